"""The JavaScript Service Bus SDK (``@azure/service-bus``) against minibroker."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import minibroker
from minibroker.servicebus import ServiceBusOptions, connection_string

pytestmark = pytest.mark.interop


def test_js_sdk_sends_and_receives_with_peek_lock(broker: minibroker.ThreadedBroker, rhea: Callable[..., Any]) -> None:
    result = rhea(
        "servicebus", connection_string=connection_string(broker.port), queue="orders", bodies=["a", "b"], timeout_ms=20000
    )
    assert result["error"] is None
    assert result["received"] == [
        {"body": "a", "sequence_number": 1, "delivery_count": 0},
        {"body": "b", "sequence_number": 2, "delivery_count": 0},
    ]
    assert broker.queue("orders").depth == 0
    assert broker.statistics().nodes["orders"].acknowledged == 2


def test_js_sdk_settles_messages_it_gave_no_id(broker: minibroker.ThreadedBroker, rhea: Callable[..., Any]) -> None:
    result = rhea("servicebus_scenarios", scenario="settle", connection_string=connection_string(broker.port), queue="jobs")
    assert result["error"] is None
    first = result["first"]
    assert [m["body"] for m in first] == ["complete", "abandon", "dead-letter", "defer"]
    ids = [m["message_id"] for m in first]
    assert all(isinstance(i, str) and len(i) == 32 for i in ids) and len(set(ids)) == 4  # given by the broker
    assert (result["again"]["body"], result["again"]["delivery_count"]) == ("abandon", 1)
    assert result["again"]["message_id"] == ids[1]
    assert (result["deferred"]["body"], result["deferred"]["sequence_number"]) == ("defer", 4)
    assert (result["dead_letter"]["body"], result["dead_letter"]["reason"]) == ("dead-letter", "bad")
    assert broker.queue("jobs").depth == 0
    assert broker.queue("jobs/$DeadLetterQueue").depth == 0


def test_js_sdk_abandon_counts_and_dead_letters_at_max_delivery_count(rhea: Callable[..., Any]) -> None:
    with minibroker.ThreadedBroker(servicebus=ServiceBusOptions(max_delivery_count=3)) as broker:
        result = rhea(
            "servicebus_scenarios", scenario="poison", connection_string=connection_string(broker.port), queue="jobs",
            attempts=5,
        )  # fmt: skip
        assert result["error"] is None
        assert result["delivery_counts"] == [0, 1, 2]
        assert result["dead_letter"]["body"] == "poison"
        assert result["dead_letter"]["reason"] == "MaxDeliveryCountExceeded"
        assert broker.queue("jobs").depth == 0


def test_js_rule_manager_adds_lists_and_removes_rules_that_filter_and_annotate(rhea: Callable[..., Any]) -> None:
    with minibroker.ThreadedBroker(servicebus=ServiceBusOptions(topics={"shop": ("orders",)})) as broker:
        result = rhea(
            "servicebus_scenarios", scenario="rules", connection_string=connection_string(broker.port), topic="shop",
            subscription="orders",
        )  # fmt: skip
        assert result["error"] is None
        assert result["initial"] == ["$Default"]
        assert result["duplicate"] == "MessagingEntityAlreadyExists"
        assert result["listed"] == [
            {"name": "red", "sql": "color = 'red' AND sys.Label = 'order'", "correlation_id": None, "action": None},
            {"name": "vip", "sql": None, "correlation_id": "vip", "action": "SET user.via = 'vip'"},
        ]
        received = [(m["body"], m["properties"].get("via")) for m in result["received"]]
        assert received == [("red order", None), ("gold", "vip")]
        assert broker.queue("shop/Subscriptions/orders").depth == 0


def test_js_sdk_against_minibroker_serve_with_an_emulator_config_and_a_cli_subscription(
    tmp_path: Path, rhea: Callable[..., Any]
) -> None:
    config = {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [{"Name": "jobs", "Properties": {"RequiresDuplicateDetection": True}}],
                    "Topics": [
                        {
                            "Name": "paint",
                            "Subscriptions": [
                                {"Name": "all"},
                                {"Name": "red", "Rules": [{"Name": "red", "Properties": {
                                    "FilterType": "Sql", "SqlFilter": {"SqlExpression": "color = 'red'"}}}]},
                            ],
                        }  # fmt: skip
                    ],
                }
            ],
            "Logging": {"Type": "Console"},
        }
    }
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(config))
    proc = subprocess.Popen(
        [sys.executable, "-m", "minibroker", "serve", "--port", "0", "--servicebus-config", str(path),
         "--subscription", "paint/audit"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        match = re.fullmatch(r"minibroker listening on amqp://127\.0\.0\.1:(\d+)", first)
        assert match, f"unexpected first line {first!r}"
        port = int(match.group(1))
        result = rhea(
            "servicebus_scenarios", scenario="topic", connection_string=connection_string(port), topic="paint",
            subscriptions=["all", "red", "audit"], bodies=["red", "blue"],
        )  # fmt: skip
        assert result["error"] is None
        assert result["received"] == {"all": ["red", "blue"], "red": ["red"], "audit": ["red", "blue"]}
        result = rhea("servicebus_scenarios", scenario="duplicates", connection_string=connection_string(port), queue="jobs")
        assert result["error"] is None
        assert result["received"] == ["first", "other"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)
    assert proc.returncode == 0


def test_js_sdk_session_lock_expires_on_the_broker_clock(rhea_process: Callable[..., Any]) -> None:
    clock = minibroker.ManualClock(start=float(int(time.time())))
    with minibroker.ThreadedBroker(clock=clock, servicebus=ServiceBusOptions(lock_duration=60)) as broker:
        proc = rhea_process(
            "servicebus_scenarios", scenario="sessionExpiry", connection_string=connection_string(broker.port), queue="jobs"
        )
        ready = proc.stdout.readline()
        assert json.loads(ready) == {"ready": True}, ready + proc.stderr.read()
        clock.advance(61)  # the session lock (60 s) was not renewed
        broker.wait_for(lambda b: b.queue("jobs").acquired == 0)
        # The lock's end also detached the receiver's link (session-lock-lost); the client must have
        # that detach before it completes, or it settles on a link it does not know is gone and waits
        # for an answer.  So wait until the broker has written everything it holds for its clients.
        deadline = time.monotonic() + 10
        while any(c.protocol.output_size or c.transport_backlog for c in list(broker._broker.connections)):
            assert time.monotonic() < deadline, "the broker did not write the detach out"
            time.sleep(0.01)
        out, err = proc.communicate("go\n", timeout=90)
        result = json.loads(out.strip().splitlines()[-1])
        assert "timed_out" not in result, err
        assert result["error"] is None, err
        assert result["first"]["delivery_count"] == 0
        assert result["complete"] == "SessionLockLost"
        assert (result["again"]["body"], result["again"]["delivery_count"]) == ("s1", 1)
        assert broker.queue("jobs").depth == 0
