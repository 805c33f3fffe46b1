"""The ``spark`` group of ``python -m bench``: rows per second through the ``amqp`` data source.

A local Spark session (``local[2]``) and a :class:`minibroker.ThreadedBroker` in this process:

- batch write: a DataFrame of N string rows (256 bytes) saved with ``format("amqp")``; the
  writer waits for every acceptance, so the time covers delivery to the broker;
- streaming read: N messages queued, then a ``trigger(availableNow=True)`` query from the
  ``amqp`` source into Spark's ``noop`` sink, ``maxBatch`` 1000; time from start to termination,
  every message settled.

One warm-up write runs first (the first write starts Spark's Python workers, ~7 s).  Skipped,
with a line saying so, when pyspark is not installed (``pip install -e '.[spark]'``).
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
from typing import Any

from minibroker import ThreadedBroker

__all__ = ["available", "measure"]


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
