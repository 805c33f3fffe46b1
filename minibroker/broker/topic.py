"""Topics: every subscription gets its own copy (broker paper 2.3.11, ``copy`` distribution).

Each subscription is a private :class:`~minibroker.broker.queue.Queue`, so
outcomes, redelivery and TTL work as on queues.  A durable subscription
(source durability and expiry-policy ``never``, Part 3 §3.5.3) outlives its
link until a detach with ``closed=true`` cancels it.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from .config import DEFAULT_DEAD_LETTER_SUFFIX
from .filters import selector_matches
from .queue import Queue
from .statistics import NodeCounters, SubscriptionSnapshot, TopicSnapshot
from .stored import StoredMessage

if TYPE_CHECKING:
    from ..amqp.performatives import Error
    from .capture import Run
    from .consuming import ConsumerRequest, NodeConsumer
    from .duplicates import RecentIds
    from .node import NodeServices
    from .selector import Selector

__all__ = ["Subscription", "Topic"]


#: A subscription's own rules, in place of a selector (the Service Bus layer's): the copies of a
#: message it takes, each possibly changed by a rule's action; none when no rule matches.
SubscriptionRules = Callable[[StoredMessage], list[StoredMessage]]


class Subscription:
    """One subscriber's queue on a topic, with the subscriber's selector (or a layer's rules)."""

    def __init__(self, key: str, queue: Queue, durable: bool, selector: Selector | None) -> None:
        self.key = key
        self.queue = queue
        self.durable = durable
        self.selector = selector
        self.rules: SubscriptionRules | None = None
        self.links = 1  # links consuming from it; a durable one stays with none

    @property
    def attached(self) -> bool:
        return self.links > 0


class Topic:
    """A topic node: each subscriber reads its own copy from its subscription queue; a :class:`~.node.Node`."""

    KIND: ClassVar[str] = "topic"
    OPTIONS: ClassVar[type[Any] | None] = None  # a topic takes none: its subscriptions take ``BrokerConfig.queue_defaults``
    SNAPSHOT: ClassVar[type[Any]] = TopicSnapshot
    #: No duplicate detection on a topic (its subscriptions' queues may have it).
    duplicates: RecentIds | None = None
    #: A copy dead-lettered to a topic passes on to its subscriptions with its ttl.
    DEAD_LETTER_TTL: ClassVar[bool] = True
    KEEPS_READ: ClassVar[bool] = False  # each subscription is a queue: what its reader accepts leaves
    HOLDS_MESSAGES: ClassVar[bool] = False  # its subscriptions do: with none, a message goes nowhere
    REFUSES_WHEN_FULL: ClassVar[bool] = True  # when any subscription queue is full (``admit``)
    EXPIRES_BY_TTL: ClassVar[bool] = True  # in its subscription queues
    KEEPS_TRANSIENT: ClassVar[bool] = False  # its subscription queues lose what was not sent durable

    @classmethod
    def make(cls, name: str, services: NodeServices, counters: NodeCounters, options: None) -> Topic:
        return cls(name, counters, services)

    def __init__(self, name: str, counters: NodeCounters, services: NodeServices | None = None) -> None:
        self.name = name
        self.counters = counters
        self.services = services
        self.subscriptions: dict[str, Subscription] = {}

    def publish(self, message: StoredMessage, now: float, matches: object = selector_matches) -> list[Queue]:
        """Copy a message to every subscription; return the queues that received it."""
        self.counters.enqueued += 1
        if not self.subscriptions:
            self.counters.dropped += 1
            return []
        targets = []
        for subscription in self.subscriptions.values():
            if subscription.rules is not None:
                copies = subscription.rules(message)
                if not copies:
                    self.counters.filtered_out += 1
                queue = subscription.queue
                if [copy for copy in copies if queue.enqueue(copy, now) is not None]:
                    targets.append(queue)
                continue
            if subscription.selector is not None and not matches(subscription.selector, message):  # type: ignore[operator]
                self.counters.filtered_out += 1
                continue
            if subscription.queue.enqueue(message, now) is not None:
                targets.append(subscription.queue)
        self.counters.delivered += len(targets)
        return targets

    def subscribe(self, key: str, durable: bool, selector: Selector | None) -> Subscription:
        """The subscription ``key``: an existing durable one, or a new one (2.3.11)."""
        subscription = self.subscriptions.get(key) if durable else None
        if subscription is not None:
            subscription.links += 1  # e.g. a client reconnecting before its old connection is noticed gone
            subscription.selector = selector
            return subscription
        services = self.services
        if services is None:
            raise RuntimeError(f"topic {self.name!r} was made without NodeServices; declare topics through the router")
        options = services.config.queue_defaults
        if options.dead_letter_address is None:  # a subscription dead-letters for its topic
            options = dataclasses.replace(options, dead_letter_address=self.name + DEFAULT_DEAD_LETTER_SUFFIX)
        queue = Queue(key, options, NodeCounters(), services.dead_letter, not durable, services.expiry_added)
        subscription = Subscription(key, queue, durable, selector)
        self.subscriptions[key] = subscription
        return subscription

    # ------------------------------------------------------- Node protocol

    def admit(self, message: StoredMessage, staged: Collection[StoredMessage] | None = None) -> Error | None:
        """Full when any subscription queue is (``drop-head`` makes room in each); limits.py."""
        for subscription in self.subscriptions.values():
            queue = subscription.queue
            if not queue.limited:
                continue
            if staged is not None and subscription.selector is not None:
                if not selector_matches(subscription.selector, message):
                    continue  # it would not reach this subscription
                staged = [m for m in staged if selector_matches(subscription.selector, m)]
            refused = queue.admit(message, staged)
            if refused is not None:
                return refused
        return None

    @property
    def limited(self) -> bool:
        """Whether any subscription queue is bounded (only then can :meth:`admit` refuse)."""
        return any(subscription.queue.limited for subscription in self.subscriptions.values())

    def configure(self, options: None, now: float) -> None:
        """Declared again: a topic has nothing to change."""

    def reserve_seq(self) -> int | None:
        return None  # a topic numbers nothing: each subscription queue numbers its own copies

    def put(self, message: StoredMessage, now: float, seq: int | None = None) -> None:
        """Copy to every subscription (``seq`` is a queue's notion: a topic numbers nothing) and dispatch."""
        for queue in self.publish(message, now):
            queue.dispatch_new(now)

    def open_consumer(self, request: ConsumerRequest) -> NodeConsumer:
        """A subscriber reads its own subscription queue: durable ones by container and link name (2.3.11)."""
        key = f"{self.name}::{request.durable_name}" if request.durable else f"{self.name}::{uuid.uuid4().hex}"
        subscription = self.subscribe(key, request.durable, request.selector)
        return request.queue_consumer(subscription.queue, browse=False, subscription=subscription, topic=self)

    def producer_credit_queue(self) -> Queue | None:
        return None  # producers to a topic are never held back by credit (its queues reject or drop)

    def queues(self) -> Iterator[Queue]:
        for subscription in self.subscriptions.values():
            yield subscription.queue

    def next_expiry(self) -> float | None:
        expiries = [e for e in (q.next_expiry() for q in self.queues()) if e is not None]
        return min(expiries) if expiries else None

    def expire(self, now: float) -> int:
        return sum(queue.expire(now) for queue in list(self.queues()))

    def dispatch(self, now: float) -> None:
        for queue in list(self.queues()):
            queue.dispatch(now)

    def purge(self) -> int:
        return sum(queue.purge() for queue in self.queues())

    def drop_transient(self) -> int:
        return sum(queue.drop_transient() for queue in list(self.queues()))

    def snapshot(self, now: float, run: Run | None = None) -> TopicSnapshot:
        return TopicSnapshot(
            name=self.name,
            subscriptions=tuple(
                SubscriptionSnapshot(s.queue.name, s.durable, s.attached, s.queue.depth)
                for s in self.subscriptions.values()
            ),
            statistics=self.counters.freeze(),
        )
