"""Topics: every subscription gets its own copy (broker paper 2.3.11, ``copy`` distribution).

Each subscription is a private :class:`~minibroker.broker.queue.Queue`, so
outcomes, redelivery and TTL work as on queues.  A durable subscription
(source durability and expiry-policy ``never``, Part 3 §3.5.3) outlives its
link until a detach with ``closed=true`` cancels it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .queue import Queue
from .statistics import NodeCounters
from .stored import StoredMessage

if TYPE_CHECKING:
    from .selector import Selector

__all__ = ["Subscription", "Topic"]


class Subscription:
    """One subscriber's queue on a topic, with the subscriber's selector."""

    def __init__(self, key: str, queue: Queue, durable: bool, selector: Selector | None) -> None:
        self.key = key
        self.queue = queue
        self.durable = durable
        self.selector = selector
        self.links = 1  # links consuming from it; a durable one stays with none

    @property
    def attached(self) -> bool:
        return self.links > 0


class Topic:
    """A topic node."""

    def __init__(self, name: str, counters: NodeCounters) -> None:
        self.name = name
        self.counters = counters
        self.subscriptions: dict[str, Subscription] = {}

    def publish(self, message: StoredMessage, now: float, matches: object) -> list[Queue]:
        """Copy a message to every subscription; return the queues that received it."""
        self.counters.enqueued += 1
        if not self.subscriptions:
            self.counters.dropped += 1
            return []
        targets = []
        for subscription in self.subscriptions.values():
            if subscription.selector is not None and not matches(subscription.selector, message):  # type: ignore[operator]
                self.counters.filtered_out += 1
                continue
            if subscription.queue.enqueue(message, now) is not None:
                targets.append(subscription.queue)
        self.counters.delivered += len(targets)
        return targets
