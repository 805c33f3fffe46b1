"""The broker's side of links: consumers (it sends), producers (it receives), browsers.

A :class:`ConsumerLink` implements the queue's ``Consumer`` protocol: it knows
its credit, whether it may take an entry (selector, undeliverable-here) and how
to put one on the wire.  Links know their client only as a :class:`Client`
(its protocol state machine, whether it is still open, and how to ask for its output
to be written) and the time only as ``now``: nothing here reaches back into
the broker.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..amqp.messaging import Accepted, Modified, Rejected, Released
from ..amqp.performatives import SND_SETTLED
from ..protocol.endpoints import Delivery, Link
from .consuming import Client
from .filters import selector_matches
from .stored import Entry

if TYPE_CHECKING:
    from .queue import Queue
    from .selector import Selector
    from .topic import Subscription, Topic

__all__ = [
    "Client", "ConsumerLink", "CreditTransaction", "ProducerLink", "CoordinatorLink", "apply_outcome", "DELIVERY_FAILED",
    "SUPPORTED_OUTCOMES", "LinkOwner", "OutcomeHandler",
]  # fmt: skip

#: The outcomes a consumer may give (Part 3 §3.4), by descriptor name as a source lists them.
SUPPORTED_OUTCOMES = frozenset(
    {"amqp:accepted:list", "amqp:rejected:list", "amqp:released:list", "amqp:modified:list"}
)
#: Modified(delivery-failed) is what a delivery left unsettled becomes (Part 3 §3.4.5).
DELIVERY_FAILED = Modified(delivery_failed=True)
#: Delivery tags are a 4-byte big-endian counter per link (§2.8.7 allows up to 32 bytes).
_TAG = struct.Struct(">I")
_TAG_MASK = 0xFFFFFFFF


class CreditTransaction(Protocol):
    """The transaction a flow's ``txn-id`` named (Part 4 §4.4.3), as a consumer sees it."""

    def acquired(self, consumer: ConsumerLink, entry: Entry, delivery: Delivery) -> None:
        """``entry`` went out on this transaction's credit: it is acquired within it."""


#: Applies a client's outcome to a delivery from a queue: (consumer, delivery, state, settled).
OutcomeHandler = Callable[["ConsumerLink", Delivery, Any, bool], None]


class ConsumerLink:
    """A link on which the broker sends messages from one queue (or subscription queue).

    The :class:`~.consuming.NodeConsumer` of queues and topics.
    """

    #: Its credit comes back only by a flow, a session window or output room, each of which
    #: pumps it (``Queue.wake``): the queue may leave it out of the turns while it has none.
    wakes_queue = True

    def __init__(
        self,
        connection: Client,
        link: Link,
        queue: Queue,
        link_id: int,
        now: Callable[[], float],
        *,
        browse: bool,
        selector: Selector | None,
        default_outcome: Any,
        outcomes: frozenset[str] | None,
        subscription: Subscription | None = None,
        topic: Topic | None = None,
        dynamic: bool = False,
        on_outcome: OutcomeHandler | None = None,
    ) -> None:
        self.connection = connection
        self.link = link
        self.queue = queue
        self.link_id = link_id
        self.now = now
        self.browse = browse
        self.selector = selector
        self.default_outcome = default_outcome
        self.outcomes = outcomes
        self.subscription = subscription
        self.topic = topic
        self.dynamic = dynamic
        self.presettled = link.snd_settle_mode == SND_SETTLED
        self.unsettled: dict[int, Entry] = {}  # delivery-id -> entry held by the client
        #: Set by a flow carrying txn-id (Part 4 §4.4.3): what is sent on that credit is acquired in it.
        self.transaction: CreditTransaction | None = None
        self._tags = 0
        self._on_outcome = on_outcome

    # NodeConsumer protocol (consuming.py) ------------------------------

    def start(self) -> None:
        self.queue.add_consumer(self)

    def reads_from(self, node: object) -> bool:
        return self.queue is node or (self.topic is not None and self.topic is node)

    def pump(self, now: float) -> None:
        self.queue.wake(self, now)

    def on_outcome(self, delivery: Delivery, state: Any, settled: bool) -> None:
        if self._on_outcome is None:
            raise RuntimeError(f"{self!r} was built without an outcome handler; build consumers through the Attacher")
        self._on_outcome(self, delivery, state, settled)

    # Consumer protocol -------------------------------------------------

    def credit(self) -> int:
        link = self.link
        if link.session.remote_incoming_window <= 0 or link.outgoing is not None:
            return 0  # no room in the session window, or a large message still going out
        if self.connection.output_full():
            return 0  # a client that does not read holds no more than its output bound; the queue keeps the rest
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

    def payload(self, entry: Entry) -> bytes:
        """The bytes of ``entry``'s transfer (a layer's consumer may add what its clients expect)."""
        # Only a message that expires needs the time (its ttl is what is left of it).
        return entry.payload_for_delivery(self.now() if entry.expires_at is not None else 0.0)

    def deliver(self, entry: Entry) -> None:
        self._tags += 1
        payload = self.payload(entry)
        settled = self.presettled
        connection = self.connection
        delivery = connection.protocol.send_transfer(self.link, _TAG.pack(self._tags & _TAG_MASK), payload, settled)
        connection.mark_dirty()
        if self.browse:
            self.offer(None, delivery)
            return
        if settled:
            self.queue.accept(entry)
            self.offer(None, delivery)
            return
        delivery.context = entry
        self.unsettled[delivery.delivery_id] = entry
        if self.transaction is not None:
            self.transaction.acquired(self, entry, delivery)
        if connection.protocol.hook is not None:  # offer(), inlined: one test when nothing observes
            self.offer(entry, delivery)

    def offer(self, entry: Entry | None, delivery: Delivery) -> None:
        """Show the tap what was just sent (``entry``: held unsettled, or None), while it has observers."""
        if self.connection.protocol.hook is not None:  # one test when nothing observes (tap.py)
            self.connection.delivered(self, entry, delivery)

    # Ending ------------------------------------------------------------

    def end(self, closed: bool, now: float) -> None:
        """The link ended: what it held goes back as modified(delivery-failed) (Part 3 §3.4.5).

        An entry whose outcome a transaction has staged stays for the
        transaction to settle at discharge.  A subscription loses this link; a
        non-durable one (or any, on ``closed``) is removed from its topic.
        """
        queue = self.queue
        queue.remove_consumer(self)
        for entry in list(self.unsettled.values()):
            txn = entry.transaction
            if txn is not None:
                if txn.has_outcome(entry):
                    continue  # its transaction settles it at discharge
                txn.forget_acquisition(entry)
            queue.modify(entry, now, True, False, None, None)
        self.unsettled.clear()
        self.transaction = None
        subscription = self.subscription
        if subscription is not None and self.topic is not None:
            subscription.links -= 1
            if closed or not subscription.durable:  # a durable one waits for the same container and link
                self.topic.subscriptions.pop(subscription.key, None)

    def __repr__(self) -> str:
        return f"<ConsumerLink {self.link.name!r} on {self.queue.name!r}>"


class ProducerLink:
    """A link on which clients send to one node, or to any node by ``to`` (anonymous relay)."""

    def __init__(self, connection: Client, link: Link, address: str | None, dynamic: bool = False) -> None:
        self.connection = connection
        self.link = link
        self.address = address  # None: anonymous relay, route by the message's ``to``
        self.dynamic = dynamic
        #: The node ``address`` led to, found for an earlier message, and the router's
        #: ``generation`` then: valid while no node has been added or removed since.
        self.route: Any = None
        self.route_generation = -1


class CoordinatorLink:
    """A link to the transaction coordinator (Part 4 §4.2)."""

    def __init__(self, connection: Client, link: Link) -> None:
        self.connection = connection
        self.link = link


LinkOwner = ConsumerLink | ProducerLink | CoordinatorLink



def apply_outcome(queue: Queue, entry: Entry, state: Any, link_id: int | None, now: float) -> None:
    """Apply a terminal outcome to an acquired entry (Part 3 §3.4); anything else counts as failed."""
    if isinstance(state, Accepted):
        queue.accept(entry)
    elif isinstance(state, Released):
        queue.release(entry, now)
    elif isinstance(state, Modified):
        queue.modify(
            entry, now, bool(state.delivery_failed), bool(state.undeliverable_here), state.message_annotations, link_id
        )
    elif isinstance(state, Rejected):
        error = state.error
        queue.reject(entry, error.condition if error else None, error.description if error else None)
    else:
        queue.modify(entry, now, True, False, None, link_id)
