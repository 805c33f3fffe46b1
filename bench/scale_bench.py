"""The ``scale`` group: how broker CPU per message and memory grow with the broker around the workload.

Each curve starts a broker process (``bench/scale_broker.py``), grows one count in it step by step
(idle connections, queues, idle consumers on the workload's queue, subscriptions of a topic,
bindings of a RabbitMQ topic exchange, open transactions) and at each size runs the same message
workload: the client worker's concurrent send+receive (``bench/client.py``, python-qpid-proton, one
sender and one receiver) of ``scale_messages`` messages.  Broker CPU per message is the broker
process's CPU time over the workload (``/proc``, as everywhere in the bench) divided by the
messages; each size runs ``scale_rounds`` workloads and the figure is their median.  The counts a
message does not touch should not change it: the target is the largest size within 1.2x of the
smallest (a topic's fan-out: CPU per message per subscription, the largest against 100, since
one subscription carries the whole message path).  Memory per connection, queue, consumer,
subscription, binding and transaction is the growth of the broker's resident set (``VmRSS``,
after a ``gc.collect()``) while the last step adds its count (e.g. 10,000 -> 100,000 queues),
measured around the growing alone, over the count added; with ``--trace-memory``, what
``tracemalloc`` counts the same step allocated and kept instead (RSS can grow by less than that,
into room an earlier workload freed, and tracing inflates RSS, so a run gives one or the other).

The idle things are held by this process: connections and links through :class:`minibroker.Client`
(a receiver attached with no credit is an idle consumer, or an idle subscriber of a topic),
transactions declared on a raw coordinator link (``minibroker.testing.Peer``).  Everything runs
on 127.0.0.1.
"""

from __future__ import annotations

import socket
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.harness import HERE, Child, Report, Settings, broker_url, fmt, process_cpu, progress, verdict
from minibroker import Client
from minibroker.amqp import Declare, Declared
from minibroker.amqp.message import Message as AmqpMessage
from minibroker.amqp.messaging import Source
from minibroker.amqp.performatives import ROLE_SENDER, Disposition, Flow
from minibroker.amqp.transactions import Coordinator
from minibroker.amqp.types import symbol
from minibroker.testing import Peer
from minibroker.testing.peer import FrameReader

#: Broker CPU per message at the largest size over the smallest: the issue's bound.
FLAT = 1.2
#: Memory targets (bytes): per idle connection, per empty queue.
CONNECTION_BYTES = 20 * 1024
QUEUE_BYTES = 2 * 1024
WAIT = 60.0


@dataclass
class Curve:
    """One count grown in one broker: its sizes, how to grow it, where the workload sends and reads."""

    name: str
    label: str
    unit: str  # what one of the count is, for "memory per ..."
    sizes: tuple[int, ...]
    send: str
    receive: str
    layer: str = "core"
    per_subscription: bool = False
    memory_target: int | None = None
    #: The client worker's message variant (``ttl``: each message has a 60 s ttl, so queues keep an
    #: expiry index and the broker's timer learns of new expiry times).
    variant: str = "plain"
    memory: bool = True
    holders: list[Any] = field(default_factory=list)


class Transactions:
    """A raw connection with a coordinator link that declares transactions and keeps them open."""

    def __init__(self, host: str, port: int) -> None:
        self.peer = Peer("scale-bench")
        self.sock = socket.create_connection((host, port), timeout=WAIT)
        self.reader = FrameReader()
        self.sock.sendall(self.peer.start())
        caps = Coordinator(capabilities=[symbol("amqp:local-transactions")])
        self.sock.sendall(self.peer.attach("ctl", 0, ROLE_SENDER, source=Source(address="ctl"), target=caps))
        self._until(lambda p: isinstance(p, Flow))  # the coordinator's credit

    def declare(self) -> None:
        self.sock.sendall(self.peer.transfer(0, None, None, AmqpMessage(body=Declare()).encode()))
        self._until(lambda p: isinstance(p, Disposition) and isinstance(p.state, Declared))

    def _until(self, want: Callable[[Any], bool]) -> None:
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the broker closed the coordinator connection")
            frames = self.reader.feed(data)
            self.peer.observe(frames)
            if any(want(f.performative) for f in frames):
                return

    def close(self) -> None:
        self.sock.close()


def curves(s: Settings) -> list[Curve]:
    quick = s.mode == "quick"
    return [
        Curve("idle_connections", "idle connections", "connection", (0, 100) if quick else (0, 100, 1_000),
              "scale.work", "scale.work", memory_target=CONNECTION_BYTES),
        Curve("queues", "queues", "queue", (10, 1_000) if quick else (10, 10_000, 100_000),
              "scale.q.0", "scale.q.0", memory_target=QUEUE_BYTES),
        Curve("queues_ttl", "queues, messages with a ttl", "queue", (10, 1_000) if quick else (10, 10_000, 100_000),
              "scale.q.0", "scale.q.0", variant="ttl", memory=False),
        Curve("consumers", "consumers on the queue (one with credit)", "consumer",
              (1, 100) if quick else (1, 100, 1_000), "scale.work", "scale.work"),
        Curve("subscriptions", "topic subscriptions (fan-out)", "subscription",
              (1, 100) if quick else (1, 100, 1_000), "scale.topic", "scale.topic", per_subscription=True),
        Curve("bindings", "RabbitMQ topic exchange bindings", "binding", (10, 1_000) if quick else (10, 10_000),
              "/exchanges/scale.x/work.key", "/queues/scale.work", layer="rabbitmq"),
        Curve("transactions", "open transactions", "transaction", (1, 100) if quick else (1, 1_000),
              "scale.work", "scale.work"),
    ]  # fmt: skip


def grow(curve: Curve, broker: Child, url: str, have: int, want: int) -> None:
    """Bring the curve's count from ``have`` to ``want``."""
    host, port = url.rsplit("//", 1)[1].rsplit(":", 1)
    add = want - have
    if curve.name == "idle_connections":
        for _ in range(add):
            client = Client(url, timeout=WAIT)
            client.sender(None)  # a session and a link: what an idle application connection holds
            curve.holders.append(client)
    elif curve.name in ("queues", "queues_ttl"):
        _command(broker, {"op": "queues", "prefix": "scale.q", "start": have, "count": add})
    elif curve.name in ("consumers", "subscriptions"):
        if not curve.holders:
            curve.holders.append(Client(url, timeout=WAIT))
            if curve.name == "subscriptions":
                _command(broker, {"op": "topic", "name": curve.send})
        client = curve.holders[0]
        # The worker's receiver is the one with credit (and a subscription of its own): hold size - 1.
        for _ in range(max(0, want - 1) - max(0, have - 1)):
            client.receiver(curve.receive)  # attached, no credit granted
    elif curve.name == "bindings":
        extra = {"name": "scale.x", "queue": "scale.work", "key": "work.*", "sink": "scale.sink"}
        _command(broker, {"op": "exchange", "start": have, "count": add, **extra})
    elif curve.name == "transactions":
        if not curve.holders:
            curve.holders.append(Transactions(host, int(port)))
        for _ in range(add):
            curve.holders[0].declare()
    else:
        raise ValueError(f"no such curve {curve.name!r}")


def _command(broker: Child, cmd: dict[str, Any]) -> dict[str, Any]:
    answer = broker.call(cmd, timeout=600)
    if not answer.get("ok"):
        raise RuntimeError(f"scale broker refused {cmd['op']}: {answer.get('error')}")
    return answer


def cpu_per_message_us(worker: Child, broker: Child, spec: dict[str, Any], s: Settings) -> float | None:
    """Run one client job; the broker's CPU time over it per message moved (None: nothing moved)."""
    spec = {"size": s.size, "credit": s.credit, **spec}
    before = process_cpu(broker.pid)[0]
    result = worker.call(spec, timeout=float(spec["limit_s"]) + 30)
    cpu = process_cpu(broker.pid)[0] - before
    if not result.get("ok"):
        raise RuntimeError(f"{spec['op']} job on {spec['url']} failed: {result.get('error')}")
    count = int(result.get("count") or 0)
    return cpu / count * 1e6 if count else None


def _rss(broker: Child) -> int:
    return int(_command(broker, {"op": "rss"})["rss"])


def run_curve(report: Report, s: Settings, worker: Child, curve: Curve) -> None:
    broker = Child(f"broker ({curve.name})", [sys.executable, str(HERE / "scale_broker.py"), curve.layer])
    try:
        url = broker_url(broker)
        grow(curve, broker, url, 0, 0)  # what the curve starts from (its topic, exchange, coordinator)
        spec = {"op": "concurrent", "url": url, "variant": curve.variant, "limit_s": s.job_limit_s,
                "send_address": curve.send, "receive_address": curve.receive}
        # One unmeasured run first: the broker's first messages pay for imports and warming caches.
        cpu_per_message_us(worker, broker, {**spec, "count": s.scale_min_messages}, s)
        _command(broker, {"op": "purge"})
        have = 0
        cpu: dict[int, float] = {}
        rss: dict[int, int] = {}
        traced: dict[int, int] = {}
        for size in curve.sizes:
            t0 = time.monotonic()
            before = _rss(broker)
            if s.scale_trace:
                _command(broker, {"op": "trace"})
            grow(curve, broker, url, have, size)
            # What growing took, measured around the growing alone: the workloads' own high water
            # (buffers, allocator arenas) stays out of it.  RSS may still grow by less than what
            # was allocated, into room an earlier workload left free: tracemalloc says that part
            # (``--trace-memory``; its own bookkeeping then inflates the RSS figure).
            if s.scale_trace:
                traced[size] = int(_command(broker, {"op": "traced"})["traced"])
            rss[size] = _rss(broker) - before
            have = size
            runs = []
            for _ in range(s.scale_rounds):
                n = s.scale_messages
                if curve.per_subscription:  # every subscription keeps a copy: bound the copies held
                    n = max(s.scale_min_messages, min(n, s.scale_copies // max(size, 1)))
                us = cpu_per_message_us(worker, broker, {**spec, "count": n}, s)
                if curve.per_subscription:  # the idle subscriptions' copies go: memory is the subscriptions'
                    _command(broker, {"op": "purge"})
                if us is not None:
                    runs.append(us / (size if curve.per_subscription and size else 1))
            cpu[size] = statistics.median(runs) if runs else float("nan")
            progress(f"  {curve.name} at {size:,}: {cpu[size]:.2f} us ({time.monotonic() - t0:.1f} s)")
        record_curve(report, curve, cpu, rss, traced)
    finally:
        for holder in curve.holders:
            try:
                holder.close()
            except Exception:  # a holder the broker already dropped
                pass
        curve.holders.clear()
        broker.close()


def record_curve(report: Report, curve: Curve, cpu: dict[int, float], rss: dict[int, int],
                 traced: dict[int, int]) -> None:  # fmt: skip
    smallest, largest = curve.sizes[0], curve.sizes[-1]
    # A topic's one subscription carries the whole message path (send, the receiver's transfer and
    # its settlement): the cost per subscription is what 100 and then 1,000 copies cost each.
    base = curve.sizes[1] if curve.per_subscription and len(curve.sizes) > 2 else smallest
    per = "per message per subscription" if curve.per_subscription else "per message"
    for size in curve.sizes:
        report.record("scale", f"{curve.name}_cpu_per_message", "minibroker", cpu[size], "us", size=size,
                      rss_growth=rss[size], per_subscription=curve.per_subscription or None)  # fmt: skip
        ratio = cpu[size] / cpu[base] if cpu[base] and size > base else None
        last = size == largest and size != base
        ok = ratio <= FLAT if last and ratio is not None else None
        if last and ratio is not None:
            report.record("scale", f"{curve.name}_cpu_ratio", "ratio", ratio, "x", target=f"<= {FLAT}x",
                          status=verdict(ok), sizes=[base, largest])  # fmt: skip
        report.row("scale", f"broker CPU {per}, {size:,} {curve.label}", mb=fmt(cpu[size], "us"),
                   ratio=fmt(ratio, "x") if ratio is not None else "",
                   target=f"<= {FLAT}x" if last else "", status=verdict(ok),
                   note=f"ratio: to {base:,}" if ratio is not None else "")  # fmt: skip
    added = largest - curve.sizes[-2] if len(curve.sizes) > 1 else 0
    if added > 0 and curve.memory and largest in traced:
        allocated = traced[largest] / added
        ok = allocated < curve.memory_target if curve.memory_target is not None else None
        target = f"< {curve.memory_target:,} B" if curve.memory_target is not None else ""
        report.record("scale", f"allocated_per_{curve.unit}", "minibroker", allocated, "B", added=added,
                      target=target or None, status=verdict(ok) if target else None)  # fmt: skip
        report.row("scale", f"memory per {curve.unit} (tracemalloc, adding the last {added:,})",
                   mb=fmt(allocated, "B"), target=target, status=verdict(ok))
    elif added > 0 and curve.memory:
        per_item = rss[largest] / added
        ok = per_item < curve.memory_target if curve.memory_target is not None else None
        target = f"< {curve.memory_target:,} B" if curve.memory_target is not None else ""
        report.record("scale", f"memory_per_{curve.unit}", "minibroker", per_item, "B", target=target or None,
                      status=verdict(ok) if target else None, added=added)  # fmt: skip
        report.row("scale", f"memory per {curve.unit} (RSS growth adding the last {added:,})", mb=fmt(per_item, "B"),
                   target=target, status=verdict(ok))


def bench_scale(report: Report, s: Settings, worker: Child, only: Callable[[str], bool] = lambda name: True) -> None:
    for curve in curves(s):
        if only(curve.name):
            progress(f"scale: {curve.label} at {', '.join(f'{n:,}' for n in curve.sizes)}; "
                     f"{s.scale_messages} messages concurrent, {s.scale_rounds} round(s) per size")  # fmt: skip
            run_curve(report, s, worker, curve)
