"""The ``spark`` group of ``python -m bench``: rows per second through the ``amqp`` data source.

A local Spark session (``local[2]``) and a :class:`minibroker.ThreadedBroker` in this process:

- batch write: a DataFrame of N string rows (256 bytes) saved with ``format("amqp")``; the
  writer waits for every acceptance, so the time covers delivery to the broker;
- streaming read: N messages queued, then a ``trigger(availableNow=True)`` query from the
  ``amqp`` source into Spark's ``noop`` sink, ``maxBatch`` 1000; time from start to termination,
  every message settled.

- streams, for each size: a stream of N 256-byte messages read by an ``availableNow`` query
  into ``noop`` (offset ranges on executors) beside a JSON-lines file source of the same rows,
  and a batch full scan (count and sum of body lengths) beside parquet: same session, same
  run, so the ratios cancel the machine's noise.

One warm-up write runs first (the first write starts Spark's Python workers, ~7 s).  Skipped,
with a line saying so, when pyspark is not installed (``pip install -e '.[spark]'``).
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
from typing import Any

from minibroker import ThreadedBroker

__all__ = ["available", "measure", "measure_streams"]


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
                source = (spark.readStream.format("amqp").option("url", url).option("address", "bench.write")
                          .option("maxBatch", "1000").load())  # fmt: skip
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


def _scan(frame: Any) -> tuple[float, int]:
    """Seconds a full scan (count and sum of body lengths) took, and the count."""
    started = time.perf_counter()
    row = frame.selectExpr("count(*) as n", "sum(length(body)) as bytes").collect()[0]
    return time.perf_counter() - started, int(row["n"])


def measure_streams(sizes: list[int], limit_s: float) -> list[dict[str, Any]]:
    """For each size: availableNow read of a stream vs a JSON-lines file source, batch scan vs parquet."""
    from pyspark_minibroker.testing import local_session

    spark = local_session(app_name="minibroker-bench-streams")
    out: list[dict[str, Any]] = []
    body = "x" * 256
    try:
        with ThreadedBroker() as broker, tempfile.TemporaryDirectory() as files:
            url = broker.url
            broker.declare_stream("bench.stream.warm-up")
            broker.publish_many("bench.stream.warm-up", [body] * 100)
            warm = spark.readStream.format("amqp").option("url", url).option("address", "bench.stream.warm-up").load()
            for rows in sizes:
                name = f"bench.stream.{rows}"
                broker.declare_stream(name)
                broker.publish_many(name, [body] * rows)
                json_dir, parquet_dir = f"{files}/json-{rows}", f"{files}/parquet-{rows}"
                frame = spark.range(rows).selectExpr(f"'{body}' as body").repartition(2)
                frame.write.json(json_dir)
                frame.write.parquet(parquet_dir)
                stream = spark.readStream.format("amqp").option("url", url).option("address", name).load()
                files_stream = spark.readStream.schema("body string").json(json_dir)
                # Warm-up of both paths: the first Python data source query starts Spark's Python workers.
                _available_now(spark, files_stream, limit_s)
                _available_now(spark, warm, limit_s)
                stream_s, stream_done = _available_now(spark, stream, limit_s)
                json_s, json_done = _available_now(spark, files_stream, limit_s)
                batch = spark.read.format("amqp").option("url", url).option("address", name).load()
                scan_s, scanned = _scan(batch)
                parquet_s, _ = _scan(spark.read.parquet(parquet_dir))
                out.append({
                    "rows": rows, "stream_s": stream_s, "json_s": json_s, "scan_s": scan_s, "parquet_s": parquet_s,
                    "complete": stream_done and json_done and scanned == rows,
                })  # fmt: skip
                broker.delete(name)
    finally:
        spark.stop()
    return out
