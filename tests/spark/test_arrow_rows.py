"""Reads hand Spark Arrow batches: each is the batch Spark's own worker builds from the tuple rows.

No Spark session: Spark's conversion of rows (``records_to_arrow_batches``, what a Python data
source's tuples go through on an executor) runs in this process, beside :meth:`Rows.arrow`.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from pyspark.sql.worker.plan_data_source_read import records_to_arrow_batches  # noqa: E402
from pyspark_minibroker.columns import Rows  # noqa: E402
from pyspark_minibroker.rows import project, read_struct_type, row_from_delivery  # noqa: E402
from pyspark_minibroker.source import _batches, _shape  # noqa: E402

from minibroker.amqp.message import Message  # noqa: E402
from minibroker.amqp.messaging import Header, Properties  # noqa: E402
from minibroker.amqp.types import symbol, timestamp, ubyte, uint, ulong  # noqa: E402
from minibroker.client import Delivery  # noqa: E402

# Written out field by field, not made from READ_SCHEMA, so it checks what the package derives.
_STRINGS = ["message_id", "correlation_id", "subject", "to", "reply_to", "content_type", "group_id"]
SCHEMA = StructType(
    [StructField("body", BinaryType())]
    + [StructField(name, StringType()) for name in _STRINGS]
    + [
        StructField("priority", IntegerType()), StructField("durable", BooleanType()),
        StructField("delivery_count", IntegerType()), StructField("creation_time", TimestampType()),
        StructField("application_properties", MapType(StringType(), StringType())),
    ]
)  # fmt: skip


class _Source:
    def name(self) -> str:
        return "amqp"


def delivery(message: Message) -> Delivery:
    return Delivery(None, 0, message.encode(), True)  # type: ignore[arg-type]


def arrow_batch(deliveries: list[Delivery], schema: Any) -> Any:
    """The batch the source's executor reader hands Spark for these deliveries."""
    rows = Rows()
    for d in deliveries:
        rows.add(d.payload)
    return rows.arrow(schema)


def spark_batch(deliveries: list[Delivery], schema: StructType = SCHEMA) -> Any:
    """The batch Spark builds from the tuple rows (of ``schema``'s columns)."""
    columns = _shape(schema).columns
    rows = iter([project(row_from_delivery(d), columns) for d in deliveries])
    batches = list(records_to_arrow_batches(rows, 10_000, schema, _Source()))  # type: ignore[arg-type]
    assert len(batches) == 1
    return batches[0]


MESSAGES = [
    Message(body=b"\x00" * 256, body_kind="data"),
    Message(body=[b"a", b"bc"], body_kind="data"),
    Message(body="text"),
    Message(body={"k": [1, 2]}),
    Message(body=b"value bytes"),
    Message(body=None),
    Message(body=[1, "x"], body_kind="sequence"),
    Message(
        body=b"x", body_kind="data",
        header=Header(durable=True, priority=ubyte(9), delivery_count=uint(3)),
        properties=Properties(
            message_id=uuid.UUID(int=7), correlation_id=b"\x01\xff", subject="s", to="q", reply_to="r",
            content_type=symbol("text/plain"), group_id="g", creation_time=timestamp(1_700_000_000_123),
        ),
        application_properties={"region": "eu", "n": 3, "f": 1.5, "none": None, "b": b"\x02"},
    ),
    Message(body="t", properties=Properties(message_id=ulong(2**64 - 1), creation_time=timestamp(0))),
    Message(body="t", properties=Properties(creation_time=timestamp(-62_135_596_800_000))),  # 0001-01-01
    Message(body="t", properties=Properties(creation_time=timestamp(253_402_300_799_999))),  # 9999-12-31
    Message(body="t", application_properties={}),
]  # fmt: skip


def test_the_documented_schema_is_the_one_batches_are_built_for() -> None:
    assert read_struct_type() == SCHEMA  # the one the package makes from READ_SCHEMA
    assert _shape(SCHEMA).arrow == to_arrow_schema(SCHEMA, timezone="UTC")
    assert _shape(SCHEMA).columns is None


@pytest.mark.parametrize("message", MESSAGES, ids=range(len(MESSAGES)))
def test_one_message_batch_equals_sparks_conversion_of_its_row(message: Message) -> None:
    got = arrow_batch([delivery(message)], _shape(SCHEMA).arrow)
    expected = spark_batch([delivery(message)])
    assert got.equals(expected), (got.to_pylist(), expected.to_pylist())


def test_a_batch_of_many_messages_equals_sparks_conversion() -> None:
    deliveries = [delivery(m) for m in MESSAGES * 3]
    got = arrow_batch(deliveries, _shape(SCHEMA).arrow)
    assert got.num_rows == len(deliveries)
    assert got.equals(spark_batch(deliveries))


def test_keys_that_read_alike_keep_the_rows_last_value() -> None:
    """application-properties keys 1 and "1" are one map key in the row (the last value wins)."""
    message = Message(body="t", application_properties={1: "int", "1": "str"})  # type: ignore[dict-item]
    got = arrow_batch([delivery(message)], _shape(SCHEMA).arrow)
    assert got.equals(spark_batch([delivery(message)]))
    assert got.column("application_properties").to_pylist() == [[("1", "str")]]


@pytest.mark.parametrize("created", [253_402_300_800_000, -62_135_596_800_001, 2**62])
def test_a_creation_time_beyond_datetimes_fails_as_the_row_does(created: int) -> None:
    message = delivery(Message(body="t", properties=Properties(creation_time=timestamp(created))))
    with pytest.raises(OverflowError) as row_error:
        row_from_delivery(message)
    with pytest.raises(OverflowError) as batch_error:
        arrow_batch([message], _shape(SCHEMA).arrow)
    assert str(batch_error.value) == str(row_error.value)


def test_no_deliveries_make_an_empty_batch() -> None:
    assert arrow_batch([], _shape(SCHEMA).arrow).num_rows == 0


#: Some of READ_SCHEMA's columns, in another order, as a user would give them with ``.schema(...)``.
SOME = StructType([
    StructField("application_properties", MapType(StringType(), StringType())), StructField("body", BinaryType()),
    StructField("creation_time", TimestampType()), StructField("priority", IntegerType()),
])  # fmt: skip


def test_a_schema_of_some_columns_gets_batches_of_those_columns() -> None:
    deliveries = [delivery(m) for m in MESSAGES]
    shape = _shape(SOME)
    assert shape.columns == (12, 0, 11, 8)
    rows = Rows()
    for d in deliveries:
        rows.add(d.payload)
    got = rows.arrow(shape.arrow, shape.columns)
    assert got.schema.names == ["application_properties", "body", "creation_time", "priority"]
    assert got.equals(spark_batch(deliveries, SOME))


@pytest.mark.parametrize("schema", [SCHEMA, SOME], ids=["all", "some"])
def test_the_queue_stream_reader_hands_spark_the_batch_it_would_build_from_the_rows(schema: StructType) -> None:
    """A queue's micro-batch (read on the driver) is one Arrow batch that Spark's runner sends on as
    it is: the one Spark builds from the tuple rows; copyable, as Spark's cache of it copies it."""
    import copy

    deliveries = [delivery(m) for m in MESSAGES * 2]
    batches = _batches(deliveries, _shape(schema), "jobs")
    again = copy.copy(batches)
    got = list(batches)
    assert len(got) == 1 and got[0].equals(spark_batch(deliveries, schema))
    assert list(again) == got
    assert list(_batches([], _shape(schema), "jobs")) == []


@pytest.mark.parametrize(
    ("field", "error"),
    [
        (StructField("partition", IntegerType()), "'partition' is not one of them"),
        (StructField("offset", IntegerType()), "reads 'offset' as bigint, not int"),
        (StructField("body", StringType()), r"reads 'body' as binary, not string: .*cast\(body as string\)"),
    ],
)
def test_a_schema_with_other_columns_or_types_is_refused_saying_what_to_read(field: StructField, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        _shape(StructType([StructField("priority", IntegerType()), field]))


#: Columns in another order again, each the same for every message below (the batch repeats one value).
SAME = StructType([
    StructField("priority", IntegerType()), StructField("subject", StringType()), StructField("body", BinaryType()),
    StructField("message_id", StringType()), StructField("durable", BooleanType()),
])  # fmt: skip


@pytest.mark.parametrize("schema", [SCHEMA, SAME], ids=["every column", "some, reordered"])
def test_columns_with_one_value_throughout_are_the_batch_spark_builds(schema: StructType) -> None:
    same = [Message(body=b"same", header=Header(priority=ubyte(7), durable=True), properties=Properties(subject="s"))] * 3
    deliveries = [delivery(m) for m in same]
    shape = _shape(schema)
    rows = Rows()
    for d in deliveries:
        rows.add(d.payload)
    got = rows.arrow(shape.arrow, shape.columns)
    assert got.equals(spark_batch(deliveries, schema))
    assert got.column(got.schema.names.index("subject")).to_pylist() == ["s"] * 3


def _stream_payload(offset: int, body: Any, header: Header | None = None) -> bytes:
    """A stream delivery's bytes: the offset annotation (a long), maybe a header, and ``body``."""
    message = Message(body=body, body_kind="data" if isinstance(body, bytes) else "value", header=header,
                      message_annotations={symbol("x-stream-offset"): 2**40 + offset})  # fmt: skip
    return message.encode()


@pytest.mark.parametrize("schema", [SCHEMA, SOME], ids=["every column", "some, reordered"])
@pytest.mark.parametrize(
    "kinds",
    ["aaa", "aara", "raa", "a" * 300],
    ids=["bodies alone", "a header amid them", "a header first", "many bodies alone"],
)
def test_rows_of_stream_messages_taken_one_by_one_are_the_batch_spark_builds(schema: StructType, kinds: str) -> None:
    """Messages of the stream's annotation and a body alone are kept as their bodies until another
    comes; whatever the mix, :meth:`Rows.take` and :meth:`Rows.add` give Spark's batch, in order."""
    payloads = [
        _stream_payload(n, f"text {n}" if n % 2 else bytes([n % 256]) * (n + 1))
        if kind == "a"
        else _stream_payload(n, b"rich", Header(priority=ubyte(9)))
        for n, kind in enumerate(kinds)
    ]
    deliveries = [Delivery(None, 0, p, True) for p in payloads]  # type: ignore[arg-type]
    shape = _shape(schema)
    expected = spark_batch(deliveries, schema)
    taken = Rows()
    taken.read_stream("s", 2**40, 2**41)
    for n, payload in enumerate(payloads):
        taken.take(n, True, payload)
    assert taken.next == 2**40 + len(payloads)
    assert taken.arrow(shape.arrow, shape.columns).equals(expected)
    assert taken.rows == [row_from_delivery(d) for d in deliveries]
    if schema is SCHEMA:  # add (the queue reader's and the tests' way in) keeps bodies alone the same way
        assert arrow_batch(deliveries, shape.arrow).equals(expected)


#: The position columns with some others, in the order a user might give them with ``.schema(...)``.
POSITIONED = StructType([
    StructField("offset", LongType()), StructField("body", BinaryType()), StructField("address", StringType()),
    StructField("timestamp", TimestampType()), StructField("subject", StringType()),
])  # fmt: skip


def test_position_columns_of_a_queue_batch_name_the_queue_and_the_enqueued_time() -> None:
    """From a queue: the address read, no offset, and the broker's ``x-opt-enqueued-time`` when it
    sends one (the rest of the row as without position columns)."""
    enqueued = 1_700_000_000_250
    messages = [
        Message(body=b"a", body_kind="data", message_annotations={symbol("x-opt-enqueued-time"): timestamp(enqueued)}),
        Message(body="b", properties=Properties(subject="s")),
    ]  # fmt: skip
    (batch,) = list(_batches([delivery(m) for m in messages], _shape(POSITIONED), "jobs"))
    assert batch.schema.names == ["offset", "body", "address", "timestamp", "subject"]
    got = batch.to_pylist()
    assert [(r["offset"], r["body"], r["address"], r["subject"]) for r in got] == [
        (None, b"a", "jobs", None), (None, b"b", "jobs", "s"),
    ]  # fmt: skip
    assert got[0]["timestamp"].timestamp() == enqueued / 1000 and got[1]["timestamp"] is None
    without = list(_batches([delivery(m) for m in messages], _shape(SOME), "jobs"))[0]
    assert "address" not in without.schema.names  # no position column asked for: none made


def test_a_source_with_include_position_reads_streams_with_their_offsets() -> None:
    from pyspark_minibroker.rows import ALL_FIELDS, READ_SCHEMA
    from pyspark_minibroker.source import AmqpDataSource, _Range, _read

    from minibroker import ManualClock, ThreadedBroker

    with ThreadedBroker(clock=ManualClock(1_700_000_000.5)) as broker:
        broker.declare_stream("a")
        broker.declare_stream("b")
        broker.publish_many("a", ["a0", "a1", "a2"])
        broker.clock.advance(2)
        broker.publish_many("b", ["b0", "b1"])
        source = AmqpDataSource({"url": broker.url, "address": "a,b", "includePosition": "true"})
        assert source.schema().endswith("address string, offset bigint, timestamp timestamp")
        assert AmqpDataSource({"url": broker.url, "address": "a"}).schema() == READ_SCHEMA  # the default, unchanged
        every = StructType([*read_struct_type().fields, StructField("address", StringType()),
                            StructField("offset", LongType()), StructField("timestamp", TimestampType())])  # fmt: skip
        assert [(f.name, f.dataType.simpleString()) for f in every.fields] == list(ALL_FIELDS)
        shape = _shape(every)
        rows = [r for address, end in (("a", 3), ("b", 2)) for batch in _read(source.parsed, _Range(address, 1, end), shape)
                for r in batch.to_pylist()]  # fmt: skip
        # The timestamp: when the stream appended the message (the reader asks for x-opt-enqueued-time).
        first, later = dt.datetime.fromtimestamp(1_700_000_000.5, dt.UTC), dt.datetime.fromtimestamp(1_700_000_002.5, dt.UTC)
        assert [(r["address"], r["offset"], r["body"], r["timestamp"]) for r in rows] == [
            ("a", 1, b"a1", first), ("a", 2, b"a2", first), ("b", 1, b"b1", later),
        ]  # fmt: skip
