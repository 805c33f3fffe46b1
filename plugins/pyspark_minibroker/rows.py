"""Messages as rows and rows as messages (no pyspark import; Spark passes plain tuples and Rows)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from minibroker.amqp.message import Message, split_sections
from minibroker.amqp.messaging import Header, Properties
from minibroker.client import Delivery

__all__ = [
    "ALL_FIELDS", "CREATED", "POSITION_SCHEMA", "READ_FIELDS", "READ_SCHEMA", "WRITE_COLUMNS", "app_values", "bad_record_message",
    "datetime_of", "fingerprint", "header_values", "message_from_row", "message_values", "plain_row", "project",
    "projection", "property_values", "read_struct_type", "redelivered", "row_digest", "row_from_delivery",
]  # fmt: skip

#: One row per message (documented in docs/spark.md).
READ_SCHEMA = (
    "body binary, message_id string, correlation_id string, subject string, to string, "
    "reply_to string, content_type string, group_id string, priority int, durable boolean, "
    "delivery_count int, creation_time timestamp, application_properties map<string,string>"
)

#: Where each row's message was, as Kafka's source gives topic, partition, offset and timestamp:
#: the address it was read from, its stream offset (null from a queue) and when the broker took
#: it (its ``x-opt-enqueued-time`` annotation when the broker sends one, else null).  Added to the
#: schema by option ``includePosition`` (or by naming them in ``.schema(...)``), so the default
#: schema, and a read DataFrame written back as it is, stay as they were.
POSITION_SCHEMA = "address string, offset bigint, timestamp timestamp"


def _fields(schema: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, kind) for name, kind in (part.split(" ", 1) for part in schema.split(", ")))


#: READ_SCHEMA's (name, type) pairs, types as Spark's ``simpleString()`` writes them.
READ_FIELDS: tuple[tuple[str, str], ...] = _fields(READ_SCHEMA)
#: READ_FIELDS and then the position columns: where a projection's indices point.
ALL_FIELDS: tuple[tuple[str, str], ...] = READ_FIELDS + _fields(POSITION_SCHEMA)


def projection(fields: list[tuple[str, str]]) -> tuple[int, ...] | None:
    """Where in a READ_SCHEMA row, followed by the position columns, each (name, type) of a schema
    given with ``.schema()`` is; None for READ_SCHEMA itself.  A column it does not have, or has
    with another type, raises ``ValueError`` saying what to read instead."""
    if tuple(fields) == READ_FIELDS:
        return None
    known = {name: (i, kind) for i, (name, kind) in enumerate(ALL_FIELDS)}
    columns = []
    for name, kind in fields:
        if name not in known:
            raise ValueError(f"the amqp source reads the columns of {READ_SCHEMA!r} (and with option includePosition "
                             f"{POSITION_SCHEMA!r}): {name!r} is not one of them")  # fmt: skip
        at, expected = known[name]
        if kind != expected:
            raise ValueError(f"the amqp source reads {name!r} as {expected}, not {kind}: read it as {expected} "
                             f"and cast it (e.g. selectExpr('cast({name} as {kind})'))")  # fmt: skip
        columns.append(at)
    return tuple(columns)


def project(row: tuple[Any, ...], columns: tuple[int, ...] | None) -> tuple[Any, ...]:
    """The values of ``columns`` (see :func:`projection`) of a READ_SCHEMA row."""
    return row if columns is None else tuple(row[i] for i in columns)


#: Columns a written DataFrame may have; ``body`` is required.  Every read column is accepted, so
#: a read DataFrame can be written as it is (``delivery_count`` is the broker's and is ignored).
WRITE_COLUMNS = (
    "body", "message_id", "correlation_id", "subject", "to", "reply_to", "content_type", "group_id",
    "priority", "durable", "delivery_count", "creation_time", "application_properties",
)  # fmt: skip

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _body_bytes(message: Message) -> bytes | None:
    body = message.body
    if body is None:
        return None
    if message.body_kind == "data":
        return body if isinstance(body, bytes) else b"".join(body)
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body, default=str, sort_keys=True).encode()


def property_values(props: Properties) -> tuple[Any, ...]:
    """The row's values from the properties (§3.2.4): message_id .. group_id, in READ_SCHEMA's order."""
    return (
        _text(props.message_id),
        _text(props.correlation_id),
        props.subject,
        _text(props.to),
        _text(props.reply_to),
        _text(props.content_type),
        props.group_id,
    )


def header_values(header: Header) -> tuple[int, bool, int]:
    """The row's priority, durable and delivery_count from the header (§3.2.1)."""
    return int(header.priority), bool(header.durable), int(header.delivery_count)


def app_values(app: dict[Any, Any] | None) -> dict[str, Any] | None:
    """The row's application_properties (§3.2.5): text keys and values, None when there are none."""
    return {str(k): _text(v) for k, v in app.items()} if app else None


def message_values(message: Message) -> tuple[Any, ...]:
    """The row's values, except ``creation_time`` as milliseconds since the epoch (or None)."""
    props = message.properties or _NO_PROPERTIES
    created = props.creation_time
    return (
        _body_bytes(message),
        *property_values(props),
        *header_values(message.header or _NO_HEADER),
        None if created is None else int(created),
        app_values(message.application_properties),
    )


_NO_PROPERTIES = Properties()
_NO_HEADER = Header()
#: Where ``creation_time`` is in a row.
CREATED = 11


def datetime_of(milliseconds: int) -> dt.datetime:
    return _EPOCH + dt.timedelta(milliseconds=milliseconds)


def row_from_delivery(delivery: Delivery) -> tuple[Any, ...]:
    """The row of :data:`READ_SCHEMA` for a received message.

    ``body`` is the data section's bytes, a string value's UTF-8, or any other
    value as JSON; ids are strings (binary ids in hex).
    """
    values = message_values(delivery.message)
    created = values[CREATED]
    if created is None:
        return values
    return (*values[:CREATED], datetime_of(created), *values[CREATED + 1 :])


def read_struct_type() -> Any:
    """READ_SCHEMA as a pyspark ``StructType``, made from it without a JVM (Spark's DDL parser needs one)."""
    from pyspark.sql import types

    kinds = {
        "binary": types.BinaryType(), "string": types.StringType(), "int": types.IntegerType(),
        "boolean": types.BooleanType(), "timestamp": types.TimestampType(),
        "map<string,string>": types.MapType(types.StringType(), types.StringType()),
    }  # fmt: skip
    return types.StructType([types.StructField(name, kinds[kind]) for name, kind in READ_FIELDS])


#: Hex digits of a fingerprint: 48 bits.  A redelivered message of another reader is taken for one
#: of ours only if its fingerprint equals one of the at most ``PENDING_BATCHES * maxBatch`` kept
#: (100,000 by default): odds of 100,000 / 2**48, about 4e-10, per such message.
FINGERPRINT_DIGITS = 12


def fingerprint(delivery: Delivery) -> str:
    """A short hash of the bare message (§3.2: what the broker never changes), to recognise a redelivery."""
    start, end = split_sections(delivery.payload).bare
    return hashlib.sha256(delivery.payload[start:end]).hexdigest()[:FINGERPRINT_DIGITS]


def redelivered(delivery: Delivery) -> bool:
    """Whether the broker counted an earlier failed delivery of this message (header delivery-count)."""
    header = delivery.message.header
    return header is not None and header.delivery_count > 0


def row_digest(row: Mapping[str, Any]) -> str:
    """A short hash of a written row's values (column names included): the same row gives the same
    digest in every run, so default message-ids built on it repeat when a failed job is run again."""
    # The bytes hashed: per column, its name, 00, a kind letter and the value, 00 (one hash call
    # over their join: the digests are those of the feeds one part at a time that came before).
    parts = []
    for name in sorted(row):
        value = row[name]
        parts.append(name.encode() + b"\x00")
        if isinstance(value, (bytes, bytearray)):
            parts.append(b"b" + bytes(value))
        elif isinstance(value, str):
            parts.append(b"s" + value.encode())
        else:
            parts.append(b"r" + repr(value).encode())  # None, numbers, datetimes, dicts: a stable repr
        parts.append(b"\x00")
    return hashlib.sha256(b"".join(parts)).hexdigest()[:16]


def message_from_row(row: Mapping[str, Any], default_id: str) -> Message:
    """The message for one written row: a string body becomes an amqp-value, bytes a data section.

    ``default_id`` is the message-id when the row has no ``message_id``.
    """
    body = row.get("body")
    if isinstance(body, bytearray):
        body = bytes(body)
    if not isinstance(body, (str, bytes)):
        raise ValueError(f"the 'body' column must be a string or binary, got {type(body).__name__}")
    priority = row.get("priority")
    durable = row.get("durable")
    header = None
    if priority is not None or durable:
        header = Header(durable=bool(durable), priority=4 if priority is None else int(priority))
    app = row.get("application_properties")
    message_id = row.get("message_id")
    created = row.get("creation_time")
    if isinstance(created, dt.datetime):
        if created.tzinfo is None:
            created = created.astimezone()  # Spark hands out local wall-clock times
        created = round((created - _EPOCH).total_seconds() * 1000)
    return Message(
        body=body,
        body_kind="data" if isinstance(body, bytes) else "value",
        header=header,
        properties=Properties(
            message_id=str(message_id) if message_id is not None else default_id,
            correlation_id=row.get("correlation_id"),
            subject=row.get("subject"),
            to=row.get("to"),
            reply_to=row.get("reply_to"),
            content_type=row.get("content_type"),
            group_id=row.get("group_id"),
            creation_time=created,
        ),
        application_properties={str(k): v for k, v in app.items()} if app else None,
    )


def _sized(code8: int, code32: int, data: bytes) -> bytes:
    """A string/symbol/binary value: the one-byte size form up to 255 bytes, else four (Part 1 §1.6)."""
    if len(data) < 256:
        return bytes((code8, len(data))) + data
    return bytes((code32,)) + len(data).to_bytes(4, "big") + data


def plain_row(body: str | bytes, prefix: str | None, suffix: str) -> bytes:
    """The encoded message of a row that has only a ``body``, with the message-id ``{prefix}-{suffix}``,
    or with no prefix ``{row_digest({"body": body})}-{suffix}`` (a batch write's default id): byte
    for byte what :func:`message_from_row` then ``encode()`` give, without building a row dict or
    a Message, and with the body encoded once for both the digest and the message (the writer's
    usual row: most of its client CPU went to those).

    A properties section holding the message-id (Part 3 §3.2.4, a list of one string field), then
    the body: a string as an amqp-value (§3.2.8), bytes as a data section (§3.2.6)."""
    if isinstance(body, str):
        data, kind, section, code8, code32 = body.encode(), b"s", b"\x00\x53\x77", 0xA1, 0xB1
    else:
        data, kind, section, code8, code32 = body, b"b", b"\x00\x53\x75", 0xA0, 0xB0
    if prefix is None:  # row_digest's bytes for the one column "body"
        prefix = hashlib.sha256(b"".join((b"body\x00", kind, data, b"\x00"))).hexdigest()[:16]
    return _id_properties(f"{prefix}-{suffix}") + section + _sized(code8, code32, data)


def _id_properties(message_id: str) -> bytes:
    """A properties section holding only ``message_id`` as a string; its list in the list8 form
    while its size fits a byte (Part 1 §1.6.22)."""
    field = _sized(0xA1, 0xB1, message_id.encode())
    if len(field) < 255:  # list8: size (count byte and field) and count in one byte each
        return b"\x00\x53\x73\xc0" + bytes((len(field) + 1, 1)) + field
    return b"\x00\x53\x73\xd0" + (len(field) + 4).to_bytes(4, "big") + b"\x00\x00\x00\x01" + field


def bad_record_message(row: Mapping[str, Any], message_id: str, reason: str) -> Message:
    """What ``onBadRecord=deadletter`` sends for a row that cannot become a message: the row as
    JSON (values it cannot show as JSON as their text), the reason in ``x-opt-deadletter-reason``."""
    return Message(
        body=json.dumps(dict(row), default=str, sort_keys=True),
        properties=Properties(message_id=message_id, content_type="application/json"),
        application_properties={"x-opt-deadletter-reason": reason},
    )
