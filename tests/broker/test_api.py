"""The Python inspection and control API, through ``ThreadedBroker`` and trio's ``open_broker``.

Both run a real listener but no client connects: every call goes through the
API.  Time moves only through a ``ManualClock``; ``wait_for`` is woken by a
change made from another thread (or task), never by sleeping.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import trio

import minibroker
from minibroker import (
    BrokerConfig,
    ManualClock,
    Message,
    NodeError,
    QueueOptions,
    ThreadedBroker,
    open_broker,
)
from minibroker.amqp.types import symbol
from minibroker.broker.kinds import NODE_KINDS

T0 = 1_700_000_000.0


@pytest.fixture
def broker() -> Iterator[ThreadedBroker]:
    with ThreadedBroker() as running:
        yield running


@pytest.fixture
def manual() -> Iterator[ThreadedBroker]:
    with ThreadedBroker(clock=ManualClock(T0)) as running:
        yield running


# ----------------------------------------------------------- publish / snapshot


def test_publish_and_queue_snapshot(broker: ThreadedBroker) -> None:
    broker.publish("orders", {"id": 1})
    broker.publish("orders", "urgent", priority=9, subject="rush", application_properties={"region": "eu"})
    broker.publish("orders", b"\x00\x01", body_kind="data", message_id="m-3", durable=True)
    snapshot = broker.queue("orders")
    assert snapshot.name == "orders"
    assert (snapshot.depth, snapshot.available, snapshot.acquired, snapshot.consumers) == (3, 3, 0, 0)
    assert snapshot.bodies == ["urgent", {"id": 1}, b"\x00\x01"]  # delivery order: priority first
    urgent, plain, data = snapshot.messages
    assert urgent.priority == 9 and urgent.properties.subject == "rush"
    assert urgent.application_properties == {"region": "eu"}
    assert plain.priority == 4 and plain.header is None and plain.expires_at is None
    assert data.message.body_kind == "data" and data.properties.message_id == "m-3"
    assert data.header.durable is True
    assert [m.acquired for m in snapshot.messages] == [False, False, False]
    assert [m.delivery_count for m in snapshot.messages] == [0, 0, 0]
    assert snapshot.statistics.enqueued == 3


def test_publish_a_prepared_message(broker: ThreadedBroker) -> None:
    message = minibroker.build_message("hello", annotations={"x-opt-source": "test"}, to="somewhere")
    broker.publish("q", message=message)
    (queued,) = broker.queue("q").messages
    assert queued.body == "hello"
    assert queued.annotations == {symbol("x-opt-source"): "test"}
    assert queued.properties.to == "somewhere"
    broker.publish("q", message=Message(body=[1, 2], body_kind="sequence"))
    assert broker.queue("q").bodies == ["hello", [1, 2]]


def test_snapshots_are_frozen(broker: ThreadedBroker) -> None:
    broker.publish("q", "a")
    snapshot = broker.queue("q")
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.depth = 99  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.messages[0].acquired = True  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.statistics.enqueued = 0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        snapshot.messages.append(snapshot.messages[0])  # type: ignore[attr-defined]
    stats = broker.statistics()
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.connections = 5  # type: ignore[misc]
    # what a snapshot hands out are copies: changing them changes nothing in the broker
    snapshot.messages[0].message.body = "changed"
    stats.nodes.clear()
    assert broker.queue("q").bodies == ["a"]
    assert "q" in broker.statistics().nodes


def test_snapshots_do_not_change_later(broker: ThreadedBroker) -> None:
    broker.publish("q", "a")
    before = broker.queue("q")
    stats_before = broker.statistics()
    broker.publish("q", "b", priority=9)
    broker.purge("q")
    broker.publish("q", "c")
    assert before.bodies == ["a"] and before.depth == 1
    assert before.statistics.enqueued == 1
    assert stats_before.nodes["q"].enqueued == 1
    assert broker.queue("q").bodies == ["c"]
    assert broker.queue("q").statistics.enqueued == 3


def test_queues_and_topics(broker: ThreadedBroker) -> None:
    assert broker.queues() == [] and broker.topics() == []
    broker.declare_queue("b")
    broker.publish("a", 1)  # auto-created
    broker.declare_topic("news")
    broker.publish("topic://events", 1)
    assert broker.queues() == ["a", "b"]
    assert broker.topics() == ["events", "news"]
    topic = broker.topic("events")
    assert topic.name == "events" and topic.subscriptions == ()
    assert topic.statistics.enqueued == 1 and topic.statistics.dropped == 1
    broker.delete("b")
    broker.delete("news")
    assert broker.queues() == ["a"] and broker.topics() == ["events"]


def test_purge(broker: ThreadedBroker) -> None:
    for i in range(3):
        broker.publish("one", i)
    broker.publish("two", "x")
    assert broker.purge("one") == 3
    assert broker.queue("one").depth == 0
    assert broker.queue("two").depth == 1
    broker.publish("one", "again")
    assert broker.purge() == 2
    assert [broker.queue(n).depth for n in broker.queues()] == [0, 0]


def test_reset(broker: ThreadedBroker) -> None:
    broker.declare_queue("q", priorities=3)
    broker.publish("q", 1)
    broker.declare_topic("t")
    broker.reset()
    assert broker.queues() == [] and broker.topics() == []
    assert broker.statistics().nodes == {}
    with pytest.raises(NodeError):
        broker.queue("q")
    # usable after a reset, with fresh defaults and counters
    broker.publish("q", 2)
    assert broker.queue("q").statistics.enqueued == 1
    assert broker.queue("q").bodies == [2]


def test_statistics(broker: ThreadedBroker) -> None:
    broker.publish("q", 1)
    broker.publish("q", 2)
    broker.publish("topic://t", 3)
    stats = broker.statistics()
    assert isinstance(stats, minibroker.BrokerStatistics)
    assert set(stats.nodes) == {"q", "t"}
    assert stats.nodes["q"].enqueued == 2 and stats.nodes["q"].delivered == 0
    assert stats.nodes["t"].dropped == 1
    assert (stats.connections, stats.links, stats.connections_total) == (0, 0, 0)
    assert broker.transactions() == []


def test_declare_queue_options(broker: ThreadedBroker) -> None:
    broker.declare_queue("two-levels", priorities=2, max_delivery_count=3)
    for body, priority in [("p0", 0), ("p4", 4), ("p5", 5), ("p9", 9)]:
        broker.publish("two-levels", body, priority=priority)
    assert broker.queue("two-levels").bodies == ["p5", "p9", "p0", "p4"]
    broker.declare_queue("expiring", default_ttl=30, max_ttl=60)
    broker.publish("expiring", "x")
    (message,) = broker.queue("expiring").messages
    assert message.expires_at is not None and message.expires_at - broker.clock.now() <= 30
    broker.declare_queue("plain")
    assert broker.queue("plain").depth == 0
    broker.declare_queue("plain")  # declaring again is harmless
    assert broker.queues() == ["expiring", "plain", "two-levels"]


def test_redeclaring_a_queue_with_more_priority_levels(broker: ThreadedBroker) -> None:
    broker.declare_queue("q")  # 10 levels
    broker.publish("q", "p9", priority=9)
    broker.declare_queue("q", priorities=20)
    broker.publish("q", "p15", priority=15)
    broker.publish("q", "p12", priority=12)
    assert broker.queue("q").bodies == ["p15", "p12", "p9"]
    broker.declare_queue("q", priorities=1)
    broker.publish("q", "fifo", priority=255)
    assert broker.queue("q").bodies == ["p15", "p12", "p9", "fifo"]
    assert broker.queue("q").depth == 4


def test_declare_queue_rejects_bad_options(broker: ThreadedBroker) -> None:
    with pytest.raises(ValueError, match="priorities must be 1..256"):
        broker.declare_queue("q", priorities=0)
    with pytest.raises(ValueError, match="max_delivery_count must be >= 1"):
        broker.declare_queue("q", max_delivery_count=0)
    with pytest.raises(TypeError, match="colour"):
        broker.declare_queue("q", colour="blue")
    assert broker.queues() == []


def test_queue_and_topic_names_do_not_clash(broker: ThreadedBroker) -> None:
    broker.declare_topic("shared")
    with pytest.raises(NodeError, match="is a topic"):
        broker.declare_queue("shared")
    broker.declare_queue("q")
    with pytest.raises(NodeError, match="is a queue"):
        broker.declare_topic("q")


def test_declare_queue_with_options_object() -> None:
    config = BrokerConfig(queue_defaults=QueueOptions(priorities=1))
    with ThreadedBroker(config=config) as broker:
        broker.publish("fifo", "low", priority=0)
        broker.publish("fifo", "high", priority=9)
        assert broker.queue("fifo").bodies == ["low", "high"]


# ------------------------------------------------------------------- wait_for


def test_wait_for_returns_after_a_publish_from_another_thread(broker: ThreadedBroker) -> None:
    broker.declare_queue("out")
    checked_once = threading.Event()
    failures: list[BaseException] = []

    def publisher() -> None:
        try:
            assert checked_once.wait(10)
            for i in range(3):
                broker.publish("out", i)
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    def three_queued(b: ThreadedBroker) -> bool:
        depth = b.queue("out").depth
        checked_once.set()  # only after reading: the first check is always false
        return depth == 3

    thread = threading.Thread(target=publisher)
    thread.start()
    try:
        assert broker.wait_for(three_queued, timeout=10) is True
    finally:
        thread.join()
    assert not failures
    assert broker.queue("out").bodies == [0, 1, 2]


def test_wait_for_returns_the_predicate_value(broker: ThreadedBroker) -> None:
    broker.publish("q", "x")
    assert broker.wait_for(lambda b: b.queue("q").bodies) == ["x"]


def test_wait_for_times_out_with_a_message(broker: ThreadedBroker) -> None:
    broker.declare_queue("never")

    def queue_is_full(b: ThreadedBroker) -> bool:
        return b.queue("never").depth > 0

    with pytest.raises(TimeoutError, match=r"queue_is_full.*still false after 0\.05 s"):
        broker.wait_for(queue_is_full, timeout=0.05)


# ---------------------------------------------------------------- manual clock


def test_manual_clock_advance_expires_immediately(manual: ThreadedBroker) -> None:
    assert manual.clock.now() == T0
    manual.publish("q", "short", ttl=30)
    manual.publish("q", "long", ttl=90)
    manual.publish("q", "forever")
    assert manual.queue("q").messages[0].expires_at == T0 + 30
    assert manual.clock.advance(29.5) == T0 + 29.5
    assert manual.queue("q").bodies == ["short", "long", "forever"]
    manual.clock.advance(0.5)
    assert manual.queue("q").bodies == ["long", "forever"]
    manual.clock.advance(60)
    assert manual.queue("q").bodies == ["forever"]
    assert manual.statistics().nodes["q"].expired == 2


def test_manual_clock_drives_dead_letter_on_expiry(manual: ThreadedBroker) -> None:
    manual.declare_queue("q", dead_letter_on_expiry=True)
    manual.publish("q", "m", ttl=1)
    manual.clock.advance(1)
    assert manual.queues() == ["q", "q/$DeadLetterQueue"]
    (dead,) = manual.queue("q/$DeadLetterQueue").messages
    assert dead.annotations[symbol("x-opt-deadletter-reason")] == "TTLExpiredException"


def test_snapshot_shows_the_remaining_ttl(manual: ThreadedBroker) -> None:
    manual.publish("q", "m", ttl=10)
    manual.clock.advance(4)
    assert manual.queue("q").messages[0].header.ttl == 6000


def test_manual_clock_shared_by_the_broker() -> None:
    clock = ManualClock(T0)
    with ThreadedBroker(clock=clock) as broker:
        broker.publish("q", "m", ttl=5)
        clock_now = broker.clock.advance(5)
        assert clock_now == clock.now() == T0 + 5
        assert broker.queue("q").depth == 0


# ----------------------------------------------------------------- misuse


def test_calls_before_start_say_to_start() -> None:
    broker = ThreadedBroker()
    with pytest.raises(RuntimeError, match=r"call start\(\)"):
        broker.queue("q")
    with pytest.raises(RuntimeError, match=r"call start\(\)"):
        broker.publish("q", 1)
    with pytest.raises(RuntimeError, match=r"call start\(\)"):
        _ = broker.port


def test_calls_after_stop_say_to_start() -> None:
    broker = ThreadedBroker().start()
    broker.stop()
    broker.stop()  # twice is fine
    with pytest.raises(RuntimeError, match=r"call start\(\)"):
        broker.queues()


def test_starting_twice_says_to_stop_first(broker: ThreadedBroker) -> None:
    with pytest.raises(RuntimeError, match=r"stop\(\) it before starting again"):
        broker.start()


def test_unknown_queue_names_the_known_ones(broker: ThreadedBroker) -> None:
    broker.declare_queue("orders")
    with pytest.raises(NodeError, match=r"no queue named 'ordrs'; known queues: \['orders'\]"):
        broker.queue("ordrs")
    with pytest.raises(NodeError, match="no queue named 'ordrs'"):
        broker.purge("ordrs")
    with pytest.raises(NodeError, match=r"'orders' is a queue, not a topic: use broker.queue\('orders'\)"):
        broker.topic("orders")
    with pytest.raises(NodeError, match=r"no topic named 'ordrs'; known topics: \[\]"):
        broker.topic("ordrs")
    with pytest.raises(NodeError, match="no queue, topic or stream named 'nothing'"):
        broker.delete("nothing")


def test_unknown_publish_field_lists_the_valid_ones(broker: ThreadedBroker) -> None:
    with pytest.raises(
        TypeError, match=r"unknown message field\(s\) \['colour'\].*application_properties.*subject"
    ):
        broker.publish("q", "body", colour="red")
    with pytest.raises(TypeError, match="not both"):
        broker.publish("q", "body", message=Message(body="x"))
    assert broker.queues() == []


def test_publish_without_auto_create_says_to_declare() -> None:
    with ThreadedBroker(auto_create=False) as broker:
        with pytest.raises(NodeError, match="declare it first"):
            broker.publish("missing", 1)
        broker.declare_queue("missing")
        broker.publish("missing", 1)
        assert broker.queue("missing").depth == 1


def test_config_and_fields_together_are_refused() -> None:
    with pytest.raises(TypeError, match="not both"):
        ThreadedBroker(config=BrokerConfig(), auto_create=False)


def test_a_misspelt_broker_keyword_lists_the_valid_ones() -> None:
    valid = r"valid keywords are: host, port, config, clock, ssl_context, tls, and the BrokerConfig fields .*frame_log"
    with pytest.raises(TypeError, match=rf"^ThreadedBroker\(\): unknown keyword\(s\) frame_logs; {valid}"):
        ThreadedBroker(frame_logs=10)

    async def main() -> None:
        async with open_broker(frame_logs=10):
            pass

    with pytest.raises(TypeError, match=rf"^open_broker\(\): unknown keyword\(s\) frame_logs; {valid}"):
        trio.run(main)


def test_advancing_the_system_clock_says_how_to_get_a_manual_one(broker: ThreadedBroker) -> None:
    hint = r"needs a manual clock, and this broker reads SystemClock: start the broker with ThreadedBroker\(clock=minibroker.ManualClock\(\)\)"
    with pytest.raises(TypeError, match=rf"^advance\(\) {hint}$"):
        broker.clock.advance(1)
    with pytest.raises(TypeError, match=rf"^rewind\(\) {hint}$"):
        broker.clock.rewind()


def test_manual_clock_cannot_go_back(manual: ThreadedBroker) -> None:
    with pytest.raises(ValueError, match=r"cannot go back.*seconds >= 0"):
        manual.clock.advance(-1)
    assert manual.clock.now() == T0
    with pytest.raises(ValueError, match="cannot go back"):
        ManualClock().advance(-0.001)


def test_advance_on_the_system_clock_says_to_use_a_manual_clock(broker: ThreadedBroker) -> None:
    with pytest.raises(TypeError, match=r"ThreadedBroker\(clock=minibroker.ManualClock\(\)\)"):
        broker.clock.advance(1)


# ------------------------------------------------------------------------ trio


@pytest.mark.trio
async def test_trio_publish_snapshot_purge_reset() -> None:
    async with open_broker() as broker:
        assert broker.url == f"amqp://{broker.host}:{broker.port}"
        broker.publish("q", "low", priority=1)
        broker.publish("q", "high", priority=8)
        snapshot = broker.queue("q")
        assert snapshot.bodies == ["high", "low"]
        with pytest.raises(dataclasses.FrozenInstanceError):
            snapshot.depth = 0  # type: ignore[misc]
        broker.declare_topic("t")
        assert broker.queues() == ["q"] and broker.topics() == ["t"]
        assert broker.purge("q") == 2
        assert snapshot.bodies == ["high", "low"]  # taken before the purge
        assert broker.statistics().nodes["q"].enqueued == 2
        broker.reset()
        assert broker.queues() == [] and broker.topics() == []
        with pytest.raises(NodeError, match="known queues"):
            broker.queue("q")


@pytest.mark.trio
async def test_trio_declare_queue_options() -> None:
    async with open_broker() as broker:
        broker.declare_queue("q", priorities=1, max_delivery_count=2)
        broker.publish("q", "a", priority=0)
        broker.publish("q", "b", priority=9)
        assert broker.queue("q").bodies == ["a", "b"]
        with pytest.raises(TypeError, match="unknown message field"):
            broker.publish("q", "c", colour="red")


@pytest.mark.trio
async def test_trio_wait_for_wakes_on_a_publish_from_another_task() -> None:
    async with open_broker() as broker:
        broker.declare_queue("out")
        checked = trio.Event()

        async def publisher() -> None:
            await checked.wait()
            broker.publish("out", "done")

        def published(b: Any) -> bool:
            depth = b.queue("out").depth
            checked.set()
            return depth == 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(publisher)
            assert await broker.wait_for(published, timeout=10) is True
        assert broker.queue("out").bodies == ["done"]


@pytest.mark.trio
async def test_trio_concurrent_waiters_all_wake(autojump_clock: trio.testing.MockClock) -> None:
    async with open_broker() as broker:
        broker.declare_queue("out")
        woke: dict[str, float] = {}
        start = trio.current_time()

        async def waiter(name: str, depth: int) -> None:
            await broker.wait_for(lambda b: b.queue("out").depth >= depth, timeout=60)
            woke[name] = trio.current_time() - start

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter, "first", 1)
            nursery.start_soon(waiter, "second", 1)
            await trio.sleep(1)  # virtual time (autojump clock): both are waiting by now
            broker.publish("out", "x")
        assert set(woke) == {"first", "second"}
        assert max(woke.values()) < 60, f"a waiter slept until its timeout: {woke}"


@pytest.mark.trio
async def test_trio_wait_for_times_out(autojump_clock: trio.testing.MockClock) -> None:
    async with open_broker() as broker:
        broker.declare_queue("never")

        def filled(b: Any) -> bool:
            return b.queue("never").depth > 0

        with pytest.raises(TimeoutError, match=r"filled.*still false after 5 s"):
            await broker.wait_for(filled, timeout=5)


@pytest.mark.trio
async def test_trio_manual_clock() -> None:
    async with open_broker(clock=ManualClock(T0)) as broker:
        broker.publish("q", "m", ttl=2)
        assert isinstance(broker.clock, ManualClock)
        broker.clock.advance(2)
        assert broker.queue("q").depth == 0
        assert broker.statistics().nodes["q"].expired == 1
        with pytest.raises(ValueError, match="cannot go back"):
            broker.clock.advance(-1)


@pytest.mark.trio
async def test_trio_config_and_fields_together_are_refused() -> None:
    with pytest.raises(TypeError, match="not both"):
        async with open_broker(config=BrokerConfig(), auto_create=False):
            pass  # pragma: no cover


def test_advancing_the_tests_own_manual_clock_expires_in_the_broker_thread() -> None:
    clock = minibroker.ManualClock()
    with minibroker.ThreadedBroker(clock=clock) as broker:
        broker.publish("jobs", "stale", ttl=5)
        ran_in: list[str] = []
        inner = broker._broker.run_timers

        def spy(now: float | None = None) -> None:
            ran_in.append(threading.current_thread().name)
            inner(now)

        broker._broker.run_timers = spy  # type: ignore[method-assign]
        clock.advance(6)  # the clock object itself, not broker.clock
        assert ran_in == ["minibroker"]
        assert broker.queue("jobs").depth == 0


def test_wait_for_a_queue_that_does_not_exist_yet_waits_for_it() -> None:
    with minibroker.ThreadedBroker() as broker:
        publisher = threading.Timer(0.05, broker.publish, args=("later", "x"))
        publisher.start()
        try:
            assert broker.wait_for(lambda b: b.queue("later").depth == 1, timeout=5)
        finally:
            publisher.cancel()
        with pytest.raises(TimeoutError, match="no queue named 'never'"):
            broker.wait_for(lambda b: b.queue("never").depth == 1, timeout=0.05)


def test_statistics_read_as_a_mapping_of_node_counters(broker: ThreadedBroker) -> None:
    broker.publish("orders", 1)
    broker.declare_topic("news")
    stats = broker.statistics()
    assert stats["orders"].enqueued == 1 and stats["orders"] is stats.nodes["orders"]
    assert stats["queue://orders"] is stats["orders"] and stats["topic://news"].enqueued == 0
    assert "orders" in stats and "audit" not in stats and stats.get("audit") is None
    assert sorted(stats) == ["news", "orders"] and len(stats) == 2
    with pytest.raises(KeyError, match=r"no node named 'audit' has counters \(nodes: \['news', 'orders'\]\)"):
        stats["audit"]


def test_a_queued_header_shows_the_remaining_ttl_and_arrived_what_was_published(manual: ThreadedBroker) -> None:
    manual.publish("jobs", "soon stale", ttl=30)
    manual.declare_queue("slow", default_ttl=60)
    manual.publish("slow", "no ttl of its own")
    manual.clock.advance(10)
    (queued,) = manual.queue("jobs").messages
    # As a consumer receiving it now gets it (Part 3 §3.2.1: the reduced ttl) ...
    assert queued.header.ttl == 20_000 and queued.expires_at == T0 + 30
    with minibroker.Client(manual.url, timeout=5) as client, client.receiver("jobs") as receiver:
        delivered = receiver.receive()
        assert delivered.message.header.ttl == 20_000
        delivered.release()
    # ... and as the producer sent it.
    assert queued.arrived.header.ttl == 30_000 and queued.arrived.body == "soon stale"
    # The queue's default ttl counts as the expiry a consumer is told of; the producer sent none.
    (defaulted,) = manual.queue("slow").messages
    assert defaulted.header.ttl == 50_000 and defaulted.arrived.header is None


# ------------------------------------------------------- every node kind, generically


@pytest.mark.parametrize("kind", sorted(NODE_KINDS))
def test_declare_snapshot_and_list_any_kind(broker: ThreadedBroker, kind: str) -> None:
    broker.declare(kind, f"{kind}://n")
    assert broker.nodes(kind) == ["n"] and broker.nodes() == ["n"]
    snapshot = broker.snapshot("n")
    assert type(snapshot) is NODE_KINDS[kind].SNAPSHOT and snapshot.name == "n" and snapshot.depth == 0
    assert type(broker.snapshot(f"{kind}://n")) is NODE_KINDS[kind].SNAPSHOT
    for other in sorted(set(NODE_KINDS) - {kind}):
        assert broker.nodes(other) == []
        with pytest.raises(NodeError, match=rf"'n' is a {kind}, not a {other}: use broker\.{kind}\('n'\)"):
            broker.snapshot(f"{other}://n")
    broker.delete(f"{kind}://n")
    assert broker.nodes() == []
    with pytest.raises(NodeError, match="no node named 'n'"):
        broker.snapshot("n")


def test_declare_takes_the_kinds_options_by_name(broker: ThreadedBroker) -> None:
    broker.declare("queue", "q", max_depth=2)
    broker.declare("stream", "s", max_age=60.0)
    assert broker.stream("s").options.max_age == 60.0
    with pytest.raises(TypeError, match=r"unknown stream option\(s\) \['depth'\]; use any of \['duplicate_window', 'max_age', 'max_bytes'\]"):
        broker.declare("stream", "s", depth=1)
    with pytest.raises(TypeError, match=r"a topic takes no options, got \['max_depth'\]"):
        broker.declare("topic", "t", max_depth=1)
    with pytest.raises(ValueError, match="no node kind 'exchange'; the kinds are"):
        broker.declare("exchange", "x")
    assert broker._broker.queues["q"].options.max_depth == 2
    broker.declare("queue", "q")  # no options: the queue keeps its own
    assert broker._broker.queues["q"].options.max_depth == 2
