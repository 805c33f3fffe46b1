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
from typing import TYPE_CHECKING, Any, cast

from ..amqp import errors as conditions
from ..amqp.message import Message
from ..amqp.performatives import Error, amqp_error
from ..protocol import events as ev
from ..protocol.endpoints import Link
from .attach import Attacher
from .client_connection import ANONYMOUS_RELAY, BrokerConnection
from .clock import Clock, SystemClock
from .config import BrokerConfig, QueueOptions, StreamOptions
from .consumers import Consumers
from .consuming import NodeConsumer
from .faults import FaultSet
from .frontends import ServedConnection, front_end_for
from .kinds import QUEUE, STREAM, TOPIC
from .layers import Layer, LayerHost, Layers
from .limits import CreditGate
from .links import ConsumerLink, apply_outcome
from .logins import LoginGuard
from .node import Node
from .permissions import Permissions
from .policy import EventPolicy
from .publish import Source
from .router import NodeError, Router
from .stored import Entry, StoredMessage, clear_header_cache
from .tap import FrameLog, FrameTrace, Tap, TraceObserver
from .timers import Timers
from .transactions import TransactionManager

if TYPE_CHECKING:  # the nodes' and the snapshots' modules load with the first node, or when asked for
    from .capture import Run
    from .injection import FaultInjector
    from .queue import Queue
    from .statistics import (
        BrokerStatistics,
        FrameRecord,
        NodeCounters,
        QueueSnapshot,
        StreamSnapshot,
        TopicSnapshot,
        TransactionSnapshot,
    )
    from .stream import Stream
    from .topic import Topic

__all__ = ["Broker", "BrokerConnection", "NodeError", "ANONYMOUS_RELAY"]


class Broker:
    """The broker engine: its connections and the Python API on its parts.  Owned by one thread.

    Nodes and routing belong to :attr:`router`, transactions to
    :attr:`transactions`, consumers to :attr:`consumers`, what each protocol
    event does to :attr:`policy`, deadlines to :attr:`timers`.  The broker
    builds them, wakes connections with output (``flush``) and answers the
    inspection API.  ("Engine" names this broker; a connection's protocol
    state machine is its ``protocol``.)
    """

    def __init__(self, config: BrokerConfig | None = None, clock: Clock | None = None, trace: FrameTrace | None = None):
        # Parts that have deadlines register here (timers.py): the router's expiries and the
        # transaction timeouts now, a layer when it is enabled, the fault injector while live.
        self.timers = Timers()
        self.config = config or BrokerConfig()
        self.clock: Clock = clock or SystemClock()
        self.connections: set[BrokerConnection] = set()
        #: Connections served by another wire front end (frontends.py): AMQP 0-9-1, ...
        self.other_connections: set[ServedConnection] = set()
        #: The resource alarm's reason while raised (:meth:`block_publishers`), else None.
        self.alarm: str | None = None
        #: The one point every inbound event and every frame in or out passes (see :mod:`.tap`).
        self.tap = Tap(self._tap_changed)
        self.frame_log: FrameLog | None = None
        if self.config.frame_log > 0:
            self.frame_log = FrameLog(self.config.frame_log, self.now)
            self.tap.install(self.frame_log)
        if trace is not None:  # called with (connection, "in" or "out", channel, performative) for every frame
            self.tap.install(TraceObserver(trace))
        self.router = Router(self.config, self.now, self.timers_changed, self._node_deleted)
        #: Grants producers of withhold-credit queues only as much credit as there is room (limits.py).
        self.credit_gate = CreditGate(self.config.link_credit)
        #: Per-user rights by address (``BrokerConfig.permissions``); None checks nothing.
        self.permissions = (
            Permissions(self.config.permissions, self.router.nodes)
            if self.config.permissions is not None
            else None
        )
        self.connections_total = 0
        #: Every receiving link the broker serves (consumers.py).
        self.consumers = Consumers(self.router, self.now)
        self.transactions = TransactionManager(
            self.config,
            self.router,
            self.now,
            detach_consumer=self.consumers.detach,
            timers_changed=self.timers_changed,
        )
        self.consumers.transactions = self.transactions
        #: Failed SASL logins per peer address; the server slows an address past the bound (logins.py).
        self.logins = LoginGuard(self.config.max_login_failures, self.config.login_delay)
        self.timers.add(self.router)
        self.timers.add(self.transactions)
        self.attacher = Attacher(
            self.router, self.now, self.config.link_credit, self.credit_gate, host=self.consumers, on_stolen=self._steal
        )
        self._dirty: set[BrokerConnection | ServedConnection] = set()
        #: Times output was queued for a connection (:meth:`mark_dirty`: about one per delivery),
        #: ever: what a reader's pass counts as the work its frames made besides reading them.
        self.woken = 0
        #: Exceptions raised while handling a connection (each closed it with amqp:internal-error).
        self.errors: list[Exception] = []
        #: Called by :meth:`reset` after the nodes are gone: what a front end keeps beside them
        #: (the AMQP 0-9-1 front end's exchanges and declarations) goes too.
        self.reset_hooks: list[Callable[[], None]] = []
        #: Called with (name, node) when a node is deleted, however (a client, the API): a front end
        #: ends its own consumers of it (the AMQP 0-9-1 one sends them ``basic.cancel``).
        self.node_deleted_hooks: list[Callable[[str, Node], None]] = []
        self.version = 0  # bumped after every change, for waiters
        self.change_watchers: list[Callable[[], None]] = []  #: told after each flush (waiters)
        #: Told when a deadline may now come sooner (an expiry, a timeout): the server's timer task.
        self.timer_watchers: list[Callable[[], None]] = []
        #: Faults to inject (``broker.faults.detach_link(...)``, faults.py), applied by an observer
        #: on the tap that is installed, and set as ``injector``, only while one is live.
        self.faults = FaultSet()
        self.injector: FaultInjector | None = None
        self.faults.on_change = self._first_fault
        self.clock.subscribe(self.run_timers)  # whatever the clock: only a stepped one ever calls it
        #: What the broker does for each protocol event (policy.py).
        self.policy = EventPolicy(self)
        #: The protocol layers on top (layers.py), in the order they are offered links; none: plain AMQP 1.0.
        self.layers = Layers(self, self.config.layers, self.timers)
        self.layers.enable_configured()

    # ------------------------------------------------------------ connections

    def _first_fault(self, live: bool) -> None:
        """The fault set's ``on_change`` until a fault is first live: the injector (injection.py,
        loaded now) is made, takes the fault set's callbacks over and goes on the tap."""
        if live:
            from .injection import FaultInjector

            FaultInjector(self, self.faults, self.timers_changed)
            assert self.faults.on_change is not None  # (the injector's own)
            self.faults.on_change(live)

    def _steal(self, consumer: ConsumerLink) -> None:
        """A new attach took over this consumer's link (Part 2 §2.6.1): detach it, not closed, with
        ``amqp:link:stolen``; what it held goes back to its (durable) subscription."""
        error = amqp_error(conditions.STOLEN, f"link {consumer.link.name!r} was attached again by its container")
        consumer.connection.protocol.detach_link(consumer.link, error, closed=False)
        self.consumers.end(consumer, closed=False)
        consumer.connection.mark_dirty()

    def connect(self, notify: Callable[[], None], peer: str = "") -> BrokerConnection:
        """A new transport: returns the object the server feeds bytes to."""
        connection = BrokerConnection(self, notify, peer)
        self.connections.add(connection)
        self.connections_total += 1
        self.flush()  # waiters on statistics().connections see it
        return connection

    def accept(self, connection: BrokerConnection, header: bytes) -> ServedConnection:
        """A new transport's first 8 bytes were ``header``: the connection that serves it.

        Every transport starts as an AMQP 1.0 :class:`BrokerConnection` (:meth:`connect`), which
        serves AMQP 1.0 with or without SASL and answers unknown headers.  When a front end is
        registered for ``header`` (frontends.py) its connection takes the transport's place
        (counted once: ``connections_total`` already has it).
        """
        factory = front_end_for(header)
        if factory is None:
            return connection
        self.connections.discard(connection)
        connection.open = False
        served = factory(self, connection.notify, connection.peer)
        self.other_connections.add(served)
        self.flush()
        return served

    def opened_connections(self, besides: object = None) -> int:
        """Connections past their handshake (what ``max_connections`` counts), ``besides`` left out."""
        return sum(1 for c in self.connections if c.container_id is not None and c is not besides) + sum(
            1 for other in self.other_connections if not other.handshaking and other is not besides
        )

    @property
    def connection_count(self) -> int:
        """Open connections, whatever their protocol."""
        return len(self.connections) + len(self.other_connections)

    def forget_connection(self, connection: BrokerConnection | ServedConnection) -> None:
        """The connection is over: it gets no more wake-ups."""
        connection.open = False
        if isinstance(connection, BrokerConnection):
            self.connections.discard(connection)
        else:
            self.other_connections.discard(connection)
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
            connection.protocol.close(error)
            self.handle(connection, connection.protocol.take_events())
        except Exception as second:  # the teardown itself failed: drop the connection
            self.errors.append(second)
            self.forget_connection(connection)
        self.mark_dirty(connection)
        self.flush()

    def _tap_changed(self, active: bool) -> None:
        for connection in self.connections:
            connection.protocol.hook = connection if active else None

    def close_connections(self, error: Error | None = None) -> None:
        """Close every connection with ``close`` (carrying ``error``), as when the broker stops."""
        for connection in list(self.connections):
            connection.close(error)
        for other in list(self.other_connections):
            other.close_forced()

    def block_publishers(self, reason: str = "low on memory") -> None:
        """Raise the broker's resource alarm, as RabbitMQ does when low on memory or disk: AMQP
        0-9-1 connections that publish are told ``connection.blocked`` with ``reason`` (when
        their client announced the capability) and stop being read once they publish, until
        :meth:`unblock_publishers`.  Connections opened meanwhile are blocked too."""
        self.alarm = reason
        for other in list(self.other_connections):
            other.alarm(reason)

    def unblock_publishers(self) -> None:
        """Clear the alarm: ``connection.unblocked`` to those told, and they are read again."""
        self.alarm = None
        for other in list(self.other_connections):
            other.alarm(None)

    def mark_dirty(self, connection: BrokerConnection | ServedConnection) -> None:
        self._dirty.add(connection)
        self.woken += 1  # a unit of work a reader's pass counts (BrokerConnection.receive_data)

    def flush(self) -> None:
        """Wake every connection with output queued by work done for another one."""
        if self.injector is not None:  # faults fired by this batch act now (injection.py)
            self.injector.run_pending()
        dirty = self._dirty
        if dirty:  # a pass that queued nothing for others (e.g. a read of dispositions) makes no new set
            self._dirty = set()
            for connection in dirty:
                connection.notify()
        self.version += 1
        for watcher in self.change_watchers:
            watcher()

    def now(self) -> float:
        return self.clock.now()

    # ------------------------------------------------------------------ timers

    def next_deadline(self) -> float | None:
        """The clock time at which something expires next (TTL, transaction timeout, ...; timers.py)."""
        return self.timers.next_deadline()

    def run_timers(self, now: float | None = None) -> None:
        """Do what is due at ``now`` (the clock's time by default) and dispatch."""
        self.timers.run(self.clock.now() if now is None else now)
        self.flush()

    def timers_changed(self) -> None:
        """A new deadline (an expiry, a transaction timeout, a layer's timer) may come before the timer's."""
        for watcher in self.timer_watchers:
            watcher()

    # ---------------------------------------------------- protocol layers (layers.py)

    def layer(self, name: str) -> Layer | None:
        """The layer registered as ``name`` if it is on, else None."""
        return self.layers.get(name)

    def enable_layer(self, name: str) -> Layer:
        """Turn on the layer registered as ``name`` (and those it requires) if it is not on yet."""
        return self.layers.enable(name)

    def add_consumer(self, consumer: NodeConsumer) -> None:
        """Start a consumer (one an extension attached, too) and end it with its link."""
        self.consumers.add(consumer)

    # ------------------------------------------------------------------- nodes

    def declare(self, kind: str, name: str, options: Any = None) -> Node:
        """Create a node of ``kind`` (a key of :data:`~.kinds.NODE_KINDS`: ``"queue"``, ``"topic"``,
        ``"stream"``) with ``options`` of its ``OPTIONS`` type (None: the defaults), or return the
        existing one of that name, ``options`` applied if given."""
        node = self.router.declare(kind, name, options)
        self.timers_changed()  # a retention limit (a stream's max_age) may have come into force
        return node

    def node(self, name: str) -> Node:
        """The node named ``name``, of any kind (:class:`NodeError` if there is none)."""
        return self.router.node(name)

    def nodes(self, kind: str) -> dict[str, Any]:
        """The nodes of ``kind`` by name (live: the broker's own table)."""
        nodes = self.router.by_kind.get(kind)
        if nodes is None:
            raise NodeError(f"no node kind {kind!r}; the kinds are {sorted(self.router.by_kind)}")
        return nodes

    def snapshot(self, name: str, run: Run | None = None, kind: str | None = None) -> Any:
        """A frozen view of the node ``name`` (or of a topic subscription's queue): its kind's
        ``SNAPSHOT`` type; ``kind`` given, only a node of that kind (see :meth:`Router.snapshot`)."""
        return self.router.snapshot(name, self.clock.now(), run, kind)

    @property
    def queues(self) -> dict[str, Queue]:
        return self.nodes(QUEUE)

    @property
    def topics(self) -> dict[str, Topic]:
        return self.nodes(TOPIC)

    @property
    def streams(self) -> dict[str, Stream]:
        return self.nodes(STREAM)

    @property
    def counters(self) -> dict[str, NodeCounters]:
        return self.router.counters

    def declare_queue(self, name: str, options: QueueOptions | None = None, temporary: bool = False) -> Queue:
        """Create a queue, or return the existing one of that name."""
        return self.router.declare_queue(name, options, temporary)

    def declare_topic(self, name: str) -> Topic:
        """Create a topic, or return the existing one of that name."""
        return cast("Topic", self.declare(TOPIC, name))

    def declare_stream(self, name: str, options: StreamOptions | None = None) -> Stream:
        """Create a stream, or return the existing one of that name (applying ``options`` if given)."""
        return cast("Stream", self.declare(STREAM, name, options))

    def delete_node(self, name: str) -> None:
        """Delete a queue or topic; links to it are detached with ``amqp:resource-deleted``."""
        self.router.delete_node(name)

    def resolve(self, address: str, capabilities: frozenset[str] = frozenset()) -> Node | None:
        """The node an address names (see :meth:`Router.resolve`)."""
        return self.router.resolve(address, capabilities)

    def _node_deleted(self, name: str, node: Node) -> None:
        self.consumers.node_deleted(name, node)  # (the router is built before the registry)
        for hook in self.node_deleted_hooks:
            hook(name, node)

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
            node = self.router.nodes.get(name)
            if node is None or not node.HOLDS_MESSAGES:  # a subscription's queue; a topic is refused
                node = self.router.queue_named(name)
            return node.purge()
        return sum(node.purge() for node in self.router.nodes.values())

    def reset(self) -> None:
        """Back to empty: every connection closed; nodes, transactions, counters, errors, frame log, faults and the resource alarm gone."""
        self.close_connections(amqp_error(conditions.CONNECTION_FORCED, "broker reset"))
        self.alarm = None
        self.router.clear()
        clear_header_cache()
        self.consumers.clear()
        self.transactions.reset()
        self.logins.clear()
        self.errors.clear()
        self.connections_total = 0
        if self.frame_log is not None:
            self.frame_log.clear()
        self.faults.clear()
        self.layers.reset()
        for hook in self.reset_hooks:
            hook()
        self.flush()

    @property
    def pristine(self) -> bool:
        """Whether :meth:`reset` would change nothing: no connection since the last reset and no
        node, counter, open transaction, error, fault (or fault history) or protocol layer.

        Only lengths and identities are read, each in one step (atomic under the GIL), so
        another thread may ask while this one is idle (the pytest plugin's reset between
        tests skips its trip to the broker's thread when a test changed nothing).
        """
        return (
            not self.connections_total
            and not self.connections
            and not self.other_connections
            and not self.router.nodes
            and not self.router.counters
            and not self.transactions.open
            and not self.errors
            and self.faults.empty
            and not self.layers
        )

    def drop_transient(self) -> int:
        """After a restart (every connection gone): lose non-durable messages, keep durable ones."""
        dropped = sum(node.drop_transient() for node in list(self.router.nodes.values()))
        self.flush()
        return dropped

    def queue_snapshot(self, name: str, run: Run | None = None) -> QueueSnapshot:
        """Counters now; messages copied only when read (``run`` runs that copy in this thread)."""
        return cast("QueueSnapshot", self.snapshot(name, run, QUEUE))

    def topic_snapshot(self, name: str) -> TopicSnapshot:
        return cast("TopicSnapshot", self.snapshot(name, kind=TOPIC))

    def stream_snapshot(self, name: str) -> StreamSnapshot:
        return cast("StreamSnapshot", self.snapshot(name, kind=STREAM))

    def statistics(self) -> BrokerStatistics:
        from .statistics import BrokerStatistics  # the snapshots' module loads when first asked for

        links = sum(
            len(session.links_by_handle)
            for connection in self.connections
            for session in connection.protocol.sessions.values()
        )
        return BrokerStatistics(
            nodes={name: counters.freeze() for name, counters in self.router.counters.items()},
            connections=self.connection_count,
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
        self.act(connection, events)
        self.flush()

    def act(self, connection: BrokerConnection, events: list[ev.Event]) -> None:
        """:meth:`handle` without the wake-up: for a caller that flushes once after several."""
        if self.tap.active:
            events = self.tap.events_in(connection, events)
        self.policy.handle(connection, events)

    def detach_link(self, connection: BrokerConnection, link: Link, error: Error) -> None:
        """Detach any link from the broker's side with ``error``, closing it, and end it (Part 2 §2.6.5)."""
        self.policy.detach_link(connection, link, error)


if TYPE_CHECKING:  # the type checker proves the broker is what a layer is handed, with no import at run time

    def _broker_is_a_layer_host(broker: Broker) -> LayerHost:
        return broker
