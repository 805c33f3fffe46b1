"""What receiving costs a ``minibroker.Client``: frame parsing, message decoding, the receive loop.

Run it directly, with ``plugins`` on ``PYTHONPATH`` (``PYTHONPATH=.:plugins python
bench/receive_bench.py``); it prints one JSON object per line.
A :class:`minibroker.ThreadedBroker` in a child process holds a stream of ``--messages``
256-byte messages shaped like what the Spark ``amqp`` source reads: a header, properties
(message-id, content-type, creation-time), application-properties and a data body; every
delivery carries ``x-stream-offset`` in its message-annotations, as a stream delivery does.

* ``decode``: the bytes a Client read from the socket for those deliveries, captured once,
  then parsed again in memory (no socket, no broker): frames only (``frames_us``, every
  frame built as the general reader builds it), frames plus decoding every message
  (``messages_us``), and frames plus the Spark row of each as an executor makes it
  (``rows_us``, :class:`pyspark_minibroker.columns.Rows`); microseconds per message, best
  of ``--repeat`` passes.
* ``client``: a Client reading the whole stream with ``fetch`` and ``prefetch`` (windows of
  1000, as the Spark source's range reader does) and making each row with ``Rows``; wall and CPU
  microseconds per message.
  The broker runs in a child process (as it does for Spark's executors), so the CPU time
  is the client's alone.
* ``task``: what a Spark executor task runs for one offset range of the stream (the data
  source's reader, then Spark's own ``records_to_arrow_batches``, as its Python worker runs
  it), without Spark around it; wall and CPU microseconds per row.  Needs the spark extra.

Every loop is bounded by ``--messages`` and ``--limit-s`` (whichever comes first).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from pyspark_minibroker.columns import Rows
from pyspark_minibroker.rows import read_struct_type

from minibroker import Client, ThreadedBroker, build_message
from minibroker.client import Delivery
from minibroker.protocol.peer import FrameReader

__all__ = ["main", "payloads"]


def payloads(count: int, size: int = 256) -> list[bytes]:
    """``count`` messages with the sections a Spark row reads (the body differs per message)."""
    template = build_message(
        body=bytes(size), body_kind="data", durable=True, message_id="message-0000000000",
        content_type="application/octet-stream", creation_time=1_700_000_000, subject="bench",
        application_properties={"source": "bench", "n": 1},
    ).encode()  # fmt: skip
    return [template[:-8] + i.to_bytes(8, "big") for i in range(count)]


def _read_all(client: Client, address: str, count: int, limit_s: float, row: bool) -> int:
    receiver = client.receiver(address, offset="first", credit=1000)
    deadline = time.monotonic() + limit_s
    got = 0
    rows = Rows()
    while got < count and time.monotonic() < deadline:
        chunk = receiver.fetch(min(1000, count - got))
        if not chunk:
            break
        if got + len(chunk) < count:
            receiver.prefetch(min(1000, count - got - len(chunk)))  # as the range reader does
        rows.clear()
        for delivery in chunk:
            if row:
                rows.add(delivery.payload)
            else:
                _ = delivery.offset
        got += len(chunk)
    receiver.close()
    return got


def _capture(url: str, address: str, count: int, limit_s: float) -> list[bytes]:
    """The byte chunks a Client read while receiving the whole stream."""
    chunks: list[bytes] = []
    with Client(url) as client:
        reader = client._reader
        feed = reader.feed

        def recording(data: bytes, take: Any = None) -> Any:
            chunks.append(data)
            return feed(data, take)

        reader.feed = recording  # type: ignore[method-assign]
        _read_all(client, address, count, limit_s, row=False)
    return chunks


def _best(fn: Callable[[], int], repeat: int, limit_s: float) -> tuple[float, int]:
    best = float("inf")
    done = 0
    deadline = time.monotonic() + limit_s
    for _ in range(repeat):
        started = time.perf_counter()
        done = fn()
        best = min(best, time.perf_counter() - started)
        if time.monotonic() > deadline:
            break
    return best, done


def measure_decode(chunks: list[bytes], repeat: int, limit_s: float) -> dict[str, float]:
    """Microseconds per message to parse the captured bytes again (see the module docstring)."""

    def frames(decode: int) -> int:
        reader = FrameReader()
        rows = Rows()
        n = 0
        for data in chunks:
            for frame in reader.feed(data):
                if frame.payload:
                    n += 1
                    if decode == 1:
                        _ = Delivery(None, 0, frame.payload, True).message  # type: ignore[arg-type]
                    elif decode == 2:
                        rows.add(frame.payload)
            rows.clear()
        return n

    out: dict[str, float] = {}
    for name, decode in (("frames_us", 0), ("messages_us", 1), ("rows_us", 2)):
        seconds, n = _best(lambda decode=decode: frames(decode), repeat, limit_s)  # type: ignore[misc]
        out[name] = seconds / max(n, 1) * 1e6
        out["messages"] = n
    return out


def measure_client(url: str, address: str, count: int, limit_s: float) -> dict[str, float]:
    """Wall and CPU microseconds per message for a Client reading the stream into rows."""
    with Client(url) as client:
        started, cpu = time.perf_counter(), time.process_time()
        got = _read_all(client, address, count, limit_s, row=True)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"messages": got, "wall_us": wall / max(got, 1) * 1e6, "cpu_us": cpu / max(got, 1) * 1e6}


def serve(messages: int) -> None:
    """The child: a broker with the stream, its URL on stdout, until stdin closes."""
    with ThreadedBroker() as broker:
        broker.declare_stream("bench.receive")
        broker.publish_many("bench.receive", messages=payloads(messages))
        print(broker.url, flush=True)
        sys.stdin.read()


def measure_task(url: str, address: str, count: int) -> dict[str, float]:
    """Wall and CPU microseconds per row for one executor task reading offsets 0..count (see above)."""
    from pyspark.sql.worker.plan_data_source_read import records_to_arrow_batches
    from pyspark_minibroker import source

    options = {"url": url, "address": address, "kind": "stream"}
    data_source = source.AmqpDataSource(options)
    reader = data_source.reader(read_struct_type())
    started, cpu = time.perf_counter(), time.process_time()
    rows = 0
    for batch in records_to_arrow_batches(reader.read(source._Range(address, 0, count)), 10_000, read_struct_type(),
                                          data_source):  # fmt: skip
        rows += batch.num_rows
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"rows": rows, "wall_us": wall / max(rows, 1) * 1e6, "cpu_us": cpu / max(rows, 1) * 1e6}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--limit-s", type=float, default=60.0)
    parser.add_argument("--only", default="decode,client,task")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.messages)
        return
    groups = set(args.only.split(","))
    child = subprocess.Popen([sys.executable, __file__, "--serve", "--messages", str(args.messages)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        if not url:
            raise SystemExit("the broker process did not start")
        if "decode" in groups:
            chunks = _capture(url, "bench.receive", args.messages, args.limit_s)
            print(json.dumps({"bench": "decode", **measure_decode(chunks, args.repeat, args.limit_s)}), flush=True)
        if "client" in groups:
            result = measure_client(url, "bench.receive", args.messages, args.limit_s)
            print(json.dumps({"bench": "client", **result}), flush=True)
        if "task" in groups:
            result = measure_task(url, "bench.receive", args.messages)
            print(json.dumps({"bench": "task", **result}), flush=True)
    finally:
        child.communicate(timeout=args.limit_s)


if __name__ == "__main__":
    main()
