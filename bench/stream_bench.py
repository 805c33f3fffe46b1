"""In-process measurements of reading without consuming: queue browsing, stream reading, stream seeking.

Started by ``bench/run.py`` in a fresh process (``python bench/stream_bench.py ...``);
prints one JSON object per line.  No sockets: a client's bytes (built with
:class:`minibroker.testing.Peer`) go straight into a broker connection and the bytes
written back are taken and dropped unparsed, so the figures are the broker's own cost
(protocol engine included) of moving messages out, not a client library's.

* ``browse``: for each ``--depth``, a queue filled to that depth and one browser
  (``distribution-mode: copy``) reading it all, granting credit ``--window`` at a time
  the way client libraries do; time per message browsed.
* ``read``: ``--messages`` messages read once from a queue (draining it) and once from a
  stream (``rabbitmq:stream-offset-spec`` ``first``), same client, same credit window,
  pre-settled on both; time per message for each.
* ``seek``: a stream of ``--messages`` messages; the time from a receiver's attach with
  offset ``messages - 10`` to its last of 10 messages being written.

Every loop stops at its count or at ``--limit-s`` seconds, whichever comes first.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from typing import Any

from minibroker import Broker, BrokerConfig, build_message
from minibroker.amqp.performatives import SND_SETTLED
from minibroker.amqp.types import Described, symbol
from minibroker.testing import Peer

OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")


def _payloads(count: int, size: int) -> list[bytes]:
    template = build_message(body=bytes(size), body_kind="data").encode()
    return [template[:-8] + i.to_bytes(8, "big") for i in range(count)]


class Reader:
    """A receiving client on one broker connection: attach, grant credit in windows, drop the output."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.connection = broker.connect(lambda: None, "bench")
        self.peer = Peer()
        self._send(self.peer.header() + self.peer.open() + self.peer.begin())

    def _send(self, data: bytes) -> int:
        self.connection.receive_data(data)
        return len(self.connection.data_to_send())

    def attach(self, address: str, handle: int, **source: Any) -> None:
        self._send(self.peer.attach_receiver(f"r{handle}", address, handle, snd_settle_mode=SND_SETTLED, **source))

    def sent(self, handle: int) -> int:
        """Transfers the broker has sent on the link (its delivery-count, Part 2 §2.6.7)."""
        for session in self.connection.engine.sessions.values():
            for link in session.links_by_handle.values():
                if link.name == f"r{handle}":
                    return int(link.delivery_count)
        raise LookupError(f"no link r{handle}")

    def read(self, handle: int, count: int, window: int, deadline: float) -> int:
        """Grant ``window`` credit at a time until ``count`` messages came (or the deadline); return how many."""
        got = 0
        while got < count and time.monotonic() < deadline:
            self._send(self.peer.flow(handle, credit=min(window, count - got), delivery_count=got))
            now = self.sent(handle)
            if now == got:
                break  # nothing more to read
            got = now
        return got


def measure_browse(depth: int, window: int, size: int, limit_s: float) -> dict[str, Any]:
    broker = Broker(BrokerConfig())
    broker.declare_queue("bench.browse")
    broker.publish_many("bench.browse", _payloads(depth, size))
    reader = Reader(broker)
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    reader.attach("bench.browse", 0, distribution_mode=symbol("copy"))
    got = reader.read(0, depth, window, time.monotonic() + limit_s)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "kind": "browse", "depth": depth, "window": window, "browsed": got, "complete": got == depth,
        "us_per_message": wall / max(1, got) * 1e6, "cpu_us_per_message": cpu / max(1, got) * 1e6,
        "still_queued": broker.queues["bench.browse"].depth,
    }  # fmt: skip


def measure_read(messages: int, window: int, size: int, limit_s: float) -> list[dict[str, Any]]:
    payloads = _payloads(messages, size)
    out = []
    for kind in ("queue", "stream"):
        broker = Broker(BrokerConfig())
        if kind == "queue":
            broker.declare_queue("bench.read")
            source: dict[str, Any] = {}
        else:
            broker.declare_stream("bench.read")
            source = {"filter": {OFFSET_SPEC: Described(OFFSET_SPEC, "first")}}
        broker.publish_many("bench.read", payloads)
        reader = Reader(broker)
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        reader.attach("bench.read", 0, **source)
        got = reader.read(0, messages, window, time.monotonic() + limit_s)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        out.append({
            "kind": f"read_{kind}", "messages": got, "window": window, "complete": got == messages,
            "us_per_message": wall / max(1, got) * 1e6, "cpu_us_per_message": cpu / max(1, got) * 1e6,
            "elapsed_s": wall,
        })  # fmt: skip
        del broker, reader
        gc.collect()
    return out


def measure_seek(messages: int, size: int, limit_s: float) -> dict[str, Any]:
    broker = Broker(BrokerConfig())
    broker.declare_stream("bench.seek")
    broker.publish_many("bench.seek", _payloads(messages, size))
    reader = Reader(broker)
    gc.collect()
    start = messages - 10
    t0 = time.perf_counter()
    reader.attach("bench.seek", 0, filter={OFFSET_SPEC: Described(OFFSET_SPEC, start)})
    got = reader.read(0, 10, 10, time.monotonic() + limit_s)
    elapsed = time.perf_counter() - t0
    return {"kind": "seek", "messages": messages, "offset": start, "read": got, "complete": got == 10,
            "ms": elapsed * 1e3}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["browse", "read", "seek"])
    parser.add_argument("--depth", type=int, action="append", default=[])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--limit-s", type=float, default=60.0)
    args = parser.parse_args()
    if args.what == "browse":
        for depth in args.depth or [20_000, 200_000]:
            print(json.dumps(measure_browse(depth, args.window, args.size, args.limit_s)), flush=True)
            gc.collect()
    elif args.what == "read":
        for line in measure_read(args.messages, args.window, args.size, args.limit_s):
            print(json.dumps(line), flush=True)
    else:
        print(json.dumps(measure_seek(args.messages, args.size, args.limit_s)), flush=True)
    sys.stdout.flush()
    os._exit(0)  # skip tearing down a million objects


if __name__ == "__main__":
    sys.exit(main())
