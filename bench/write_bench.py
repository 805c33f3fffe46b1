"""The Spark writer's CPU per row and the broker's, without Spark (issue #46).

``python bench/write_bench.py --rows 100000 --repeats 2`` starts a :class:`ThreadedBroker` here
and, for each repeat, a child process that sends that many rows of a 256-character body to a
new queue with the writer's own ``_send_rows`` (``pyspark_minibroker.source``; no Spark session:
a batch write's default ids, one partition).  It prints, per repeat, the broker thread's CPU per
row (``time.pthread_getcpuclockid`` of the broker's thread), the writer's (its process time) and
the write's wall time.  Two trees compare by running each in turn with its own ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time

from minibroker import ThreadedBroker
from minibroker.broker_thread import THREAD_NAME

#: The writer, in a child process as a Spark task is: prints its CPU seconds, wall seconds, rows sent.
_WRITER = """
import sys, time
from pyspark_minibroker.options import parse_options
from pyspark_minibroker.source import _send_rows
url, address, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
options = parse_options({"url": url, "address": address})
body = "x" * 256
cpu, wall = time.process_time(), time.perf_counter()
sent = _send_rows(options, ["body"], ((body,) for _ in range(rows)), None)
print(time.process_time() - cpu, time.perf_counter() - wall, sent.count)
"""


def measure(rows: int, repeats: int) -> list[dict[str, float]]:
    """Each repeat's broker and writer CPU per row (µs) and wall time (s)."""
    results = []
    with ThreadedBroker() as broker:
        [thread] = [t for t in threading.enumerate() if t.name == THREAD_NAME]
        assert thread.ident is not None
        clock = time.pthread_getcpuclockid(thread.ident)
        for repeat in range(repeats):
            address = f"bench.write.{repeat}"
            before = time.clock_gettime(clock)
            done = subprocess.run(
                [sys.executable, "-c", _WRITER, broker.url, address, str(rows)], capture_output=True, text=True, check=True
            )
            broker_s = time.clock_gettime(clock) - before
            writer_s, wall_s, sent = done.stdout.split()
            if int(sent) != rows or broker.queue(address).depth != rows:
                raise RuntimeError(f"expected {rows} rows on {address}, the writer sent {sent}")
            results.append(
                {"broker_us": broker_s / rows * 1e6, "writer_us": float(writer_s) / rows * 1e6, "wall_s": float(wall_s)}
            )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    for result in measure(args.rows, args.repeats):
        print(json.dumps({key: round(value, 2) for key, value in result.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
