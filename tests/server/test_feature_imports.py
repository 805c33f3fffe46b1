"""What a broker that is started and stopped imports, and what loads with the first use of a feature.

Issue #47 (the fixture's fixed cost): a broker imports the modules of a node kind when it makes
its first node of that kind (``broker/kinds.py``), the snapshots' module with the first node or
the first snapshot, the stream filters with the first link that names a filter, the AMQP 1.0
protocol engine with the first client and the fault injector with the first fault.  The check
runs in a fresh interpreter (this one has imported everything long ago) and walks the features
in order, each step asserting its modules were not loaded before it and are after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

#: Each step's code (run with ``broker``, a started ThreadedBroker) and the modules it loads.
STEPS: list[tuple[str, str, list[str]]] = [
    (
        "a queue, a message put on it and read back",
        'broker.declare_queue("q"); broker.publish("q", "hi"); assert broker.queue("q").messages[0].body == "hi"',
        ["minibroker.broker.queue", "minibroker.broker.statistics", "minibroker.broker.capture"],
    ),
    ("a topic", 'broker.declare_topic("t")', ["minibroker.broker.topic"]),
    (
        "a stream",
        'broker.declare_stream("s")',
        [
            "minibroker.broker.stream",
            "minibroker.broker.streamlog",
            "minibroker.broker.streamfilters",
            "minibroker.broker.expressions",
        ],
    ),
    (
        "a client that connects and receives",
        "from minibroker import Client; client = Client(broker.url); "
        'client.receiver("q").receive(timeout=10).accept(); client.close()',
        ["minibroker.protocol.connection", "minibroker.protocol.sessions", "minibroker.protocol.sasl", "minibroker.amqp.sasl_frames"],
    ),
    ("a fault", 'broker.faults.drop_connection(address="q")', ["minibroker.broker.injection"]),
]

CHILD = textwrap.dedent(
    """
    import json, sys
    from pytest_minibroker import settings  # what the plugin imports for every run
    from minibroker import ThreadedBroker

    broker = ThreadedBroker()
    broker.start()
    broker.reset(drop_connections=True)
    broker.stop()
    loaded = [sorted(sys.modules)]
    broker = ThreadedBroker()
    broker.start()
    for code in json.loads(sys.argv[1]):
        exec(code)
        loaded.append(sorted(sys.modules))
    broker.stop()
    print(json.dumps(loaded))
    """
)


def test_each_feature_loads_its_modules_at_first_use() -> None:
    """Fails where the engine, the router or the attacher import every feature at their tops."""
    codes = [code for _, code, _ in STEPS]
    result = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(codes)],
        capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONHASHSEED="0"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    loaded = [set(modules) for modules in json.loads(result.stdout)]
    for i, (what, _, modules) in enumerate(STEPS):
        before, after = loaded[i], loaded[i + 1]
        early = sorted(set(modules) & before)
        assert not early, f"loaded before {what} (by a broker's start, reset and stop, or an earlier step): {early}"
        missing = sorted(set(modules) - after)
        assert not missing, f"not loaded by {what}: {missing} (a step that no longer uses them?)"
