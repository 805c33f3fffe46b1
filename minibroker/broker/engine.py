"""The broker engine: nodes, routing, link semantics and the inspection API.

Single-threaded and clock-injected: the server feeds it bytes and time; it
never reads the wall clock or touches a socket.  Semantics follow OASIS AMQP
1.0 Part 3 (distribution nodes, outcomes, termini) and the AMQP 1.0 broker
paper (addresses 2.1, links 2.3, outcomes 2.3.5, flow control 2.3.9,
filters 2.3.10, subscribers and consumers 2.3.11, browsing 2.3.12, dynamic
nodes 2.3.13).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..amqp import errors as conditions
from ..amqp.errors import AMQPDecodeError
from ..amqp.message import Message
from ..amqp.messaging import (
    Accepted,
    Received,
    Rejected,
)
from ..amqp.performatives import RCV_SECOND, Error, amqp_error
from ..amqp.transactions import Coordinator, TransactionalState
from ..protocol import LinkState
from ..protocol import events as ev
from ..protocol.endpoints import Delivery, Link
from .attach import Attacher, Refusal
from .capture import Run
from .client_connection import ANONYMOUS_RELAY, BrokerConnection
from .clock import Clock, ManualClock, SystemClock
from .config import BrokerConfig, QueueOptions, StreamOptions
from .consuming import NodeConsumer
from .extension import Extension, ExtensionLink, layer_for
from .faults import FaultSet
from .injection import FaultInjector
from .limits import CreditGate, connection_refusal, link_refusal
from .links import (
    DELIVERY_FAILED,
    ConsumerLink,
    CoordinatorLink,
    ProducerLink,
    apply_outcome,
)
from .node import Node
from .permissions import Permissions
from .publish import Source, format_refusal, messages_of, relay_refusal, route_all
from .queue import Queue
from .router import NodeError, Router
from .statistics import (
    BrokerStatistics,
    FrameRecord,
    NodeCounters,
    QueueSnapshot,
    StreamSnapshot,
    TopicSnapshot,
    TransactionSnapshot,
)
from .stored import Entry, StoredMessage
from .stream import Stream
from .tap import FrameLog, FrameTrace, Tap, TraceObserver
from .topic import Topic
from .transactions import TransactionManager

__all__ = ["Broker", "BrokerConnection", "NodeError", "ANONYMOUS_RELAY"]

#: The claims-based-security node Azure Service Bus and Event Hubs clients attach first;
#: ``BrokerConfig.servicebus`` or ``.event_hubs`` turns the layer registered for it on up front.
SERVICEBUS_ADDRESS = "$cbs"



class Broker:
    """Connections, protocol-event policy, timers and the inspection API.  Owned by one thread.

    Nodes and routing belong to :attr:`router`, transactions to
    :attr:`transactions`; the broker turns each protocol event into calls on
    them and on the links it attaches.
    """

    def __init__(self, config: BrokerConfig | None = None, clock: Clock | None = None, trace: FrameTrace | None = None):
        self.config = config or BrokerConfig()
        self.clock: Clock = clock or SystemClock()
        self.connections: set[BrokerConnection] = set()
        #: The one point every inbound event and every frame in or out passes (see :mod:`.tap`).
        self.tap = Tap(self._tap_changed)
        self.frame_log: FrameLog | None = None
        if self.config.frame_log > 0:
            self.frame_log = FrameLog(self.config.frame_log, self.now)
            self.tap.install(self.frame_log)
        if trace is not None:  # called with (connection, "in" or "out", channel, performative) for every frame
            self.tap.install(TraceObserver(trace))
        self.router = Router(self.config, self.now, self._timers_changed, self._node_deleted)
        #: Grants producers of withhold-credit queues only as much credit as there is room (limits.py).
        self.credit_gate = CreditGate(self.config.link_credit)
        #: Per-user rights by address (``BrokerConfig.permissions``); None checks nothing.
        self.permissions = (
            Permissions(self.config.permissions, self.router.nodes)
            if self.config.permissions is not None
            else None
        )
        self.connections_total = 0
        self.transactions = TransactionManager(
            self.config,
            self.router,
            self.now,
            detach_consumer=self._detach_consumer,
            timers_changed=self._timers_changed,
        )
        self.attacher = Attacher(
            self.router, self.now, self.config.link_credit, self.credit_gate, on_outcome=self._consumer_outcome
        )
        self._dirty: set[BrokerConnection] = set()
        self._consumers: set[NodeConsumer] = set()
        #: Exceptions raised while handling a connection (each closed it with amqp:internal-error).
        self.errors: list[Exception] = []
        self.version = 0  # bumped after every change, for waiters
        self.on_change: Callable[[], None] | None = None
        #: Called when a new expiry may come before the timer's deadline (the server's timer task).
        self.on_timers_changed: Callable[[], None] | None = None
        #: Faults to inject (``broker.faults.detach_link(...)``, faults.py), applied by an observer
        #: on the tap that is installed, and set as ``injector``, only while one is live.
        self.faults = FaultSet()
        self.injector: FaultInjector | None = None
        FaultInjector(self, self.faults, self._timers_changed)
        if isinstance(self.clock, ManualClock):
            self.clock.subscribe(self.run_timers)
        #: A protocol layer on top (the Service Bus layer), or None: plain AMQP 1.0.
        self.extension: Extension | None = None
        if self.config.servicebus is not None or self.config.event_hubs is not None:
            self.enable_layer(SERVICEBUS_ADDRESS)

    # ------------------------------------------------------------ connections

    def connect(self, notify: Callable[[], None], peer: str = "") -> BrokerConnection:
        """A new transport: returns the object the server feeds bytes to."""
        connection = BrokerConnection(self, notify, peer)
        #: Set when the broker already serves max_connections: sent with ``close`` after ``open``.
        connection.refusal = connection_refusal(len(self.connections), self.config.max_connections)
        self.connections.add(connection)
        self.connections_total += 1
        self.flush()  # waiters on statistics().connections see it
        return connection

    def forget_connection(self, connection: BrokerConnection) -> None:
        """The connection is over: it gets no more wake-ups."""
        connection.open = False
        self.connections.discard(connection)
        self._dirty.discard(connection)
        self.flush()  # waiters on statistics().connections see it go

    def internalerror(self, connection: BrokerConnection, exc: Exception) -> None:
        """Close the connection whose handling raised, with ``amqp:internal-error``; keep the error.

        Other connections and every queued message are unaffected; ``errors``
        lets a test harness re-raise what happened inside the broker.
        """
        self.errors.append(exc)
        error = amqp_error(conditions.INTERNAL_ERROR, f"broker error: {type(exc).__name__}: {exc}")
        try:
            connection.engine.close(error)
            self.handle(connection, connection.engine.take_events())
        except Exception as second:  # the teardown itself failed: drop the connection
            self.errors.append(second)
            self.forget_connection(connection)
        self.mark_dirty(connection)
        self.flush()

    def _tap_changed(self, active: bool) -> None:
        for connection in self.connections:
            connection.engine.hook = connection if active else None

    def close_connections(self, error: Error | None = None) -> None:
        """Close every connection with ``close`` (carrying ``error``), as when the broker stops."""
        for connection in list(self.connections):
            connection.close(error)

    def mark_dirty(self, connection: BrokerConnection) -> None:
        self._dirty.add(connection)

    def flush(self) -> None:
        """Wake every connection with output queued by work done for another one."""
        if self.injector is not None:  # faults fired by this batch act now (injection.py)
            self.injector.run_pending()
        dirty, self._dirty = self._dirty, set()
        for connection in dirty:
            connection.notify()
        self.version += 1
        if self.on_change is not None:
            self.on_change()

    def now(self) -> float:
        return self.clock.now()

    # ------------------------------------------------------------------ timers

    def next_deadline(self) -> float | None:
        """The clock time at which something expires next (TTL, transaction timeout)."""
        deadlines = [self.router.next_expiry(), self.transactions.next_deadline()]
        if self.injector is not None:
            deadlines.append(self.injector.next_deadline())
        if self.extension is not None:
            deadlines.append(self.extension.next_deadline())
        present = [d for d in deadlines if d is not None]
        return min(present) if present else None

    def run_timers(self, now: float | None = None) -> None:
        """Expire what is due at ``now`` (the clock's time by default) and dispatch."""
        now = self.clock.now() if now is None else now
        self.router.expire(now)
        self.transactions.expire(now)
        if self.injector is not None:
            self.injector.run_timers(now)
        if self.extension is not None:
            self.extension.run_timers(now)
        self.flush()

    def _timers_changed(self) -> None:
        """A new deadline (an expiry, a transaction timeout) may come before the timer's."""
        if self.on_timers_changed is not None:
            self.on_timers_changed()

    # --------------------------------------- extension points (minibroker.servicebus)

    def enable_layer(self, address: str) -> Extension:
        """Turn on the layer registered for ``address`` (extension.py), e.g. Service Bus for ``$cbs``."""
        if self.extension is None:
            factory = layer_for(address)
            if factory is None:
                raise RuntimeError(f"no layer is registered for {address!r}; import the package that provides it")
            self.extension = factory(self)
        return self.extension

    def add_consumer(self, consumer: NodeConsumer) -> None:
        """Start a consumer (one an extension attached, too) and end it with its link."""
        consumer.start()
        self._consumers.add(consumer)

    # ------------------------------------------------------------------- nodes

    @property
    def queues(self) -> dict[str, Queue]:
        return self.router.queues

    @property
    def topics(self) -> dict[str, Topic]:
        return self.router.topics

    @property
    def counters(self) -> dict[str, NodeCounters]:
        return self.router.counters

    def declare_queue(self, name: str, options: QueueOptions | None = None, temporary: bool = False) -> Queue:
        """Create a queue, or return the existing one of that name."""
        return self.router.declare_queue(name, options, temporary)

    def declare_topic(self, name: str) -> Topic:
        """Create a topic, or return the existing one of that name."""
        return self.router.declare_topic(name)

    def declare_stream(self, name: str, options: StreamOptions | None = None) -> Stream:
        """Create a stream, or return the existing one of that name (applying ``options`` if given)."""
        stream = self.router.declare_stream(name, options)
        self._timers_changed()  # max_age may have come into force
        return stream

    @property
    def streams(self) -> dict[str, Stream]:
        return self.router.streams

    def delete_node(self, name: str) -> None:
        """Delete a queue or topic; links to it are detached with ``amqp:resource-deleted``."""
        self.router.delete_node(name)

    def resolve(self, address: str, capabilities: frozenset[str] = frozenset()) -> Node | None:
        """The node an address names (see :meth:`Router.resolve`)."""
        return self.router.resolve(address, capabilities)

    def _node_deleted(self, name: str, node: Node) -> None:
        error = amqp_error(conditions.RESOURCE_DELETED, f"node {name!r} was deleted")
        for consumer in list(self._consumers):
            if consumer.reads_from(node):
                consumer.connection.engine.detach_link(consumer.link, error)
                self._end_consumer(consumer, closed=True)
                consumer.connection.mark_dirty()

    def apply_outcome(self, queue: Queue, entry: Entry, state: Any, link_id: int | None) -> None:
        """Apply a terminal outcome to an acquired entry (Part 3 §3.4)."""
        apply_outcome(queue, entry, state, link_id, self.clock.now())

    # ------------------------------------------------------------ Python API

    def publish(self, address: str, message: Message | bytes) -> None:
        """Put a message on a node as if a client had sent it (``bytes``: an encoded message)."""
        self.publish_many(address, [message if isinstance(message, bytes) else message.encode()])

    def publish_many(self, address: str, payloads: Iterable[bytes]) -> int:
        """Put encoded messages on a node in one go, in order; returns how many."""
        node = self.router.resolve(address)
        if node is None:
            raise NodeError(self.router.unresolved(address))
        now = self.clock.now()
        count = 0
        publish = self.router.publisher.publish
        for payload in payloads:
            publish(node, StoredMessage(payload, now), now, Source.API)  # not limited (publish.py)
            count += 1
        self.flush()
        return count

    def purge(self, name: str | None = None) -> int:
        """Remove available messages from one queue (or all); return how many."""
        if name is not None:
            stream = self.router.streams.get(name)
            return stream.purge() if stream is not None else self.router.queue_named(name).purge()
        return sum(node.purge() for node in self.router.nodes.values())

    def reset(self) -> None:
        """Back to empty: every connection closed; nodes, transactions, counters, errors, frame log and faults gone."""
        self.close_connections(amqp_error(conditions.CONNECTION_FORCED, "broker reset"))
        self.router.clear()
        self._consumers.clear()
        self.transactions.reset()
        self.errors.clear()
        self.connections_total = 0
        if self.frame_log is not None:
            self.frame_log.clear()
        self.faults.clear()
        if self.extension is not None:
            self.extension.reset()
        self.flush()

    def drop_transient(self) -> int:
        """After a restart (every connection gone): lose non-durable messages, keep durable ones."""
        dropped = sum(node.drop_transient() for node in list(self.router.nodes.values()))
        self.flush()
        return dropped

    def queue_snapshot(self, name: str, run: Run | None = None) -> QueueSnapshot:
        """Counters now; messages copied only when read (``run`` runs that copy in this thread)."""
        return self.router.queue_snapshot(name, self.clock.now(), run)

    def topic_snapshot(self, name: str) -> TopicSnapshot:
        return self.router.topic_snapshot(name)

    def stream_snapshot(self, name: str) -> StreamSnapshot:
        return self.router.stream_snapshot(name)

    def statistics(self) -> BrokerStatistics:
        links = sum(
            len(session.links_by_handle)
            for connection in self.connections
            for session in connection.engine.sessions.values()
        )
        return BrokerStatistics(
            nodes={name: counters.freeze() for name, counters in self.router.counters.items()},
            connections=len(self.connections),
            links=links,
            connections_total=self.connections_total,
        )

    def frames(self, last: int | None = None) -> list[FrameRecord]:
        """The frame log (``BrokerConfig.frame_log``), oldest first; the ``last`` N if given."""
        if self.frame_log is None:
            raise RuntimeError("the frame log is off: start the broker with frame_log=N to keep the last N frames")
        return self.frame_log.records(last)

    def transaction_snapshots(self) -> list[TransactionSnapshot]:
        return self.transactions.snapshots(self.clock.now())

    # ------------------------------------------------------------ event loop

    def handle(self, connection: BrokerConnection, events: list[ev.Event]) -> None:
        """Act on the protocol events of one connection, then wake the others with output."""
        if self.tap.active:
            events = self.tap.events_in(connection, events)
        for event in events:
            handler = _HANDLERS[type(event)]
            handler(self, connection, event)
        self.flush()

    def _on_opened(self, connection: BrokerConnection, event: ev.ConnectionOpened) -> None:
        connection.container_id = event.container_id
        if connection.refusal is not None:  # hook: max_connections (limits.py)
            connection.close(connection.refusal)

    def _on_closed(self, connection: BrokerConnection, event: ev.ConnectionClosed) -> None:
        self.forget_connection(connection)

    def _ignore(self, connection: BrokerConnection, event: ev.Event) -> None:
        pass

    def _on_attached(self, connection: BrokerConnection, event: ev.LinkAttached) -> None:
        link = event.link
        if link.state is not LinkState.ATTACH_RCVD:
            return  # the peer detached it, or ended its session, in the same bytes
        denied = link_refusal(connection.engine, self.config.max_links)  # hook: max_links (limits.py)
        if denied is None and self.permissions is not None:  # hook: per-user permissions (permissions.py)
            denied = self.permissions.link_refusal(connection.engine.user, link)
        if denied is not None:
            connection.engine.refuse_link(link, denied)
            return
        try:
            extension = self.extension
            if extension is None and layer_for(link.address) is not None:  # e.g. an Azure Service Bus client
                extension = self.enable_layer(link.address)
            if extension is not None and extension.attach(connection, link):
                return
            if link.is_sender:
                self._attach_consumer(connection, link)
            else:
                self._attach_producer(connection, link)
        except Refusal as refusal:
            connection.engine.refuse_link(link, refusal.error)

    def _attach_consumer(self, connection: BrokerConnection, link: Link) -> None:
        self.add_consumer(self.attacher.consumer(connection, link, connection.container_id))

    def _attach_producer(self, connection: BrokerConnection, link: Link) -> None:
        target = link.target
        if isinstance(target, Coordinator):
            self.transactions.attach_coordinator(connection, link, target)
        else:
            self.attacher.producer(connection, link)

    def _on_credit(self, connection: BrokerConnection, event: ev.CreditChanged) -> None:
        consumer = event.link.context
        if isinstance(consumer, ExtensionLink):
            consumer.on_credit()
            return
        if isinstance(consumer, ConsumerLink):
            self.transactions.on_flow(consumer, event.properties)
        if consumer not in self._consumers:
            return  # not a consumer, or refused: the flow named a transaction that does not exist
        now = self.clock.now()
        consumer.pump(now)
        if event.link.drain:
            connection.engine.drained(event.link)

    def _on_window(self, connection: BrokerConnection, event: ev.SessionWindowOpened) -> None:
        now = self.clock.now()
        for link in list(event.session.links_by_handle.values()):
            if link.context in self._consumers:
                link.context.pump(now)
            elif isinstance(link.context, ExtensionLink):
                link.context.on_credit()  # e.g. an Event Hubs reader waiting for the window

    def _on_message(self, connection: BrokerConnection, event: ev.MessageReceived) -> None:
        link, delivery = event.link, event.delivery
        producer = link.context
        engine = connection.engine
        if isinstance(producer, CoordinatorLink):
            self.transactions.on_control_message(producer, delivery)
        elif isinstance(producer, ProducerLink):
            now = self.clock.now()
            refused = format_refusal(delivery)
            if refused is not None:
                if not delivery.remote_settled:
                    engine.settle(delivery, refused)
            else:
                try:
                    messages = messages_of(delivery, now)
                except (AMQPDecodeError, IndexError) as exc:
                    # The broker paper 2.2.1: misrepresented sections are a session error.
                    engine.end_session(link.session, amqp_error(conditions.DECODE_ERROR, f"malformed message: {exc}"))
                    return
                state = delivery.state
                denied = None
                if producer.address is None and self.permissions is not None:  # hook: the relay's permissions
                    denied = relay_refusal(self.permissions, connection.engine.user, messages)
                if denied is not None:
                    if not delivery.remote_settled:
                        rejected: Any = Rejected(error=denied)
                        if isinstance(state, TransactionalState):
                            rejected = TransactionalState(txn_id=state.txn_id, outcome=rejected)
                        engine.settle(delivery, rejected)
                elif isinstance(state, TransactionalState):
                    self.transactions.stage_publish(producer, delivery, messages, state.txn_id)
                else:
                    outcome = route_all(self.router.node_for_publish, self.router.publisher, producer.address, messages, now)
                    if not delivery.remote_settled:
                        engine.settle(delivery, outcome, settled=link.rcv_settle_mode != RCV_SECOND)
        elif isinstance(producer, ExtensionLink):
            producer.on_message(delivery)
        if link.credit <= self.config.link_credit // 2 and link.state is LinkState.ATTACHED:
            gated = self.credit_gate.queue_of(producer) if isinstance(producer, ProducerLink) else None
            if gated is not None:  # hook: withhold-credit (limits.py)
                self.credit_gate.top_up(gated, [producer])
            else:
                engine.grant_credit(link, self.config.link_credit)

    def _on_delivery_updated(self, connection: BrokerConnection, event: ev.DeliveryUpdated) -> None:
        owner = event.link.context
        if isinstance(owner, ConsumerLink) or owner in self._consumers:
            owner.on_outcome(event.delivery, event.state, event.settled)  # a queue's: _consumer_outcome

    def _consumer_outcome(self, consumer: ConsumerLink, delivery: Delivery, state: Any, settled: bool) -> None:
        entry = consumer.unsettled.get(delivery.delivery_id)
        if entry is None:
            return
        if isinstance(state, TransactionalState):
            self.transactions.stage_outcome(consumer, delivery, entry, state, settled)
            return
        if state is None or isinstance(state, Received):
            if not settled:
                return
            state = consumer.default_outcome or DELIVERY_FAILED
        if consumer.outcomes is not None and state.DESCRIPTOR_NAME not in consumer.outcomes:
            error = amqp_error(
                conditions.NOT_ALLOWED,
                f"outcome {state.DESCRIPTOR_NAME} is not among the outcomes this link declared: {sorted(consumer.outcomes)}",
            )
            self._detach_consumer(consumer, error)
            return
        del consumer.unsettled[delivery.delivery_id]
        now = self.clock.now()
        apply_outcome(consumer.queue, entry, state, consumer.link_id, now)
        if not settled:
            consumer.connection.engine.settle(delivery, state)
        if not isinstance(state, (Accepted, Rejected)):
            consumer.queue.dispatch(self.clock.now())  # the message is available again

    def _on_detached(self, connection: BrokerConnection, event: ev.LinkDetached) -> None:
        owner = event.link.context
        if owner in self._consumers:
            self._end_consumer(owner, event.closed)
        elif isinstance(owner, ProducerLink):
            self.credit_gate.detach(owner)
            if owner.dynamic and owner.address is not None:
                self.router.drop_temporary(owner.address)
        elif isinstance(owner, CoordinatorLink):
            self.transactions.coordinator_gone(owner)
        elif isinstance(owner, ExtensionLink):
            owner.on_detach()

    def detach_link(self, connection: BrokerConnection, link: Link, error: Error) -> None:
        """Detach any link from the broker's side with ``error``, closing it, and end it (Part 2 §2.6.5)."""
        connection.engine.detach_link(link, error)
        self._on_detached(connection, ev.LinkDetached(link, True, error))

    def _detach_consumer(self, consumer: NodeConsumer, error: Error) -> None:
        """Detach a consumer's link with ``error`` (closing it) and end it."""
        consumer.connection.engine.detach_link(consumer.link, error)
        self._end_consumer(consumer, closed=True)

    def _end_consumer(self, consumer: NodeConsumer, closed: bool) -> None:
        """A consumer's link ended: what it held goes back, a dynamic node goes with it."""
        if consumer not in self._consumers:
            return
        self._consumers.discard(consumer)
        now = self.clock.now()
        consumer.end(closed, now)
        if isinstance(consumer, ConsumerLink):
            queue = consumer.queue
            if consumer.subscription is None and consumer.dynamic:
                self.router.drop_temporary(queue.name)
            queue.dispatch(now)  # what it held is available to the others


_HANDLERS: dict[type, Callable[[Broker, BrokerConnection, Any], None]] = {
    ev.ConnectionOpened: Broker._on_opened,
    ev.ConnectionClosed: Broker._on_closed,
    ev.SessionBegun: Broker._ignore,
    ev.SessionEnded: Broker._ignore,
    ev.LinkAttached: Broker._on_attached,
    ev.LinkDetached: Broker._on_detached,
    ev.MessageReceived: Broker._on_message,
    ev.DeliveryUpdated: Broker._on_delivery_updated,
    ev.CreditChanged: Broker._on_credit,
    ev.SessionWindowOpened: Broker._on_window,
}

