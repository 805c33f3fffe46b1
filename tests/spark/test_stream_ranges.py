"""Reading streams by offset range (pyspark_minibroker.ranges and the stream reader), without a Spark session.

The reader's driver-side methods (initialOffset, latestOffset, partitions) and its executor-side
``read`` are called directly, as Spark would, against a broker on loopback.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pytest

pytest.importorskip("pyarrow")  # the spark extra (CI installs it); the README's test command runs without it
pytest.importorskip("pyspark")
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark_minibroker import ranges
from pyspark_minibroker.columns import Rows
from pyspark_minibroker.options import Options, parse_options
from pyspark_minibroker.ranges import (
    OffsetRange,
    bounds,
    is_stream,
    plan,
    read_range,
    split,
    starting_offsets,
)
from pyspark_minibroker.rows import read_struct_type
from pyspark_minibroker.source import AmqpDataSource, _OffsetStreamReader, _shape, _StreamBatchReader

from minibroker import BrokerConfig, ManualClock, ThreadedBroker

TIMEOUT = 5.0


@pytest.fixture
def broker() -> Iterator[ThreadedBroker]:
    with ThreadedBroker() as b:
        b.declare_stream("events")
        b.publish_many("events", [f"e{i}" for i in range(25)])
        yield b


def options(broker: ThreadedBroker, **extra: str) -> Options:
    return parse_options({"url": broker.url, "address": "events", "timeout": str(TIMEOUT), **extra})


def bodies(batches: Iterator[Rows]) -> list[str]:
    """The bodies of every row a range read gave (each row's body is the UTF-8 of a string message)."""
    return [row[0].decode() for rows in batches for row in rows.rows]


def test_bounds_and_the_probe(broker: ThreadedBroker) -> None:
    opts = options(broker)
    assert bounds(opts, "events") == bounds(opts, "events")
    assert (bounds(opts, "events").first, bounds(opts, "events").next) == (0, 25)
    broker.declare_stream("empty")
    assert (bounds(opts, "empty").first, bounds(opts, "empty").next) == (0, 0)  # stated by the attach
    broker.declare_queue("jobs")
    assert is_stream(opts, "events") and not is_stream(opts, "jobs")
    broker.assert_stream("events", count=25)  # probing read nothing away


def test_bounds_of_a_stream_that_retains_nothing_come_from_the_attach_else_are_unknown(
    broker: ThreadedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """minibroker's attach states a stream's offsets (x-stream-first-offset, x-stream-next-offset),
    so a stream whose messages were all dropped still has a next offset; a broker that states
    none (RabbitMQ 4) is read at first and last, and such a stream's bounds are unknown."""
    from minibroker.client import Receiver

    opts = options(broker)
    assert broker.purge("events") == 25
    assert bounds(opts, "events") == ranges.Bounds(25, 25)
    broker.publish("events", "e25")
    assert bounds(opts, "events") == ranges.Bounds(25, 26)
    monkeypatch.setattr(Receiver, "properties", property(lambda self: {}))  # a broker that says nothing
    assert bounds(opts, "events") == ranges.Bounds(25, 26)  # the offsets of the messages at first and last
    assert broker.purge("events") == 1
    assert bounds(opts, "events") == ranges.Bounds(None, None)


def test_offsets_dropped_while_no_query_ran_fail_the_next_micro_batch_though_nothing_is_left() -> None:
    """A checkpoint at offset 5; offsets 5 to 7 appended and dropped by retention while the query
    was stopped, leaving the stream empty: the next micro-batch plans 5 to 8 from the offsets the
    attach states, and its task finds them gone (as Kafka's source does when a topic's log start
    offset moved past the committed one), unless failOnDataLoss is false."""
    with ThreadedBroker(clock=ManualClock(1_700_000_000.0)) as broker:
        broker.declare_stream("events", max_age=60)
        broker.publish_many("events", [f"e{i}" for i in range(8)])
        broker.clock.advance(61)
        assert broker.stream("events").count == 0
        for fail_on_data_loss in ("true", "false"):
            reader = _OffsetStreamReader(options(broker, failOnDataLoss=fail_on_data_loss), _shape(read_struct_type()))
            end = reader.latestOffset({"events": 5}, ReadAllAvailable())
            assert end == {"events": 8} and reader.reportLatestOffset() == {"events": 8}
            (part,) = reader.partitions({"events": 5}, end)
            if fail_on_data_loss == "true":
                with pytest.raises(ranges.DataLost, match="offsets 5 to 7 of stream 'events' are no longer retained.*"
                                   "set option failOnDataLoss to 'false'"):  # fmt: skip
                    list(reader.read(part))
            else:
                assert list(reader.read(part)) == []  # read on from the next offset: nothing yet
        assert _OffsetStreamReader(options(broker), _shape(read_struct_type())).initialOffset() == {"events": 8}


def test_split_and_read_a_range(broker: ThreadedBroker) -> None:
    assert split("events", 3, 25, 10) == [
        OffsetRange("events", 3, 13), OffsetRange("events", 13, 23), OffsetRange("events", 23, 25),
    ]  # fmt: skip
    assert split("events", 5, 5, 10) == []
    assert bodies(read_range(options(broker), OffsetRange("events", 3, 13))) == [f"e{i}" for i in range(3, 13)]
    # A range is planned only up to the stream's next offset, so offsets missing past the end were
    # dropped (or the stream made anew): lost data, unless failOnDataLoss is false, which reads what there is.
    with pytest.raises(ranges.DataLost, match="offsets 25 to 39 "):
        bodies(read_range(options(broker), OffsetRange("events", 20, 40)))
    lenient = parse_options({"url": broker.url, "address": "events", "timeout": str(TIMEOUT), "failOnDataLoss": "false"})
    assert bodies(read_range(lenient, OffsetRange("events", 20, 40))) == [f"e{i}" for i in range(20, 25)]


def test_a_range_read_fetches_fewer_large_messages_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a first fetch of ``FIRST_WINDOW`` messages, a fetch asks for about ``WINDOW_BYTES``
    of them by their mean size (at most ``WINDOW``): what a task holds is bounded for large
    messages too, and every message is read once, in order."""
    monkeypatch.setattr(ranges, "WINDOW_BYTES", 64 * 1024)
    monkeypatch.setattr(ranges, "FIRST_WINDOW", 4)
    monkeypatch.setattr(ranges, "WINDOW", 50)
    with ThreadedBroker() as b:
        b.declare_stream("large")
        b.publish_many("large", [f"{n:05d}" + "x" * 20_000 for n in range(40)])
        b.declare_stream("small")
        b.publish_many("small", [f"s{n}" for n in range(200)])
        opts = parse_options({"url": b.url, "address": "large", "timeout": str(TIMEOUT)})
        sizes, read = [], []
        for rows in read_range(opts, OffsetRange("large", 0, 40)):
            sizes.append(len(rows))
            read += [row[0][:5].decode() for row in rows.rows]
        assert read == [f"{n:05d}" for n in range(40)]
        assert sizes[0] == 4 and max(sizes[1:]) == 3  # 64 KiB of ~20 KiB messages
        small = [len(rows) for rows in read_range(opts, OffsetRange("small", 0, 200))]
        assert small == [4, 50, 50, 50, 46]  # small messages: the window's cap


def test_plan_bounds_a_task_and_spreads_over_min_partitions(broker: ThreadedBroker) -> None:
    spans = {"events": (0, 250_000), "audit": (10, 20)}
    default = plan(options(broker), spans)
    assert [(p.address, p.start, p.end) for p in default] == [
        ("events", 0, 100_000), ("events", 100_000, 200_000), ("events", 200_000, 250_000), ("audit", 10, 20),
    ]  # fmt: skip
    spread = plan(options(broker, minPartitions="8"), spans)  # 250,010 offsets in ranges of at most 31,252
    assert len(spread) >= 8 and max(p.end - p.start for p in spread) == 31_252
    assert sum(p.end - p.start for p in spread) == 250_010
    capped = plan(options(broker, minPartitions="2", maxOffsetsPerPartition="1000"), {"events": (0, 5000)})
    assert len(capped) == 5  # the per-task bound still holds
    assert plan(options(broker, minPartitions="4"), {"events": (7, 7)}) == []
    with pytest.raises(ValueError, match="option 'minPartitions' must be at least 1"):
        options(broker, minPartitions="0")


def test_starting_offsets(broker: ThreadedBroker) -> None:
    broker.declare_stream("audit")
    assert starting_offsets(options(broker)) == {"events": 0}
    assert starting_offsets(options(broker, startingOffsets="latest")) == {"events": 25}
    assert starting_offsets(options(broker, address="events,audit", startingOffsets='{"events": 7}')) == {
        "events": 7, "audit": 0,
    }  # fmt: skip
    with pytest.raises(ValueError, match="option 'startingOffsets' is 'earliest', 'latest' or a JSON object"):
        options(broker, startingOffsets="yesterday")


def test_micro_batches_as_offset_ranges_read_by_pickled_copies(broker: ThreadedBroker) -> None:
    reader = _OffsetStreamReader(options(broker, maxOffsetsPerPartition="10"), _shape(read_struct_type()))
    start = reader.initialOffset()
    assert start == {"events": 0}
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"events": 25}
    parts = reader.partitions(start, end)
    assert [(p.start, p.end) for p in parts] == [(0, 10), (10, 20), (20, 25)]
    # Each task reads its range on its own pickled copy of the reader, as executors do.
    batches = [b for part in parts for b in pickle.loads(pickle.dumps(reader)).read(pickle.loads(pickle.dumps(part)))]
    assert [body for b in batches for body in b.column("body").to_pylist()] == [f"e{i}".encode() for i in range(25)]
    reader.commit(end)
    assert reader.latestOffset(end, ReadAllAvailable()) == end  # nothing new: the same offset back
    broker.publish("events", "late")
    assert reader.latestOffset(end, ReadAllAvailable()) == {"events": 26}
    broker.assert_stream("events", count=26)  # nothing was removed by reading


def test_max_offsets_per_trigger_and_available_now(broker: ThreadedBroker) -> None:
    reader = _OffsetStreamReader(options(broker, maxOffsetsPerTrigger="10"), _shape(read_struct_type()))
    assert reader.getDefaultReadLimit() == ReadMaxRows(10)
    start = reader.initialOffset()
    assert reader.reportLatestOffset() is None  # nothing asked of the broker yet
    assert reader.latestOffset(start, ReadMaxRows(10)) == {"events": 10}
    assert reader.reportLatestOffset() == {"events": 25}  # the lag: 15 offsets beyond this micro-batch
    reader.prepareForTriggerAvailableNow()
    broker.publish("events", "after the trigger")
    assert reader.latestOffset({"events": 20}, ReadAllAvailable()) == {"events": 25}  # not past the target
    assert reader.latestOffset({"events": 25}, ReadAllAvailable()) == {"events": 25}


def test_the_source_picks_the_reader_by_kind(broker: ThreadedBroker) -> None:
    from pyspark.errors import PySparkNotImplementedError
    from pyspark.sql.types import StructType

    schema = StructType()  # any schema: which reader is picked does not depend on it
    broker.declare_queue("jobs")
    stream_source = AmqpDataSource({"url": broker.url, "address": "events"})
    assert isinstance(stream_source.streamReader(schema), _OffsetStreamReader)
    assert isinstance(stream_source.reader(schema), _StreamBatchReader)
    queue_source = AmqpDataSource({"url": broker.url, "address": "jobs"})
    with pytest.raises(PySparkNotImplementedError):
        queue_source.streamReader(schema)
    told = AmqpDataSource({"url": broker.url, "address": "jobs", "kind": "queue"})
    with pytest.raises(PySparkNotImplementedError):
        told.streamReader(schema)
    with pytest.raises(ValueError, match="only streams read several"):
        AmqpDataSource({"url": broker.url, "address": "jobs,other", "kind": "queue"}).reader(schema)


def test_retention_during_a_query_fails_it_unless_fail_on_data_loss_is_false() -> None:
    with ThreadedBroker(config=BrokerConfig()) as broker:
        broker.declare_stream("events", max_bytes=500)
        broker.publish_many("events", [f"m{i:03}" for i in range(100)])
        first = broker.stream("events").first_offset
        assert first > 0
        opts = parse_options({"url": broker.url, "address": "events", "timeout": str(TIMEOUT)})
        assert opts.fail_on_data_loss  # Kafka's default
        with pytest.raises(ranges.DataLost, match=f"offsets 0 to {first - 1} of stream 'events' are no longer "
                           "retained.*set option failOnDataLoss to 'false'"):  # fmt: skip
            list(read_range(opts, OffsetRange("events", 0, 100)))
        with pytest.raises(ranges.DataLost, match=f"offsets 3 to {first - 1} "):
            list(read_range(opts, OffsetRange("events", 3, first + 2)))
        with pytest.raises(ranges.DataLost, match="offsets 0 to 1 "):  # the whole range dropped
            list(read_range(opts, OffsetRange("events", 0, 2)))
        assert bodies(read_range(opts, OffsetRange("events", first, 100))) == [f"m{i:03}" for i in range(first, 100)]
        skip = parse_options({"url": broker.url, "address": "events", "timeout": str(TIMEOUT), "failOnDataLoss": "false"})
        got = bodies(read_range(skip, OffsetRange("events", 0, 100)))
        assert got == [f"m{i:03}" for i in range(first, 100)]
        with pytest.raises(ValueError, match="option 'failOnDataLoss' must be 'true' or 'false'"):
            parse_options({"url": broker.url, "address": "events", "failOnDataLoss": "no"})


def test_a_range_whose_offsets_retention_dropped_with_nothing_newer_fails_unless_fail_on_data_loss_is_false(
    broker: ThreadedBroker,
) -> None:
    # Offsets 20 to 24 were appended (a range was planned over them), then dropped with nothing
    # after them: the reader starts at the stream's next offset and no message comes to show the gap.
    assert broker.purge("events") == 25
    opts = parse_options({"url": broker.url, "address": "events", "timeout": str(TIMEOUT)})
    with pytest.raises(ranges.DataLost, match="offsets 20 to 24 of stream 'events' are no longer retained.*"
                       "set option failOnDataLoss to 'false'"):  # fmt: skip
        list(read_range(opts, OffsetRange("events", 20, 25)))
    skip = parse_options({"url": broker.url, "address": "events", "timeout": str(TIMEOUT), "failOnDataLoss": "false"})
    assert bodies(read_range(skip, OffsetRange("events", 20, 25))) == []
    broker.publish("events", "e25")  # something newer: the first fetch's offset tells, as before
    with pytest.raises(ranges.DataLost, match="offsets 20 to 24 "):
        list(read_range(opts, OffsetRange("events", 20, 26)))


def test_a_stream_declared_anew_under_a_query_fails_it_unless_fail_on_data_loss_is_false(
    broker: ThreadedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint at offset 25; the stream deleted and declared again, with 3 messages: its next
    offset (3) is below the checkpoint's.  As Kafka's source reports a partition whose offsets
    went backwards, the micro-batch fails naming both offsets, the likely cause and the option;
    with failOnDataLoss=false it ends at the new stream's first retained offset (planning nothing
    of it, taking nothing of maxOffsetsPerTrigger), warns once, and the next reads from there."""
    broker.declare_stream("audit")
    broker.publish_many("audit", [f"a{i}" for i in range(10)])
    broker.delete("events")
    broker.declare_stream("events")
    broker.publish_many("events", ["n0", "n1", "n2"])
    checkpoint = {"events": 25, "audit": 0}
    strict = _OffsetStreamReader(options(broker, address="events,audit"), _shape(read_struct_type()))
    with pytest.raises(ranges.DataLost, match=r"the offsets of stream 'events' went backwards: its next offset is 3, "
                       r"below offset 25 at which this query goes on .*deleted and declared again, or its broker "
                       r"restarted without its messages.*set option failOnDataLoss to 'false' to go on from its "
                       r"first retained offset \(0\)"):  # fmt: skip
        strict.latestOffset(checkpoint, ReadAllAvailable())
    lenient = _OffsetStreamReader(options(broker, address="events,audit", failOnDataLoss="false"),
                                  _shape(read_struct_type()))  # fmt: skip
    with caplog.at_level("WARNING", logger="pyspark_minibroker"):
        end = lenient.latestOffset(checkpoint, ReadMaxRows(4))
        assert end == {"events": 0, "audit": 4}  # the budget all went to audit
        assert lenient.reportLatestOffset() == {"events": 3, "audit": 10}
        assert [(p.address, p.start, p.end) for p in lenient.partitions(checkpoint, end)] == [("audit", 0, 4)]
        after = lenient.latestOffset(end, ReadMaxRows(4))
        assert after == {"events": 3, "audit": 5}
        (part, _) = lenient.partitions(end, after)
        assert [b.decode() for batch in lenient.read(part) for b in batch.column("body").to_pylist()] == ["n0", "n1", "n2"]
    (warning,) = caplog.records  # once: the micro-batch after goes on from the new stream's offsets
    assert warning.levelname == "WARNING"
    assert "its next offset is 3, below offset 25" in warning.getMessage()
    assert "going on from its first retained offset (0)" in warning.getMessage()


def test_a_batch_read_starting_past_a_stream_s_end_fails_unless_fail_on_data_loss_is_false(
    broker: ThreadedBroker,
) -> None:
    """startingOffsets past the stream's next offset (a job that keeps the offset it read to, the
    stream since declared anew) is checked as a query's checkpoint is; Kafka's batch query leaves
    such a partition out without a word."""
    schema = read_struct_type()

    def read(**extra: str) -> list[str]:
        reader = AmqpDataSource({"url": broker.url, "address": "events", "timeout": str(TIMEOUT), **extra}).reader(schema)
        return [bytes(body).decode() for p in reader.partitions() for batch in reader.read(p)
                for body in batch.column("body").to_pylist()]  # fmt: skip

    with pytest.raises(ranges.DataLost, match="its next offset is 25, below offset 40 at which option startingOffsets "
                       "starts this read.*set option failOnDataLoss to 'false'"):  # fmt: skip
        read(startingOffsets='{"events": 40}')
    assert read(startingOffsets='{"events": 40}', failOnDataLoss="false") == [f"e{i}" for i in range(25)]
    assert read(startingOffsets='{"events": 25}') == []  # at its end: nothing new, nothing lost


def test_unknown_options_are_refused_naming_the_valid_ones() -> None:
    base = {"url": "amqp://127.0.0.1:5672", "address": "events"}
    with pytest.raises(ValueError, match=r"no option 'maxBatchSize' \(did you mean 'maxBatch'\?\); its options are url, "
                       r"address, .*failOnDataLoss.* \(and Spark's path, paths, checkpointLocation\)"):  # fmt: skip
        parse_options({**base, "maxBatchSize": "10"})
    with pytest.raises(ValueError, match="no option 'colour'; its options"):
        parse_options({**base, "colour": "red"})
    # Spark hands options over lower-cased; its own generic options pass.
    parsed = parse_options({"url": base["url"], "address": "events", "maxbatch": "7", "failondataloss": "false",
                            "path": "/x", "checkpointlocation": "/ck"})  # fmt: skip
    assert (parsed.max_batch, parsed.fail_on_data_loss) == (7, False)


def test_offsets_naming_an_address_not_read_are_refused() -> None:
    base = {"url": "amqp://127.0.0.1:5672", "address": "events, audit"}
    assert parse_options({**base, "startingOffsets": '{"audit": 3}'}).starting_offsets == '{"audit": 3}'
    with pytest.raises(ValueError, match=r"option 'startingOffsets' names \['orders'\], which option 'address' does "
                       r"not read \(it reads \['events', 'audit'\]\)"):  # fmt: skip
        parse_options({**base, "startingOffsets": '{"events": 1, "orders": 3}'})
    with pytest.raises(ValueError, match="option 'endingOffsets' names"):
        parse_options({**base, "endingOffsets": '{"order": 3}'})
    with pytest.raises(ValueError, match="option 'endingOffsets' is 'latest' or a JSON object"):
        parse_options({**base, "endingOffsets": "earliest"})


def test_a_batch_read_of_a_stream_is_bounded_by_starting_and_ending_offsets(broker: ThreadedBroker) -> None:
    """As Kafka's batch queries: ``startingOffsets`` (default earliest) to before ``endingOffsets``
    (default latest); an address the JSON leaves out is read whole; an end past the stream's is its end."""
    broker.declare_stream("audit")
    broker.publish_many("audit", [f"a{i}" for i in range(10)])
    schema = read_struct_type()

    def read(**extra: str) -> list[str]:
        reader = AmqpDataSource({"url": broker.url, "address": "events,audit", "timeout": str(TIMEOUT), **extra}).reader(schema)
        return sorted(bytes(body).decode() for p in reader.partitions() for batch in reader.read(p)
                      for body in batch.column("body").to_pylist())  # fmt: skip

    everything = sorted([f"e{i}" for i in range(25)] + [f"a{i}" for i in range(10)])
    assert read() == everything
    assert read(startingOffsets="earliest", endingOffsets="latest") == everything
    assert read(startingOffsets='{"events": 20}', endingOffsets='{"audit": 2, "events": 99}') == sorted(
        [f"e{i}" for i in range(20, 25)] + ["a0", "a1"])  # fmt: skip
    assert read(startingOffsets='{"events": 5, "audit": 4}', endingOffsets='{"events": 5, "audit": 3}') == []
    with pytest.raises(ValueError, match="startingOffsets='latest' reads nothing in a batch read"):
        read(startingOffsets="latest")


def test_offset_bounds_are_refused_where_they_do_not_apply(broker: ThreadedBroker) -> None:
    schema = read_struct_type()
    with pytest.raises(ValueError, match="option 'endingOffsets' bounds batch reads only"):
        AmqpDataSource({"url": broker.url, "address": "events", "endingOffsets": "latest"}).streamReader(schema)
    broker.declare_queue("jobs")
    for option in ("startingOffsets", "endingOffsets"):
        with pytest.raises(ValueError, match="'jobs' is a queue"):
            AmqpDataSource({"url": broker.url, "address": "jobs", option: "latest"}).reader(schema)


def test_bad_record_options_are_checked() -> None:
    base = {"url": "amqp://127.0.0.1:5672", "address": "out"}
    assert parse_options(base).on_bad_record == "fail"
    assert parse_options({**base, "onBadRecord": "SKIP"}).on_bad_record == "skip"
    parsed = parse_options({**base, "onBadRecord": "deadletter", "deadLetterAddress": "out-bad"})
    assert (parsed.on_bad_record, parsed.dead_letter_address) == ("deadletter", "out-bad")
    with pytest.raises(ValueError, match="'onBadRecord' must be one of"):
        parse_options({**base, "onBadRecord": "ignore"})
    with pytest.raises(ValueError, match="needs option 'deadLetterAddress'"):
        parse_options({**base, "onBadRecord": "deadletter"})


def test_a_consuming_batch_read_that_fails_midway_removes_nothing() -> None:
    from pyspark.sql.datasource import InputPartition
    from pyspark_minibroker.source import _BatchReader

    with ThreadedBroker() as broker:
        broker.publish_many("jobs", range(25))
        opts = parse_options({"url": broker.url, "address": "jobs", "mode": "consume", "maxBatch": "10"})
        reader = _BatchReader(opts, _shape(read_struct_type()))
        batches = reader.read(InputPartition(0))
        taken = [next(batches) for _ in range(2)]  # the task took two fetches' rows, then failed
        batches.close()
        assert sum(b.num_rows for b in taken) == 20
        broker.wait_for(lambda b: b.queue("jobs").available == 25, timeout=TIMEOUT)
        everything = list(reader.read(InputPartition(0)))  # a task that reads to the end removes it all
        assert sum(b.num_rows for b in everything) == 25
        broker.wait_for(lambda b: b.queue("jobs").depth == 0, timeout=TIMEOUT)


def test_rows_on_bad_record_let_pass_are_counted_in_the_driver_log(caplog: pytest.LogCaptureFixture) -> None:
    from pyspark_minibroker.source import SentCount, _BatchWriter, _StreamWriter

    opts = parse_options({"url": "amqp://127.0.0.1:5672", "address": "out", "onBadRecord": "deadletter",
                          "deadLetterAddress": "out-bad"})  # fmt: skip
    with caplog.at_level("WARNING", logger="pyspark_minibroker"):
        _BatchWriter(opts, ["body"]).commit([SentCount(0, 5), SentCount(1, 3)])
        assert not caplog.records  # nothing let pass: nothing to say
        _BatchWriter(opts, ["body"]).commit([SentCount(0, 5, 0, 2), None, SentCount(1, 3, 0, 1)])
        _StreamWriter(opts, ["body"], "q").commit([SentCount(0, 4, 0, 1)], 7)
    first, second = (r.getMessage() for r in caplog.records)
    assert "write to 'out': 8 row(s) sent, 0 skipped and 3 dead-lettered to 'out-bad'" in first
    assert "micro-batch 7 to 'out': 4 row(s) sent, 0 skipped and 1 dead-lettered" in second


def test_default_message_ids_of_a_batch_write_depend_only_on_the_row() -> None:
    from pyspark_minibroker.rows import row_digest

    row = {"body": b"\x00payload", "subject": "s", "application_properties": {"k": "v"}, "priority": None}
    assert row_digest(row) == row_digest(dict(reversed(list(row.items()))))  # the same row, the same digest
    assert row_digest(row) != row_digest({**row, "subject": "t"})
    assert row_digest({"body": "1"}) != row_digest({"body": b"1"})  # a string and bytes are different bodies


def test_a_batch_read_of_an_empty_stream_gives_no_rows() -> None:
    """No range to read: Spark plans one ``InputPartition(None)`` instead, and its task reads nothing."""
    with ThreadedBroker() as broker:
        broker.declare_stream("empty")
        for options in ({}, {"kind": "stream"}):
            source = AmqpDataSource({"url": broker.url, "address": "empty", **options})
            reader = source.reader(read_struct_type())
            assert isinstance(reader, _StreamBatchReader) and reader.partitions() == []
            assert list(reader.read(InputPartition(None))) == []
        with pytest.raises(TypeError, match="reads stream ranges"):
            list(reader.read(InputPartition(3)))


def test_a_body_alone_is_encoded_as_a_built_message_would_be_and_ids_stay_the_same() -> None:
    from pyspark_minibroker.rows import message_from_row, plain_row, row_digest

    # Sizes around each one-byte/four-byte boundary of the id, the body and the properties list.
    for n in [*range(4), *range(250, 262), 70_000]:
        for body in ("x" * n, b"y" * n, "é" * n):
            for prefix in ("i" * n, "é" * (n // 2)):
                expected = message_from_row({"body": body}, f"{prefix}-0-7").encode()
                assert plain_row(body, prefix, "0-7") == expected
            # No prefix: a batch write's default id, the row's digest.
            expected = message_from_row({"body": body}, f"{row_digest({'body': body})}-1-2").encode()
            assert plain_row(body, None, "1-2") == expected
    # Default ids of a batch write as earlier versions made them: a rerun after an upgrade repeats them.
    assert row_digest({"body": "x" * 256}) == "66da11d34c25a090"
    assert row_digest({"body": b"ab", "priority": 3, "application_properties": {"a": "b"}}) == "f5ed708c1c391167"


def test_a_write_of_bodies_alone_sends_each_with_its_id(broker: ThreadedBroker) -> None:
    from pyspark_minibroker.source import _send_rows

    opts = parse_options({"url": broker.url, "address": "out", "timeout": str(TIMEOUT)})
    sent = _send_rows(opts, ["body"], iter([("a",), (b"b",)]), "q-7")
    assert sent.count == 2
    got = broker.queue("out").messages
    assert [(m.body, m.properties.message_id) for m in got] == [("a", "q-7-0-0"), (b"b", "q-7-0-1")]


def test_a_body_only_write_reads_arrow_batches_and_sends_what_the_row_writer_sends(broker: ThreadedBroker) -> None:
    """PySpark hands a ``DataSourceArrowWriter`` record batches instead of a Row per row: a write of
    a body column alone (the usual one) takes them, and sends the messages, ids and bad-record
    handling the row writer gives the same rows."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    def source(address: str) -> AmqpDataSource:
        return AmqpDataSource({"url": broker.url, "address": address, "onBadRecord": "skip", "timeout": str(TIMEOUT)})

    for kind, values in ((StringType(), ["a", "é" * 300, None, "b"]), (BinaryType(), [b"\x00", None, b"y" * 70_000])):
        schema = StructType([StructField("body", kind)])
        arrow = source(f"arrow-{kind}").writer(schema, False)
        assert isinstance(arrow, DataSourceArrowWriter)
        assert isinstance(source("s").streamWriter(schema, False), DataSourceStreamArrowWriter)
        batches = [pa.record_batch([pa.array(values[:2])], names=["body"]), pa.record_batch([pa.array(values[2:])], names=["body"])]
        sent = arrow.write(iter(batches))
        rows = source(f"rows-{kind}").writer(StructType([StructField("body", kind), StructField("subject", StringType())]), False)
        assert not isinstance(rows, DataSourceArrowWriter)
        rows.columns = ["body"]  # the row writer, given the same rows as Spark's Rows
        assert rows.write(iter([(v,) for v in values])) == sent
        assert sent.count == len(values) - 1 and sent.skipped == 1  # the null body, let pass

        def messages(address: str) -> list[tuple[object, object]]:
            return [(m.message.properties.message_id, m.message.body) for m in broker.queue(address).messages]

        assert messages(f"arrow-{kind}") == messages(f"rows-{kind}") and len(messages(f"rows-{kind}")) == len(values) - 1
