"""Interoperability with rhea (the Node.js AMQP 1.0 client).

Each test drives one or more scripts from ``tests/interop/js`` (``send.js``,
``receive.js``, ``requester.js``, ``responder.js``) through the ``rhea``
fixture and asserts what the client observed on the wire, plus the broker's
state through the ``broker`` fixture's inspection API.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import minibroker

pytestmark = pytest.mark.interop

JS_DIR = Path(__file__).parent / "js"
Rhea = Callable[..., Any]

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def gen_body(size: int, seed: int) -> str:
    """The same deterministic body as ``genBody`` in js/common.js."""
    return "".join(ALPHABET[(i * 31 + seed + (i >> 10)) % len(ALPHABET)] for i in range(size))


@contextmanager
def background(rhea: Rhea) -> Iterator[Callable[..., Future[Any]]]:
    """Run rhea scripts concurrently: ``start("receive", port=..., ...)`` returns a future of its result."""
    with ThreadPoolExecutor(max_workers=4) as pool:

        def start(script: str, **args: Any) -> Future[Any]:
            return pool.submit(rhea, script, **args)

        yield start


def no_errors(result: dict[str, Any]) -> None:
    assert result["errors"] == [], result["errors"]
    assert not result.get("timed_out"), result


# --------------------------------------------------------------------- wire (issue 3)


def test_thousand_messages_round_trip(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    sent = rhea("send", port=broker.port, address="bulk", count=1000, body_prefix="m-")
    no_errors(sent)
    assert sent["sent"] == 1000
    assert sent["outcomes"] == ["accepted"] * 1000
    assert broker.queue("bulk").depth == 1000

    received = rhea("receive", port=broker.port, address="bulk", count=1000, timeout_ms=20000)
    no_errors(received)
    assert [m["body"] for m in received["messages"]] == [f"m-{i}" for i in range(1000)]
    broker.wait_for(lambda b: b.queue("bulk").depth == 0)
    stats = broker.queue("bulk").statistics
    assert (stats.enqueued, stats.delivered, stats.acknowledged) == (1000, 1000, 1000)


def test_one_mebibyte_message_crosses_intact(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    size, seed = 1024 * 1024, 7
    expected = gen_body(size, seed)
    # The broker's max-frame-size is 256 KiB and the receiver asks for 64 KiB frames, so the
    # message is split into several transfer frames in both directions.
    sent = rhea("send", port=broker.port, address="big", messages=[{"body_size": size, "body_seed": seed}])
    no_errors(sent)
    assert sent["outcomes"] == ["accepted"]
    assert broker.queue("big").bodies == [expected]

    received = rhea("receive", port=broker.port, address="big", digest=True, max_frame_size=65536)
    no_errors(received)
    assert received["transfer_frames"] >= size // 65536  # split to the receiver's max-frame-size
    [message] = received["messages"]
    assert message["body_length"] == size
    assert message["body_sha256"] == hashlib.sha256(expected.encode("ascii")).hexdigest()
    broker.wait_for(lambda b: b.queue("big").depth == 0)


def test_sasl_plain_with_configured_user(rhea: Rhea) -> None:
    with minibroker.ThreadedBroker(users={"alice": "secret"}, allow_anonymous=False) as broker:
        sent = rhea(
            "send",
            port=broker.port,
            address="secured",
            user="alice",
            password="secret",
            messages=[{"body": "hello"}],
        )
        no_errors(sent)
        assert sent["opened"] is True
        assert sent["outcomes"] == ["accepted"]
        received = rhea("receive", port=broker.port, address="secured", user="alice", password="secret")
        no_errors(received)
        assert [m["body"] for m in received["messages"]] == ["hello"]


def test_sasl_wrong_password_is_refused(rhea: Rhea) -> None:
    with minibroker.ThreadedBroker(users={"alice": "secret"}, allow_anonymous=False) as broker:
        result = rhea(
            "send",
            port=broker.port,
            address="secured",
            user="alice",
            password="wrong",
            messages=[{"body": "never"}],
            timeout_ms=5000,
        )
        assert result["opened"] is False
        assert result["sent"] == 0
        assert not result.get("timed_out"), result
        [error, *_] = result["errors"]
        assert error["event"] == "connection_error"
        assert error["condition"] == "amqp:unauthorized-access"
        assert "authenticate" in error["description"]
        assert "secured" not in broker.queues()


# ----------------------------------------------------------------- broker core (issue 4)


def test_competing_consumers_share_a_queue(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    total = 100
    with background(rhea) as start:
        consumers = [
            start(
                "receive",
                port=broker.port,
                address="work",
                count=total,
                # Each stops once no message came for this long (it cannot know its share): wide
                # enough that a loaded machine's pause between two sends does not end a consumer
                # early, since the run ends only on it.
                idle_ms=2000,
                credit_window=10,
                timeout_ms=10000,
            )
            for _ in range(2)
        ]
        broker.wait_for(lambda b: "work" in b.queues() and b.queue("work").consumers == 2)
        sent = rhea("send", port=broker.port, address="work", count=total, body_prefix="job-")
        results = [c.result(timeout=20) for c in consumers]
    no_errors(sent)
    bodies = [[m["body"] for m in r["messages"]] for r in results]
    assert all(r["errors"] == [] for r in results)
    assert all(len(b) > 0 for b in bodies), [len(b) for b in bodies]
    everything = bodies[0] + bodies[1]
    assert sorted(everything) == sorted(f"job-{i}" for i in range(total))
    assert not [body for body, n in Counter(everything).items() if n > 1]
    for got in bodies:  # each consumer sees its share in publication order
        assert got == sorted(got, key=lambda b: int(b.split("-")[1]))
    broker.wait_for(lambda b: b.queue("work").depth == 0)


def test_request_reply_via_dynamic_reply_to(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    requests = ["alpha", "beta", "gamma"]
    with background(rhea) as start:
        service = start("responder", port=broker.port, address="requests", count=len(requests))
        client = rhea("requester", port=broker.port, address="requests", requests=requests)
        served = service.result(timeout=20)
    no_errors(client)
    no_errors(served)
    reply_to = client["reply_to"]
    assert isinstance(reply_to, str) and reply_to
    assert served["handled"] == len(requests)
    assert [r["reply_to"] for r in served["requests"]] == [reply_to] * len(requests)
    assert served["reply_outcomes"] == ["accepted"] * len(requests)
    replies = {r["correlation_id"]: r["body"] for r in client["replies"]}
    assert replies == {f"request-{i}": body.upper() for i, body in enumerate(requests)}
    assert client["outcomes"] == ["accepted"] * len(requests)
    # The temporary reply queue goes away with its link.
    broker.wait_for(lambda b: reply_to not in b.queues())
    broker.wait_for(lambda b: b.queue("requests").depth == 0)


def test_anonymous_relay_routes_by_to(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    sent = rhea(
        "send",
        port=broker.port,
        anonymous=True,
        messages=[
            {"body": "a1", "to": "relay-a"},
            {"body": "b1", "to": "relay-b"},
            {"body": "a2", "to": "queue://relay-a"},
            {"body": "lost"},  # no `to`: nowhere to route
        ],
    )
    assert sent["outcomes"] == ["accepted", "accepted", "accepted", "rejected"]
    assert sent["rejections"]["3"]["condition"] == "amqp:invalid-field"
    assert broker.queue("relay-a").bodies == ["a1", "a2"]
    assert broker.queue("relay-b").bodies == ["b1"]

    received = rhea("receive", port=broker.port, address="relay-a", count=2)
    no_errors(received)
    assert [(m["body"], m["to"]) for m in received["messages"]] == [
        ("a1", "relay-a"),
        ("a2", "queue://relay-a"),
    ]


def test_browse_twice_then_consume(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    bodies = [f"item-{i}" for i in range(5)]
    for body in bodies:
        broker.publish("catalogue", body)
    for _ in range(2):
        browsed = rhea("receive", port=broker.port, address="catalogue", browse=True, count=5)
        no_errors(browsed)
        assert browsed["source"]["distribution_mode"] == "copy"
        assert [m["body"] for m in browsed["messages"]] == bodies
        assert broker.queue("catalogue").depth == 5
        assert broker.queue("catalogue").available == 5

    consumed = rhea("receive", port=broker.port, address="catalogue", count=5)
    no_errors(consumed)
    assert [m["body"] for m in consumed["messages"]] == bodies
    assert [m["delivery_count"] for m in consumed["messages"]] == [0] * 5
    broker.wait_for(lambda b: b.queue("catalogue").depth == 0)


def test_drain_on_non_empty_queue(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    for i in range(3):
        broker.publish("drainable", f"d-{i}")
    result = rhea("receive", port=broker.port, address="drainable", credit=10, drain=True, timeout_ms=5000)
    no_errors(result)
    assert result["drained"] is True
    assert [m["body"] for m in result["messages"]] == ["d-0", "d-1", "d-2"]
    broker.wait_for(lambda b: b.queue("drainable").depth == 0)


def test_drain_on_empty_queue(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    broker.declare_queue("dry")
    result = rhea("receive", port=broker.port, address="dry", credit=10, drain=True, timeout_ms=5000)
    no_errors(result)
    assert result["drained"] is True
    assert result["messages"] == []


def test_topic_fan_out_to_two_subscribers(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    bodies = [f"news-{i}" for i in range(10)]
    with background(rhea) as start:
        subscribers = [
            start("receive", port=broker.port, address="topic://news", count=len(bodies)),
            start("receive", port=broker.port, address="news", topic=True, count=len(bodies)),
        ]
        broker.wait_for(lambda b: "news" in b.topics() and len(b.topic("news").subscriptions) == 2)
        sent = rhea("send", port=broker.port, address="topic://news", messages=[{"body": b} for b in bodies])
        results = [s.result(timeout=20) for s in subscribers]
    no_errors(sent)
    assert sent["outcomes"] == ["accepted"] * len(bodies)
    for result in results:
        no_errors(result)
        assert [m["body"] for m in result["messages"]] == bodies
    assert "news" not in broker.queues()
    broker.wait_for(lambda b: b.topic("news").subscriptions == ())
    assert broker.topic("news").statistics.enqueued == len(bodies)


def test_durable_subscription_survives_detach_and_close_cancels(
    broker: minibroker.ThreadedBroker, rhea: Rhea
) -> None:
    identity = {"container_id": "rhea-durable-client", "link_name": "price-feed", "durable": True}
    first = rhea("receive", port=broker.port, address="topic://prices", count=0, end="detach", **identity)
    no_errors(first)
    assert first["source"]["durable"] == 2
    assert first["source"]["expiry_policy"] == "never"
    [subscription] = broker.topic("prices").subscriptions
    assert subscription.durable is True
    broker.wait_for(lambda b: not b.topic("prices").subscriptions[0].attached)

    # Published while nobody is attached: kept for the durable subscription.
    sent = rhea(
        "send", port=broker.port, address="topic://prices", messages=[{"body": f"p-{i}"} for i in range(3)]
    )
    no_errors(sent)
    assert sent["outcomes"] == ["accepted"] * 3
    assert broker.topic("prices").subscriptions[0].depth == 3

    again = rhea("receive", port=broker.port, address="topic://prices", count=3, end="detach", **identity)
    no_errors(again)
    assert [m["body"] for m in again["messages"]] == ["p-0", "p-1", "p-2"]
    broker.wait_for(lambda b: not b.topic("prices").subscriptions[0].attached)
    assert broker.topic("prices").subscriptions[0].depth == 0

    # Re-attach and close (detach with closed=true): the subscription is cancelled.
    last = rhea("receive", port=broker.port, address="topic://prices", count=0, end="close", **identity)
    no_errors(last)
    broker.wait_for(lambda b: b.topic("prices").subscriptions == ())


def test_released_redelivery_keeps_delivery_count(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    broker.publish("again", "boomerang")
    result = rhea("receive", port=broker.port, address="again", count=2, outcomes=["release", "accept"])
    no_errors(result)
    assert [(m["body"], m["delivery_count"], m["outcome"]) for m in result["messages"]] == [
        ("boomerang", 0, "release"),
        ("boomerang", 0, "accept"),
    ]
    broker.wait_for(lambda b: b.queue("again").depth == 0)
    stats = broker.queue("again").statistics
    assert (stats.released, stats.acknowledged) == (1, 1)


def test_modified_delivery_failed_increments_delivery_count(
    broker: minibroker.ThreadedBroker, rhea: Rhea
) -> None:
    broker.publish("retry", "fragile")
    result = rhea(
        "receive",
        port=broker.port,
        address="retry",
        count=2,
        outcomes=["modify", "accept"],
        modify={"delivery_failed": True},
    )
    no_errors(result)
    assert [(m["body"], m["delivery_count"]) for m in result["messages"]] == [("fragile", 0), ("fragile", 1)]
    assert result["messages"][1]["has_header"] is True
    broker.wait_for(lambda b: b.queue("retry").depth == 0)
    stats = broker.queue("retry").statistics
    assert (stats.modified, stats.acknowledged) == (1, 1)


def _node() -> str:
    node = shutil.which("node")
    assert node is not None, "node is not installed"
    return node


def test_killed_consumer_messages_come_back(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    bodies = [f"task-{i}" for i in range(5)]
    for body in bodies:
        broker.publish("tasks", body)
    args = {
        "port": broker.port,
        "address": "tasks",
        "count": 3,
        "credit": 3,
        "outcome": "none",
        "hold": True,
        "hold_ms": 20000,
    }
    proc = subprocess.Popen(
        [_node(), str(JS_DIR / "receive.js"), json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=JS_DIR,
        env={**os.environ, "NODE_PATH": str(JS_DIR / "node_modules")},
    )
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        line = pool.submit(proc.stdout.readline).result(timeout=15)  # type: ignore[union-attr]
        held = json.loads(line)
        assert held["held"] is True
        assert [(m["body"], m["outcome"]) for m in held["messages"]] == [(b, "none") for b in bodies[:3]]
        snapshot = broker.queue("tasks")
        assert (snapshot.acquired, snapshot.available) == (3, 2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        pool.shutdown(wait=True)  # the readline returns at EOF once the process is gone
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL

    broker.wait_for(lambda b: b.queue("tasks").available == 5)
    assert [m.delivery_count for m in broker.queue("tasks").messages] == [1, 1, 1, 0, 0]

    result = rhea("receive", port=broker.port, address="tasks", count=5)
    no_errors(result)
    assert [(m["body"], m["delivery_count"]) for m in result["messages"]] == [
        ("task-0", 1), ("task-1", 1), ("task-2", 1), ("task-3", 0), ("task-4", 0),
    ]  # fmt: skip
    broker.wait_for(lambda b: b.queue("tasks").depth == 0)


# ------------------------------------------------------------------ semantics (issue 5)


def test_priorities_delivered_highest_first(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    sent = rhea(
        "send",
        port=broker.port,
        address="ranked",
        messages=[{"body": f"prio-{p}", "priority": p} for p in range(10)],
    )
    no_errors(sent)
    assert sent["outcomes"] == ["accepted"] * 10
    result = rhea("receive", port=broker.port, address="ranked", count=10)
    no_errors(result)
    assert [m["priority"] for m in result["messages"]] == list(range(9, -1, -1))
    assert [m["body"] for m in result["messages"]] == [f"prio-{p}" for p in range(9, -1, -1)]


def test_expired_message_is_not_delivered_and_is_dead_lettered(
    broker: minibroker.ThreadedBroker, rhea: Rhea
) -> None:
    broker.declare_queue("perishable", dead_letter_on_expiry=True)
    sent = rhea(
        "send",
        port=broker.port,
        address="perishable",
        messages=[{"body": "stale", "ttl": 100}, {"body": "fresh", "ttl": 60000}],
    )
    no_errors(sent)
    assert sent["outcomes"] == ["accepted", "accepted"]
    # The broker's own timer (real clock, 100 ms) dead-letters "stale"; wait for that, not for a time.
    dlq = "perishable/$DeadLetterQueue"
    broker.wait_for(lambda b: dlq in b.queues() and b.queue(dlq).depth == 1)

    # Credit for two, stop after one: then the queue is empty, so the stale one never could come
    # (no deadline that a slow start of node could cut short).
    result = rhea("receive", port=broker.port, address="perishable", count=1, credit=2)
    no_errors(result)
    [fresh] = result["messages"]
    assert fresh["body"] == "fresh"
    assert 0 < fresh["ttl"] <= 60000
    broker.wait_for(lambda b: b.queue("perishable").depth == 0)

    [dead] = broker.queue(dlq).messages
    assert dead.body == "stale"
    assert dead.annotations is not None
    assert dead.annotations["x-opt-deadletter-reason"] == "TTLExpiredException"
    stats = broker.queue("perishable").statistics
    assert (stats.expired, stats.dead_lettered) == (1, 1)


def test_rejected_message_is_dead_lettered_with_reason(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    broker.publish("orders", "order-42")
    result = rhea(
        "receive",
        port=broker.port,
        address="orders",
        outcome="reject",
        reject_error={"condition": "app:out-of-stock", "description": "no widgets left"},
    )
    no_errors(result)
    assert [m["outcome"] for m in result["messages"]] == ["reject"]
    broker.wait_for(lambda b: b.queue("orders").depth == 0)

    dlq = "orders/$DeadLetterQueue"
    [dead] = broker.queue(dlq).messages
    assert dead.body == "order-42"
    assert dead.annotations is not None
    assert dead.annotations["x-opt-deadletter-reason"] == "app:out-of-stock"
    assert dead.annotations["x-opt-deadletter-description"] == "no widgets left"

    # rhea sees the same annotations when it consumes the dead-letter queue.
    dead_letters = rhea("receive", port=broker.port, address=dlq)
    no_errors(dead_letters)
    [message] = dead_letters["messages"]
    assert message["body"] == "order-42"
    assert message["message_annotations"]["x-opt-deadletter-reason"] == "app:out-of-stock"
    assert message["message_annotations"]["x-opt-deadletter-description"] == "no widgets left"
    assert broker.queue("orders").statistics.rejected == 1


def test_max_delivery_count_exceeded_is_dead_lettered(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    broker.declare_queue("flaky", max_delivery_count=2)
    broker.publish("flaky", "poison")
    result = rhea(
        "receive",
        port=broker.port,
        address="flaky",
        count=3,
        outcome="modify",
        modify={"delivery_failed": True},
    )
    no_errors(result)
    # Delivered with delivery-count 0, 1 and 2; the third failure exceeds the maximum of 2, so
    # the message is dead-lettered and the queue left empty: no fourth delivery can come (shown
    # by the broker's state, not by waiting a fixed time for one).
    assert [(m["body"], m["delivery_count"]) for m in result["messages"]] == [
        ("poison", 0),
        ("poison", 1),
        ("poison", 2),
    ]

    dlq = "flaky/$DeadLetterQueue"
    broker.wait_for(lambda b: dlq in b.queues() and b.queue(dlq).depth == 1)
    assert broker.queue("flaky").depth == 0
    dead_letters = rhea("receive", port=broker.port, address=dlq)
    no_errors(dead_letters)
    [message] = dead_letters["messages"]
    assert message["body"] == "poison"
    annotations = message["message_annotations"]
    assert annotations["x-opt-deadletter-reason"] == "MaxDeliveryCountExceeded"
    assert "max_delivery_count" in annotations["x-opt-deadletter-description"]


def test_concurrent_selector_consumers_get_exactly_their_messages(
    broker: minibroker.ThreadedBroker, rhea: Rhea
) -> None:
    colors = ["red", "green", "blue"]
    messages = [
        {"body": f"{color}-{i}", "properties": {"color": color, "n": i}} for i in range(4) for color in colors
    ]
    with background(rhea) as start:
        consumers = {
            color: start(
                "receive",
                port=broker.port,
                address="palette",
                selector=f"color = '{color}'",
                count=4,
                timeout_ms=10000,
            )
            for color in colors
        }
        broker.wait_for(lambda b: "palette" in b.queues() and b.queue("palette").consumers == 3)
        sent = rhea("send", port=broker.port, address="palette", messages=messages)
        results = {color: future.result(timeout=20) for color, future in consumers.items()}
    no_errors(sent)
    for color, result in results.items():
        no_errors(result)
        assert [m["body"] for m in result["messages"]] == [f"{color}-{i}" for i in range(4)]
        assert {m["application_properties"]["color"] for m in result["messages"]} == {color}
    broker.wait_for(lambda b: b.queue("palette").depth == 0)


def test_invalid_selector_refuses_link_with_readable_error(
    broker: minibroker.ThreadedBroker, rhea: Rhea
) -> None:
    broker.publish("guarded", "untouched", application_properties={"color": "red"})
    result = rhea("receive", port=broker.port, address="guarded", selector="color = = 'red'", timeout_ms=5000)
    assert not result.get("timed_out"), result
    assert result["messages"] == []
    assert result["source"] is None  # refused: the attach came back with a null source
    [error] = result["errors"]
    assert error["event"] == "receiver_error"
    assert error["condition"] == "amqp:invalid-field"
    assert "selector" in error["description"]
    snapshot = broker.queue("guarded")
    assert (snapshot.depth, snapshot.consumers) == (1, 0)
