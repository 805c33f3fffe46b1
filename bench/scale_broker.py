"""A broker process the ``scale`` group grows around an unchanged workload (``bench/scale_bench.py``).

``python bench/scale_broker.py [core|rabbitmq]`` serves a ``ThreadedBroker`` (with the RabbitMQ 4
layer for ``rabbitmq``) on a free loopback port with the per-client limits raised past the curves'
largest sizes, prints ``minibroker listening on amqp://127.0.0.1:PORT`` like ``minibroker
serve``, then takes one JSON command a line on stdin and answers each with a JSON line holding
``"ok"`` and the process's resident memory (``rss``, bytes, from ``/proc/self/status``):

``{"op": "queues", "prefix": P, "start": I, "count": N}``
    declare queues ``P.I`` .. ``P.(I+N-1)``, as the Python API's ``declare_queue`` does, in one
    trip to the broker's thread.
``{"op": "topic", "name": T}``
    declare a topic.
``{"op": "exchange", "name": X, "queue": Q, "key": K, "sink": S, "start": I, "count": N}``
    declare topic exchange ``X`` bound to queue ``Q`` with key ``K`` (the workload's binding) and
    queue ``S``, then add ``N`` bindings from ``X`` to ``S`` with the keys ``other.I.*`` ... that
    no workload message matches (one destination, so what grows is bindings, not queues).
``{"op": "purge"}``
    remove what every queue holds (a topic's idle subscriptions keep a copy of each message).
``{"op": "trace"}``, ``{"op": "traced"}``
    start ``tracemalloc``; stop it, answering ``traced``: the bytes still allocated of what was
    allocated since it started (after a ``gc.collect()``), whichever thread allocated them.
``{"op": "rss"}``
    only the memory.
``{"op": "exit"}``
    stop.
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from typing import Any

from minibroker import ThreadedBroker
from minibroker.rabbitmq.options import RabbitMQOptions

#: Past every curve's largest size (1,000 connections, 1,000 links on one, 1,000 transactions,
#: 10,000 bindings), so no limit refuses what a curve builds.
LIMITS: dict[str, Any] = {
    "max_connections": 2_000,
    "max_links": 2_000,
    "max_transactions_per_connection": 2_000,
    # The idle things the bench holds send nothing, and a curve may take longer than the default 60 s.
    "idle_timeout": None,
}


def rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def handle(broker: ThreadedBroker, cmd: dict[str, Any]) -> dict[str, Any]:
    op = cmd["op"]
    if op == "queues":
        # The engine's declare, as ``declare_queue`` calls it, for a whole batch in one trip to the
        # broker's thread: one ``declare_queue`` call each is a thread round trip (about 2 ms here),
        # minutes for 100,000 queues, and what grows is the same.
        names = [f"{cmd['prefix']}.{i}" for i in range(cmd["start"], cmd["start"] + cmd["count"])]
        broker._call(lambda: [broker._broker.declare("queue", name, None) for name in names])
    elif op == "topic":
        broker.declare_topic(cmd["name"])
    elif op == "exchange":
        name = cmd["name"]
        if name not in broker.exchanges():
            broker.declare_exchange(name, "topic")
            broker.declare_queue(cmd["queue"])
            broker.declare_queue(cmd["sink"])
            broker.bind(name, queue=cmd["queue"], key=cmd["key"])
        for i in range(cmd["start"], cmd["start"] + cmd["count"]):
            broker.bind(name, queue=cmd["sink"], key=f"other.{i}.*")
    elif op == "purge":
        broker.purge()
    elif op == "trace":
        tracemalloc.start()
    elif op == "traced":
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return {"traced": traced}
    elif op != "rss":
        raise ValueError(f"unknown op {op!r}; expected queues, topic, exchange, purge, trace, traced, rss or exit")
    return {}


def main() -> int:
    layer = sys.argv[1] if len(sys.argv) > 1 else "core"
    if layer not in ("core", "rabbitmq"):
        print(f"layer must be core or rabbitmq, got {layer!r}", file=sys.stderr)
        return 2
    extra: dict[str, Any] = {"rabbitmq": RabbitMQOptions(max_bindings=None)} if layer == "rabbitmq" else {}
    with ThreadedBroker(**LIMITS, **extra) as broker:
        print(f"minibroker listening on {broker.url}", flush=True)
        for line in sys.stdin:
            cmd = json.loads(line)
            if cmd.get("op") == "exit":
                break
            try:
                extra = handle(broker, cmd)
            except Exception as exc:  # the bench reports it; the broker stays up for the next command
                print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
                continue
            gc.collect()
            print(json.dumps({"ok": True, "rss": rss(), **extra}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
