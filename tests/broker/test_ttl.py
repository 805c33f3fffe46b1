"""Message expiry with a manual clock: no sleeps, no sockets, no threads.

OASIS AMQP 1.0 Part 3 §3.2.1 (header ttl, reduced on retransmission), §3.2.4
(absolute-expiry-time), broker paper 2.2.5 (expired messages are discarded or
dead-lettered and never delivered).  Time only moves through
``ManualClock.advance``, which runs ``Broker.run_timers``.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_consumer import FakeConsumer

from minibroker.amqp.message import decode_message
from minibroker.amqp.messaging import Released
from minibroker.amqp.types import symbol, timestamp
from minibroker.api import build_message
from minibroker.broker import queue as queue_module
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig, QueueOptions
from minibroker.broker.engine import Broker
from minibroker.broker.queue import Queue
from minibroker.broker.statistics import NodeCounters
from minibroker.broker.stored import AVAILABLE, Entry, StoredMessage

T0 = 1_700_000_000.0
DLQ = "q/$DeadLetterQueue"


def make_broker(**options: Any) -> tuple[Broker, ManualClock]:
    clock = ManualClock(T0)
    broker = Broker(BrokerConfig(), clock)
    broker.declare_queue("q", QueueOptions(**options))
    return broker, clock


def bodies(broker: Broker, name: str = "q") -> list[Any]:
    return broker.queue_snapshot(name).bodies


def expires_at(broker: Broker, body: Any, name: str = "q") -> float | None:
    for message in broker.queue_snapshot(name).messages:
        if message.body == body:
            return message.expires_at
    raise AssertionError(f"{body!r} is not in {name}")


def consume(broker: Broker, count: int = 1, name: str = "q") -> list[Entry]:
    """Attach a fake consumer with ``count`` credit and return what it got."""
    queue = broker.queues[name]
    consumer = FakeConsumer(count)
    queue.add_consumer(consumer)
    queue.dispatch(broker.now())
    queue.remove_consumer(consumer)
    return consumer.delivered


def ms(seconds: float) -> timestamp:
    """An AMQP timestamp: milliseconds since the epoch, passed to the wire unchanged."""
    return timestamp(round(seconds * 1000))


# --------------------------------------------------------------- when it expires


def test_header_ttl() -> None:
    broker, clock = make_broker()
    broker.publish("q", build_message("short", ttl=10))
    broker.publish("q", build_message("forever"))
    assert expires_at(broker, "short") == T0 + 10
    assert expires_at(broker, "forever") is None
    clock.advance(9.999)
    assert bodies(broker) == ["short", "forever"]
    clock.advance(0.001)
    assert bodies(broker) == ["forever"]
    assert broker.statistics().nodes["q"].expired == 1


def test_ttl_counts_from_arrival() -> None:
    broker, clock = make_broker()
    clock.advance(100)
    broker.publish("q", build_message("m", ttl=5))
    assert expires_at(broker, "m") == T0 + 105
    clock.advance(4.5)
    assert bodies(broker) == ["m"]
    clock.advance(0.5)
    assert bodies(broker) == []


def test_absolute_expiry_time() -> None:
    broker, clock = make_broker()
    broker.publish("q", build_message("abs", absolute_expiry_time=ms(T0 + 5)))
    broker.publish("q", build_message("props-without-expiry", message_id="id-1", subject="s"))
    assert expires_at(broker, "abs") == T0 + 5
    assert expires_at(broker, "props-without-expiry") is None
    clock.advance(4)
    assert bodies(broker) == ["abs", "props-without-expiry"]
    clock.advance(1)
    assert bodies(broker) == ["props-without-expiry"]


def test_absolute_expiry_time_in_the_past_is_dropped_on_arrival() -> None:
    broker, clock = make_broker()
    broker.publish("q", build_message("stale", absolute_expiry_time=ms(T0 - 1)))
    assert bodies(broker) == []
    stats = broker.statistics().nodes["q"]
    assert stats.enqueued == 1 and stats.expired == 1


@pytest.mark.parametrize(
    ("ttl", "absolute_in", "expected_in"),
    [(10, 5, 5), (3, 5, 3), (7, 7, 7)],
)
def test_the_earlier_of_ttl_and_absolute_expiry_time_wins(
    ttl: float, absolute_in: float, expected_in: float
) -> None:
    broker, clock = make_broker()
    broker.publish("q", build_message("m", ttl=ttl, absolute_expiry_time=ms(T0 + absolute_in)))
    assert expires_at(broker, "m") == T0 + expected_in
    clock.advance(expected_in - 0.001)
    assert bodies(broker) == ["m"]
    clock.advance(0.001)
    assert bodies(broker) == []


def test_queue_default_ttl_applies_to_messages_without_expiry() -> None:
    broker, clock = make_broker(default_ttl=20)
    broker.publish("q", build_message("default"))
    broker.publish("q", build_message("own-ttl", ttl=50))
    broker.publish("q", build_message("own-abs", absolute_expiry_time=ms(T0 + 30)))
    assert expires_at(broker, "default") == T0 + 20
    assert expires_at(broker, "own-ttl") == T0 + 50  # the message's own ttl beats the default
    assert expires_at(broker, "own-abs") == T0 + 30
    clock.advance(20)
    assert bodies(broker) == ["own-ttl", "own-abs"]


def test_queue_max_ttl_caps_every_message() -> None:
    broker, clock = make_broker(max_ttl=10)
    broker.publish("q", build_message("long", ttl=3600))
    broker.publish("q", build_message("none"))
    broker.publish("q", build_message("short", ttl=2))
    broker.publish("q", build_message("far", absolute_expiry_time=ms(T0 + 3600)))
    expected = {"long": T0 + 10, "none": T0 + 10, "short": T0 + 2, "far": T0 + 10}
    assert {body: expires_at(broker, body) for body in expected} == expected
    clock.advance(2)
    assert bodies(broker) == ["long", "none", "far"]
    clock.advance(8)
    assert bodies(broker) == []
    assert broker.statistics().nodes["q"].expired == 4


def test_max_ttl_caps_the_default_ttl() -> None:
    broker, clock = make_broker(default_ttl=60, max_ttl=15)
    broker.publish("q", build_message("m"))
    assert expires_at(broker, "m") == T0 + 15


def test_invalid_ttl_options_are_refused() -> None:
    with pytest.raises(ValueError, match="default_ttl must be a positive"):
        QueueOptions(default_ttl=0)
    with pytest.raises(ValueError, match="max_ttl must be a positive"):
        QueueOptions(max_ttl=-1)


# ------------------------------------------------------------- never delivered


def test_expired_messages_are_never_dispatched() -> None:
    """Even when no timer ran, dispatch at a later time delivers nothing expired."""
    queue = Queue("q", QueueOptions(), NodeCounters())
    for body, ttl in [("a", 1), ("b", None), ("c", 2), ("d", 5)]:
        queue.enqueue(StoredMessage(build_message(body, ttl=ttl).encode(), T0), T0)
    consumer = FakeConsumer(10)
    queue.add_consumer(consumer)
    queue.dispatch(T0 + 3)
    assert [e.message.decode().body for e in consumer.delivered] == ["b", "d"]
    assert queue.counters.expired == 2
    assert queue.counters.delivered == 2


def test_message_expiring_while_held_is_not_redelivered() -> None:
    broker, clock = make_broker()
    broker.publish("q", build_message("m", ttl=5))
    (entry,) = consume(broker)
    clock.advance(10)  # held by the consumer: stays until it comes back
    assert broker.queue_snapshot("q").depth == 1
    assert broker.queue_snapshot("q").acquired == 1
    broker.apply_outcome(broker.queues["q"], entry, Released(), None)
    assert broker.queue_snapshot("q").depth == 0
    assert consume(broker) == []
    assert broker.statistics().nodes["q"].expired == 1


def test_message_held_past_expiry_can_still_be_accepted() -> None:
    broker, clock = make_broker()
    broker.publish("q", build_message("m", ttl=5))
    (entry,) = consume(broker)
    clock.advance(10)
    broker.queues["q"].accept(entry)
    stats = broker.statistics().nodes["q"]
    assert stats.acknowledged == 1 and stats.expired == 0


def test_expiry_in_a_topic_subscription_queue_is_also_driven_by_the_clock() -> None:
    broker, clock = make_broker()
    queue = broker.declare_queue("other", QueueOptions(default_ttl=1))
    broker.publish("other", build_message("x"))
    assert queue.depth == 1
    clock.advance(1)
    assert queue.depth == 0


# ------------------------------------------------------------ dead-lettering


def test_dead_letter_on_expiry() -> None:
    broker, clock = make_broker(dead_letter_on_expiry=True)
    broker.publish("q", build_message("m", ttl=5, annotations={"x-opt-origin": "test"}, message_id="m-1"))
    bare = next(broker.queues["q"].entries()).message.bare
    clock.advance(5)
    assert bodies(broker) == []
    assert DLQ in broker.queues
    (dead,) = broker.queue_snapshot(DLQ).messages
    assert dead.body == "m"
    assert dead.properties.message_id == "m-1"
    assert dead.annotations[symbol("x-opt-deadletter-reason")] == "TTLExpiredException"
    assert dead.annotations[symbol("x-opt-origin")] == "test"
    assert dead.header.ttl is None, "a kept dead letter must not carry a spent ttl (0) to its next hop"
    (entry,) = broker.queues[DLQ].entries()
    assert entry.message.bare == bare, "the bare message must reach the dead-letter queue byte for byte"
    # the dead-lettered copy does not expire again (it is not TTL-expired on arrival in the DLQ)
    clock.advance(3600)
    assert broker.queue_snapshot(DLQ).depth == 1
    stats = broker.statistics().nodes
    assert stats["q"].expired == 1 and stats["q"].dead_lettered == 1
    assert stats[DLQ].enqueued == 1 and stats[DLQ].expired == 0


def test_dead_letter_on_expiry_of_absolute_expiry_time() -> None:
    broker, clock = make_broker(dead_letter_on_expiry=True)
    broker.publish("q", build_message("abs", absolute_expiry_time=ms(T0 + 2)))
    bare = next(broker.queues["q"].entries()).message.bare
    clock.advance(2)
    (entry,) = broker.queues[DLQ].entries()
    assert entry.message.bare == bare
    assert broker.queue_snapshot(DLQ).bodies == ["abs"]


def test_without_dead_letter_on_expiry_expired_messages_are_dropped() -> None:
    broker, clock = make_broker()
    broker.publish("q", build_message("m", ttl=5))
    clock.advance(5)
    assert DLQ not in broker.queues
    stats = broker.statistics().nodes["q"]
    assert stats.expired == 1 and stats.dead_lettered == 0


def test_expiry_dead_letter_respects_a_disabled_dead_letter_address() -> None:
    broker, clock = make_broker(dead_letter_on_expiry=True, dead_letter_address="")
    broker.publish("q", build_message("m", ttl=5))
    clock.advance(5)
    assert DLQ not in broker.queues
    assert broker.statistics().nodes["q"].dead_lettered == 0


def test_expired_while_held_and_released_is_dead_lettered() -> None:
    broker, clock = make_broker(dead_letter_on_expiry=True)
    broker.publish("q", build_message("m", ttl=5))
    (entry,) = consume(broker)
    clock.advance(6)
    broker.apply_outcome(broker.queues["q"], entry, Released(), None)
    assert broker.queue_snapshot(DLQ).bodies == ["m"]


# ---------------------------------------------------------- reduced ttl (§3.2.1)


def test_redelivered_header_carries_the_reduced_ttl() -> None:
    broker, clock = make_broker()
    broker.publish("q", build_message("m", ttl=10))
    (entry,) = consume(broker)
    first = decode_message(entry.payload_for_delivery(clock.now())).header
    assert first.ttl == 10_000
    clock.advance(3)  # held for 3 s
    broker.apply_outcome(broker.queues["q"], entry, Released(), None)
    (again,) = consume(broker)
    header = decode_message(again.payload_for_delivery(clock.now())).header
    assert header.ttl == 7_000
    assert header.delivery_count == 0  # released: not a failed delivery
    assert broker.queue_snapshot("q").messages[0].header.ttl == 7_000


def test_first_delivery_after_waiting_carries_the_reduced_ttl() -> None:
    broker, clock = make_broker()
    broker.publish("q", build_message("m", ttl=10, priority=7, durable=True))
    clock.advance(2.5)
    (entry,) = consume(broker)
    delivered = decode_message(entry.payload_for_delivery(clock.now()))
    assert delivered.header.ttl == 7_500
    assert delivered.header.priority == 7 and delivered.header.durable is True
    assert entry.payload_for_delivery(clock.now()).endswith(entry.message.bare)


def test_untouched_message_is_sent_byte_for_byte() -> None:
    broker, clock = make_broker()
    broker.publish("q", build_message("m", ttl=10))
    broker.publish("q", build_message("n", priority=2))
    for entry in broker.queues["q"].entries():
        assert entry.payload_for_delivery(clock.now()) == entry.message.payload
    clock.advance(1)
    second = [e for e in broker.queues["q"].entries() if e.message.decode().body == "n"][0]
    assert second.payload_for_delivery(clock.now()) == second.message.payload


# ------------------------------------------------------------------ the index


class _CountingEntry(Entry):
    """An Entry counting reads of the fields a scan for expired entries must look at."""

    __slots__ = ()
    reads = 0

    @property  # type: ignore[override]
    def state(self) -> int:
        _CountingEntry.reads += 1
        return Entry.state.__get__(self)  # type: ignore[attr-defined,no-any-return]

    @state.setter
    def state(self, value: int) -> None:
        Entry.state.__set__(self, value)  # type: ignore[attr-defined]

    @property  # type: ignore[override]
    def expires_at(self) -> float | None:
        _CountingEntry.reads += 1
        return Entry.expires_at.__get__(self)  # type: ignore[attr-defined,no-any-return]

    @expires_at.setter
    def expires_at(self, value: float | None) -> None:
        Entry.expires_at.__set__(self, value)  # type: ignore[attr-defined]


def test_expiry_uses_the_index_not_a_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue_module, "Entry", _CountingEntry)
    broker, clock = make_broker()
    queue = broker.queues["q"]
    long_lived = build_message("long", ttl=3600).encode()
    for _ in range(10_000):
        broker.publish("q", long_lived)
    broker.publish("q", build_message("short", ttl=1))
    assert queue.depth == 10_001
    assert isinstance(next(queue.entries()), _CountingEntry)
    assert queue.next_expiry() == T0 + 1
    assert broker.next_deadline() == T0 + 1

    _CountingEntry.reads = 0
    clock.advance(1)
    assert queue.depth == 10_000
    assert queue.counters.expired == 1
    assert queue.next_expiry() == T0 + 3600
    for _ in range(100):  # nothing due: each tick must cost nothing per message
        clock.advance(1)
    assert queue.depth == 10_000
    assert _CountingEntry.reads < 100, f"expiry looked at entries {_CountingEntry.reads} times: a scan?"

    clock.advance(3600)
    assert queue.depth == 0
    assert queue.counters.expired == 10_001


def test_next_deadline_follows_the_earliest_expiry() -> None:
    broker, clock = make_broker()
    assert broker.next_deadline() is None
    broker.publish("q", build_message("a", ttl=30))
    broker.publish("q", build_message("b", ttl=10))
    assert broker.next_deadline() == T0 + 10
    clock.advance(10)
    assert broker.next_deadline() == T0 + 30
    clock.advance(20)
    assert broker.next_deadline() is None


def test_run_timers_with_an_explicit_time() -> None:
    broker, _clock = make_broker()
    broker.publish("q", build_message("a", ttl=30))
    broker.run_timers(T0 + 29)
    assert broker.queue_snapshot("q").depth == 1
    broker.run_timers(T0 + 30)
    assert broker.queue_snapshot("q").depth == 0


def test_timer_watchers_are_told_of_an_earlier_expiry() -> None:
    broker, _clock = make_broker()
    calls: list[None] = []
    broker.timer_watchers.append(lambda: calls.append(None))
    broker.publish("q", build_message("a", ttl=30))
    assert len(calls) == 1  # the first deadline
    broker.publish("q", build_message("b", ttl=60))
    assert len(calls) == 1  # later than the current deadline: nothing to reschedule
    broker.publish("q", build_message("c", ttl=10))
    assert len(calls) == 2
    assert broker.next_deadline() == T0 + 10


# ----------------------------------------------------------------- statistics


def test_statistics_count_expired_and_dead_lettered() -> None:
    broker, clock = make_broker(dead_letter_on_expiry=True)
    broker.declare_queue("plain")
    for i in range(3):
        broker.publish("q", build_message(i, ttl=1))
        broker.publish("plain", build_message(i, ttl=1))
    broker.publish("q", build_message("keeps"))
    clock.advance(1)
    nodes = broker.statistics().nodes
    assert (nodes["q"].enqueued, nodes["q"].expired, nodes["q"].dead_lettered) == (4, 3, 3)
    assert (nodes["plain"].enqueued, nodes["plain"].expired, nodes["plain"].dead_lettered) == (3, 3, 0)
    assert nodes[DLQ].enqueued == 3
    assert broker.queue_snapshot(DLQ).bodies == [0, 1, 2]
    assert broker.queue_snapshot("q").statistics == nodes["q"]
    assert all(e.state == AVAILABLE for e in broker.queues[DLQ].entries())


def test_redelivered_ttl_is_what_is_left_of_the_brokers_expiry() -> None:
    broker, clock = make_broker(max_ttl=10)
    broker.publish("q", build_message("capped", ttl=60))  # the queue's max_ttl wins: 10 s
    queue = broker.queues["q"]
    entry = next(queue.entries())
    clock.advance(4)
    header = decode_message(entry.payload_for_delivery(clock.now())).header
    assert header is not None and header.ttl == 6000


def test_a_custom_dead_letter_queue_still_expires_its_own_messages() -> None:
    broker, clock = make_broker(dead_letter_address="errors")
    broker.declare_queue("errors", QueueOptions(default_ttl=5))
    broker.publish("errors", build_message("ordinary"))
    clock.advance(6)
    assert broker.queue_snapshot("errors").depth == 0
