"""Queue semantics observed through python-qpid-proton over a real socket.

Priorities (Part 3 §3.2.1: 0..9, higher first, FIFO within a level, default
4, fewer levels map onto ranges), time to live (header ``ttl`` and
properties ``absolute-expiry-time``, the earlier wins; expired messages are
never delivered), dead-lettering (rejected, expired when configured, and
over-delivered messages go to ``<queue>/$DeadLetterQueue`` with
``x-opt-deadletter-reason``/``-description`` annotations) and JMS selector
filters (``apache.org:selector-filter:string``, proton's ``Selector`` link
option).  Blocking proton clients are used where their event loop turns by
itself (send, receive, attach); :class:`ProtonClient` where the test must see
the broker after a disposition.  Every wait is bounded; loopback only.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from proton import Condition, Delivery, Described, Message, symbol
from proton.reactor import Filter, Selector
from proton.utils import BlockingConnection, LinkDetached
from proton_tx_helpers import LinkRefused, ProtonClient  # tests/interop is on sys.path (rootdir-relative)

import minibroker

pytestmark = pytest.mark.interop

REASON = "x-opt-deadletter-reason"
DESCRIPTION = "x-opt-deadletter-description"
TIMEOUT = 10.0


@contextmanager
def blocking(broker: minibroker.ThreadedBroker) -> Iterator[BlockingConnection]:
    connection = BlockingConnection(broker.url, timeout=TIMEOUT)
    try:
        yield connection
    finally:
        connection.close()


@pytest.fixture
def clocked() -> Iterator[tuple[minibroker.ThreadedBroker, minibroker.ManualClock]]:
    """A broker on the manual clock: expiry happens when the test moves time, at once and exactly."""
    clock = minibroker.ManualClock()
    with minibroker.ThreadedBroker(clock=clock) as running:
        yield running, clock


@pytest.fixture
def client(broker: minibroker.ThreadedBroker) -> Iterator[ProtonClient]:
    with ProtonClient(broker.url, timeout=TIMEOUT) as running:
        yield running


def send_all(broker: minibroker.ThreadedBroker, address: str, messages: list[Message]) -> None:
    """Send with a blocking proton sender; each send waits for the broker's accepted."""
    with blocking(broker) as connection:
        sender = connection.create_sender(address, name=f"send-{address}")
        for message in messages:
            sender.send(message)


def receive_all(broker: minibroker.ThreadedBroker, address: str, count: int) -> list[Message]:
    """Attach a proton receiver now, take ``count`` messages and accept them; then check nothing else was there.

    The receiver has credit for one more.  Closing the connection settles the accepted ones and
    gives back whatever else it held, so an empty queue afterwards means nothing else was
    deliverable, without waiting for a fixed time to see whether more comes.
    """
    with blocking(broker) as connection:
        receiver = connection.create_receiver(address, credit=count + 1, name=f"recv-{address}")
        got = []
        for _ in range(count):
            got.append(receiver.receive(timeout=TIMEOUT))
            receiver.accept()
    broker.wait_for(lambda b: b.queue(address).depth == 0 and b.statistics().connections == 0)
    return got


def dead_letter_queue(name: str) -> str:
    return f"{name}/$DeadLetterQueue"


# ------------------------------------------------------------------ priorities


def test_ten_priorities_sent_before_attach_arrive_highest_first(broker: minibroker.ThreadedBroker) -> None:
    send_all(broker, "prio", [Message(body=f"p{p}", priority=p) for p in range(10)])
    assert [m.priority for m in broker.queue("prio").messages] == list(range(9, -1, -1))

    got = receive_all(broker, "prio", 10)
    assert [m.priority for m in got] == list(range(9, -1, -1))
    assert [m.body for m in got] == [f"p{p}" for p in range(9, -1, -1)]


def test_equal_priorities_stay_fifo_and_the_default_is_four(broker: minibroker.ThreadedBroker) -> None:
    plan: list[tuple[str, int | None]] = [
        ("a", 2), ("b", 7), ("c", None), ("d", 7), ("e", 2), ("f", 4), ("g", None), ("h", 7), ("i", 5),
    ]  # fmt: skip
    messages = []
    for body, priority in plan:
        message = Message(body=body)
        if priority is not None:
            message.priority = priority
        messages.append(message)
    send_all(broker, "fifo", messages)
    snapshot = broker.queue("fifo").messages
    assert {m.body: m.priority for m in snapshot}["c"] == 4  # no priority given: 4

    got = receive_all(broker, "fifo", len(plan))
    assert [m.body for m in got] == ["b", "d", "h", "i", "c", "f", "g", "a", "e"]


def test_queue_with_two_priority_levels_maps_low_and_high_ranges(broker: minibroker.ThreadedBroker) -> None:
    # Two levels (Part 3 §3.2.1): priorities 0-4 share the low level, 5-9 the high one; FIFO in each.
    broker.declare_queue("two-levels", priorities=2)
    sent = [0, 9, 4, 5, 1, 8, 3, 6]
    send_all(broker, "two-levels", [Message(body=f"{n}:p{p}", priority=p) for n, p in enumerate(sent)])
    got = receive_all(broker, "two-levels", len(sent))
    assert [m.body for m in got] == ["1:p9", "3:p5", "5:p8", "7:p6", "0:p0", "2:p4", "4:p1", "6:p3"]
    assert [m.priority for m in got] == [9, 5, 8, 6, 0, 4, 1, 3]  # the header itself is untouched


# ------------------------------------------------------------------ time to live


def test_message_past_its_ttl_is_never_delivered(clocked: tuple[minibroker.ThreadedBroker, minibroker.ManualClock]) -> None:
    broker, clock = clocked
    send_all(
        broker,
        "ttl",
        [Message(body="short", ttl=0.1), Message(body="long", ttl=30), Message(body="forever")],
    )
    clock.advance(1)  # "short" is past its 100 ms

    got = receive_all(broker, "ttl", 2)
    assert [m.body for m in got] == ["long", "forever"]
    assert got[0].ttl == 29  # the remaining time to live travels on (§3.2.1)
    stats = broker.queue("ttl").statistics
    assert (stats.expired, stats.dead_lettered) == (1, 0)
    assert dead_letter_queue("ttl") not in broker.queues()  # not dead-lettered unless configured


def test_earlier_of_ttl_and_absolute_expiry_time_wins(
    clocked: tuple[minibroker.ThreadedBroker, minibroker.ManualClock],
) -> None:
    broker, clock = clocked
    now = clock.now()
    send_all(
        broker,
        "expiry",
        [
            Message(body="absolute-first", ttl=30, expiry_time=now + 0.1),
            Message(body="ttl-first", ttl=0.1, expiry_time=now + 30),
            Message(body="both-late", ttl=30, expiry_time=now + 30),
            Message(body="absolute-only", expiry_time=now + 0.1),
        ],
    )
    clock.advance(1)
    got = receive_all(broker, "expiry", 1)
    assert [m.body for m in got] == ["both-late"]
    assert broker.queue("expiry").statistics.expired == 3


def test_expired_message_is_dead_lettered_when_configured(broker: minibroker.ThreadedBroker) -> None:
    # The real clock here (the timer of a broker that serves sockets; the other TTL tests use the
    # manual clock): a 100 ms TTL, waited for with wait_for's bound, 50 times as long.
    broker.declare_queue("perishable", dead_letter_on_expiry=True)
    send_all(
        broker, "perishable", [Message(body="milk", ttl=0.1, properties={"batch": 7}), Message(body="salt")]
    )

    dlq = dead_letter_queue("perishable")
    # No consumer is attached: the broker's own timer expires it.
    broker.wait_for(lambda b: dlq in b.queues() and b.queue(dlq).depth == 1)
    [dead] = broker.queue(dlq).messages
    assert dead.body == "milk" and dead.application_properties == {"batch": 7}
    assert dead.annotations[REASON] == "TTLExpiredException"
    assert broker.queue("perishable").bodies == ["salt"]

    assert dead.expires_at is None  # the dead letter itself no longer expires
    [seen] = receive_all(broker, dlq, 1)
    assert seen.body == "milk" and seen.annotations[REASON] == "TTLExpiredException"
    assert [m.body for m in receive_all(broker, "perishable", 1)] == ["salt"]


# ------------------------------------------------------------------ dead letters


def test_rejected_message_is_dead_lettered_with_reason_and_description(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    sender = client.sender("orders")
    client.send(sender, Message(body="bad order", id="order-1", properties={"amount": -5}))
    client.send(sender, Message(body="good order", id="order-2"))
    broker.wait_for(lambda b: b.queue("orders").depth == 2)

    client.receiver("orders", credit=1)
    [got] = client.receive(1)
    assert got.body == "bad order"
    client.settle(got.delivery, Delivery.REJECTED, Condition("app:bad", "because"))

    dlq = dead_letter_queue("orders")
    broker.wait_for(lambda b: dlq in b.queues() and b.queue(dlq).depth == 1)
    [dead] = broker.queue(dlq).messages
    assert dead.annotations[REASON] == "app:bad"
    assert dead.annotations[DESCRIPTION] == "because"
    # The bare message is kept as sent.
    assert (dead.body, dead.properties.message_id, dead.application_properties) == (
        "bad order",
        "order-1",
        {"amount": -5},
    )
    assert broker.queue("orders").bodies == ["good order"]
    stats = broker.queue("orders").statistics
    assert (stats.rejected, stats.dead_lettered) == (1, 1)

    # A proton consumer of the dead-letter queue sees the annotations too.
    client.receiver(dlq, credit=1)
    [seen] = client.receive(1)
    assert seen.body == "bad order"
    assert seen.message.annotations[REASON] == "app:bad"
    assert seen.message.annotations[DESCRIPTION] == "because"


def test_rejected_without_error_goes_to_the_configured_dead_letter_address(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    broker.declare_queue("custom", dead_letter_address="graveyard")
    broker.publish("custom", "unwanted")
    client.receiver("custom", credit=1)
    [got] = client.receive(1)
    client.settle(got.delivery, Delivery.REJECTED)
    broker.wait_for(lambda b: "graveyard" in b.queues() and b.queue("graveyard").depth == 1)
    [dead] = broker.queue("graveyard").messages
    assert dead.body == "unwanted"
    assert dead.annotations[REASON] == "amqp:rejected"
    assert dead_letter_queue("custom") not in broker.queues()


def test_message_failing_more_than_max_delivery_count_is_dead_lettered(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    broker.declare_queue("flaky", max_delivery_count=2)
    broker.publish("flaky", "poison", application_properties={"kind": "poison"})
    receiver = client.receiver("flaky")
    counts = []
    for _ in range(3):
        client.flow(receiver, 1)
        [got] = client.receive(1)
        counts.append((got.message.delivery_count, got.message.first_acquirer))
        # modified(delivery-failed=true): the delivery attempt failed (§3.4.5)
        client.settle(got.delivery, Delivery.MODIFIED, failed=True)
    assert counts == [(0, False), (1, False), (2, False)]

    dlq = dead_letter_queue("flaky")
    broker.wait_for(lambda b: dlq in b.queues() and b.queue(dlq).depth == 1)
    [dead] = broker.queue(dlq).messages
    assert dead.body == "poison" and dead.application_properties == {"kind": "poison"}
    assert dead.annotations[REASON] == "MaxDeliveryCountExceeded"
    assert "2" in dead.annotations[DESCRIPTION]
    assert broker.queue("flaky").depth == 0
    client.flow(receiver, 1)
    with pytest.raises(queue.Empty):
        client.receive(1, timeout=0.3)


def test_released_or_modified_without_delivery_failed_does_not_count(
    broker: minibroker.ThreadedBroker,
) -> None:
    """Proton's ``BlockingReceiver.release(delivered=True)`` sends modified with delivery-failed
    false (proton leaves ``local.failed`` unset), and ``release(delivered=False)`` sends released:
    neither is a failed delivery, so neither counts towards max_delivery_count."""
    broker.declare_queue("patient", max_delivery_count=1)
    broker.publish("patient", "again")
    with blocking(broker) as connection:
        receiver = connection.create_receiver("patient", credit=1, name="patient-recv")
        seen = []
        for delivered in (True, False, True, False):
            message = receiver.receive(timeout=TIMEOUT)
            seen.append(message.delivery_count)
            receiver.release(delivered=delivered)
        message = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
    # Closing the connection flushed the accept before the close frame.
    broker.wait_for(lambda b: b.queue("patient").depth == 0)
    assert seen == [0, 0, 0, 0] and message.body == "again"
    stats = broker.queue("patient").statistics
    assert (stats.modified, stats.released, stats.dead_lettered, stats.acknowledged) == (2, 2, 0, 1)
    assert dead_letter_queue("patient") not in broker.queues()


# ------------------------------------------------------------------ selectors


def _filter_of(client: ProtonClient, link: Any) -> Any:
    def read() -> Any:
        data = link.remote_source.filter
        data.rewind()
        return data.get_object() if data.next() else None

    return client.call(read)


def test_concurrent_selector_consumers_each_get_exactly_their_messages(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    selectors = {"red": "color = 'red'", "blue": "color = 'blue'", "big": "size > 10"}
    receivers = {
        key: client.receiver("paint", credit=20, options=Selector(text)) for key, text in selectors.items()
    }
    for key, link in receivers.items():  # the broker echoes the filter it applies
        assert _filter_of(client, link) == {
            symbol("selector"): Described(symbol("apache.org:selector-filter:string"), selectors[key])
        }

    # Each message matches exactly one selector.
    plan = [
        ("red", 1),
        ("blue", 2),
        ("green", 50),
        ("red", 3),
        ("green", 11),
        ("blue", 4),
        ("red", 5),
        ("blue", 6),
    ]
    sender = client.sender("paint")
    for n, (color, size) in enumerate(plan):
        client.send(sender, Message(body=f"{n}:{color}:{size}", properties={"color": color, "size": size}))

    got = client.receive(len(plan))
    by_link: dict[str, list[str]] = {}
    for received in got:
        by_link.setdefault(received.link_name, []).append(received.body)
        client.settle(received.delivery, Delivery.ACCEPTED)
    names = {key: client.call(lambda link=link: link.name) for key, link in receivers.items()}
    assert by_link[names["red"]] == ["0:red:1", "3:red:3", "6:red:5"]
    assert by_link[names["blue"]] == ["1:blue:2", "5:blue:4", "7:blue:6"]
    assert by_link[names["big"]] == ["2:green:50", "4:green:11"]
    broker.wait_for(lambda b: b.queue("paint").depth == 0)
    with pytest.raises(queue.Empty):
        client.receive(1, timeout=0.2)


def test_selector_consumer_skips_other_messages_without_reordering_them(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    for n, color in enumerate(["blue", "red", "blue", "red", "blue"]):
        broker.publish("mixed", f"{color}-{n}", application_properties={"color": color})
    client.receiver("mixed", credit=10, options=Selector("color = 'red'"))
    reds = client.receive(2)
    assert [r.body for r in reds] == ["red-1", "red-3"]
    with pytest.raises(queue.Empty):
        client.receive(1, timeout=0.2)

    snapshot = broker.queue("mixed")
    assert [m.body for m in snapshot.messages if not m.acquired] == ["blue-0", "blue-2", "blue-4"]
    assert snapshot.statistics.delivered == 2

    client.receiver("mixed", credit=10)  # a plain consumer sees the skipped ones in their order
    blues = client.receive(3)
    assert [b.body for b in blues] == ["blue-0", "blue-2", "blue-4"]
    for received in reds + blues:
        client.settle(received.delivery, Delivery.ACCEPTED)
    broker.wait_for(lambda b: b.queue("mixed").depth == 0)


def test_selector_on_header_field_and_message_arriving_later(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    client.receiver("urgent", credit=5, options=Selector("JMSPriority >= 7"))
    sender = client.sender("urgent")
    for p in (1, 8, 4, 9):
        client.send(sender, Message(body=f"p{p}", priority=p))
    got = client.receive(2)
    assert [r.body for r in got] == ["p8", "p9"]
    broker.wait_for(lambda b: b.queue("urgent").available == 2)
    assert [m.body for m in broker.queue("urgent").messages if not m.acquired] == ["p4", "p1"]


def test_invalid_selector_refuses_the_link_with_a_readable_error(broker: minibroker.ThreadedBroker) -> None:
    broker.publish("guarded", "still here", application_properties={"color": "red"})
    with blocking(broker) as connection:
        with pytest.raises(LinkDetached) as refused:
            connection.create_receiver("guarded", name="bad-selector", options=Selector("color = = 'red'"))
        assert refused.value.condition == "amqp:invalid-field"
        text = str(refused.value)
        assert "selector" in text and "color = = 'red'" in text

        # Only the link was refused: the connection still works.
        receiver = connection.create_receiver(
            "guarded", credit=1, name="good-selector", options=Selector("color = 'red'")
        )
        assert receiver.receive(timeout=TIMEOUT).body == "still here"
        receiver.accept()
    assert broker.queue("guarded").statistics.delivered == 1


def test_unknown_filter_type_is_refused_not_ignored(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    odd = Filter({symbol("odd"): Described(symbol("example.org:no-such-filter"), "x")})
    with pytest.raises(LinkRefused) as refused:
        client.receiver("filtered", credit=1, options=odd)
    assert refused.value.condition == "amqp:invalid-field"
    assert refused.value.description and "not supported" in refused.value.description
