"""Limits: connections, links, and queue bounds with ``reject-publish``, ``drop-head``, ``withhold-credit``.

``max_connections`` and ``max_links`` (per connection) refuse the one too
many with ``amqp:resource-limit-exceeded`` (Part 2 §2.8.15): a connection
gets ``open`` then ``close`` with that error, a link is refused (§2.6.3).
Sessions are bounded by the channel-max offered in ``open`` (§2.7.1).

A queue with ``max_depth`` (messages, acquired ones included) or
``max_bytes`` (encoded message bytes) set is full when one more message
would pass either bound.  Its ``overflow`` policy, named as RabbitMQ users
know it, says what happens then:

``reject-publish``
    the transfer is settled ``rejected`` with ``amqp:resource-limit-exceeded``
    (Part 3 §3.4.2; §2.8.15: "the peer exceeded its resource allocation");
``drop-head``
    the oldest available message is dropped to make room, and dead-lettered
    (reason ``MaxLengthExceeded``) when the queue dead-letters (its default
    ``<queue>/$DeadLetterQueue``, or ``dead_letter_address=""`` for none);
``withhold-credit``
    AMQP's own back-pressure (Part 2 §2.6.7): producers attached to the queue
    are granted only as much credit, all of them together, as there is room;
    at zero they wait, and get credit again as consumers take messages.  A
    message that arrives anyway (through the anonymous relay, which cannot be
    held back per address) is rejected as for ``reject-publish``.

A topic is full when any of its subscription queues is (``drop-head`` makes
room in each).  Limits apply to what clients send, directly or in a
transaction (publish.py names the sources and decides this once); the
Python API's ``publish``, dead-lettering and scheduled messages are not
limited.  A transactional transfer is refused on arrival when it would not
fit with what every open transaction already holds for that node, and the commit
fails with ``amqp:transaction:rollback`` if the room has gone meanwhile
(transactions.py).  The sums are in bounds.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..amqp import errors as conditions
from ..amqp.performatives import Error, amqp_error
from .bounds import room
from .links import ProducerLink

if TYPE_CHECKING:
    from ..protocol.connection import Connection
    from .node import Node
    from .queue import Queue

__all__ = ["OVERFLOW_POLICIES", "CreditGate", "connection_refusal", "link_refusal"]

OVERFLOW_POLICIES = ("reject-publish", "drop-head", "withhold-credit")


def connection_refusal(open_connections: int, max_connections: int) -> Error | None:
    """The error to close a new connection with when ``max_connections`` are already open."""
    if open_connections < max_connections:
        return None
    return amqp_error(
        conditions.RESOURCE_LIMIT_EXCEEDED,
        f"the broker serves at most {max_connections} connections at once (max_connections); close one first",
    )


def link_refusal(protocol: Connection, max_links: int) -> Error | None:
    """The error to refuse a newly attached link with when its connection already has ``max_links``.

    Counted are the links already answered, not the attaches read in the same bytes and still
    waiting for their answer: of a burst of attaches the first ``max_links`` are accepted.
    """
    if protocol.links_answered < max_links:
        return None
    return amqp_error(
        conditions.RESOURCE_LIMIT_EXCEEDED,
        f"a connection may have at most {max_links} links (max_links); detach one first",
    )


class CreditGate:
    """Grants producers of ``withhold-credit`` queues credit only as far as there is room."""

    def __init__(self, link_credit: int) -> None:
        self.link_credit = link_credit
        self._producers: dict[Queue, dict[ProducerLink, None]] = {}  # insertion-ordered sets
        self._queue_of: dict[object, Queue] = {}  # keyed by producer; any link's role may ask

    @staticmethod
    def gated(node: Node | None) -> Queue | None:
        """The queue whose room bounds the credit of producers to ``node``, if any (``withhold-credit``)."""
        return node.producer_credit_queue() if node is not None else None

    def attach(self, queue: Queue, producer: ProducerLink) -> None:
        """A producer now sends to a gated queue: grant it what room allows."""
        self._producers.setdefault(queue, {})[producer] = None
        self._queue_of[producer] = queue
        queue.on_removed = self.room_made
        self.top_up(queue, [producer])

    def queue_of(self, producer: object) -> Queue | None:
        """The gated queue a producer sends to, if it is gated (any other link's role: None)."""
        return self._queue_of.get(producer)

    def refill(self, producer: object) -> bool:
        """Top up ``producer``'s credit within its gated queue's room; False if it is not gated."""
        queue = self._queue_of.get(producer)
        if queue is None:
            return False
        self.top_up(queue, [p for p in self._producers[queue] if p is producer])
        return True

    def detach(self, producer: ProducerLink) -> None:
        """The producer's link ended: it no longer holds or waits for credit."""
        queue = self._queue_of.pop(producer, None)
        if queue is None:
            return
        producers = self._producers[queue]
        del producers[producer]
        if not producers:
            del self._producers[queue]
            queue.on_removed = None

    def top_up(self, queue: Queue, producers: Iterable[ProducerLink]) -> None:
        """Give each producer (in turn) credit up to half of ``link_credit``, within the room left.

        The credit outstanding over all producers never exceeds the room, so
        the queue passes ``max_depth`` only if a client ignores its credit.
        """
        attached = self._producers.get(queue, {})
        # Credit already granted is room already promised: subtract it, or two producers
        # could each be granted the same free slots and together pass max_depth.
        free = room(queue) - sum(p.link.credit for p in attached)
        for producer in producers:
            link = producer.link
            if free <= 0:
                return
            if link.credit > self.link_credit // 2 or not producer.connection.open:
                continue
            grant = min(self.link_credit - link.credit, free)
            producer.connection.protocol.grant_credit(link, link.credit + grant)
            producer.connection.mark_dirty()
            free -= grant
            if producer in attached:  # the next room goes to the others first
                del attached[producer]
                attached[producer] = None

    def room_made(self, queue: Queue) -> None:
        """A message left ``queue``: producers waiting for room may send again."""
        producers = self._producers.get(queue)
        if producers:
            self.top_up(queue, list(producers))
