"""In-process measurements of the broker engine (no sockets): memory per queued message and cost vs depth.

Started by ``bench/run.py`` in a fresh process (``python bench/engine_bench.py ...``) so
its heap and garbage collector start clean; prints one JSON object per line.

* ``memory``: ``tracemalloc`` growth (and RSS growth) while ``--messages`` distinct
  encoded messages of ``--size`` bytes are published with ``Broker.publish`` and stay
  queued, divided by the number queued.
* ``depth``: for each ``--depth``, a fresh broker whose queue is filled to that depth
  (``Broker.publish``, fill time per message reported), then ``--ops`` steady-state
  rounds of one ``Broker.publish`` plus one dispatch-and-accept of the oldest message,
  so the depth stays constant.  Enqueue and dequeue time per message at each depth.

Every loop stops at its count or at ``--limit-s`` seconds, whichever comes first.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import tracemalloc
from typing import Any

from minibroker import Broker, BrokerConfig, build_message

QUEUE = "bench.depth"
BATCH = 64


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _template(size: int) -> bytes:
    """An encoded message whose last 8 bytes are body bytes (so a counter there keeps it valid)."""
    payload = build_message(body=bytes(size), body_kind="data").encode()
    assert payload.endswith(bytes(8))
    return payload


def _distinct(template: bytes, i: int) -> bytes:
    return template[:-8] + i.to_bytes(8, "big")


class _Sink:
    """A consumer the queue can hand messages to: takes ``allowance`` of them."""

    link_id = -1
    browse = False

    def __init__(self) -> None:
        self.allowance = 0
        self.taken: list[Any] = []

    def credit(self) -> int:
        return self.allowance

    def accepts(self, entry: Any) -> bool:
        return True

    def deliver(self, entry: Any) -> None:
        self.allowance -= 1
        self.taken.append(entry)


def measure_memory(messages: int, size: int, limit_s: float) -> dict[str, Any]:
    template = _template(size)
    broker = Broker(BrokerConfig())
    broker.declare_queue("bench.memory")
    broker.publish("bench.memory", _distinct(template, 0))  # warm caches and lazy structures
    gc.collect()
    rss0 = _rss_bytes()
    tracemalloc.start()
    traced0 = tracemalloc.get_traced_memory()[0]
    deadline = time.monotonic() + limit_s
    published = 0
    for i in range(1, messages + 1):
        broker.publish("bench.memory", _distinct(template, i))
        published += 1
        if i % 1024 == 0 and time.monotonic() > deadline:
            break
    gc.collect()
    traced1 = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    rss1 = _rss_bytes()
    depth = broker.queues["bench.memory"].depth
    return {
        "kind": "memory",
        "messages": published,
        "depth": depth,
        "complete": published == messages,
        "size": size,
        "payload_bytes": len(template),
        "traced_bytes_per_message": (traced1 - traced0) / max(1, published),
        "rss_bytes_per_message": (rss1 - rss0) / max(1, published),
    }


def measure_depth(depth: int, ops: int, size: int, limit_s: float) -> dict[str, Any]:
    template = _template(size)
    broker = Broker(BrokerConfig())
    queue = broker.declare_queue(QUEUE)
    sink = _Sink()
    queue.add_consumer(sink)
    publish = broker.publish
    gc.collect()
    rss0 = _rss_bytes()
    deadline = time.monotonic() + limit_s
    t0, c0 = time.perf_counter(), time.process_time()
    filled = 0
    for i in range(depth):
        publish(QUEUE, _distinct(template, i))
        filled += 1
        if i % 4096 == 0 and time.monotonic() > deadline:
            break
    fill_s = time.perf_counter() - t0
    fill_cpu = time.process_time() - c0
    rss1 = _rss_bytes()
    # Steady state at this depth: a batch in, then the oldest batch out (depth stays within one batch).
    now = broker.clock.now
    wall, cpu = time.perf_counter, time.process_time
    enq_wall = enq_cpu = deq_wall = deq_cpu = 0.0
    done = 0
    seq = depth
    deadline = time.monotonic() + limit_s
    while done < ops and time.monotonic() < deadline:
        batch = min(BATCH, ops - done)
        payloads = [_distinct(template, seq + k) for k in range(batch)]
        seq += batch
        w0, c0 = wall(), cpu()
        for payload in payloads:
            publish(QUEUE, payload)
        w1, c1 = wall(), cpu()
        for _ in range(batch):
            sink.allowance = 1
            queue.dispatch(now())
            queue.accept(sink.taken.pop())
        w2, c2 = wall(), cpu()
        enq_wall += w1 - w0
        enq_cpu += c1 - c0
        deq_wall += w2 - w1
        deq_cpu += c2 - c1
        done += batch
    return {
        "kind": "depth",
        "depth": filled,
        "depth_requested": depth,
        "complete": filled == depth and done == ops,
        "ops": done,
        "fill_us_per_message": fill_s / max(1, filled) * 1e6,
        "fill_cpu_us_per_message": fill_cpu / max(1, filled) * 1e6,
        "fill_rss_bytes_per_message": (rss1 - rss0) / max(1, filled),
        "enqueue_us": enq_wall / max(1, done) * 1e6,
        "dequeue_us": deq_wall / max(1, done) * 1e6,
        "enqueue_cpu_us": enq_cpu / max(1, done) * 1e6,
        "dequeue_cpu_us": deq_cpu / max(1, done) * 1e6,
        "round_us": (enq_wall + deq_wall) / max(1, done) * 1e6,
        "round_cpu_us": (enq_cpu + deq_cpu) / max(1, done) * 1e6,
        "queue_depth_after": queue.depth,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["memory", "depth"])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--depth", type=int, action="append", default=[])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--limit-s", type=float, default=60.0)
    args = parser.parse_args()
    if args.what == "memory":
        print(json.dumps(measure_memory(args.messages, args.size, args.limit_s)), flush=True)
    else:
        for depth in args.depth or [1000]:
            print(json.dumps(measure_depth(depth, args.ops, args.size, args.limit_s)), flush=True)
            gc.collect()
    sys.stdout.flush()
    os._exit(0)  # skip tearing down a million objects


if __name__ == "__main__":
    sys.exit(main())
