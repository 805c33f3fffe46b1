"""Unit tests of :class:`minibroker.broker.queue.Queue`: no broker, no sockets, no threads.

Semantics under test (OASIS AMQP 1.0 Part 3 §3.2.1 priority, §3.3 message
states, §3.4 outcomes, §3.5.3 distribution modes): priority order with FIFO
inside a level, requeue to the original place, delivery-count accounting,
competing consumers, browsers, purge.  A stateful Hypothesis test checks a
queue against a plain Python model, and a property test checks the priority
mapping against the formula of §3.2.1.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fake_consumer import FakeConsumer as BaseFakeConsumer
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from minibroker.amqp.message import Message, decode_message
from minibroker.amqp.messaging import Header
from minibroker.amqp.types import symbol
from minibroker.api import build_message
from minibroker.broker.config import QueueOptions
from minibroker.broker.queue import Queue, priority_level
from minibroker.broker.statistics import NodeCounters
from minibroker.broker.stored import ACQUIRED, ARCHIVED, AVAILABLE, Entry, StoredMessage

T0 = 1_700_000_000.0


class FakeConsumer(BaseFakeConsumer):
    """The shared fake consumer, plus the bodies it was given."""

    def bodies(self) -> list[Any]:
        return [body_of(entry) for entry in self.delivered]

    def __repr__(self) -> str:
        return f"<FakeConsumer {self.name} credit={self.link_credit}>"


def body_of(entry: Entry) -> Any:
    return entry.message.decode().body


def stored(body: Any = None, now: float = T0, **fields: Any) -> StoredMessage:
    return StoredMessage(build_message(body, **fields).encode(), now)


def make_queue(**options: Any) -> Queue:
    return Queue("q", QueueOptions(**options), NodeCounters())


def fill(queue: Queue, *bodies: Any, now: float = T0, **fields: Any) -> list[Entry]:
    entries = []
    for body in bodies:
        entry = queue.enqueue(stored(body, now, **fields), now)
        assert entry is not None
        entries.append(entry)
    return entries


def take(queue: Queue, consumer: FakeConsumer, count: int = 1, now: float = T0) -> list[Entry]:
    """Grant ``count`` credit, dispatch, and return what the consumer received."""
    before = len(consumer.delivered)
    consumer.link_credit += count
    queue.dispatch(now)
    return consumer.delivered[before:]


def available_bodies(queue: Queue) -> list[Any]:
    return [body_of(e) for e in queue.entries() if e.state == AVAILABLE]


def drain(queue: Queue, now: float = T0) -> list[Any]:
    """Everything available, in delivery order, taken by a fresh consumer."""
    consumer = FakeConsumer(10_000)
    queue.add_consumer(consumer)
    queue.dispatch(now)
    queue.remove_consumer(consumer)
    return consumer.bodies()


# ------------------------------------------------------------------ ordering


def test_fifo() -> None:
    queue = make_queue()
    fill(queue, *range(20))
    assert queue.depth == 20
    assert queue.available_count == 20
    assert available_bodies(queue) == list(range(20))
    assert drain(queue) == list(range(20))


def test_enqueue_makes_entries_available_in_arrival_order() -> None:
    queue = make_queue()
    entries = fill(queue, "a", "b", "c")
    assert [e.state for e in entries] == [AVAILABLE] * 3
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
    assert len({e.seq for e in entries}) == 3


def test_higher_priority_first_fifo_within_a_level() -> None:
    queue = make_queue()
    for body, priority in [("p1", 1), ("p9a", 9), ("p4a", 4), ("p9b", 9), ("p0", 0), ("p4b", 4), ("p1b", 1)]:
        fill(queue, body, priority=priority)
    expected = ["p9a", "p9b", "p4a", "p4b", "p1", "p1b", "p0"]
    assert available_bodies(queue) == expected
    assert drain(queue) == expected


def test_message_without_header_has_default_priority_4() -> None:
    queue = make_queue()
    fill(queue, "header-4", priority=4)
    fill(queue, "no-header")  # build_message without priority/ttl/durable writes no header
    fill(queue, "p3", priority=3)
    fill(queue, "p5", priority=5)
    fill(queue, "no-header-2")
    entry = next(e for e in queue.entries() if body_of(e) == "no-header")
    assert entry.message.header is None
    assert entry.message.priority == 4
    assert drain(queue) == ["p5", "header-4", "no-header", "no-header-2", "p3"]


def test_priorities_above_9_share_the_top_level_with_10_levels() -> None:
    queue = make_queue(priorities=10)
    fill(queue, "p200", priority=200)
    fill(queue, "p9", priority=9)
    fill(queue, "p255", priority=255)
    fill(queue, "p8", priority=8)
    assert drain(queue) == ["p200", "p9", "p255", "p8"]


def test_fewer_levels_merge_priorities() -> None:
    # n = 2 (Part 3 §3.2.1): 0..4 are the low level, 5 and above the high one.
    queue = make_queue(priorities=2)
    for body, priority in [("p0", 0), ("p4", 4), ("p5", 5), ("p3", 3), ("p9", 9)]:
        fill(queue, body, priority=priority)
    assert drain(queue) == ["p5", "p9", "p0", "p4", "p3"]


def test_single_level_is_plain_fifo() -> None:
    queue = make_queue(priorities=1)
    for body, priority in [("a", 0), ("b", 9), ("c", 4), ("d", 255)]:
        fill(queue, body, priority=priority)
    assert drain(queue) == ["a", "b", "c", "d"]


# ------------------------------------------------------------------ outcomes


def test_released_entry_returns_to_its_original_place() -> None:
    queue = make_queue()
    fill(queue, "a", "b", "c")
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    (a,) = take(queue, consumer)
    (b,) = take(queue, consumer)
    assert [body_of(a), body_of(b)] == ["a", "b"]
    queue.release(b, T0)
    queue.release(a, T0)
    assert a.state == b.state == AVAILABLE
    assert available_bodies(queue) == ["a", "b", "c"]
    assert [body_of(e) for e in take(queue, consumer, 3)] == ["a", "b", "c"]


def test_released_entry_returns_to_its_place_within_its_level() -> None:
    queue = make_queue()
    fill(queue, "low-1", priority=1)
    fill(queue, "high-1", priority=8)
    fill(queue, "high-2", priority=8)
    fill(queue, "low-2", priority=1)
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    high1, high2, low1 = take(queue, consumer, 3)
    assert [body_of(e) for e in (high1, high2, low1)] == ["high-1", "high-2", "low-1"]
    queue.release(low1, T0)
    queue.release(high2, T0)
    queue.modify(high1, T0, delivery_failed=True, undeliverable_here=False, annotations=None, link_id=None)
    assert available_bodies(queue) == ["high-1", "high-2", "low-1", "low-2"]


def test_modified_entry_returns_to_its_original_place() -> None:
    queue = make_queue()
    fill(queue, "a", "b", "c")
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    a, b = take(queue, consumer, 2)
    queue.modify(b, T0, delivery_failed=False, undeliverable_here=False, annotations=None, link_id=None)
    assert available_bodies(queue) == ["b", "c"]
    queue.modify(a, T0, delivery_failed=True, undeliverable_here=False, annotations=None, link_id=None)
    assert available_bodies(queue) == ["a", "b", "c"]


def test_message_enqueued_with_a_reserved_number_takes_its_place_before_newer_ones() -> None:
    # A scheduled message keeps the arrival number reserved when it was scheduled.
    queue = make_queue()
    early = queue.reserve_seq()
    fill(queue, "b", "c")
    queue.enqueue(stored("a"), T0, seq=early)
    assert available_bodies(queue) == ["a", "b", "c"]
    assert drain(queue) == ["a", "b", "c"]


class OnlyB(FakeConsumer):
    def accepts(self, entry: Entry) -> bool:
        return bool(body_of(entry) == "b")


def test_entry_taken_from_the_middle_and_released_is_delivered_once() -> None:
    # A selective consumer takes "b" past the head; released, it must come back once, in place.
    queue = make_queue()
    fill(queue, "a", "b", "c")
    picky = OnlyB()
    queue.add_consumer(picky)
    (b,) = take(queue, picky)
    queue.remove_consumer(picky)
    queue.release(b, T0)
    assert available_bodies(queue) == ["a", "b", "c"]
    assert queue.available_count == 3
    assert drain(queue) == ["a", "b", "c"]


def test_release_does_not_count_a_delivery() -> None:
    queue = make_queue()
    fill(queue, "a")
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    for _ in range(3):
        (entry,) = take(queue, consumer)
        queue.release(entry, T0)
    assert entry.delivery_count == 0
    header = decode_message(entry.payload_for_delivery(T0)).header
    assert header is None or header.delivery_count == 0
    assert queue.counters.released == 3
    assert queue.counters.delivered == 3


def test_modified_delivery_failed_counts_a_delivery() -> None:
    queue = make_queue()
    fill(queue, "a", priority=4)
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    (entry,) = take(queue, consumer)
    queue.modify(entry, T0, delivery_failed=True, undeliverable_here=False, annotations=None, link_id=None)
    assert entry.delivery_count == 1
    (again,) = take(queue, consumer)
    assert again is entry
    header = decode_message(again.payload_for_delivery(T0)).header
    assert header.delivery_count == 1
    assert header.first_acquirer is False
    queue.modify(entry, T0, delivery_failed=False, undeliverable_here=False, annotations=None, link_id=None)
    assert entry.delivery_count == 1  # not failed: not counted
    assert queue.counters.modified == 2


def test_delivery_count_of_a_headerless_message_is_sent_after_a_failed_delivery() -> None:
    """A message sent without a header gets one carrying delivery-count once it has failed (§3.2.1)."""
    queue = make_queue()
    fill(queue, "no-header")
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    (entry,) = take(queue, consumer)
    assert entry.message.header is None
    assert entry.payload_for_delivery(T0) == entry.message.payload
    queue.modify(entry, T0, delivery_failed=True, undeliverable_here=False, annotations=None, link_id=None)
    (again,) = take(queue, consumer)
    delivered = decode_message(again.payload_for_delivery(T0))
    assert delivered.header is not None
    assert delivered.header.delivery_count == 1
    assert delivered.header.priority == 4
    assert delivered.body == "no-header"


def test_delivery_count_starts_from_the_header() -> None:
    message = Message(body="x", header=Header(delivery_count=2))
    queue = make_queue()
    entry = queue.enqueue(StoredMessage(message.encode(), T0), T0)
    assert entry is not None and entry.delivery_count == 2


def test_undeliverable_here_never_goes_back_to_that_consumer_but_does_to_others() -> None:
    queue = make_queue()
    fill(queue, "a", "b")
    refuser = FakeConsumer(name="refuser")
    queue.add_consumer(refuser)
    (a,) = take(queue, refuser)
    queue.modify(
        a, T0, delivery_failed=False, undeliverable_here=True, annotations=None, link_id=refuser.link_id
    )
    # "a" is available again, in front, but not for the refuser: it gets "b".
    assert available_bodies(queue) == ["a", "b"]
    assert [body_of(e) for e in take(queue, refuser, 5)] == ["b"]
    assert refuser.link_credit == 4
    assert queue.available_count == 1
    other = FakeConsumer(name="other")
    queue.add_consumer(other)
    assert [body_of(e) for e in take(queue, other)] == ["a"]
    # and once more refused by the second consumer, it goes to neither
    queue.modify(
        a, T0, delivery_failed=False, undeliverable_here=True, annotations=None, link_id=other.link_id
    )
    queue.dispatch(T0)
    other.link_credit += 1
    queue.dispatch(T0)
    assert queue.available_count == 1
    assert refuser.bodies() == ["a", "b"]  # "a" only the first time
    third = FakeConsumer(name="third")
    queue.add_consumer(third)
    assert [body_of(e) for e in take(queue, third)] == ["a"]


def test_annotations_are_merged_on_modified() -> None:
    queue = make_queue()
    fill(queue, "a", annotations={"x-opt-origin": "sender", "x-opt-keep": 1})
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    (entry,) = take(queue, consumer)
    queue.modify(
        entry, T0, delivery_failed=False, undeliverable_here=False,
        annotations={symbol("x-opt-retry"): "yes", symbol("x-opt-origin"): "consumer"}, link_id=None,
    )  # fmt: skip
    (entry,) = take(queue, consumer)
    annotations = decode_message(entry.payload_for_delivery(T0)).message_annotations
    assert annotations == {"x-opt-origin": "consumer", "x-opt-keep": 1, "x-opt-retry": "yes"}
    queue.modify(
        entry, T0, delivery_failed=True, undeliverable_here=False,
        annotations={symbol("x-opt-second"): 2}, link_id=None,
    )  # fmt: skip
    (entry,) = take(queue, consumer)
    delivered = decode_message(entry.payload_for_delivery(T0))
    assert delivered.message_annotations == {
        "x-opt-origin": "consumer", "x-opt-keep": 1, "x-opt-retry": "yes", "x-opt-second": 2,
    }  # fmt: skip
    assert delivered.header.delivery_count == 1
    # the bare message (§3.2) is never touched
    assert entry.payload_for_delivery(T0).endswith(entry.message.bare)


def test_modified_without_annotations_keeps_the_original_ones() -> None:
    queue = make_queue()
    fill(queue, "a", annotations={"x-opt-a": 1})
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    (entry,) = take(queue, consumer)
    queue.modify(entry, T0, delivery_failed=False, undeliverable_here=False, annotations=None, link_id=None)
    assert decode_message(entry.payload_for_delivery(T0)).message_annotations == {"x-opt-a": 1}


def test_accept_archives_once() -> None:
    queue = make_queue()
    (entry,) = fill(queue, "a")
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    take(queue, consumer)
    assert entry.state == ACQUIRED and entry.owner is consumer
    assert queue.depth == 1 and queue.available_count == 0
    queue.accept(entry)
    queue.accept(entry)
    queue.release(entry, T0)
    queue.modify(entry, T0, delivery_failed=True, undeliverable_here=False, annotations=None, link_id=None)
    assert entry.state == ARCHIVED
    assert queue.depth == 0
    assert queue.counters.acknowledged == 1
    assert queue.counters.released == 0 and queue.counters.modified == 0
    assert list(queue.entries()) == []


def test_release_of_an_available_entry_is_ignored() -> None:
    queue = make_queue()
    (entry,) = fill(queue, "a")
    queue.release(entry, T0)
    queue.modify(entry, T0, delivery_failed=True, undeliverable_here=False, annotations=None, link_id=None)
    assert entry.delivery_count == 0
    assert queue.available_count == 1 and queue.depth == 1
    assert queue.counters.released == 0


def test_reject_removes_without_dead_letter_callback() -> None:
    queue = make_queue()
    (entry,) = fill(queue, "a")
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    take(queue, consumer)
    queue.reject(entry, "app:bad", "bad message")
    assert entry.state == ARCHIVED
    assert queue.depth == 0
    assert queue.counters.rejected == 1


def test_reject_calls_the_dead_letter_callback_with_the_error() -> None:
    calls: list[tuple[str, Any, str, str | None]] = []
    queue = Queue(
        "q",
        QueueOptions(),
        NodeCounters(),
        dead_letter=lambda q, e, r, d: calls.append((q.name, body_of(e), r, d)),
    )
    entries = fill(queue, "a", "b")
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    take(queue, consumer, 2)
    queue.reject(entries[0], "app:bad", "bad message")
    queue.reject(entries[1], None, None)
    assert calls == [("q", "a", "app:bad", "bad message"), ("q", "b", "amqp:rejected", None)]


def test_max_delivery_count_exceeded_archives_and_dead_letters() -> None:
    calls: list[tuple[str, str | None, int]] = []
    queue = Queue(
        "q", QueueOptions(max_delivery_count=2), NodeCounters(),
        dead_letter=lambda q, e, r, d: calls.append((r, d, e.delivery_count)),
    )  # fmt: skip
    fill(queue, "a", "b")
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    for attempt in range(1, 4):
        (entry,) = take(queue, consumer)
        assert body_of(entry) == "a"
        queue.modify(
            entry, T0, delivery_failed=True, undeliverable_here=False, annotations=None, link_id=None
        )
        assert entry.delivery_count == attempt
    assert entry.state == ARCHIVED
    assert [r for r, _d, _c in calls] == ["MaxDeliveryCountExceeded"]
    assert calls[0][2] == 3
    assert "max_delivery_count 2" in (calls[0][1] or "")
    assert available_bodies(queue) == ["b"]


# ------------------------------------------------------------------ consumers


def test_round_robin_across_competing_consumers() -> None:
    queue = make_queue()
    consumers = [FakeConsumer(10, name=f"c{i}") for i in range(3)]
    for consumer in consumers:
        queue.add_consumer(consumer)
    fill(queue, *range(9))
    queue.dispatch(T0)
    assert [c.bodies() for c in consumers] == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    # the turn carries over from one dispatch to the next
    for body in range(9, 13):
        fill(queue, body)
        queue.dispatch(T0)
    assert [c.bodies()[3:] for c in consumers] == [[9, 12], [10], [11]]
    assert queue.counters.delivered == 13


def test_round_robin_skips_consumers_without_credit() -> None:
    queue = make_queue()
    a, b, c = FakeConsumer(1, name="a"), FakeConsumer(0, name="b"), FakeConsumer(5, name="c")
    for consumer in (a, b, c):
        queue.add_consumer(consumer)
    fill(queue, *range(6))
    queue.dispatch(T0)
    assert a.bodies() == [0]
    assert b.bodies() == []
    assert c.bodies() == [1, 2, 3, 4, 5]


def test_consumer_without_credit_gets_nothing() -> None:
    queue = make_queue()
    consumer = FakeConsumer(0)
    queue.add_consumer(consumer)
    fill(queue, "a", "b")
    queue.dispatch(T0)
    assert consumer.delivered == []
    assert queue.available_count == 2
    assert queue.counters.delivered == 0
    consumer.link_credit = 1
    queue.dispatch(T0)
    assert consumer.bodies() == ["a"]
    queue.dispatch(T0)
    assert consumer.bodies() == ["a"]
    assert queue.available_count == 1


def test_removed_consumer_gets_nothing_more() -> None:
    queue = make_queue()
    a, b = FakeConsumer(10, name="a"), FakeConsumer(10, name="b")
    queue.add_consumer(a)
    queue.add_consumer(b)
    queue.remove_consumer(a)
    fill(queue, 1, 2, 3)
    queue.dispatch(T0)
    assert a.delivered == []
    assert b.bodies() == [1, 2, 3]


def test_consumer_removing_itself_while_delivering() -> None:
    queue = make_queue()

    class Leaving(FakeConsumer):
        def deliver(self, entry: Entry) -> None:
            super().deliver(entry)
            queue.remove_consumer(self)

    leaving, staying = Leaving(10, name="leaving"), FakeConsumer(10, name="staying")
    queue.add_consumer(leaving)
    queue.add_consumer(staying)
    fill(queue, *range(4))
    queue.dispatch(T0)
    assert leaving.bodies() == [0]
    assert staying.bodies() == [1, 2, 3]


# ------------------------------------------------------------------- browsers


def test_browser_sees_everything_in_arrival_order_without_acquiring() -> None:
    queue = make_queue()
    fill(queue, "low", priority=0)
    fill(queue, "high", priority=9)
    fill(queue, "mid", priority=5)
    browser = FakeConsumer(100, browse=True)
    queue.add_consumer(browser)
    queue.dispatch(T0)
    assert browser.bodies() == ["low", "high", "mid"]
    assert all(e.state == AVAILABLE for e in browser.delivered)
    assert queue.depth == 3 and queue.available_count == 3
    assert queue.counters.delivered == 0
    # browsing again shows nothing new; a consumer still gets everything
    queue.dispatch(T0)
    assert len(browser.delivered) == 3
    consumer = FakeConsumer(10)
    queue.add_consumer(consumer)
    queue.dispatch(T0)
    assert consumer.bodies() == ["high", "mid", "low"]


def test_browser_sees_acquired_messages_too() -> None:
    queue = make_queue()
    fill(queue, "a", "b")
    consumer = FakeConsumer(1)
    queue.add_consumer(consumer)
    queue.dispatch(T0)
    browser = FakeConsumer(10, browse=True)
    queue.add_consumer(browser)
    queue.dispatch(T0)
    assert browser.bodies() == ["a", "b"]
    assert consumer.delivered[0].state == ACQUIRED


def test_browser_then_sees_new_arrivals_only() -> None:
    queue = make_queue()
    fill(queue, "a", "b")
    browser = FakeConsumer(100, browse=True)
    queue.add_consumer(browser)
    queue.dispatch(T0)
    fill(queue, "c", priority=9)
    fill(queue, "d")
    queue.dispatch(T0)
    assert browser.bodies() == ["a", "b", "c", "d"]


def test_browser_respects_credit() -> None:
    queue = make_queue()
    fill(queue, *range(5))
    browser = FakeConsumer(2, browse=True)
    queue.add_consumer(browser)
    queue.dispatch(T0)
    assert browser.bodies() == [0, 1]
    browser.link_credit = 2
    queue.dispatch(T0)
    assert browser.bodies() == [0, 1, 2, 3]
    browser.link_credit = 10
    queue.dispatch(T0)
    assert browser.bodies() == [0, 1, 2, 3, 4]


def test_browser_does_not_see_consumed_messages() -> None:
    queue = make_queue()
    entries = fill(queue, "a", "b", "c")
    consumer = FakeConsumer(1)
    queue.add_consumer(consumer)
    queue.dispatch(T0)
    queue.accept(entries[0])
    browser = FakeConsumer(10, browse=True)
    queue.add_consumer(browser)
    queue.dispatch(T0)
    assert browser.bodies() == ["b", "c"]


def test_browser_skips_what_leaves_while_it_browses() -> None:
    queue = make_queue()
    entries = fill(queue, *range(6))
    browser = FakeConsumer(2, browse=True)
    queue.add_consumer(browser)
    queue.dispatch(T0)
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    held = take(queue, consumer, 4)  # 0..3, acquired
    queue.accept(held[2])  # 2 leaves: the browser has not seen it yet
    queue.accept(entries[0])  # 0 leaves: the browser saw it already
    browser.link_credit = 10
    queue.dispatch(T0)
    assert browser.bodies() == [0, 1, 3, 4, 5]
    fill(queue, "new")
    queue.dispatch(T0)
    assert browser.bodies()[-1] == "new"


class CountingArrivals:
    """The queue's browse index, counting every entry a walk over it hands out."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self.reads = 0

    def irange_key(self, *args: Any, **kwargs: Any) -> Iterator[Entry]:
        for entry in self.index.irange_key(*args, **kwargs):
            self.reads += 1
            yield entry

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)


@pytest.mark.parametrize("depth", [1_000, 20_000])
def test_a_browser_fetch_reads_only_what_it_sends(depth: int) -> None:
    """Browsing one message at a time reads O(1) entries per message, at any depth (not the whole queue)."""
    queue = make_queue()
    message = stored("m")
    for _ in range(depth):
        queue.enqueue(message, T0)
    browser = FakeConsumer(0, browse=True)
    queue.add_consumer(browser)
    assert queue._browsers is not None
    counting = CountingArrivals(queue._browsers._arrivals)
    queue._browsers._arrivals = counting  # type: ignore[assignment]
    for _ in range(50):
        browser.link_credit = 1
        queue.dispatch(T0)
    assert len(browser.delivered) == 50
    assert counting.reads <= 2 * 50  # the one sent, and the next one looked at before credit ran out


def test_the_browse_index_lives_only_while_browsers_do() -> None:
    queue = make_queue()
    fill(queue, "a")
    assert queue._browsers is None
    browser = FakeConsumer(10, browse=True)
    queue.add_consumer(browser)
    assert queue._browsers is not None
    assert [entry.seq for entry in queue._browsers._arrivals] == [1]
    fill(queue, "b")
    assert [entry.seq for entry in queue._browsers._arrivals] == [1, 2]
    queue.remove_consumer(browser)
    assert queue._browsers is None


# ---------------------------------------------------------------------- purge


def test_purge_removes_available_messages_only() -> None:
    queue = make_queue()
    fill(queue, *range(5))
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    held = take(queue, consumer, 2)
    assert queue.purge() == 3
    assert queue.depth == 2 and queue.available_count == 0
    assert [e.state for e in held] == [ACQUIRED, ACQUIRED]
    queue.release(held[1], T0)
    assert available_bodies(queue) == [1]
    assert [body_of(e) for e in take(queue, consumer, 5)] == [1]
    assert queue.purge() == 0


def test_queue_is_usable_after_purge() -> None:
    queue = make_queue()
    fill(queue, "old-1", "old-2", priority=9)
    assert queue.purge() == 2
    fill(queue, "new-low", priority=1)
    fill(queue, "new-high", priority=9)
    assert queue.depth == 2
    assert drain(queue) == ["new-high", "new-low"]


def test_entries_lists_available_then_acquired() -> None:
    queue = make_queue()
    fill(queue, "a", "b", "c")
    fill(queue, "d", priority=9)
    consumer = FakeConsumer()
    queue.add_consumer(consumer)
    take(queue, consumer, 2)  # d, a
    assert [(body_of(e), e.state) for e in queue.entries()] == [
        ("b", AVAILABLE), ("c", AVAILABLE), ("a", ACQUIRED), ("d", ACQUIRED),
    ]  # fmt: skip


# ------------------------------------------------------- priority mapping (§3.2.1)


def spec_level(priority: int, levels: int) -> int:
    """OASIS AMQP 1.0 Part 3 §3.2.1, written out independently of the broker.

    With n < 10 levels, priorities 0..(5 - ceil(n/2)) are the lowest level,
    (4 + floor(n/2)) and above the highest, each priority in between its own
    level.  With n >= 10 the natural extension keeps every priority below n
    distinct and folds priorities >= n into the top level n - 1, which for
    0..255 and n <= 256 gives exactly n levels.
    """
    if levels >= 10:
        return min(priority, levels - 1)
    lowest = 5 - math.ceil(levels / 2)
    highest = 4 + levels // 2
    if priority <= lowest:
        return 0
    if priority >= highest:
        return levels - 1
    return priority - lowest


@pytest.mark.parametrize("levels", range(1, 13))
def test_priority_mapping_matches_the_spec(levels: int) -> None:
    mapped = [priority_level(p, levels) for p in range(256)]
    assert mapped == [spec_level(p, levels) for p in range(256)]
    assert all(a <= b for a, b in itertools.pairwise(mapped)), "mapping must be monotonic"
    assert sorted(set(mapped)) == list(range(levels)), "exactly n distinct levels 0..n-1"
    assert mapped[0] == 0 and mapped[255] == levels - 1


@pytest.mark.parametrize(
    ("levels", "lowest_group", "highest_from"),
    [(1, range(0, 256), 0), (2, range(0, 5), 5), (3, range(0, 4), 5), (4, range(0, 4), 6),
     (5, range(0, 3), 6), (8, range(0, 2), 8), (9, range(0, 1), 8)],
)  # fmt: skip
def test_priority_mapping_boundaries_below_10_levels(
    levels: int, lowest_group: range, highest_from: int
) -> None:
    for priority in lowest_group:
        assert priority_level(priority, levels) == 0
    for priority in range(highest_from, 256):
        assert priority_level(priority, levels) == levels - 1
    if levels > 1:
        assert priority_level(max(lowest_group) + 1, levels) == 1


@given(levels=st.integers(1, 256), a=st.integers(0, 255), b=st.integers(0, 255))
def test_priority_mapping_properties(levels: int, a: int, b: int) -> None:
    la, lb = priority_level(a, levels), priority_level(b, levels)
    assert 0 <= la < levels
    assert la == spec_level(a, levels)
    if a <= b:
        assert la <= lb
    if levels >= 10 and a < levels and b < levels and a != b:
        assert la != lb  # every priority below n is a level of its own


@pytest.mark.parametrize("levels", [10, 11, 12, 100, 255, 256])
def test_priority_mapping_at_and_above_10_levels(levels: int) -> None:
    mapped = {priority_level(p, levels) for p in range(256)}
    assert mapped == set(range(levels))
    assert priority_level(levels - 1, levels) == levels - 1
    assert priority_level(255, levels) == levels - 1


def test_queue_with_more_than_10_levels_orders_by_them() -> None:
    queue = make_queue(priorities=12)
    for priority in [3, 11, 10, 200, 9, 10]:
        fill(queue, f"p{priority}", priority=priority)
    assert drain(queue) == ["p11", "p200", "p10", "p10", "p9", "p3"]


# ------------------------------------------------------------- stateful model


@dataclass
class ModelEntry:
    ident: int
    seq: int
    level: int
    expires_at: float | None
    state: int = AVAILABLE
    delivery_count: int = 0
    entry: Entry | None = None


class QueueMachine(RuleBasedStateMachine):
    """A queue against a list-of-records model: order, depth, no loss, no duplicates."""

    MAX_DELIVERY_COUNT = 3

    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.levels = 10
        self.queue = make_queue()
        self.consumer = FakeConsumer(0, name="model-consumer")
        self.queue.add_consumer(self.consumer)
        self.model: dict[int, ModelEntry] = {}
        self.next_ident = 0
        self.next_seq = 0
        self.expired = 0
        self.dead = 0

    @initialize(levels=st.integers(1, 12))
    def make(self, levels: int) -> None:
        self.levels = levels
        self.queue = Queue(
            "model",
            QueueOptions(priorities=levels, max_delivery_count=self.MAX_DELIVERY_COUNT),
            NodeCounters(),
        )
        self.queue.add_consumer(self.consumer)

    # model helpers -------------------------------------------------------

    def _available(self) -> list[ModelEntry]:
        live = [m for m in self.model.values() if m.state == AVAILABLE]
        return sorted(live, key=lambda m: (-m.level, m.seq))

    def _held(self) -> list[ModelEntry]:
        return sorted((m for m in self.model.values() if m.state == ACQUIRED), key=lambda m: m.seq)

    def _expire_available(self) -> int:
        due = [m for m in self._available() if m.expires_at is not None and m.expires_at <= self.now]
        for m in due:
            del self.model[m.ident]
        self.expired += len(due)
        return len(due)

    def _back(self, m: ModelEntry) -> None:
        """A held entry comes back: expired ones are dropped, others become available."""
        if m.expires_at is not None and m.expires_at <= self.now:
            del self.model[m.ident]
            self.expired += 1
        else:
            m.state = AVAILABLE

    def _pick_held(self, index: int) -> ModelEntry:
        held = self._held()
        return held[index % len(held)]

    # rules ---------------------------------------------------------------

    @rule(priority=st.none() | st.integers(0, 255), ttl_ms=st.none() | st.integers(1, 5000))
    def publish(self, priority: int | None, ttl_ms: int | None) -> None:
        header = None
        if priority is not None or ttl_ms is not None:
            header = Header(priority=4 if priority is None else priority, ttl=ttl_ms)
        ident = self.next_ident
        self.next_ident += 1
        entry = self.queue.enqueue(
            StoredMessage(Message(body=ident, header=header).encode(), self.now), self.now
        )
        assert entry is not None
        self.next_seq += 1
        expires_at = None if ttl_ms is None else self.now + ttl_ms / 1000
        level = spec_level(4 if priority is None else priority, self.levels)
        assert entry.level == level
        assert entry.expires_at == expires_at
        self.model[ident] = ModelEntry(ident, self.next_seq, level, expires_at, entry=entry)

    @rule()
    def take_one(self) -> None:
        self._expire_available()
        available = self._available()
        before = len(self.consumer.delivered)
        self.consumer.link_credit = 1
        self.queue.dispatch(self.now)
        got = self.consumer.delivered[before:]
        if not available:
            assert got == []
            assert self.consumer.link_credit == 1
            return
        expected = available[0]
        assert len(got) == 1
        assert body_of(got[0]) == expected.ident, f"expected {expected}, got {body_of(got[0])}"
        assert got[0] is expected.entry
        assert got[0].state == ACQUIRED
        expected.state = ACQUIRED

    @precondition(lambda self: self._held())
    @rule(index=st.integers(0, 1000))
    def accept(self, index: int) -> None:
        m = self._pick_held(index)
        assert m.entry is not None
        self.queue.accept(m.entry)
        del self.model[m.ident]

    @precondition(lambda self: self._held())
    @rule(index=st.integers(0, 1000))
    def release(self, index: int) -> None:
        m = self._pick_held(index)
        assert m.entry is not None
        self.queue.release(m.entry, self.now)
        self._back(m)

    @precondition(lambda self: self._held())
    @rule(index=st.integers(0, 1000))
    def modify_failed(self, index: int) -> None:
        m = self._pick_held(index)
        assert m.entry is not None
        self.queue.modify(m.entry, self.now, True, False, None, None)
        m.delivery_count += 1
        assert m.entry.delivery_count == m.delivery_count
        if m.delivery_count > self.MAX_DELIVERY_COUNT:
            del self.model[m.ident]
            self.dead += 1
        else:
            self._back(m)

    @rule(ms=st.integers(0, 3000))
    def advance(self, ms: int) -> None:
        self.now += ms / 1000

    @rule()
    def expire(self) -> None:
        assert self.queue.expire(self.now) == self._expire_available()

    @rule()
    def purge(self) -> None:
        available = self._available()
        assert self.queue.purge() == len(available)
        for m in available:
            del self.model[m.ident]

    # invariants ----------------------------------------------------------

    @invariant()
    def same_contents_in_the_same_order(self) -> None:
        expected = [m.ident for m in self._available()] + [m.ident for m in self._held()]
        actual = [body_of(e) for e in self.queue.entries()]
        assert actual == expected
        assert len(set(actual)) == len(actual), "an entry is listed twice"

    @invariant()
    def depth_and_counts_match(self) -> None:
        assert self.queue.depth == len(self.model)
        assert self.queue.available_count == len(self._available())
        assert self.queue.counters.expired == self.expired

    @invariant()
    def next_expiry_is_the_earliest_available(self) -> None:
        # Acquired messages are judged when they come back, so only available ones count.
        times = [m.expires_at for m in self._available() if m.expires_at is not None]
        assert self.queue.next_expiry() == (min(times) if times else None)


QueueMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestQueueMachine = QueueMachine.TestCase


def test_put_hands_a_message_to_the_next_consumer_in_turn_as_dispatch_would() -> None:
    """With nothing waiting, put() gives the message straight to a consumer: same turns, same counters."""
    queue = make_queue()
    a, b, c = FakeConsumer(2, name="a"), FakeConsumer(0, name="b"), FakeConsumer(4, name="c")
    for consumer in (a, b, c):
        queue.add_consumer(consumer)
    for body in range(6):
        queue.put(stored(body), T0)
    assert [a.bodies(), b.bodies(), c.bodies()] == [[0, 2], [], [1, 3, 4, 5]]
    assert queue.counters.delivered == 6 and queue.available_count == 0 and queue.depth == 6
    queue.put(stored(6), T0)  # nobody has credit: it waits, and goes out when credit comes
    assert queue.available_count == 1
    assert [body_of(e) for e in take(queue, b)] == [6]


def test_a_message_handed_over_by_put_and_released_comes_back_before_later_ones() -> None:
    queue = make_queue()
    first = FakeConsumer(1, name="first")
    queue.add_consumer(first)
    queue.put(stored("a"), T0)  # handed over at once
    queue.put(stored("b"), T0)  # no credit left: waits
    queue.put(stored("c"), T0)
    (entry,) = first.delivered
    queue.release(entry, T0)
    assert available_bodies(queue) == ["a", "b", "c"]
    queue.remove_consumer(first)
    assert drain(queue) == ["a", "b", "c"]
