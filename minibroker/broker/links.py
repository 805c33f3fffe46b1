"""The broker's side of links: consumers (it sends), producers (it receives), browsers.

A :class:`ConsumerLink` implements the queue's ``Consumer`` protocol: it knows
its credit, whether it may take an entry (selector, undeliverable-here) and how
to put one on the wire.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from ..amqp.performatives import SND_SETTLED
from ..protocol.endpoints import Link
from .filters import selector_matches
from .stored import Entry

if TYPE_CHECKING:
    from .engine import Broker, BrokerConnection
    from .queue import Queue
    from .selector import Selector
    from .topic import Subscription, Topic
    from .transactions import Transaction

__all__ = ["ConsumerLink", "ProducerLink", "CoordinatorLink"]

_TAG = struct.Struct(">I")


class ConsumerLink:
    """A link on which the broker sends messages from one queue (or subscription queue)."""

    def __init__(
        self,
        broker: Broker,
        connection: BrokerConnection,
        link: Link,
        queue: Queue,
        link_id: int,
        *,
        browse: bool,
        selector: Selector | None,
        default_outcome: Any,
        outcomes: frozenset[str] | None,
        subscription: Subscription | None = None,
        topic: Topic | None = None,
        dynamic: bool = False,
    ) -> None:
        self.broker = broker
        self.connection = connection
        self.link = link
        self.queue = queue
        self.link_id = link_id
        self.browse = browse
        self.selector = selector
        self.default_outcome = default_outcome
        self.outcomes = outcomes
        self.subscription = subscription
        self.topic = topic
        self.dynamic = dynamic
        self.presettled = link.snd_settle_mode == SND_SETTLED
        self.unsettled: dict[int, Entry] = {}  # delivery-id -> entry held by the client
        self.transaction: Transaction | None = None  # set by a flow carrying txn-id
        self._tags = 0

    # Consumer protocol -------------------------------------------------

    def credit(self) -> int:
        link = self.link
        if link.session.remote_incoming_window <= 0 or link.outgoing is not None:
            return 0  # no room in the session window, or a large message still going out
        return link.credit

    def accepts(self, entry: Entry) -> bool:
        if entry.undeliverable is not None and self.link_id in entry.undeliverable:
            return False
        limit = self.link.max_message_size
        if limit is not None and len(entry.message.payload) > limit:
            return False  # larger than this receiver takes (§2.7.3): left for others
        if self.selector is not None and self.subscription is None:
            return selector_matches(self.selector, entry.message, entry.delivery_count)
        return True

    def deliver(self, entry: Entry) -> None:
        self._tags += 1
        broker = self.broker
        payload = entry.payload_for_delivery(broker.clock.now())
        settled = self.presettled
        engine = self.connection.engine
        delivery = engine.send_transfer(self.link, _TAG.pack(self._tags & 0xFFFFFFFF), payload, settled)
        broker.mark_dirty(self.connection)
        if self.browse:
            return
        if settled:
            self.queue.accept(entry)
            return
        delivery.context = entry
        self.unsettled[delivery.delivery_id] = entry
        if self.transaction is not None:
            self.transaction.acquired(self, entry, delivery)

    def __repr__(self) -> str:
        return f"<ConsumerLink {self.link.name!r} on {self.queue.name!r}>"


class ProducerLink:
    """A link on which clients send to one node, or to any node by ``to`` (anonymous relay)."""

    def __init__(self, connection: BrokerConnection, link: Link, address: str | None, dynamic: bool = False) -> None:
        self.connection = connection
        self.link = link
        self.address = address  # None: anonymous relay, route by the message's ``to``
        self.dynamic = dynamic


class CoordinatorLink:
    """A link to the transaction coordinator (Part 4 §4.2)."""

    def __init__(self, connection: BrokerConnection, link: Link) -> None:
        self.connection = connection
        self.link = link
