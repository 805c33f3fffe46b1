"""The ``spark`` group of ``python -m bench``: rows per second through the ``amqp`` data source.

A local Spark session (``local[2]``) and a :class:`minibroker.ThreadedBroker` in this process:

- batch write: a DataFrame of N string rows (256 bytes) saved with ``format("amqp")``; the
  writer waits for every acceptance, so the time covers delivery to the broker;
- streaming read: N messages queued, then a ``trigger(availableNow=True)`` query from the
  ``amqp`` source into Spark's ``noop`` sink (default ``maxBatch``); time from start to termination,
  every message settled.

- streams, for each size: a stream of N 256-byte messages read by an ``availableNow`` query
  into ``noop`` (offset ranges on executors) beside a JSON-lines file source of the same rows,
  and a batch full scan (count and sum of body lengths) beside parquet: same session, same
  run, so the ratios cancel the machine's noise.

- queues, for each size: a batch write of the rows to a queue (waiting for every acceptance)
  beside writing them as parquet, a batch scan of the queue (browse) beside the parquet scan,
  and an ``availableNow`` read of the queue (driver-side reader, default ``maxBatch`` and
  ``maxBatchBytes``) beside the JSON source; the read empties the queue, the next round's
  write fills it again;
- the same two reads with ``.schema("body binary")``: the one column the files hold;
- beside both, for each size: the same two reads of a Python data source that makes the same
  rows in ``read()`` without a broker (:class:`NoBrokerSource`: the bytes of a stream delivery
  turned into rows by the ``amqp`` source's own row code, split into the same ranges), so
  what Spark's Python data source machinery costs by itself is in the same run.

One warm-up write runs first (the first write starts Spark's Python workers, ~7 s).  Skipped,
with a line saying so, when pyspark is not installed (``pip install -e '.[spark]'``).
"""

from __future__ import annotations

import functools
import importlib.util
import statistics
import tempfile
import time
from typing import Any

from minibroker import ThreadedBroker

__all__ = ["STREAM_RATIOS", "available", "measure", "measure_streams", "no_broker_source"]


def available() -> str | None:
    """None if the Spark group can run, else why not."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed: pip install -e '.[spark]'"
    return None


def measure(rows: int, limit_s: float) -> dict[str, Any]:
    """Both measurements for ``rows`` rows: ``{name: {"rows", "elapsed_s", "rate", "complete"}}``."""
    from pyspark_minibroker.testing import local_session

    spark = local_session(app_name="minibroker-bench")
    out: dict[str, Any] = {}
    try:
        with ThreadedBroker() as broker:
            url = broker.url
            body = "x" * 256
            warm = spark.createDataFrame([(body,)] * 10, "body string")
            warm.write.format("amqp").option("url", url).option("address", "warm-up").mode("append").save()

            frame = spark.range(rows).selectExpr(f"'{body}' as body").repartition(2).persist()
            frame.count()
            started = time.perf_counter()
            frame.write.format("amqp").option("url", url).option("address", "bench.write").mode("append").save()
            elapsed = time.perf_counter() - started
            moved = broker.queue("bench.write").depth
            out["spark_batch_write"] = {"rows": moved, "elapsed_s": elapsed, "rate": moved / elapsed,
                                        "complete": moved == rows}  # fmt: skip
            frame.unpersist()

            with tempfile.TemporaryDirectory() as checkpoint:
                source = spark.readStream.format("amqp").option("url", url).option("address", "bench.write").load()
                started = time.perf_counter()
                query = (source.writeStream.format("noop").option("checkpointLocation", checkpoint)
                         .trigger(availableNow=True).start())  # fmt: skip
                try:
                    finished = query.awaitTermination(limit_s)
                finally:
                    query.stop()
                elapsed = time.perf_counter() - started
                left = broker.queue("bench.write").depth
                moved = rows - left
                out["spark_stream_read"] = {"rows": moved, "elapsed_s": elapsed, "rate": moved / elapsed,
                                            "complete": bool(finished) and left == 0}  # fmt: skip
    finally:
        spark.stop()
    return out


def _available_now(spark: Any, source: Any, limit_s: float) -> tuple[float, bool]:
    """Seconds an availableNow query from ``source`` into ``noop`` took, and whether it finished."""
    with tempfile.TemporaryDirectory() as checkpoint:
        started = time.perf_counter()
        query = (source.writeStream.format("noop").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())  # fmt: skip
        try:
            finished = query.awaitTermination(limit_s)
        finally:
            query.stop()
        return time.perf_counter() - started, bool(finished)


def _timed(job: Any) -> float:
    """Seconds ``job()`` took."""
    started = time.perf_counter()
    job()
    return time.perf_counter() - started


def _scan(frame: Any) -> tuple[float, int]:
    """Seconds a full scan (count and sum of body lengths) took, and the count."""
    started = time.perf_counter()
    row = frame.selectExpr("count(*) as n", "sum(length(body)) as bytes").collect()[0]
    return time.perf_counter() - started, int(row["n"])


def no_broker_source() -> Any:
    """A Python data source (``bench-rows``, option ``rows``) whose ``read()`` makes the rows a
    stream of ``rows`` 256-byte string messages gives, without a broker: what the ``amqp`` source
    would hand Spark, minus the broker, the wire and the client.  Defined here and pickled by
    value, so Spark's workers need not import this module."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
    from pyspark_minibroker.columns import Rows
    from pyspark_minibroker.options import Options
    from pyspark_minibroker.ranges import plan
    from pyspark_minibroker.rows import READ_SCHEMA

    from minibroker.amqp import encode
    from minibroker.amqp.messaging import AmqpValue, MessageAnnotations
    from minibroker.amqp.types import symbol

    # A stream delivery's bytes with the offset as a long (what the broker sends past offset 127),
    # the offset spliced in per row: the row code sees what it sees from the broker, at the cost
    # of one join.
    template = encode(MessageAnnotations({symbol("x-stream-offset"): 2**40})) + encode(AmqpValue("x" * 256))
    at = template.index((2**40).to_bytes(8, "big"))
    head, tail = template[:at], template[at + 8 :]

    def payload(offset: int) -> bytes:
        return b"".join((head, offset.to_bytes(8, "big", signed=True), tail))

    def ranges(start: int, end: int) -> list[InputPartition]:
        pieces = plan(Options(url="amqp://127.0.0.1", address="rows"), {"rows": (start, end)})
        return [InputPartition((p.start, p.end)) for p in pieces]

    def read(partition: Any, schema: Any) -> Any:
        arrow, (start, end) = to_arrow_schema(schema, timezone="UTC"), partition.value
        rows = Rows()
        for low in range(start, end, 1000):
            rows.clear()
            for offset in range(low, min(low + 1000, end)):
                rows.add(payload(offset))
            yield rows.arrow(arrow)

    class Reader(DataSourceReader):  # type: ignore[misc]
        def __init__(self, count: int, schema: Any) -> None:
            self.count, self.schema = count, schema

        def partitions(self) -> list[InputPartition]:
            return ranges(0, self.count)

        def read(self, partition: Any) -> Any:
            return read(partition, self.schema)

    class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
        def __init__(self, count: int, schema: Any) -> None:
            self.count, self.schema = count, schema

        def prepareForTriggerAvailableNow(self) -> None:
            pass  # every row there is, as the amqp source's availableNow reads them

        def initialOffset(self) -> dict[str, int]:
            return {"n": 0}

        def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None) -> dict[str, int]:
            return {"n": self.count}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return ranges(start["n"], end["n"])

        def read(self, partition: Any) -> Any:
            return read(partition, self.schema)

    class NoBrokerSource(DataSource):  # type: ignore[misc]
        @classmethod
        def name(cls) -> str:
            return "bench-rows"

        def schema(self) -> str:
            return READ_SCHEMA

        def reader(self, schema: Any) -> DataSourceReader:
            return Reader(int(self.options["rows"]), schema)

        def streamReader(self, schema: Any) -> DataSourceStreamReader:
            return StreamReader(int(self.options["rows"]), schema)

    return NoBrokerSource


#: The ratios :func:`measure_streams` takes (measurement, baseline): the reads against the file
#: sources, and the ``amqp`` reads against the Python source making the same rows without a broker.
STREAM_RATIOS = (
    ("stream_s", "json_s"), ("scan_s", "parquet_s"), ("stream_body_s", "json_s"), ("scan_body_s", "parquet_s"),
    ("python_stream_s", "json_s"), ("python_scan_s", "parquet_s"),
    ("stream_s", "python_stream_s"), ("scan_s", "python_scan_s"),
    ("write_s", "parquet_write_s"), ("queue_scan_s", "parquet_s"), ("queue_stream_s", "json_s"),
)  # fmt: skip


def measure_streams(sizes: list[int], limit_s: float, rounds: int = 1) -> list[dict[str, Any]]:
    """For each size: availableNow read of a stream vs a JSON-lines file source, batch scan vs parquet,
    the same with the body column only, and both reads of :func:`no_broker_source`; for a queue,
    a batch write of the rows vs writing them as parquet, a batch scan (browse) vs parquet, and an
    availableNow read (which takes them off the queue; the next round writes them again) vs JSON.

    Every measurement is taken ``rounds`` times in turn; each line holds the median seconds of
    each and, under ``"ratios"`` (keyed ``"measurement/baseline"``, see :data:`STREAM_RATIOS`), the
    median of the ratios taken within a round (a round's
    measurements ran within seconds of each other, so the machine's drift mostly cancels).
    """
    from pyspark_minibroker.testing import local_session

    spark = local_session(app_name="minibroker-bench-streams")
    spark.dataSource.register(no_broker_source())
    out: list[dict[str, Any]] = []
    body = "x" * 256
    try:
        with ThreadedBroker() as broker, tempfile.TemporaryDirectory() as files:
            url = broker.url
            broker.declare_stream("bench.stream.warm-up")
            broker.publish_many("bench.stream.warm-up", [body] * 100)
            warm = spark.readStream.format("amqp").option("url", url).option("address", "bench.stream.warm-up").load()
            # The first write of a session starts its Python writer workers: not part of any round.
            spark.createDataFrame([(body,)] * 10, "body string").write.format("amqp").option("url", url) \
                .option("address", "bench.write.warm-up").mode("append").save()
            for rows in sizes:
                name = f"bench.stream.{rows}"
                broker.declare_stream(name)
                broker.publish_many(name, [body] * rows)
                json_dir, parquet_dir = f"{files}/json-{rows}", f"{files}/parquet-{rows}"
                frame = spark.range(rows).selectExpr(f"'{body}' as body").repartition(2).persist()
                frame.write.json(json_dir)
                frame.write.parquet(parquet_dir)
                queue = f"bench.queue.{rows}"

                def amqp(reader: Any, schema: str | None = None, address: str = name) -> Any:
                    reader = reader.format("amqp").option("url", url).option("address", address)
                    return (reader.schema(schema) if schema else reader).load()

                bench_rows = spark.read.format("bench-rows").option("rows", str(rows))
                files_stream = spark.readStream.schema("body string").json(json_dir)
                # Warm-up of both paths: the first Python data source query starts Spark's Python workers.
                _available_now(spark, files_stream, limit_s)
                _available_now(spark, warm, limit_s)
                taken: list[dict[str, float]] = []
                complete = True
                for _ in range(rounds):
                    times: dict[str, float] = {}
                    done = []
                    times["stream_s"], ok = _available_now(spark, amqp(spark.readStream), limit_s)
                    done.append(ok)
                    times["json_s"], ok = _available_now(spark, files_stream, limit_s)
                    done.append(ok)
                    times["scan_s"], n = _scan(amqp(spark.read))
                    done.append(n == rows)
                    times["parquet_s"], _ = _scan(spark.read.parquet(parquet_dir))
                    # The one column the files hold, read as such (a schema of some of the source's columns).
                    times["stream_body_s"], ok = _available_now(spark, amqp(spark.readStream, "body binary"), limit_s)
                    done.append(ok)
                    times["scan_body_s"], n = _scan(amqp(spark.read, "body binary"))
                    done.append(n == rows)
                    no_broker = spark.readStream.format("bench-rows").option("rows", str(rows)).load()
                    times["python_stream_s"], ok = _available_now(spark, no_broker, limit_s)
                    done.append(ok)
                    times["python_scan_s"], n = _scan(bench_rows.load())
                    done.append(n == rows)
                    times["write_s"] = _timed(frame.write.format("amqp").option("url", url).option("address", queue)
                                              .mode("append").save)  # fmt: skip
                    done.append(broker.queue(queue).depth == rows)
                    times["parquet_write_s"] = _timed(functools.partial(frame.write.mode("overwrite").parquet,
                                                                        f"{files}/out"))  # fmt: skip
                    times["queue_scan_s"], n = _scan(amqp(spark.read, address=queue))
                    done.append(n == rows)
                    times["queue_stream_s"], ok = _available_now(spark, amqp(spark.readStream, address=queue), limit_s)
                    done.append(ok and broker.queue(queue).depth == 0)
                    taken.append(times)
                    complete = complete and all(done)
                line: dict[str, Any] = {key: statistics.median(t[key] for t in taken) for key in taken[0]}
                line["ratios"] = {f"{key}/{base}": statistics.median(t[key] / t[base] for t in taken)
                                  for key, base in STREAM_RATIOS}  # fmt: skip
                out.append({"rows": rows, "rounds": rounds, **line, "complete": complete})
                broker.delete(name)
                broker.delete(queue)
                frame.unpersist()
    finally:
        spark.stop()
    return out
