"""amqplib (the Node.js AMQP 0-9-1 client) against minibroker over real sockets.

Each test runs one scenario of ``tests/interop/js/amqplib_scenarios.js`` against a
``ThreadedBroker`` and asserts what the client saw; every expected value is what the same
scenario saw against RabbitMQ 3.10 (checked by hand when written).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import minibroker

pytestmark = pytest.mark.interop

JS_DIR = Path(__file__).parent / "js"


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker() as running:
        yield running
        assert running.errors() == []


def run(broker: minibroker.ThreadedBroker, scenario: str, query: str = "", **args: Any) -> dict[str, Any]:
    """Run ``scenario`` against ``broker``; return what amqplib saw (its ``result``)."""
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / "amqplib").exists():
        raise RuntimeError(f"the amqplib tests need Node.js and `npm install` in {JS_DIR} (see .ci/run)")
    url = f"amqp://guest:guest@127.0.0.1:{broker.port}/{query}"
    proc = subprocess.run(
        [node, str(JS_DIR / "amqplib_scenarios.js"), json.dumps({"url": url, "scenario": scenario, **args})],
        capture_output=True, text=True, timeout=60, cwd=JS_DIR,
        env={**os.environ, "NODE_PATH": str(JS_DIR / "node_modules")},
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert proc.returncode == 0 and lines, f"amqplib scenario {scenario} failed:\n{proc.stdout}\n{proc.stderr}"
    outcome: dict[str, Any] = json.loads(lines[-1])
    assert "result" in outcome, outcome
    result: dict[str, Any] = outcome["result"]
    return result


def test_tuning_heartbeats_and_frames(broker: minibroker.ThreadedBroker) -> None:
    # The client asks for 1 s heartbeats and stays idle past two intervals: both sides must
    # heartbeat for the connection to live.  A 300 kB body crosses in frames of frame_max.
    tuned = run(broker, "tune", "?heartbeat=1", idle_ms=2500, body_size=300_000)
    assert tuned == {
        "heartbeat": 1, "frame_max": 131072, "channel_max": 2047, "product": "RabbitMQ",
        "closed_while_idle": None, "big_body_size": 300_000,
    }  # fmt: skip


def test_smaller_frame_max_asked_by_the_client(broker: minibroker.ThreadedBroker) -> None:
    tuned = run(broker, "tune", "?frameMax=4096&heartbeat=0", body_size=20_000)
    assert (tuned["frame_max"], tuned["heartbeat"], tuned["big_body_size"]) == (4096, 0, 20_000)


def test_consume_ack_and_nack(broker: minibroker.ThreadedBroker) -> None:
    seen = run(broker, "settle")
    assert seen["declared"] == {"queue": "work", "message_count": 0, "consumer_count": 0}
    assert [(m["body"], m["redelivered"], m["delivery_tag"]) for m in seen["first"]] == [
        ("a", False, 1), ("b", False, 2), ("c", False, 3),
    ]  # fmt: skip
    # The nacked-with-requeue "b" comes again, redelivered; the nacked "c" is gone.
    assert (seen["again"]["body"], seen["again"]["redelivered"], seen["again"]["delivery_tag"]) == ("b", True, 4)
    assert seen["left"] == 0
    assert seen["headers"] == {}


def test_confirm_channel(broker: minibroker.ThreadedBroker) -> None:
    # x-max-length 1 with reject-publish: the first publish is acked, the second nacked, and
    # waitForConfirms fails on the third.
    assert run(broker, "confirms") == {"outcomes": ["ack", "nack"], "wait_for_confirms": "nacked"}


def test_confirms_coalesce_and_precede_the_close_ok(broker: minibroker.ThreadedBroker) -> None:
    # amqplib's own suite ("multiple confirms", "works when channel is closed"): RabbitMQ acks a
    # burst with multiple acks, and a channel closed right after a burst gets every ack before
    # its close-ok.  Before the fix, one ack a publish, and the close-ok before the acks.
    burst = run(broker, "confirm_burst")
    assert burst == {"coalesced": True, "queued": 400, "uncaught": []}


def test_prefetch_window(broker: minibroker.ThreadedBroker) -> None:
    window = run(broker, "prefetch")
    assert window == {"before": ["0", "1"], "after": ["0", "1", "2"]}


def test_get_and_get_empty(broker: minibroker.ThreadedBroker) -> None:
    got = run(broker, "get")
    assert got == {
        "message": {"body": "only", "redelivered": False, "delivery_tag": 1, "routing_key": "polled", "exchange": ""},
        "content_type": "text/plain", "headers": {"k": "v"}, "message_count": 0, "empty": False, "left": 0,
    }  # fmt: skip


def test_channel_error_and_server_named_queue(broker: minibroker.ThreadedBroker) -> None:
    seen = run(broker, "missing")
    assert seen["error"]["code"] == 404
    assert "NOT_FOUND - no queue 'missing' in vhost '/'" in seen["error"]["message"]
    assert seen["server_named"] is True
