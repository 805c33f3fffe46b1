"""Protocol-event policy: what the broker does for each event a client connection raises.

The protocol state machine (``minibroker.protocol``) turns bytes into events
(protocol/events.py); :meth:`EventPolicy.handle` looks each one up in
:data:`_HANDLERS` and acts on it through the broker's parts: links are
checked (limits.py, permissions.py) and attached (attach.py, or a layer
on top, layers.py); after that every event of a link goes to the role
its attach put in ``link.context`` (roles.py) as a method call: a
producer's messages come back here (:meth:`EventPolicy.publish`) to enter
nodes by the publish path (publish.py) or be staged in a transaction
(transactions.py); a node's consumer gets credit and ends through the
consumer registry (consumers.py), which knows whether it still reads.  The
policy never asks a role's class.  It holds no state of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..amqp import errors as conditions
from ..amqp.errors import AMQPDecodeError
from ..amqp.messaging import Rejected
from ..amqp.performatives import RCV_SECOND, Error, amqp_error
from ..amqp.transactions import Coordinator, TransactionalState
from ..protocol import LinkState
from ..protocol import events as ev
from ..protocol.endpoints import SERIAL_MOD, Delivery, Link
from .attach import Attacher, Refusal
from .client_connection import BrokerConnection
from .clock import Clock
from .config import BrokerConfig
from .consumers import Consumers
from .limits import CreditGate, connection_refusal, link_refusal
from .links import ProducerLink
from .permissions import Permissions
from .publish import ACCEPTED, Source, format_refusal, messages_of, relay_refusal, route_all
from .router import Router
from .stored import StoredMessage
from .transactions import TransactionManager

__all__ = ["EventPolicy", "PolicyHost"]

# Read per message: plain names, as an enum member read through its class costs a metaclass lookup.
_CLIENT = Source.CLIENT
_ATTACHED = LinkState.ATTACHED


class LayerLinks(Protocol):
    """The broker's layers as the policy uses them (``layers.Layers``)."""

    def offer(self, connection: BrokerConnection, link: Link) -> bool:
        """Offer an attached link to the layers (turning on those its address registered): True if one took it."""


class PolicyHost(Protocol):
    """The broker, as the event policy sees it (``minibroker.broker.engine.Broker``)."""

    config: BrokerConfig
    clock: Clock
    router: Router
    attacher: Attacher
    transactions: TransactionManager
    consumers: Consumers
    credit_gate: CreditGate
    permissions: Permissions | None
    connections: set[BrokerConnection]
    #: The protocol layers, offered each attach first (layers.py).
    layers: LayerLinks

    def opened_connections(self, besides: object = None) -> int: ...

    def forget_connection(self, connection: BrokerConnection) -> None: ...


class EventPolicy:
    """Acts on the protocol events of the broker's connections."""

    def __init__(self, broker: PolicyHost) -> None:
        self.broker = broker
        # The broker's parts, none of which is ever replaced: read once, not per event.
        self.config = broker.config
        self.clock = broker.clock
        self.router = broker.router
        self.attacher = broker.attacher
        self.transactions = broker.transactions
        self.consumers = broker.consumers
        self.credit_gate = broker.credit_gate
        self.permissions = broker.permissions
        self._find = broker.router.node_for_publish
        self._publisher = broker.router.publisher

    def handle(self, connection: BrokerConnection, events: list[ev.Event]) -> None:
        """Act on each event, in order."""
        for event in events:
            _HANDLERS[type(event)](self, connection, event)

    def detach_link(self, connection: BrokerConnection, link: Link, error: Any) -> None:
        """Detach any link from the broker's side with ``error``, closing it, and end it (Part 2 §2.6.5)."""
        connection.protocol.detach_link(link, error)
        self._on_detached(connection, ev.LinkDetached(link, True, error))

    def _on_opened(self, connection: BrokerConnection, event: ev.ConnectionOpened) -> None:
        connection.container_id = event.container_id
        # hook: max_connections (limits.py), counting only connections past their handshake: one
        # still in it holds no slot (the server bounds those by max_handshakes).
        opened = self.broker.opened_connections(besides=connection)  # AMQP 1.0 and other front ends
        # (A layer's refusal, e.g. RabbitMQ's virtual hosts, came before the open was answered:
        # BrokerConnection._open_refusal.)
        connection.refusal = connection.refusal or connection_refusal(opened, self.config.max_connections)
        if connection.refusal is not None:
            connection.close(connection.refusal)

    def _on_closed(self, connection: BrokerConnection, event: ev.ConnectionClosed) -> None:
        self.broker.forget_connection(connection)

    def _ignore(self, connection: BrokerConnection, event: ev.Event) -> None:
        pass

    def _on_attached(self, connection: BrokerConnection, event: ev.LinkAttached) -> None:
        link = event.link
        if link.state is not LinkState.ATTACH_RCVD:
            return  # the peer detached it, or ended its session, in the same bytes
        denied = link_refusal(connection.protocol, self.config.max_links)  # hook: max_links (limits.py)
        if denied is None and self.permissions is not None:  # hook: per-user permissions (permissions.py)
            denied = self.permissions.link_refusal(connection.protocol.user, link)
        if denied is not None:
            connection.protocol.refuse_link(link, denied)
            return
        try:
            if self.broker.layers.offer(connection, link):  # a layer took it (layers.py)
                return
            if link.is_sender:
                self._attach_consumer(connection, link)
            else:
                self._attach_producer(connection, link)
        except Refusal as refusal:
            connection.protocol.refuse_link(link, refusal.error)

    def _attach_consumer(self, connection: BrokerConnection, link: Link) -> None:
        self.consumers.add(self.attacher.consumer(connection, link, connection.container_id))

    def _attach_producer(self, connection: BrokerConnection, link: Link) -> None:
        target = link.target
        if isinstance(target, Coordinator):  # the target's type (Part 4 §4.2), a value, not a role
            self.transactions.attach_coordinator(connection, link, target)
        else:
            self.attacher.producer(connection, link, self)

    # A link's events after its attach go to its role.  ``link.context`` is None only for a link
    # refused at attach (the protocol may still report what the peer sent on it before its
    # detach came).

    def _on_credit(self, connection: BrokerConnection, event: ev.CreditChanged) -> None:
        role = event.link.context
        if role is not None:
            role.on_credit(event.properties, event.link.drain)

    def _on_window(self, connection: BrokerConnection, event: ev.SessionWindowOpened) -> None:
        now = self.clock.now()
        for link in list(event.session.links_by_handle.values()):
            role = link.context
            if role is not None:
                role.on_window(now)

    def _on_message(self, connection: BrokerConnection, event: ev.MessageReceived) -> None:
        link = event.link
        role = link.context
        if role is not None:
            role.on_message(event.delivery)  # a producer's comes back to publish()
        self._top_up(connection, link, role)

    def _on_messages(self, connection: BrokerConnection, event: ev.MessagesReceived) -> None:
        link = event.link
        role = link.context
        if role is not None:
            role.on_messages(event.deliveries)  # a producer's come back to publish_many()
        self._top_up(connection, link, role)

    def _top_up(self, connection: BrokerConnection, link: Link, role: Any) -> None:
        """Credit top-up after a producer's messages (one test per event, not per message)."""
        # A producer is granted link_credit again once it has used half, so a steady sender
        # never waits for a flow (one flow per link_credit/2 messages, not one per message),
        # and credit stays bounded by link_credit.  A withhold-credit queue's producers get
        # only what room there is (limits.CreditGate).
        if link.credit <= self.config.link_credit // 2 and link.state is _ATTACHED:
            if not self.credit_gate.refill(role):  # hook: withhold-credit (limits.py)
                connection.protocol.grant_credit(link, self.config.link_credit)

    # ProducerHost (links.py): what a producer's messages and its end come to ------------

    def producer_ended(self, producer: ProducerLink) -> None:
        self.credit_gate.detach(producer)
        if producer.dynamic and producer.address is not None:
            self.router.drop_temporary(producer.address)

    def publish(self, producer: ProducerLink, delivery: Delivery) -> None:
        """A client's message on a sending link: into its node (or a transaction), and the outcome back."""
        self._publish(producer, delivery, self.clock.now())

    def publish_many(self, producer: ProducerLink, deliveries: list[Delivery]) -> None:
        """Messages read together on a sending link: each as :meth:`publish`, with one reading of the clock.

        On a link to one node that settles at once (``Link.settles_at_once``), the usual message
        (format 0, no state, unsettled) is published here and the accepted ones with consecutive
        delivery-ids are settled as one range (``settle_received``); any other goes to
        :meth:`_publish`, which decides it as for a lone message.
        """
        now = self.clock.now()
        link = producer.link
        address = producer.address
        if address is None or not link.settles_at_once:
            for delivery in deliveries:
                self._publish(producer, delivery, now)
            return
        protocol = producer.connection.protocol
        publish = self._publisher.publish
        router = self.router
        first = last = -1  # the accepted deliveries not yet settled: first..last (none while first < 0)
        for delivery in deliveries:
            delivery_id = delivery.delivery_id
            if not (delivery.message_format or delivery.remote_settled or delivery.state is not None):
                try:
                    message = StoredMessage(delivery.payload, now)
                    message.check_sections()  # what messages_of does
                except (AMQPDecodeError, IndexError):
                    message = None  # _publish below rejects it, and says why
                if message is not None:
                    if producer.route_generation == router.generation:
                        # The node found for an earlier message: no node was added or removed since.
                        refusal = publish(producer.route, message, now, _CLIENT)
                    else:
                        node = self._route(producer, address, message)
                        refusal = node if isinstance(node, Error) else publish(node, message, now, _CLIENT)
                    if refusal is None:
                        if first >= 0 and (last + 1) % SERIAL_MOD == delivery_id:
                            last = delivery_id
                            continue
                        if first >= 0:
                            protocol.settle_received(link, first, last, ACCEPTED)
                        first = last = delivery_id
                        continue
                    if first >= 0:
                        protocol.settle_received(link, first, last, ACCEPTED)
                        first = -1
                    protocol.settle(delivery, Rejected(error=refusal))
                    continue
            if first >= 0:  # answered in order: the range before this delivery first
                protocol.settle_received(link, first, last, ACCEPTED)
                first = -1
            self._publish(producer, delivery, now)
        if first >= 0:
            protocol.settle_received(link, first, last, ACCEPTED)

    def _route(self, producer: ProducerLink, address: str, message: StoredMessage) -> Any:
        """The node ``address`` leads to (created if auto-create says so), kept on the producer for
        its next messages; or the error refusing ``message``."""
        node = self._find(address, message)
        if not isinstance(node, Error):
            producer.route, producer.route_generation = node, self.router.generation
        return node

    def _publish(self, producer: ProducerLink, delivery: Delivery, now: float) -> None:
        protocol = producer.connection.protocol
        # Format 0 (a plain AMQP message) is all but every transfer: only another is looked up.
        refused = format_refusal(delivery) if delivery.message_format else None
        if refused is not None:
            if not delivery.remote_settled:  # a pre-settled send is owed no answer (§3.4)
                protocol.settle(delivery, refused)
            return
        state = delivery.state
        try:
            messages = messages_of(delivery, now)
        except (AMQPDecodeError, IndexError) as exc:
            # A bad message is that message's problem, not the session's: the frames
            # were well formed, so reject this transfer and keep the session.
            if not delivery.remote_settled:
                error = amqp_error(conditions.DECODE_ERROR, f"malformed message, not stored: {exc}")
                bad: Any = Rejected(error=error)
                if isinstance(state, TransactionalState):
                    bad = TransactionalState(txn_id=state.txn_id, outcome=bad)
                protocol.settle(delivery, bad)
            return
        address = producer.address
        if address is None and self.permissions is not None:  # hook: the relay's permissions
            denied = relay_refusal(self.permissions, protocol.user, messages)
            if denied is not None:
                if not delivery.remote_settled:
                    rejected: Any = Rejected(error=denied)
                    if isinstance(state, TransactionalState):
                        rejected = TransactionalState(txn_id=state.txn_id, outcome=rejected)
                    protocol.settle(delivery, rejected)
                return
        if not messages:
            return  # an empty batch: nothing to route, nothing to answer
        # A transfer whose state names a transaction is staged, not published (Part 4 §4.4.1): the
        # ``is not None`` test first, as nearly every transfer has no state at all.
        if state is not None and isinstance(state, TransactionalState):
            self.transactions.stage_publish(producer, delivery, messages, state.txn_id)
            return
        if address is not None and len(messages) == 1 and producer.route_generation == self.router.generation:
            # The link's node, as found for its last message: no node was added or removed since.
            refusal = self._publisher.publish(producer.route, messages[0], now, _CLIENT)
            outcome: Any = ACCEPTED if refusal is None else Rejected(error=refusal)
        else:
            outcome = route_all(self._find, self._publisher, address, messages, now)
            if address is not None:
                node = self._find(address, messages[0], False)
                if not isinstance(node, Error):
                    producer.route, producer.route_generation = node, self.router.generation
        if not delivery.remote_settled:
            protocol.settle(delivery, outcome, settled=delivery.link.rcv_settle_mode != RCV_SECOND)

    def _on_delivery_updated(self, connection: BrokerConnection, event: ev.DeliveryUpdated) -> None:
        role = event.link.context
        if role is not None:
            role.on_outcome(event.delivery, event.state, event.settled)  # a queue's: Consumers.queue_outcome

    def _on_deliveries_updated(self, connection: BrokerConnection, event: ev.DeliveriesUpdated) -> None:
        role = event.link.context
        if role is not None:
            role.on_outcomes(event.deliveries, event.state, event.settled)  # a queue's: Consumers.queue_outcomes

    def _on_detached(self, connection: BrokerConnection, event: ev.LinkDetached) -> None:
        role = event.link.context
        if role is not None:
            role.end(event.closed, self.clock.now())


_HANDLERS: dict[type, Callable[[EventPolicy, BrokerConnection, Any], None]] = {
    ev.ConnectionOpened: EventPolicy._on_opened,
    ev.ConnectionClosed: EventPolicy._on_closed,
    ev.SessionBegun: EventPolicy._ignore,
    ev.SessionEnded: EventPolicy._ignore,
    ev.LinkAttached: EventPolicy._on_attached,
    ev.LinkDetached: EventPolicy._on_detached,
    ev.MessageReceived: EventPolicy._on_message,
    ev.MessagesReceived: EventPolicy._on_messages,
    ev.DeliveryUpdated: EventPolicy._on_delivery_updated,
    ev.DeliveriesUpdated: EventPolicy._on_deliveries_updated,
    ev.CreditChanged: EventPolicy._on_credit,
    ev.SessionWindowOpened: EventPolicy._on_window,
}

