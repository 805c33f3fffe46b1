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
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..amqp.messaging import Accepted, Modified, Rejected, Released
from ..amqp.performatives import SND_SETTLED
from ..protocol.endpoints import Delivery, Link
from .consuming import Client, ConsumerRegistry
from .enqueued import ENQUEUED_TIME, with_enqueued_time
from .filters import selector_matches
from .roles import Role
from .stored import Entry

if TYPE_CHECKING:
    from .queue import Queue
    from .selector import Selector
    from .topic import Subscription, Topic

__all__ = [
    "Client", "ConsumerLink", "CreditTransaction", "ProducerLink", "CoordinatorLink", "apply_outcome", "DELIVERY_FAILED",
    "SUPPORTED_OUTCOMES", "ConsumerHost", "CoordinatorHost", "ProducerHost",
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


class ConsumerHost(Protocol):
    """The broker's consumer registry (consumers.py), as a consumer on a queue reaches it."""

    def queue_outcome(self, consumer: ConsumerLink, delivery: Delivery, state: Any, settled: bool) -> None:
        """Apply a client's outcome to a delivery from a queue (Part 3 §3.4; Part 4 §4.4.2 in a transaction)."""

    def queue_outcomes(self, consumer: ConsumerLink, deliveries: list[Delivery], state: Any, settled: bool) -> None:
        """:meth:`queue_outcome` for the deliveries one disposition gave the same outcome, in order."""

    def on_flow(self, consumer: ConsumerLink, properties: dict[Any, Any] | None) -> None:
        """A flow arrived: one naming a transaction makes what its credit takes transactional (Part 4 §4.4.3)."""

    def drop_temporary(self, name: str) -> None:
        """A dynamic node's consumer ended: the node goes with it (Part 3 §3.5.10, delete-on-close)."""


class ProducerHost(Protocol):
    """Where a producer's messages go (the event policy, policy.py): into their node or a transaction."""

    def publish(self, producer: ProducerLink, delivery: Delivery) -> None:
        """A client's message on ``producer``: into its node (or a transaction), and the outcome back."""

    def publish_many(self, producer: ProducerLink, deliveries: list[Delivery]) -> None:
        """Messages read together on ``producer``, in order: each as :meth:`publish`, at one time."""

    def producer_ended(self, producer: ProducerLink) -> None:
        """Its link ended: it holds no credit any more, and a dynamic target goes with it."""


class CoordinatorHost(Protocol):
    """The transaction coordinator (transactions.py), as its links reach it (Part 4 §4.2)."""

    def on_control_message(self, controller: CoordinatorLink, delivery: Delivery) -> None:
        """A declare or discharge arrived on the coordinator link."""

    def coordinator_gone(self, controller: CoordinatorLink) -> None:
        """The controller's link ended: its open transactions roll back (§4.3)."""


class ConsumerLink(Role):
    """A link on which the broker sends messages from one queue (or subscription queue).

    The :class:`~.consuming.NodeConsumer` of queues and topics, and its link's role (roles.py).
    """

    #: Its credit comes back only by a flow, a session window or output room, each of which
    #: pumps it (``Queue.wake``): the queue may leave it out of the turns while it has none.
    wakes_queue = True
    #: A delivery it holds unsettled waits for the client's outcome: a fault may replace that outcome.
    outcome_faults = True

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
        host: ConsumerHost | None = None,
        enqueued_time: bool = False,
    ) -> None:
        if enqueued_time:
            # Its attach desired x-opt-enqueued-time (enqueued.py): it becomes the subclass of its
            # class whose payload adds the time and whose attach offers it.  Chosen once here, so
            # a consumer that did not ask sends as before, with no per-message test.
            self.__class__ = _stamping(type(self))
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
        self._host = host
        self._registry: ConsumerRegistry | None = None
        #: Whether its queue may hand it runs (:meth:`run_room`, :meth:`deliver_run`): not a class
        #: with its own :meth:`deliver` (a Service Bus consumer locks each message it sends).
        self.runs = type(self).deliver is ConsumerLink.deliver
        #: Whether :meth:`accepts` takes every entry that was never given back with
        #: undeliverable-here (no selector of its own, no max-message-size): a queue's run then
        #: asks it only of those that were (``queue._take_run``).
        self.takes_fresh = (
            type(self).accepts is ConsumerLink.accepts
            and (selector is None or subscription is not None)
            and link.max_message_size is None
        )

    @property
    def address(self) -> str:
        """Faults aimed at the queue's name fire on what it sends."""
        return self.queue.name

    # NodeConsumer protocol (consuming.py) ------------------------------

    def start(self, registry: ConsumerRegistry) -> None:
        self._registry = registry
        self.queue.add_consumer(self)

    def reads_from(self, node: object) -> bool:
        return self.queue is node or (self.topic is not None and self.topic is node)

    def pump(self, now: float) -> None:
        self.queue.wake(self, now)

    def on_outcome(self, delivery: Delivery, state: Any, settled: bool) -> None:
        if self._host is None:
            raise RuntimeError(f"{self!r} was built without a host; build consumers through the Attacher")
        self._host.queue_outcome(self, delivery, state, settled)

    def on_outcomes(self, deliveries: list[Delivery], state: Any, settled: bool) -> None:
        if self._host is None or type(self).on_outcome is not ConsumerLink.on_outcome:
            # A layer's consumer decides outcomes in its own on_outcome: each delivery goes there.
            super().on_outcomes(deliveries, state, settled)
            return
        self._host.queue_outcomes(self, deliveries, state, settled)

    def on_flow(self, properties: dict[Any, Any] | None) -> None:
        if self._host is not None:  # a layer's consumer (built without one) takes no transactional credit
            self._host.on_flow(self, properties)

    def available(self) -> int:
        # §2.7.4 flow ``available``: what awaits credit at the sender (advisory).  Like RabbitMQ 4,
        # whose drain reply carries the queue's ready messages, a drain is answered with how many
        # messages the queue holds that no one has acquired, so a reader can learn a queue's depth
        # over plain AMQP (the Spark source bounds an ``availableNow`` run by it).  A browser moves
        # nothing, so it announces nothing.
        return 0 if self.browse else self.queue.available_count

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

    def run_room(self) -> int:
        """How many messages its queue may hand it in one run now (``Queue._dispatch_runs``): its
        credit within the session window (§2.5.6, §2.6.7); 0 to have them one at a time, as
        :meth:`deliver` sends them: a transaction's credit, a message still going out, a hook
        watching frames (the tap sees each delivery), a full output."""
        link = self.link
        if self.transaction is not None or link.outgoing is not None:
            return 0
        connection = self.connection
        if connection.protocol.hook is not None or connection.output_full():
            return 0
        return min(link.credit, link.session.remote_incoming_window)

    def deliver_run(self, entries: list[Entry]) -> int:
        """Send ``entries``, at most :meth:`run_room` of them, acquired for it by its queue in
        delivery order; return how many went out (the queue puts the rest back as they were).

        One string of frames (``Connection.send_run``) and one ``mark_dirty``; when the connection
        must write them one by one (a delivery-id among a session's first 256, a message of
        several frames), :meth:`deliver` each while the link and the session window take them.
        """
        connection = self.connection
        link = self.link
        if type(self).payload is ConsumerLink.payload:
            now = self.now()  # read only by a message that expires (its ttl is what is left of it)
            payloads = [entry.payload_for_delivery(now) for entry in entries]
        else:
            payloads = [self.payload(entry) for entry in entries]
        deliveries = connection.protocol.send_run(link, (self._tags + 1) & _TAG_MASK, payloads, self.presettled)
        if deliveries is None:
            session = link.session
            for sent, entry in enumerate(entries):
                if link.outgoing is not None or link.credit <= 0 or session.remote_incoming_window <= 0:
                    return sent  # a message of several frames took the window, or is still going out
                self.deliver(entry)
            return len(entries)
        self._tags += len(entries)
        if self.presettled:
            self.queue.accept_all(entries)
        else:
            unsettled = self.unsettled
            for delivery, entry in zip(deliveries, entries, strict=True):
                delivery.context = entry
                unsettled[delivery.delivery_id] = entry
        connection.mark_dirty()
        return len(entries)

    def offer(self, entry: Entry | None, delivery: Delivery) -> None:
        """Show the tap what was just sent (``entry``: held unsettled, or None), while it has observers."""
        if self.connection.protocol.hook is not None:  # one test when nothing observes (tap.py)
            self.connection.delivered(self, entry, delivery)

    # Link role (roles.py): its link's events go to the registry that started it --------

    def on_credit(self, properties: dict[Any, Any] | None, drain: bool) -> None:
        if self._registry is not None:
            self._registry.credit(self, properties, drain)

    def on_window(self, now: float) -> None:
        if self._registry is not None:
            self._registry.pump(self, now)

    def end(self, closed: bool, now: float) -> None:
        if self._registry is not None:
            self._registry.end(self, closed)

    # Ending ------------------------------------------------------------

    def finish(self, closed: bool, now: float) -> None:
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
        if subscription is None and self.dynamic and self._host is not None:
            self._host.drop_temporary(queue.name)
        queue.dispatch(now)  # what it held is available to the others

    # Faults (roles.py) ---------------------------------------------------

    def sent_message(self, delivery_id: int) -> Callable[[], Any] | None:
        entry = self.unsettled.get(delivery_id)
        if entry is None:
            return None  # pre-settled (or browsed): gone from the queue, nothing a fault can put back
        return entry.message.decode

    def fault_outcome(self, delivery_id: int, delivery: Delivery | None, outcome: Released | Modified) -> None:
        entry = self.unsettled.pop(delivery_id)
        now = self.now()
        apply_outcome(self.queue, entry, outcome, self.link_id, now)
        if delivery is not None:
            self.connection.protocol.settle(delivery, outcome)
        self.queue.dispatch(now)

    def __repr__(self) -> str:
        return f"<ConsumerLink {self.link.name!r} on {self.queue.name!r}>"


class _Stamping(ConsumerLink):
    """A consumer whose every delivery carries ``x-opt-enqueued-time`` (enqueued.py), mixed in
    front of a consumer's own class by :func:`_stamping`."""

    offered_capabilities = (str(ENQUEUED_TIME),)

    def payload(self, entry: Entry) -> bytes:
        return with_enqueued_time(super().payload(entry), entry.message)


#: The stamping class of each consumer class, made on first use.
_STAMPING: dict[type[ConsumerLink], type[ConsumerLink]] = {}


def _stamping(base: type[ConsumerLink]) -> type[ConsumerLink]:
    """``base`` (ConsumerLink or a layer's subclass) with :class:`_Stamping` in front: its payload,
    the layer's own included (RabbitMQ's exchange annotations), then the time.  One class per base."""
    made = _STAMPING.get(base)
    if made is None:
        made = _STAMPING[base] = cast(
            "type[ConsumerLink]", type(base.__name__, (_Stamping, base), {"__module__": base.__module__})
        )
    return made


class ProducerLink(Role):
    """A link on which clients send to one node, or to any node by ``to`` (anonymous relay)."""

    message_point = "publish"
    #: The broker grants its credit (policy.py's top-up): a ``stall_credit`` fault may withhold it.
    credit_stalls = True

    def __init__(
        self, connection: Client, link: Link, address: str | None, dynamic: bool, host: ProducerHost
    ) -> None:
        self.connection = connection
        self.link = link
        self.address = address  # None: anonymous relay, route by the message's ``to``
        self.dynamic = dynamic
        self.host = host
        #: The node ``address`` led to, found for an earlier message, and the router's
        #: ``generation`` then: valid while no node has been added or removed since.
        self.route: Any = None
        self.route_generation = -1
        # Every message it takes is settled while the event reporting it is handled (the policy's
        # publish), unless the peer asked to settle first (rcv-settle-mode second, §2.6.12).
        link.settles_at_once = not link.rcv_settle_mode

    def on_message(self, delivery: Delivery) -> None:
        self.host.publish(self, delivery)

    def on_messages(self, deliveries: list[Delivery]) -> None:
        self.host.publish_many(self, deliveries)

    def end(self, closed: bool, now: float) -> None:
        self.host.producer_ended(self)


class CoordinatorLink(Role):
    """A link to the transaction coordinator (Part 4 §4.2): its messages are declares and discharges."""

    message_point = "discharge"
    address = None  # declares and discharges name no node

    def __init__(self, connection: Client, link: Link, host: CoordinatorHost) -> None:
        self.connection = connection
        self.link = link
        self.host = host

    def on_message(self, delivery: Delivery) -> None:
        self.host.on_control_message(self, delivery)

    def end(self, closed: bool, now: float) -> None:
        self.host.coordinator_gone(self)



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
