"""A queue's cost per message does not grow with consumers that have no credit (issue #47, bench ``scale``).

Consumers take turns (Part 3 §3.4; broker paper 2.2.4); one found without credit whose credit
only :meth:`Queue.wake` brings back leaves the turns until woken.  Counted here: the calls to
``credit()`` a message costs, never time.
"""

from __future__ import annotations

from fake_consumer import FakeConsumer

from minibroker.api import build_message
from minibroker.broker.config import BrokerConfig, QueueOptions
from minibroker.broker.node import NodeServices
from minibroker.broker.queue import Queue
from minibroker.broker.statistics import NodeCounters
from minibroker.broker.stored import StoredMessage
from minibroker.broker.topic import Topic

T0 = 1_700_000_000.0
IDLE = 1_000
MESSAGES = 2_000
SUBSCRIPTIONS = 100
COPIES = 50


class Counted(FakeConsumer):
    """A consumer that counts how often the queue asks for its credit."""

    asked = 0

    def credit(self) -> int:
        Counted.asked += 1
        return self.link_credit


class Waking(Counted):
    """Like the broker's AMQP 1.0 links: its credit comes back only through ``Queue.wake``."""

    wakes_queue = True


def message(n: int) -> StoredMessage:
    return StoredMessage(build_message(n).encode(), T0)


def queue_with_idle(idle: int) -> tuple[Queue, Waking]:
    queue = Queue("q", QueueOptions(), NodeCounters())
    for _ in range(idle // 2):
        queue.add_consumer(Waking())
    active = Waking(credit=0, name="active")
    queue.add_consumer(active)  # in the middle of the turns
    for _ in range(idle - idle // 2):
        queue.add_consumer(Waking())
    return queue, active


def test_idle_consumers_are_not_asked_for_credit_per_message() -> None:
    queue, active = queue_with_idle(IDLE)
    active.link_credit = MESSAGES
    queue.wake(active, T0)
    Counted.asked = 0
    for n in range(MESSAGES):
        queue.put(message(n), T0)
    assert len(active.delivered) == MESSAGES
    # Each idle consumer is asked once (then parked), the active one about once a message;
    # walking every consumer per message would be IDLE * MESSAGES / 2 and more.
    assert Counted.asked <= IDLE + 3 * MESSAGES


def test_dispatch_of_a_backlog_does_not_walk_idle_consumers_per_message() -> None:
    queue, active = queue_with_idle(IDLE)
    for n in range(MESSAGES):
        queue.put(message(n), T0)  # nobody has credit: the backlog waits
    Counted.asked = 0
    for _ in range(MESSAGES // 100):  # the client grants credit 100 at a time, as a flow each
        active.link_credit += 100
        queue.wake(active, T0)
    assert len(active.delivered) == MESSAGES
    assert Counted.asked <= IDLE + 3 * MESSAGES


def test_a_parked_consumer_gets_messages_once_woken() -> None:
    queue, active = queue_with_idle(4)
    active.link_credit = 1
    queue.put(message(0), T0)  # the idle ones are found without credit and parked
    sleeper = next(c for c in queue.consumers if c is not active)
    sleeper.link_credit = 1
    queue.wake(sleeper, T0)
    queue.put(message(1), T0)
    assert [len(active.delivered), len(sleeper.delivered)] == [1, 1]


def test_a_consumer_that_does_not_wake_the_queue_is_never_left_out() -> None:
    queue = Queue("q", QueueOptions(), NodeCounters())
    plain = FakeConsumer(credit=0)  # no wakes_queue: its credit may come back unannounced
    queue.add_consumer(plain)
    queue.put(message(0), T0)
    plain.link_credit = 1
    queue.put(message(1), T0)  # the first still waits; dispatch of the backlog finds it
    assert len(plain.delivered) == 1


def test_removing_a_consumer_brings_every_parked_one_back() -> None:
    queue, active = queue_with_idle(2)
    active.link_credit = 1
    queue.put(message(0), T0)  # both idle ones parked
    others = [c for c in queue.consumers if c is not active]
    for other in others:
        other.link_credit = 1  # credit they got without a wake (a single active consumer's successor)
    queue.remove_consumer(active)
    queue.dispatch(T0)
    queue.put(message(1), T0)
    queue.put(message(2), T0)
    assert sorted(len(c.delivered) for c in others) == [1, 1]


def test_a_topic_copy_does_not_ask_idle_subscribers_for_credit() -> None:
    """Fan-out (broker paper 2.3.11): each subscription queue takes its copy; its subscriber, found
    without credit by the first copy, is not asked again by every later one."""
    services = NodeServices(BrokerConfig(), dead_letter=lambda *args: None, expiry_added=lambda at: None)
    topic = Topic("t", NodeCounters(), services)
    subscribers = []
    for i in range(SUBSCRIPTIONS):
        subscription = topic.subscribe(f"t::{i}", durable=False, selector=None)
        subscriber = Waking()
        subscription.queue.add_consumer(subscriber)
        subscribers.append(subscriber)
    topic.put(message(0), T0)  # each subscriber is found idle once
    Counted.asked = 0
    for n in range(1, COPIES + 1):
        topic.put(message(n), T0)
    assert Counted.asked == 0
    assert all(sub.queue.depth == COPIES + 1 for sub in topic.subscriptions.values())
