"""Broker-core semantics seen through python-qpid-proton (issue "broker core").

Each test drives ``proton.utils.BlockingConnection`` clients (and, where a
process has to die, a proton client in a subprocess) against a real
``ThreadedBroker`` socket, and checks both what the client observed and the
broker's state through the inspection API.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest
from proton import Delivery, Message, Timeout, symbol
from proton.reactor import Copy, DurableSubscription
from proton.utils import LinkDetached, SendException
from proton_helpers import TIMEOUT, connect, pump_until, receive, settle_next, unique

import minibroker

pytestmark = pytest.mark.interop


def send_all(connection: Any, address: str, bodies: list[Any]) -> None:
    sender = connection.create_sender(address)
    for body in bodies:
        sender.send(Message(body=body))
    sender.close()


# ---------------------------------------------------------- competing consumers


def test_competing_consumers_share_a_queue(broker: minibroker.ThreadedBroker) -> None:
    address = unique("work")
    count = 100
    with connect(broker) as first, connect(broker) as second:
        receivers = [first.create_receiver(address, credit=5), second.create_receiver(address, credit=5)]
        broker.wait_for(lambda b: b.queue(address).consumers == 2)
        with connect(broker) as producer:
            send_all(producer, address, [f"job-{i}" for i in range(count)])
        got: list[list[str]] = [[], []]
        deadline = time.monotonic() + TIMEOUT
        while sum(map(len, got)) < count:
            assert time.monotonic() < deadline, f"received only {sum(map(len, got))} of {count}"
            for index, receiver in enumerate(receivers):
                try:  # turns this connection's event loop briefly even when nothing comes
                    got[index].append(receiver.receive(timeout=0.05).body)
                except Timeout:
                    continue
                receiver.accept()
        for receiver in receivers:
            receiver.close()
    assert got[0] and got[1], f"one consumer got nothing: {len(got[0])} / {len(got[1])}"
    everything = got[0] + got[1]
    assert len(everything) == len(set(everything)) == count, "duplicates or losses"
    assert set(everything) == {f"job-{i}" for i in range(count)}
    # Each consumer sees its share in queue order.
    for share in got:
        assert share == sorted(share, key=lambda body: int(body.split("-")[1]))
    broker.wait_for(lambda b: b.queue(address).depth == 0)
    assert broker.queue(address).statistics.acknowledged == count


# ---------------------------------------------------------------- request/reply


def test_request_reply_through_a_dynamic_reply_queue(broker: minibroker.ThreadedBroker) -> None:
    service = unique("service")
    requests = 5
    errors: list[BaseException] = []
    ready = threading.Event()

    def responder() -> None:
        try:
            with connect(broker) as connection:
                receiver = connection.create_receiver(service, credit=requests)
                replies = connection.create_sender(None)  # anonymous: reply to each request's reply_to
                ready.set()
                for _ in range(requests):
                    request = receiver.receive(timeout=TIMEOUT)
                    replies.send(
                        Message(
                            address=request.reply_to,
                            correlation_id=request.id,
                            body=str(request.body).upper(),
                            properties={"served-by": "responder"},
                        )
                    )
                    receiver.accept()
                receiver.close()
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)
            ready.set()

    thread = threading.Thread(target=responder, name="proton-responder", daemon=True)
    thread.start()
    assert ready.wait(TIMEOUT)
    with connect(broker) as connection:
        reply_receiver = connection.create_receiver(None, dynamic=True, credit=requests)
        reply_to = reply_receiver.link.remote_source.address
        assert reply_to, "the broker returned no address for the dynamic source"
        assert reply_to in broker.queues()
        sender = connection.create_sender(service)
        for i in range(requests):
            sender.send(Message(id=f"req-{i}", reply_to=reply_to, body=f"request {i}"))
        replies = receive(reply_receiver, requests)
        reply_receiver.close()
        # The dynamic queue lives as long as its link.
        broker.wait_for(lambda b: reply_to not in b.queues())
    thread.join(TIMEOUT)
    assert not thread.is_alive(), "the responder did not finish"
    assert errors == []
    assert [r.correlation_id for r in replies] == [f"req-{i}" for i in range(requests)]
    assert [r.body for r in replies] == [f"REQUEST {i}" for i in range(requests)]
    assert all(r.properties == {"served-by": "responder"} for r in replies)
    broker.wait_for(lambda b: b.queue(service).depth == 0)


# -------------------------------------------------------------- anonymous relay


def test_anonymous_relay_routes_by_message_address(broker: minibroker.ThreadedBroker) -> None:
    first, second = unique("relay-a"), unique("relay-b")
    with connect(broker) as connection:
        assert symbol("ANONYMOUS-RELAY") in (connection.conn.remote_offered_capabilities or [])
        sender = connection.create_sender(None)
        assert sender.link.remote_target.address is None
        for i in range(6):
            sender.send(Message(address=(first, second)[i % 2], body=f"relayed-{i}"))
        sender.send(Message(address=f"queue://{first}", body="prefixed"))
        # Without an address there is nowhere to route: the broker rejects it.
        with pytest.raises(SendException) as rejected:
            sender.send(Message(body="nowhere"))
        assert rejected.value.state == Delivery.REJECTED
    assert broker.queue(first).bodies == ["relayed-0", "relayed-2", "relayed-4", "prefixed"]
    assert broker.queue(second).bodies == ["relayed-1", "relayed-3", "relayed-5"]
    assert all(m.properties.to in (first, f"queue://{first}") for m in broker.queue(first).messages)


# ----------------------------------------------------------------------- browse


def test_browse_twice_then_consume(broker: minibroker.ThreadedBroker) -> None:
    address = unique("catalog")
    bodies = [f"item-{i}" for i in range(5)]
    for body in bodies:
        broker.publish(address, body)
    with connect(broker) as connection:
        for _ in range(2):
            browser = connection.create_receiver(address, credit=10, options=Copy())
            assert browser.link.remote_source.distribution_mode == browser.link.source.DIST_MODE_COPY
            seen = [m.body for m in receive(browser, len(bodies))]
            assert seen == bodies
            with pytest.raises(Timeout):  # nothing beyond what the queue holds
                browser.receive(timeout=0.2)
            snapshot = broker.queue(address)
            assert (snapshot.depth, snapshot.available, snapshot.acquired) == (5, 5, 0)
            browser.close()
        consumer = connection.create_receiver(address, credit=10)
        consumed = [m.body for m in receive(consumer, len(bodies))]
        consumer.close()
    assert consumed == bodies
    broker.wait_for(lambda b: b.queue(address).depth == 0)
    stats = broker.queue(address).statistics
    assert (stats.delivered, stats.acknowledged) == (5, 5)


# ------------------------------------------------------------------------ drain


def test_drain_on_a_non_empty_queue(broker: minibroker.ThreadedBroker) -> None:
    address = unique("drain-full")
    for i in range(3):
        broker.publish(address, f"d-{i}")
    with connect(broker) as connection:
        receiver = connection.create_receiver(address, credit=0)
        link = receiver.link
        assert link.credit == 0
        link.drain(10)
        connection.wait(lambda: link.credit == 0 and receiver.fetcher.has_message == 3, timeout=TIMEOUT)
        assert not link.draining()
        assert link.drained() == 7  # the credit the broker could not use came back
        # fetcher.pop(), not receive(): receive() grants a credit whenever the link has none.
        assert [receiver.fetcher.pop().body for _ in range(3)] == ["d-0", "d-1", "d-2"]
        for _ in range(3):
            receiver.accept()
        # With the credit spent, a new message waits in the queue.
        pump_until(connection, lambda: broker.queue(address).depth == 0)
        broker.publish(address, "later")
        with pytest.raises(Timeout):
            connection.wait(lambda: receiver.fetcher.has_message, timeout=0.3)
        assert broker.queue(address).available == 1


def test_drain_on_an_empty_queue_completes(broker: minibroker.ThreadedBroker) -> None:
    address = unique("drain-empty")
    broker.declare_queue(address)
    with connect(broker) as connection:
        receiver = connection.create_receiver(address, credit=0)
        link = receiver.link
        link.drain(5)
        assert link.credit == 5
        connection.wait(lambda: link.credit == 0, msg="drain on an empty queue", timeout=TIMEOUT)
        assert not link.draining()
        assert link.drained() == 5
        assert receiver.fetcher.has_message == 0
        # A second drain behaves the same; then ordinary credit still works.
        link.drain(2)
        connection.wait(lambda: link.credit == 0, msg="second drain", timeout=TIMEOUT)
        assert link.drained() == 2
        link.drain_mode = False
        broker.publish(address, "after-drain")
        link.flow(1)
        [message] = receive(receiver, 1)
        assert message.body == "after-drain"


# ---------------------------------------------------------------------- topics


def test_topic_fan_out_to_two_subscribers(broker: minibroker.ThreadedBroker) -> None:
    with connect(broker) as one, connect(broker) as two, connect(broker) as publisher:
        receivers = [
            one.create_receiver("topic://news", credit=50),
            two.create_receiver("topic://news", credit=50),
        ]
        assert len(broker.topic("news").subscriptions) == 2
        send_all(publisher, "topic://news", [f"headline-{i}" for i in range(20)])
        for receiver in receivers:
            assert [m.body for m in receive(receiver, 20)] == [f"headline-{i}" for i in range(20)]
            receiver.close()
        broker.wait_for(lambda b: b.topic("news").subscriptions == ())
    stats = broker.topic("news").statistics
    assert (stats.enqueued, stats.delivered) == (20, 40)


def test_durable_subscription_survives_detach_and_close_cancels_it(broker: minibroker.ThreadedBroker) -> None:
    topic = unique("alerts")
    container_id, link_name = unique("subscriber-app"), "alerts-sub"
    with connect(broker, container_id=container_id) as connection:
        receiver = connection.create_receiver(
            f"topic://{topic}", name=link_name, credit=10, options=DurableSubscription()
        )
        source = receiver.link.remote_source
        assert source.durability == source.DELIVERIES and source.expiry_policy == source.EXPIRE_NEVER
        broker.publish(f"topic://{topic}", "before-1")
        broker.publish(f"topic://{topic}", "before-2")
        assert [m.body for m in receive(receiver, 2)] == ["before-1", "before-2"]
        # detach(closed=false): the subscription stays.  proton keeps a link that the
        # peer merely detached REMOTE_ACTIVE, so watch for the detach event instead.
        detached: list[Any] = []
        receiver.fetcher.on_link_remote_detach = detached.append  # the link's events go to its fetcher
        receiver.link.detach()
        connection.wait(lambda: bool(detached), msg="the broker's detach", timeout=TIMEOUT)
        assert receiver.link.remote_condition is None
    [subscription] = broker.wait_for(lambda b: b.topic(topic).subscriptions)
    assert subscription.durable and not subscription.attached and subscription.depth == 0

    for i in range(3):
        broker.publish(f"topic://{topic}", f"while-away-{i}")
    [subscription] = broker.topic(topic).subscriptions
    assert subscription.depth == 3

    with connect(broker, container_id=container_id) as connection:
        receiver = connection.create_receiver(
            f"topic://{topic}", name=link_name, credit=10, options=DurableSubscription()
        )
        [subscription] = broker.topic(topic).subscriptions
        assert subscription.attached
        messages = receive(receiver, 3)
        assert [m.body for m in messages] == [f"while-away-{i}" for i in range(3)]
        assert all(m.delivery_count == 0 for m in messages)
        receiver.close()  # detach(closed=true): the subscription is cancelled
        assert broker.wait_for(lambda b: b.topic(topic).subscriptions == ())
    broker.publish(f"topic://{topic}", "nobody-listens")
    assert broker.topic(topic).statistics.dropped == 1


# ------------------------------------------------------------------ redelivery


def test_released_and_modified_redelivery_counts(broker: minibroker.ThreadedBroker) -> None:
    address = unique("retry")
    broker.publish(address, "fragile")
    broker.publish(address, "second")
    with connect(broker) as connection:
        # No prefetch: receive() grants one credit at a time, so only the message
        # being looked at is ever out (with a prefetch the flow controller tops credit up).
        receiver = connection.create_receiver(address, credit=0)
        seen = []

        def take() -> Message:
            message = receiver.receive(timeout=TIMEOUT)
            seen.append((message.body, message.delivery_count, message.first_acquirer))
            return message

        def settle(state: int, failed: bool = False) -> None:
            settle_next(receiver, state, failed=failed)
            # proton sends the next flow ahead of this disposition in one write, so let the
            # broker apply the outcome before granting credit again (else "second" goes out first).
            pump_until(connection, lambda: broker.queue(address).acquired == 0)

        take()
        settle(Delivery.RELEASED)  # released: back in its place, count unchanged
        take()
        settle(Delivery.MODIFIED, failed=True)  # modified(delivery-failed): count + 1
        take()
        settle(Delivery.MODIFIED, failed=True)
        take()
        settle(Delivery.MODIFIED, failed=False)  # modified without delivery-failed: unchanged
        take()
        pump_until(connection, lambda: broker.queue(address).acquired == 1)
        by_body = {m.body: m for m in broker.queue(address).messages}
        assert (by_body["fragile"].acquired, by_body["fragile"].delivery_count) == (True, 2)
        assert (by_body["second"].acquired, by_body["second"].delivery_count) == (False, 0)
        receiver.accept()
        pump_until(connection, lambda: broker.queue(address).depth == 1)
        take()
        receiver.accept()
        pump_until(connection, lambda: broker.queue(address).depth == 0)
    assert [(body, count) for body, count, _ in seen] == [
        ("fragile", 0),
        ("fragile", 0),
        ("fragile", 1),
        ("fragile", 2),
        ("fragile", 2),
        ("second", 0),
    ]
    # A message counted as failed is no longer offered as to its first acquirer.
    assert [first for _, _, first in seen][2:5] == [False, False, False]
    stats = broker.queue(address).statistics
    assert (stats.released, stats.modified, stats.acknowledged) == (1, 3, 2)


def test_proton_sees_first_acquirer_only_on_a_first_acquisition(broker: minibroker.ThreadedBroker) -> None:
    """A producer's first-acquirer=true reaches the first receiver; once the message was released
    it comes back with first-acquirer false (Part 3 §3.2.1), its delivery-count unchanged."""
    address = unique("first")
    with connect(broker) as connection:
        connection.create_sender(address).send(Message(body="once", durable=True, first_acquirer=True))
        receiver = connection.create_receiver(address, credit=0)
        first = receiver.receive(timeout=TIMEOUT)
        assert (first.body, first.first_acquirer, first.delivery_count) == ("once", True, 0)
        settle_next(receiver, Delivery.RELEASED)
        pump_until(connection, lambda: broker.queue(address).acquired == 0)
        again = receiver.receive(timeout=TIMEOUT)
        assert (again.body, again.first_acquirer, again.delivery_count, again.durable) == ("once", False, 0, True)
        receiver.accept()
        pump_until(connection, lambda: broker.queue(address).depth == 0)


CONSUMER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from proton.utils import BlockingConnection
    url, address, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    connection = BlockingConnection(url, timeout=10)
    receiver = connection.create_receiver(address, credit=count)
    bodies = [receiver.receive(timeout=10).body for _ in range(count)]  # never settled
    print("received", len(bodies), flush=True)
    time.sleep(60)
    """
)


def read_line(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    if not ready:
        raise AssertionError(f"the consumer subprocess printed nothing within {timeout} s")
    return process.stdout.readline().strip()


def test_killed_consumer_messages_come_back(broker: minibroker.ThreadedBroker) -> None:
    address = unique("orphans")
    count = 4
    for i in range(count):
        broker.publish(address, f"o-{i}")
    process = subprocess.Popen(
        [sys.executable, "-c", CONSUMER_SCRIPT, broker.url, address, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = read_line(process, TIMEOUT)
        assert line == f"received {count}", (
            line,
            process.stderr.read() if process.poll() is not None else "",
        )
        snapshot = broker.wait_for(lambda b: (s := b.queue(address)).acquired == count and s)
        assert all(m.acquired for m in snapshot.messages)
        process.send_signal(signal.SIGKILL)
        process.wait(TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(TIMEOUT)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    broker.wait_for(lambda b: b.queue(address).available == count, timeout=TIMEOUT)
    assert all(not m.acquired and m.delivery_count == 1 for m in broker.queue(address).messages)
    with connect(broker) as connection:
        receiver = connection.create_receiver(address, credit=count)
        messages = receive(receiver, count)
        receiver.close()
    assert [m.body for m in messages] == [f"o-{i}" for i in range(count)]
    assert [m.delivery_count for m in messages] == [1] * count
    broker.wait_for(lambda b: b.queue(address).depth == 0)


# ------------------------------------------------------------ nodes and the API


def test_unknown_address_is_refused_without_auto_create() -> None:
    with minibroker.ThreadedBroker(auto_create=False) as broker:
        with connect(broker) as connection:
            with pytest.raises(LinkDetached) as receiving:
                connection.create_receiver("no-such-queue")
            assert receiving.value.condition == "amqp:not-found"
            assert "not-found" in str(receiving.value)
            with pytest.raises(LinkDetached) as sending:
                connection.create_sender("no-such-queue")
            assert sending.value.condition == "amqp:not-found"
            assert broker.queues() == []
            # Once declared, the same address works.
            broker.declare_queue("declared")
            send_all(connection, "declared", ["ok"])
            receiver = connection.create_receiver("declared")
            assert [m.body for m in receive(receiver, 1)] == ["ok"]


def test_api_publish_seeds_a_queue_proton_consumes(broker: minibroker.ThreadedBroker) -> None:
    address = unique("seeded")
    broker.publish(
        address,
        {"order": 1, "items": ["a", "b"]},
        priority=7,
        ttl=60,
        durable=True,
        application_properties={"region": "eu", "rank": 3},
        annotations={"x-opt-origin": "api"},
        message_id="seed-1",
        subject="orders",
        correlation_id="corr-1",
        content_type="application/json",
    )
    broker.publish(address, "plain")
    with connect(broker) as connection:
        receiver = connection.create_receiver(address, credit=2)
        first, second = receive(receiver, 2)
        receiver.close()
    assert first.body == {"order": 1, "items": ["a", "b"]}
    assert (first.id, first.subject, first.correlation_id, first.content_type) == (
        "seed-1",
        "orders",
        "corr-1",
        "application/json",
    )
    assert first.priority == 7 and first.durable is True
    assert 59.0 <= first.ttl <= 60.0
    assert first.properties == {"region": "eu", "rank": 3}
    assert first.annotations == {symbol("x-opt-origin"): "api"}
    assert second.body == "plain" and second.id is None and second.properties is None
    broker.wait_for(lambda b: b.queue(address).depth == 0)


def test_snapshot_shows_acquired_flags_for_unsettled_deliveries(broker: minibroker.ThreadedBroker) -> None:
    address = unique("held")
    for i in range(4):
        broker.publish(address, f"h-{i}")
    with connect(broker) as connection:
        receiver = connection.create_receiver(address, credit=0)  # no prefetch that tops credit up
        receiver.link.flow(2)
        connection.wait(lambda: receiver.fetcher.has_message == 2, msg="two deliveries", timeout=TIMEOUT)
        held = [receiver.fetcher.pop() for _ in range(2)]  # not settled: still acquired
        assert [m.body for m in held] == ["h-0", "h-1"]
        snapshot = broker.queue(address)
        assert (snapshot.depth, snapshot.available, snapshot.acquired) == (4, 2, 2)
        assert {m.body: m.acquired for m in snapshot.messages} == {
            "h-0": True,
            "h-1": True,
            "h-2": False,
            "h-3": False,
        }

        receiver.accept()  # settles h-0 only
        pump_until(connection, lambda: broker.queue(address).depth == 3)
        snapshot = broker.queue(address)
        assert {m.body: m.acquired for m in snapshot.messages} == {"h-1": True, "h-2": False, "h-3": False}
        assert snapshot.acquired == 1
    # Closing the connection with h-1 unsettled gives it back as modified(delivery-failed).
    broker.wait_for(lambda b: b.queue(address).acquired == 0)
    snapshot = broker.queue(address)
    assert [(m.body, m.acquired, m.delivery_count) for m in snapshot.messages] == [
        ("h-1", False, 1),
        ("h-2", False, 0),
        ("h-3", False, 0),
    ]


def test_topic_address_on_a_queue_name_is_refused_naming_the_clash() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.publish("events", "x")
        with connect(broker) as connection:
            with pytest.raises(LinkDetached) as receiving:
                connection.create_receiver("topic://events")
            assert receiving.value.condition == "amqp:not-found"
            assert "'events' is a queue; a queue and a topic cannot share a name" in str(receiving.value)
            assert "auto-create" not in str(receiving.value)
            with pytest.raises(LinkDetached) as sending:
                connection.create_sender("topic://events")
            assert "'events' is a queue" in str(sending.value)
        assert broker.topics() == [] and broker.queue("events").depth == 1
