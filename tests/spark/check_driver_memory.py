"""Driver memory against the backlog: the resident memory of the driver's Python streaming-source
runner (where ``latestOffset``, ``partitions`` and ``commit`` run) while an ``availableNow`` query
reads a backlog of 20,000 and of 200,000 256-byte messages, from a stream and from a queue.

Run by hand (a few minutes; not part of CI)::

    python tests/spark/check_driver_memory.py [ROWS ...]

The readers are the data source's own, subclassed here only to sample the process's resident set
and its high-water mark (``/proc/self/status``) each time Spark calls ``latestOffset`` (a queue:
``read``) or ``commit``, into a file named by its pid.  Prints, per source and backlog, the
largest resident sample and the high-water mark, and the runner's pids.  The driver must hold no more for the larger backlog: a stream's driver holds
only offsets; a queue's holds one micro-batch (``maxBatch``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark_minibroker.source import AmqpDataSource, _OffsetStreamReader, _StreamReader
from pyspark_minibroker.testing import local_session

from minibroker import ThreadedBroker

BODY = "x" * 256
MAX_BATCH = 10_000


def sample(directory: str) -> None:
    """Append this process's resident set and its high-water mark (``VmRSS``, ``VmHWM``: since the
    process's own start, unlike ``ru_maxrss``, which keeps the JVM's from before the exec)."""
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) * 1024
    with open(Path(directory) / f"{os.getpid()}.txt", "a") as out:
        out.write(f"{fields['VmRSS']} {fields['VmHWM']}\n")


class SampledOffsets(_OffsetStreamReader):  # type: ignore[misc]
    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        sample(self.directory)
        return super().latestOffset(start, limit)

    def commit(self, end: dict[str, int]) -> None:
        sample(self.directory)


class SampledQueue(_StreamReader):  # type: ignore[misc]
    def read(self, start: dict[str, Any]) -> Any:
        sample(self.directory)
        return super().read(start)

    def commit(self, end: dict[str, Any]) -> None:
        sample(self.directory)
        super().commit(end)


class SampledSource(AmqpDataSource):
    @classmethod
    def name(cls) -> str:
        return "amqp-sampled"

    def streamReader(self, schema: Any) -> Any:
        reader = super().streamReader(schema)  # raises for a queue: Spark falls back to the simple reader
        sampled = SampledOffsets(reader.options, reader.arrow)
        sampled.directory = self.options["samples"]
        return sampled

    def simpleStreamReader(self, schema: Any) -> Any:
        sampled = SampledQueue(self.parsed)
        sampled.directory = self.options["samples"]
        return sampled


def run(spark: Any, url: str, address: str, rows: int) -> tuple[float, int, int, str]:
    """Seconds, largest resident sample and high-water mark of the runner process (bytes), its pids."""
    with tempfile.TemporaryDirectory() as samples, tempfile.TemporaryDirectory() as checkpoint:
        source = (spark.readStream.format("amqp-sampled").option("url", url).option("address", address)
                  .option("maxBatch", str(MAX_BATCH)).option("samples", samples).load())  # fmt: skip
        started = time.perf_counter()
        query = (source.writeStream.format("noop").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())  # fmt: skip
        try:
            assert query.awaitTermination(1200), "the availableNow query did not finish"
        finally:
            query.stop()
        elapsed = time.perf_counter() - started
        files = list(Path(samples).glob("*.txt"))
        lines = [line.split() for f in files for line in f.read_text().splitlines()]
        pids = ",".join(f.stem for f in files)
        return elapsed, max(int(r) for r, _ in lines), max(int(p) for _, p in lines), pids


def main(sizes: list[int]) -> None:
    spark = local_session(app_name="minibroker-driver-memory")
    spark.dataSource.register(SampledSource)
    try:
        with ThreadedBroker() as broker:
            broker.declare_stream("warm-up")
            broker.publish_many("warm-up", [BODY] * 10)
            run(spark, broker.url, "warm-up", 10)
            for kind in ("stream", "queue"):
                for rows in sizes:
                    address = f"{kind}-{rows}"
                    if kind == "stream":
                        broker.declare_stream(address)
                    broker.publish_many(address, [BODY] * rows)
                    elapsed, resident, peak, pids = run(spark, broker.url, address, rows)
                    if kind == "queue":
                        assert broker.queue(address).depth == 0, "the queue was not read to the end"
                    print(f"{kind:6} {rows:>7} rows: {elapsed:6.1f} s, runner resident max {resident / 2**20:6.1f} MiB, "
                          f"high-water {peak / 2**20:6.1f} MiB (pid {pids})", flush=True)  # fmt: skip
                    broker.delete(address)
    finally:
        spark.stop()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [20_000, 200_000])
