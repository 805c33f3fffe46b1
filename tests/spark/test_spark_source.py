"""The ``amqp`` data source on real PySpark (local[2]) against a broker on loopback."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minibroker import BrokerConfig, Client, ManualClock, ThreadedBroker

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

WAIT = 120  # seconds a streaming query may take on a busy machine


@pytest.fixture
def broker() -> Iterator[ThreadedBroker]:
    with ThreadedBroker() as b:
        yield b


def amqp(reader: Any, broker: ThreadedBroker, address: str, **options: str) -> Any:
    reader = reader.format("amqp").option("url", broker.url).option("address", address)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


def bodies(broker: ThreadedBroker, address: str) -> list[Any]:
    return [m.message.body for m in broker.queue(address).messages]


def run_available_now(query_builder: Any, checkpoint: Path) -> None:
    query = query_builder.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(WAIT), "the availableNow query did not finish"
    finally:
        query.stop()
    assert query.exception() is None


def test_batch_read_browses_by_default_with_the_documented_schema(spark: Any, broker: ThreadedBroker) -> None:
    created = 1_700_000_000  # seconds since the epoch, as publish() takes them
    broker.publish(
        "in", "hello", message_id="m-1", correlation_id="c-1", subject="greeting", priority=7,
        creation_time=created, application_properties={"region": "eu", "n": 3},
    )  # fmt: skip
    broker.publish("in", b"\x01\x02", message_id="m-2")
    broker.publish("in", {"k": [1, 2]})
    df = amqp(spark.read, broker, "in").load()
    assert df.count() == 3 and df.count() == 3  # lazily re-evaluated: browsing counts the same twice
    assert broker.queue("in").depth == 3
    rows = df.selectExpr("cast(body as string) as text", "*").collect()
    first = rows[0]
    assert first.text == "hello"
    assert (first.message_id, first.correlation_id, first.subject, first.priority) == ("m-1", "c-1", "greeting", 7)
    assert first.application_properties == {"region": "eu", "n": "3"}
    assert first.delivery_count == 0 and first.durable is False
    assert first.creation_time.astimezone(dt.UTC) == dt.datetime.fromtimestamp(created, dt.UTC)
    assert bytes(rows[1].body) == b"\x01\x02"
    assert rows[2].text == '{"k": [1, 2]}'
    assert [f.name for f in df.schema.fields][:3] == ["body", "message_id", "correlation_id"]


def test_consume_mode_removes_what_it_returns(spark: Any, broker: ThreadedBroker) -> None:
    for i in range(25):
        broker.publish("in", f"m{i}")
    df = amqp(spark.read, broker, "in", mode="consume", maxBatch="10").load().persist()
    try:
        assert df.count() == 25
        assert broker.queue("in").depth == 0
        assert sorted(r.text for r in df.selectExpr("cast(body as string) as text").collect()) == sorted(
            f"m{i}" for i in range(25)
        )
    finally:
        df.unpersist()


def test_a_consuming_read_whose_task_fails_removes_nothing(spark: Any, broker: ThreadedBroker) -> None:
    broker.publish_many("jobs", [f"m{i}" for i in range(25)])
    # The read task's connection dies at the 16th delivery: its first fetch of 10 was already taken.
    fault = broker.faults.drop_connection("jobs", after=15, times=1, must_fire=True)
    df = amqp(spark.read, broker, "jobs", mode="consume", maxBatch="10").load()
    with pytest.raises(Exception, match="jobs|closed|connection"):
        df.count()  # the task fails, and with it the job
    assert fault.fired == 1
    broker.wait_for(lambda b: b.queue("jobs").available == 25, timeout=10)  # every message is back


def test_batch_write_waits_for_acceptance_with_deterministic_ids(spark: Any, broker: ThreadedBroker) -> None:
    rows = [(f"order-{i}", f"s{i % 3}", {"i": str(i)}) for i in range(40)]
    df = spark.createDataFrame(rows, "body string, subject string, application_properties map<string,string>")
    amqp(df.repartition(2).write, broker, "out").mode("append").save()
    # save() returned: every message is already on the queue (the writer waited for acceptance)
    queued = broker.queue("out").messages
    assert sorted(m.message.body for m in queued) == sorted(r[0] for r in rows)
    ids = [m.message.properties.message_id for m in queued]
    assert len(set(ids)) == 40
    assert {i.split("-")[1] for i in ids} == {"0", "1"}  # DIGEST-PARTITION-ROW
    amqp(df.repartition(2).write, broker, "out").mode("append").save()  # the same job again...
    again = [m.message.properties.message_id for m in broker.queue("out").messages[40:]]
    assert sorted(again) == sorted(ids)  # ...repeats every id: a consumer drops the repeats
    assert {m.message.application_properties["i"] for m in queued} == {str(i) for i in range(40)}
    explicit = spark.createDataFrame([("x", "my-id", b"\x00")], "body string, message_id string, b binary")
    amqp(explicit.select("body", "message_id").write, broker, "out2").mode("append").save()
    assert broker.queue("out2").messages[0].message.properties.message_id == "my-id"
    amqp(explicit.selectExpr("b as body").write, broker, "out3").mode("append").save()
    assert broker.queue("out3").messages[0].message.body == b"\x00"


def test_a_failed_batch_write_run_again_sends_what_it_had_sent_under_the_same_ids(
    spark: Any, broker: ThreadedBroker
) -> None:
    df = spark.range(30).selectExpr("concat('r', cast(id as string)) as body").coalesce(1)
    fault = broker.faults.reject_publish("out", after=12, times=1, must_fire=True)
    with pytest.raises(Exception, match="rejected"):
        amqp(df.write, broker, "out").mode("append").save()  # the job fails: 29 rows are on the queue
    assert fault.fired == 1 and broker.queue("out").depth == 29
    amqp(df.write, broker, "out").mode("append").save()  # run again: all 30
    by_id: dict[str, set[Any]] = {}
    for m in broker.queue("out").messages:
        by_id.setdefault(m.message.properties.message_id, set()).add(m.message.body)
    assert len(by_id) == 30  # deduplicated by message-id: exactly the rows, each once
    assert sorted(b for bodies in by_id.values() for b in bodies) == sorted(f"r{i}" for i in range(30))


def test_twenty_rows_of_one_mib_write_as_exactly_twenty_messages(spark: Any, broker: ThreadedBroker) -> None:
    df = spark.range(20).selectExpr("cast(repeat(cast(id as string), 1048576) as binary) as body")
    amqp(df.repartition(2).write, broker, "big").mode("append").save()
    snapshot = broker.queue("big")
    assert snapshot.depth == 20
    assert sorted(len(m.message.body) for m in snapshot.messages) == [1048576] * 10 + [2097152] * 10


def test_a_row_that_cannot_become_a_message_fails_is_skipped_or_dead_lettered(
    spark: Any, broker: ThreadedBroker
) -> None:
    df = spark.createDataFrame([("a",), (None,), ("c",)], "body string").coalesce(1)
    with pytest.raises(Exception, match="row 1 of partition 0 cannot become a message.*onBadRecord"):
        amqp(df.write, broker, "strict").mode("append").save()
    amqp(df.write, broker, "lenient", onBadRecord="skip").mode("append").save()
    assert sorted(bodies(broker, "lenient")) == ["a", "c"]
    amqp(df.write, broker, "kept", onBadRecord="deadletter", deadLetterAddress="kept-bad").mode("append").save()
    assert sorted(bodies(broker, "kept")) == ["a", "c"]
    (bad,) = broker.queue("kept-bad").messages
    assert bad.message.body == '{"body": null}'
    assert "'body' column must be a string or binary" in bad.application_properties["x-opt-deadletter-reason"]
    ids = {m.message.properties.message_id for m in broker.queue("kept").messages} | {bad.properties.message_id}
    assert len(ids) == 3 and {i.rsplit("-", 1)[1] for i in ids} == {"0", "1", "2"}


def test_write_rejects_unknown_columns_naming_them(spark: Any, broker: ThreadedBroker) -> None:
    df = spark.createDataFrame([("x", 1)], "body string, amount int")
    with pytest.raises(Exception, match="amount"):
        amqp(df.write, broker, "out").mode("append").save()


def test_missing_option_and_unreachable_broker_are_named(spark: Any, broker: ThreadedBroker) -> None:
    with pytest.raises(Exception, match="needs option 'address'"):
        spark.read.format("amqp").option("url", broker.url).load().count()
    with pytest.raises(Exception, match="needs option 'url'"):
        spark.read.format("amqp").option("address", "q").load().count()
    with pytest.raises(Exception, match="option 'mode'"):
        amqp(spark.read, broker, "q", mode="steal").load().count()
    with Client(broker.url) as probe:
        port = probe.port
    broker.stop()
    with pytest.raises(Exception, match=f"option url='amqp://127.0.0.1:{port}'.*tried again for 1 s: option reconnectTimeout"):
        reader = spark.read.format("amqp").option("url", f"amqp://127.0.0.1:{port}").option("reconnectTimeout", "1")
        reader.option("address", "q").load().count()


def test_write_to_a_refused_address_fails_the_job_naming_it(spark: Any) -> None:
    with ThreadedBroker(config=BrokerConfig(auto_create=False)) as broker:
        df = spark.createDataFrame([("x",)], "body string")
        with pytest.raises(Exception, match="not-found.*'nowhere'|'nowhere'.*not-found"):
            amqp(df.write, broker, "nowhere").mode("append").save()


def test_stream_moves_every_message_once_and_restarts_from_the_checkpoint(
    spark: Any, broker: ThreadedBroker, tmp_path: Path
) -> None:
    for i in range(23):
        broker.publish("in", f"a{i}")

    def query() -> Any:
        source = amqp(spark.readStream, broker, "in", maxBatch="5").load()
        return amqp(source.select("body", "message_id").writeStream, broker, "out")

    run_available_now(query(), tmp_path / "ck")
    assert sorted(bodies(broker, "out")) == sorted(f"a{i}".encode() for i in range(23))
    assert broker.queue("in").depth == 0  # every batch settled, the last one included
    ids = [m.message.properties.message_id for m in broker.queue("out").messages]
    assert len(set(ids)) == 23

    for i in range(7):
        broker.publish("in", f"b{i}")
    run_available_now(query(), tmp_path / "ck")  # restarted from the checkpoint: only what is new
    expected = sorted([f"a{i}".encode() for i in range(23)] + [f"b{i}".encode() for i in range(7)])
    assert sorted(bodies(broker, "out")) == expected
    assert broker.queue("in").depth == 0


def test_a_query_stopped_mid_batch_loses_nothing_and_repeats_only_with_the_same_ids(
    spark: Any, broker: ThreadedBroker, tmp_path: Path
) -> None:
    for i in range(12):
        broker.publish("in", f"m{i}")
    source = amqp(spark.readStream, broker, "in", maxBatch="4").load()
    sink = amqp(source.select("body").writeStream, broker, "out")
    query = sink.option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="200 milliseconds").start()
    try:
        broker.wait_for(lambda b: b.queue("out").depth >= 12, timeout=WAIT)
    finally:
        query.stop()  # may cancel a batch whose rows were sent but which Spark did not commit
    for i in range(3):
        broker.publish("in", f"late{i}")
    run_available_now(sink, tmp_path / "ck")  # replays an uncommitted batch, then reads what is new
    expected = sorted([f"m{i}".encode() for i in range(12)] + [f"late{i}".encode() for i in range(3)])
    by_id: dict[str, set[bytes]] = {}
    for m in broker.queue("out").messages:
        by_id.setdefault(m.message.properties.message_id, set()).add(m.message.body)
    assert all(len(b) == 1 for b in by_id.values())  # a repeat carries the same message-id
    assert sorted(b for bs in by_id.values() for b in bs) == expected  # deduplicated: exactly the input
    broker.wait_for(lambda b: b.queue("in").depth == 0, timeout=10)


def test_stream_write_ids_come_from_query_and_batch(spark: Any, broker: ThreadedBroker, tmp_path: Path) -> None:
    for i in range(4):
        broker.publish("in", f"m{i}")
    source = amqp(spark.readStream, broker, "in", maxBatch="2").load()
    query = amqp(source.select("body").writeStream, broker, "out").option("checkpointLocation", str(tmp_path))
    run_available_now(query, tmp_path)
    ids = sorted(m.message.properties.message_id for m in broker.queue("out").messages)
    query_id = ids[0].rsplit("-", 3)[0]
    uuid.UUID(query_id)  # the streaming query's id, kept in the checkpoint
    assert {i.rsplit("-", 3)[1] for i in ids} == {"0", "1"}  # two micro-batches


def test_body_written_as_string_reads_back_castable(spark: Any, broker: ThreadedBroker) -> None:
    df = spark.createDataFrame([("é ✓",)], "body string")
    amqp(df.write, broker, "q").mode("append").save()
    back = amqp(spark.read, broker, "q").load().selectExpr("cast(body as string) as text").collect()
    assert [r.text for r in back] == ["é ✓"]
    with Client(broker.url) as client, client.receiver("q") as receiver:
        assert receiver.receive().message.body == "é ✓"  # an amqp-value string for other clients


def test_a_stream_is_read_by_offset_ranges_exactly_once_across_restarts(
    spark: Any, broker: ThreadedBroker, tmp_path: Path
) -> None:
    broker.declare_stream("events")
    broker.publish_many("events", [f"a{i}" for i in range(45)])

    def query() -> Any:
        source = amqp(spark.readStream, broker, "events", maxOffsetsPerPartition="10").load()
        return amqp(source.select("body").writeStream, broker, "out")

    run_available_now(query(), tmp_path / "ck")
    assert sorted(bodies(broker, "out")) == sorted(f"a{i}".encode() for i in range(45))
    broker.publish_many("events", [f"b{i}" for i in range(7)])
    run_available_now(query(), tmp_path / "ck")  # from the checkpoint's offsets: only what is new
    expected = sorted([f"a{i}".encode() for i in range(45)] + [f"b{i}".encode() for i in range(7)])
    assert sorted(bodies(broker, "out")) == expected
    broker.assert_stream("events", count=52)  # reading a stream removes nothing


def test_a_batch_read_of_a_stream_splits_into_ranges(spark: Any, broker: ThreadedBroker) -> None:
    broker.declare_stream("events")
    broker.publish_many("events", [f"m{i}" for i in range(30)])
    df = amqp(spark.read, broker, "events", maxOffsetsPerPartition="8").load()
    assert df.rdd.getNumPartitions() == 4
    assert sorted(r.body for r in df.select("body").collect()) == sorted(f"m{i}".encode() for i in range(30))


def test_a_batch_read_of_an_empty_stream_is_an_empty_dataframe(spark: Any, broker: ThreadedBroker) -> None:
    broker.declare_stream("empty")
    for options in ({}, {"kind": "stream"}):
        assert amqp(spark.read, broker, "empty", **options).load().count() == 0


def test_options_are_checked_and_bound_a_batch_read_of_a_stream(
    spark: Any, broker: ThreadedBroker, tmp_path: Path
) -> None:
    broker.declare_stream("events")
    broker.publish_many("events", [f"m{i}" for i in range(30)])
    with pytest.raises(Exception, match=r"(?i)no option 'maxBatchSize' \(did you mean 'maxBatch'\?\)"):
        amqp(spark.read, broker, "events", maxBatchSize="10").load().collect()
    bounded = amqp(spark.read, broker, "events", startingOffsets='{"events": 10}', endingOffsets='{"events": 14}')
    assert sorted(bytes(r.body) for r in bounded.load().collect()) == [f"m{i}".encode() for i in range(10, 14)]
    # Spark's own options pass: load(path), and a streaming query's checkpointLocation (both ends).
    assert amqp(spark.read, broker, "events").load("ignored/path").count() == 30
    streaming = amqp(spark.readStream, broker, "events", endingOffsets="latest").load().writeStream.format("noop")
    query = streaming.option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    try:
        with pytest.raises(Exception, match="'endingOffsets' bounds batch reads only"):
            query.awaitTermination(WAIT)
    finally:
        query.stop()


def test_a_stream_query_whose_offsets_retention_dropped_fails_saying_how_to_go_on(
    spark: Any, tmp_path: Path
) -> None:
    with ThreadedBroker(config=BrokerConfig()) as broker:
        broker.declare_stream("events", max_bytes=500)
        broker.publish_many("events", [f"m{i:03}" for i in range(100)])
        first = broker.stream("events").first_offset
        broker.declare_queue("out")
        source = amqp(spark.readStream, broker, "events", startingOffsets='{"events": 0}').load()
        query = amqp(source.select("body").writeStream, broker, "out").option(
            "checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()  # fmt: skip
        try:
            with pytest.raises(Exception, match="are no longer retained.*set option failOnDataLoss to 'false'"):
                query.awaitTermination(WAIT)
        finally:
            query.stop()
        assert broker.queue("out").depth == 0
        lenient = amqp(spark.readStream, broker, "events", startingOffsets='{"events": 0}', failOnDataLoss="false")
        run_available_now(amqp(lenient.load().select("body").writeStream, broker, "out"), tmp_path / "ck2")
        assert broker.queue("out").depth == 100 - first


def test_offsets_dropped_while_the_query_was_stopped_fail_it_on_restart_though_the_stream_is_empty(
    spark: Any, tmp_path: Path
) -> None:
    """The checkpoint says 5 offsets were read; 3 more were appended and retention dropped all 8
    while the query was stopped: restarted, it fails at once saying how to go on (the broker's
    attach states the empty stream's next offset, 8), and with failOnDataLoss=false it goes on
    from there."""
    with ThreadedBroker(clock=ManualClock(1_700_000_000.0)) as broker:
        broker.declare_stream("events", max_age=60)
        broker.declare_queue("out")
        broker.publish_many("events", [f"e{i}" for i in range(5)])

        def copy(**options: str) -> Any:
            source = amqp(spark.readStream, broker, "events", **options).load()
            return amqp(source.select("body").writeStream, broker, "out")

        run_available_now(copy(), tmp_path / "ck")
        assert broker.queue("out").depth == 5
        broker.publish_many("events", ["lost-5", "lost-6", "lost-7"])
        broker.clock.advance(61)
        assert broker.stream("events").count == 0
        query = copy().option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
        try:
            with pytest.raises(Exception, match="offsets 5 to 7 of stream 'events' are no longer retained.*"
                               "set option failOnDataLoss to 'false'"):  # fmt: skip
                query.awaitTermination(WAIT)
        finally:
            query.stop()
        run_available_now(copy(failOnDataLoss="false"), tmp_path / "ck")
        broker.publish("events", "e8")
        run_available_now(copy(), tmp_path / "ck")
        assert bodies(broker, "out") == [f"e{i}".encode() for i in range(5)] + [b"e8"]  # nothing twice, nothing lost


def _read_then_declare_anew(spark: Any, broker: ThreadedBroker, checkpoint: Path) -> Any:
    """A query copies offsets 0 to 9 of ``events`` to ``out`` (its checkpoint at 10); then the
    stream is deleted and declared again, and 4 messages go to it (offsets 0 to 3).  Returns a
    function making the query again, with options."""
    broker.declare_stream("events")
    broker.declare_queue("out")
    broker.publish_many("events", [f"old{i}" for i in range(10)])

    def copy(**options: str) -> Any:
        source = amqp(spark.readStream, broker, "events", **options).load()
        return amqp(source.select("body").writeStream, broker, "out")

    run_available_now(copy(), checkpoint)
    assert broker.queue("out").depth == 10
    broker.delete("events")
    broker.declare_stream("events")
    broker.publish_many("events", [f"new{i}" for i in range(4)])
    return copy


def test_a_stream_declared_anew_under_a_query_fails_it_naming_both_offsets(
    spark: Any, broker: ThreadedBroker, tmp_path: Path
) -> None:
    """The stream's next offset (4) is below the checkpoint's (10): the query fails at once, as
    Kafka's source does when a partition's offsets go backwards, where it used to wait silently
    until the new stream passed 10 and then skip its offsets 0 to 9."""
    copy = _read_then_declare_anew(spark, broker, tmp_path / "ck")
    query = copy().option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    try:
        with pytest.raises(Exception, match="the offsets of stream 'events' went backwards: its next offset is 4, "
                           "below offset 10 .*deleted and declared again.*set option failOnDataLoss to 'false'"):  # fmt: skip
            query.awaitTermination(WAIT)
    finally:
        query.stop()
    assert broker.queue("out").depth == 10


def test_a_stream_declared_anew_is_read_from_its_first_offset_with_fail_on_data_loss_false(
    spark: Any, broker: ThreadedBroker, tmp_path: Path
) -> None:
    """With failOnDataLoss=false a micro-batch ends at the new stream's first offset (planning
    nothing: Spark takes an end offset below the start) and the next reads the new stream from
    there; a later run with the default option goes on from the new offsets, nothing twice."""
    copy = _read_then_declare_anew(spark, broker, tmp_path / "ck")
    run_available_now(copy(failOnDataLoss="false"), tmp_path / "ck")
    broker.publish_many("events", ["new4", "new5"])
    run_available_now(copy(), tmp_path / "ck")
    assert bodies(broker, "out") == [f"old{i}".encode() for i in range(10)] + [f"new{i}".encode() for i in range(6)]


def test_a_lost_connection_mid_read_or_write_is_ridden_out(spark: Any, broker: ThreadedBroker, tmp_path: Path) -> None:
    """A broker restart drops every connection: a stream's range read goes on from its next
    offset on a new connection, and a write resends what was not confirmed."""
    broker.declare_stream("events")
    broker.publish_many("events", [f"m{i}" for i in range(50)])
    fault = broker.faults.drop_connection("events", after=20, times=1, must_fire=True)
    rows = amqp(spark.read, broker, "events").load().select("body").collect()
    assert sorted(bytes(r.body) for r in rows) == sorted(f"m{i}".encode() for i in range(50)) and fault.fired == 1
    source = amqp(spark.readStream, broker, "events").load().select("body")
    broker.faults.drop_connection("events", after=30, times=1, must_fire=True)
    broker.faults.drop_connection("out", after=10, times=1, must_fire=True)
    run_available_now(amqp(source.writeStream, broker, "out"), tmp_path / "ck")
    assert sorted(set(bodies(broker, "out"))) == sorted(f"m{i}".encode() for i in range(50))


def test_progress_shows_the_lag_of_streams_and_queues(spark: Any, broker: ThreadedBroker, tmp_path: Path) -> None:
    """A stream's ``latestOffset`` beside ``endOffset`` (reportLatestOffset); a queue's backlog in
    its ``endOffset`` (Spark asks a simple stream reader for no latest offset)."""
    import json

    broker.declare_stream("events")
    broker.publish_many("events", [f"e{i}" for i in range(30)])
    broker.publish_many("jobs", [f"j{i}" for i in range(30)])
    progress = {}
    for address, options in (("events", {"maxOffsetsPerTrigger": "10"}), ("jobs", {"maxBatch": "10"})):
        source = amqp(spark.readStream, broker, address, **options).load()
        query = source.writeStream.format("noop").option("checkpointLocation", str(tmp_path / address)).start()
        try:
            query.processAllAvailable()  # both sources are bounded here: 30 messages each
            first = [p for p in query.recentProgress if p["numInputRows"]][0]
            progress[address] = first["sources"][0]
        finally:
            query.stop()
    assert json.loads(progress["events"]["endOffset"]) == {"events": 10}
    assert json.loads(progress["events"]["latestOffset"]) == {"events": 30}  # 20 behind after the first batch
    assert json.loads(progress["jobs"]["endOffset"])["backlog"] == 20
    assert len(json.dumps(progress["jobs"]["endOffset"])) < 200  # 10 fingerprints, packed


def test_a_job_run_twice_into_a_deduplicating_stream_appends_each_row_once(spark: Any, broker: ThreadedBroker) -> None:
    broker.declare_stream("log", duplicate_window=3600)
    df = spark.range(30).selectExpr("concat('r', cast(id as string)) as body").repartition(2)
    for _ in range(2):  # a rerun of the same job repeats its default message-ids
        amqp(df.write, broker, "log").mode("append").save()
    broker.assert_stream("log", count=30)
    assert sorted(bytes(r.body) for r in amqp(spark.read, broker, "log").load().collect()) == sorted(
        f"r{i}".encode() for i in range(30))  # fmt: skip


def test_a_schema_of_some_columns_reads_just_those_from_streams_and_queues(
    spark: Any, broker: ThreadedBroker, tmp_path: Path
) -> None:
    """``.schema(...)`` with some of the documented columns, in any order: batch and streaming
    reads of a stream (offset ranges) and of a queue (the driver-side reader) give those columns."""
    schema = "message_id string, body binary"
    broker.declare_stream("events")
    broker.publish_many("events", [f"e{i}" for i in range(12)], message_id="same")
    broker.publish_many("jobs", [f"j{i}" for i in range(5)], message_id="job")
    scan = amqp(spark.read.schema(schema), broker, "events", minPartitions="3").load()
    assert scan.rdd.getNumPartitions() == 3 and scan.columns == ["message_id", "body"]
    assert sorted((r.message_id, bytes(r.body)) for r in scan.collect()) == sorted(
        ("same", f"e{i}".encode()) for i in range(12))  # fmt: skip
    queue = amqp(spark.read.schema(schema), broker, "jobs").load()
    assert sorted(bytes(r.body) for r in queue.collect()) == [f"j{i}".encode() for i in range(5)]
    for address, checkpoint in (("events", "ck-stream"), ("jobs", "ck-queue")):
        source = amqp(spark.readStream.schema(schema), broker, address).load()
        run_available_now(amqp(source.select("body", "message_id").writeStream, broker, f"out-{address}"),
                          tmp_path / checkpoint)  # fmt: skip
    assert sorted(bodies(broker, "out-events")) == sorted(f"e{i}".encode() for i in range(12))
    assert sorted(bodies(broker, "out-jobs")) == sorted(f"j{i}".encode() for i in range(5))
    with pytest.raises(Exception, match="'partition' is not one of them"):
        amqp(spark.read.schema("partition int"), broker, "events").load().collect()


def test_position_columns_tell_rows_of_several_streams_apart(spark: Any, broker: ThreadedBroker, tmp_path: Path) -> None:
    import time

    broker.declare_stream("a")
    broker.declare_stream("b")
    before = time.time()
    broker.publish_many("a", ["a0", "a1", "a2"])
    broker.publish_many("b", ["b0", "b1"])
    after = time.time()
    df = amqp(spark.read, broker, "a,b", includePosition="true").load()
    assert df.columns[-3:] == ["address", "offset", "timestamp"]
    got = df.collect()
    assert sorted((r.address, r.offset, bytes(r.body)) for r in got) == [
        ("a", 0, b"a0"), ("a", 1, b"a1"), ("a", 2, b"a2"), ("b", 0, b"b0"), ("b", 1, b"b1"),
    ]  # fmt: skip
    # Each row's timestamp: when the stream appended it (to the millisecond), not null.
    assert all(before - 0.001 <= r.timestamp.timestamp() <= after + 0.001 for r in got), [r.timestamp for r in got]
    assert amqp(spark.read, broker, "a").load().columns[-1] == "application_properties"  # the default schema
    picked = amqp(spark.read.schema("offset bigint, body binary"), broker, "b").load()  # named: no option needed
    assert sorted((r.offset, bytes(r.body)) for r in picked.collect()) == [(0, b"b0"), (1, b"b1")]
    broker.publish_many("jobs", ["j0", "j1"])
    source = amqp(spark.readStream, broker, "jobs", includePosition="true").load()
    run_available_now(source.selectExpr("cast(body as string) as body", "address as subject").writeStream.format("amqp")
                      .option("url", broker.url).option("address", "out"), tmp_path / "ck")  # fmt: skip
    assert sorted((m.message.body, m.message.properties.subject) for m in broker.queue("out").messages) == [
        ("j0", "jobs"), ("j1", "jobs"),
    ]  # fmt: skip


def test_queue_reads_give_each_row_the_time_its_message_arrived(spark: Any, tmp_path: Path) -> None:
    """A queue read with the position columns asks for ``x-opt-enqueued-time``: each row's
    timestamp is when its message arrived at the broker (its manual clock), browsed or streamed."""
    t0 = 1_700_000_000.25
    with ThreadedBroker(clock=ManualClock(t0)) as broker:
        broker.publish("in", "m0")
        broker.clock.advance(1.5)
        broker.publish_many("in", ["m1", "m2"])
        expected = {"m0": t0, "m1": t0 + 1.5, "m2": t0 + 1.5}

        def times(rows: list[Any]) -> dict[str, float | None]:
            return {bytes(r.body).decode(): r.timestamp and r.timestamp.timestamp() for r in rows}

        assert times(amqp(spark.read, broker, "in", includePosition="true").load().collect()) == expected
        picked = amqp(spark.read.schema("body binary, timestamp timestamp"), broker, "in").load().collect()
        assert times(picked) == expected
        source = amqp(spark.readStream, broker, "in", includePosition="true").load()
        run_available_now(source.writeStream.format("memory").queryName("arrivals"), tmp_path / "ck")
        assert times(spark.table("arrivals").collect()) == expected
        assert broker.queue("in").depth == 0  # the stream consumed them


def test_kill_9_of_the_driver_mid_stream_then_a_restart_leaves_every_id_once(
    spark: Any, broker: ThreadedBroker, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    broker.declare_stream("ids")
    broker.publish_many("ids", [f"id-{i:04}" for i in range(600)])
    sink, checkpoint = tmp_path / "sink", tmp_path / "ck"
    driver = [sys.executable, str(Path(__file__).with_name("stream_driver.py")), broker.url, "ids", str(sink), str(checkpoint)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # Its own process group: the kill takes the driver's JVM with it, as a crash of the machine would.
    slow = subprocess.Popen([*driver, "slow"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + WAIT
        committed = checkpoint / "commits"
        while not (committed.is_dir() and len(list(committed.glob("[0-9]*"))) >= 2):  # a few batches in
            assert slow.poll() is None, "the driver ended before it was killed"
            assert time.monotonic() < deadline, "no micro-batch was committed in time"
            time.sleep(0.2)  # polling a directory another process writes: no broker event to wait on
    finally:
        os.killpg(slow.pid, signal.SIGKILL)
        slow.wait(30)
    done = subprocess.run([*driver, "finish"], env=env, capture_output=True, text=True, timeout=WAIT * 2)
    assert "finished" in done.stdout, done.stderr[-3000:]
    ids = [row.id for row in spark.read.json(str(sink)).collect()]
    assert sorted(ids) == [f"id-{i:04}" for i in range(600)]  # every id, each exactly once


@pytest.mark.timeout(600)  # four driver processes, each starting its own JVM
def test_kill_9_of_the_driver_three_times_while_writing_to_a_deduplicating_queue_leaves_every_id_once(
    spark: Any, tmp_path: Path
) -> None:
    """Each kill comes while a micro-batch is being written (rows of it on the queue, its commit not):
    the restart replays it under the same message-ids, and the queue's duplicate detection drops
    what had arrived already."""
    import os
    import signal
    import subprocess
    import sys
    import time

    with ThreadedBroker() as broker:
        broker.declare_stream("ids")
        broker.publish_many("ids", [f"id-{i:04}" for i in range(1000)])
        broker.declare_queue("out", duplicate_window=3600)
        # Each acceptance reaches the writer 1 s late: a batch's rows are on the queue well before
        # the writer's task ends and Spark commits the batch.
        broker.faults.delay(1.0, "out", frames="disposition", times=None)
        checkpoint = tmp_path / "ck"
        driver = [sys.executable, str(Path(__file__).with_name("stream_driver.py")), broker.url, "ids", "amqp:out",
                  str(checkpoint)]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

        def count(log: str) -> int:
            folder = checkpoint / log
            return len(list(folder.glob("[0-9]*"))) if folder.is_dir() else 0

        for _ in range(3):
            before = count("commits")
            slow = subprocess.Popen([*driver, "slow"], env=env, start_new_session=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            try:
                deadline = time.monotonic() + WAIT
                # A batch committed by this run, then rows of the next on the queue before its commit.
                while not (count("commits") > before and broker.queue("out").depth > 50 * count("commits")):
                    assert slow.poll() is None, "the driver ended before it was killed"
                    assert time.monotonic() < deadline, "no micro-batch was written in time"
                    time.sleep(0.02)  # polling a directory another process writes: no broker event to wait on
            finally:
                os.killpg(slow.pid, signal.SIGKILL)
                slow.wait(30)
        done = subprocess.run([*driver, "finish"], env=env, capture_output=True, text=True, timeout=WAIT * 2)
        assert "finished" in done.stdout, done.stderr[-3000:]
        ids = sorted(m.message.body for m in broker.queue("out").messages)
        assert ids == [f"id-{i:04}".encode() for i in range(1000)]  # every id, each exactly once
