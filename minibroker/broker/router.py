"""The router: every node of the broker, found by address, and where dead letters go.

It owns the nodes (broker paper 2.1: an address names a node), creates them
on demand when ``auto_create`` is on (each kind through its factory in
kinds.py), makes the queues of dynamic nodes (2.3.13) and dead-letters what
a queue gives up on, through the publish path (publish.py) like every other
message.  It knows nothing of connections or links and never asks a node
what kind it is beyond ``Node.KIND``: time comes in as ``now``, and it tells
its owner of a new expiry (``on_timers_changed``) and of a deleted node
(``on_deleted``, so that links to it can be detached) through callbacks.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from ..amqp import errors as conditions
from ..amqp.performatives import Error, amqp_error
from ..amqp.types import symbol
from .addresses import QUEUE_PREFIX, TOPIC_CAPABILITIES, TOPIC_PREFIX, clash, parse_address, unresolved_reason
from .config import DEFAULT_DEAD_LETTER_SUFFIX, BrokerConfig, QueueOptions, StreamOptions
from .kinds import NODE_KINDS, QUEUE, STREAM, TOPIC
from .node import Node, NodeServices
from .publish import Publisher, Source
from .stored import Entry, StoredMessage

if TYPE_CHECKING:  # each kind's module loads with its first node (kinds.py)
    from .capture import Run
    from .queue import Queue
    from .selector import Selector
    from .statistics import NodeCounters, QueueSnapshot, StreamSnapshot, TopicSnapshot
    from .stream import Stream
    from .topic import Subscription, Topic

__all__ = [
    "Router", "NodeError", "Node", "DeadLetterHook", "QUEUE_PREFIX", "TOPIC_PREFIX", "TOPIC_CAPABILITIES",
    "DYNAMIC_PREFIX",
]  # fmt: skip

#: Addresses the broker makes up for dynamic nodes (broker paper 2.3.13) start with this.
DYNAMIC_PREFIX = "$dynamic/"

#: Sees each entry a queue dead-letters before it moves: (queue, entry, reason, description).
#: One of the router's dead-letter handlers: (queue, entry, reason, description) -> whether it took
#: the dead letter (moved or dropped it itself); one that returns False may still have marked it.
DeadLetterHook = Callable[["Queue", Entry, str, "str | None"], bool]


class NodeError(LookupError):
    """A node that does not exist, or exists with another kind, for the Python API."""


class Router:
    """Address -> node, on-demand and dynamic nodes, and dead-lettering."""

    def __init__(
        self,
        config: BrokerConfig,
        now: Callable[[], float],
        on_timers_changed: Callable[[], None],
        on_deleted: Callable[[str, Node], None],
    ) -> None:
        self.config = config
        self.now = now
        self._timers_changed = on_timers_changed
        self._on_deleted = on_deleted
        #: No expiry comes before this time without the timer being told (the last deadline it
        #: read, or an earlier expiry told since); None: nothing is known to expire.
        self._deadline: float | None = None
        #: Every node by name (all kinds share one name space).
        self.nodes: dict[str, Node] = {}
        #: Bumped whenever a node is added or removed: a route cached with an older number is stale.
        self.generation = 0
        #: The nodes of each kind by name; ``queues`` and ``topics`` are two of them.
        self.by_kind: dict[str, dict[str, Any]] = {kind: {} for kind in NODE_KINDS}
        self.queues: dict[str, Queue] = self.by_kind[QUEUE]
        self.topics: dict[str, Topic] = self.by_kind[TOPIC]
        self.streams: dict[str, Stream] = self.by_kind[STREAM]
        self.counters: dict[str, NodeCounters] = {}
        #: The one way into a node (publish.py); its ``observers`` are told of every message.
        self.publisher = Publisher()
        self._on_route: Callable[[str, StoredMessage], None] | None = None
        #: Offered, in order, what a queue dead-letters before the router moves it to the queue's
        #: dead-letter address: one may take it (RabbitMQ's dead-letter exchanges route it) or only
        #: mark it (the Service Bus layer adds its properties).  Anyone registers; nothing replaces.
        self.dead_letter_handlers: list[DeadLetterHook] = []
        self.services = NodeServices(config, self.dead_letter, self._expiry_added)
        #: Names of the entities made on demand that still exist: nodes made by :meth:`resolve`,
        #: and what the layers make on first use (event hubs, Service Bus subscriptions), counted
        #: against ``BrokerConfig.max_auto_created`` (see :meth:`auto_create_refusal`).
        self.auto_created: set[str] = set()

    @property
    def on_route(self) -> Callable[[str, StoredMessage], None] | None:
        """The observer set by this name (the inspection API's ``observe``): setting it replaces that
        one among ``publisher.observers`` and leaves the others registered there alone."""
        return self._on_route

    @on_route.setter
    def on_route(self, observer: Callable[[str, StoredMessage], None] | None) -> None:
        observers = self.publisher.observers
        if self._on_route is not None and self._on_route in observers:
            observers.remove(self._on_route)
        self._on_route = observer
        if observer is not None:
            observers.append(observer)

    # -------------------------------------------------------------- nodes

    def declare(self, kind: str, name: str, options: Any = None) -> Node:
        """Create a node of ``kind`` (kinds.py) with ``options`` (its ``OPTIONS`` type; None: the
        defaults), or return the existing one of that name and kind, ``options`` applied if given."""
        cls = NODE_KINDS.get(kind)
        if cls is None:
            raise NodeError(f"no node kind {kind!r}; the kinds are {sorted(NODE_KINDS)}")
        if options is not None and (cls.OPTIONS is None or not isinstance(options, cls.OPTIONS)):
            wanted = "no options" if cls.OPTIONS is None else f"{cls.OPTIONS.__name__} or None"
            raise TypeError(f"a {kind} takes {wanted}, got {options!r}")
        node = self.nodes.get(name)
        if node is not None:
            if node.KIND != kind:
                raise NodeError(f"{name!r} is a {node.KIND}; {clash(kind, node.KIND)}")
            if options is not None:
                node.configure(options, self.now())
            return node
        from .statistics import NodeCounters  # (loaded by then: every kind's module uses it)

        node = cls.make(name, self.services, self.counters.setdefault(name, NodeCounters()), options)
        self._add(node)
        return node

    def node(self, name: str) -> Node:
        """The node named ``name`` (any kind)."""
        node = self.nodes.get(name)
        if node is None:
            raise NodeError(f"no queue, topic or stream named {name!r}")
        return node

    def _add(self, node: Node) -> None:
        self.generation += 1
        self.nodes[node.name] = node
        self.by_kind.setdefault(node.KIND, {})[node.name] = node

    def declare_queue(self, name: str, options: QueueOptions | None = None, temporary: bool = False) -> Queue:
        """Create a queue, or return the existing one of that name (taking ``options`` if given)."""
        return self._temporary(name) if temporary else cast("Queue", self.declare(QUEUE, name, options))

    def declare_topic(self, name: str) -> Topic:
        """Create a topic, or return the existing one of that name."""
        return cast("Topic", self.declare(TOPIC, name))

    def declare_stream(self, name: str, options: StreamOptions | None = None) -> Stream:
        """Create a stream, or return the existing one of that name (with ``options``, if given:
        a smaller limit drops what it no longer keeps at once)."""
        return cast("Stream", self.declare(STREAM, name, options))

    def _temporary(self, name: str) -> Queue:
        """A queue that goes when its link ends (:meth:`drop_temporary`), or the queue already of that name."""
        queue = self.queues.get(name)
        if queue is None:
            self.declare(QUEUE, name)  # makes it, or raises: the name is taken by another kind
            queue = self.queues[name]
            queue.temporary = True
        return queue

    def declare_dynamic(self) -> tuple[str, Queue]:
        """A temporary queue under a fresh address, for a dynamic terminus (broker paper 2.3.13)."""
        address = f"{DYNAMIC_PREFIX}{uuid.uuid4().hex}"
        return address, self.declare_queue(address, temporary=True)

    def delete_node(self, name: str) -> None:
        """Delete a node; the owner's ``on_deleted`` detaches the links to it."""
        node = self.nodes.pop(name, None)
        if node is None:
            raise NodeError(f"no queue, topic or stream named {name!r}")
        self.generation += 1
        del self.by_kind[node.KIND][name]
        self.counters.pop(name, None)
        self.auto_created.discard(name)
        self._on_deleted(name, node)

    def drop_temporary(self, name: str) -> None:
        """A dynamic node's link ended: the node goes, and its dead-letter queue if empty."""
        queue = self.queues.get(name)
        if queue is not None and queue.temporary:
            self.delete_node(name)
            dead_letters = self.queues.get(name + DEFAULT_DEAD_LETTER_SUFFIX)
            if dead_letters is not None and dead_letters.depth == 0:
                self.delete_node(dead_letters.name)  # nothing left in it: it goes with its queue

    def subscribe(self, topic: Topic, key: str, durable: bool, selector: Selector | None) -> Subscription:
        """The subscription ``key`` on ``topic``: an existing durable one, or a new one (2.3.11)."""
        return topic.subscribe(key, durable, selector)

    def resolve(
        self, address: str, capabilities: frozenset[str] = frozenset(), create: bool = True
    ) -> Node | None:
        """Find (or, with auto-create, create) the node an address names (broker paper 2.1).

        ``kind://name`` is a node of that kind (addresses.py); a plain name is
        whichever exists, else a node of the kind the terminus's capabilities
        ask for (a queue by default).  ``create=False`` only looks.
        """
        name, kind, explicit = parse_address(address, capabilities)
        node = self.nodes.get(name)
        if node is not None:
            return node if not explicit or node.KIND == kind else None
        if not name or not self.config.auto_create or not create or self.auto_create_refusal() is not None:
            return None
        node = self.declare(kind, name)
        self.auto_created.add(name)
        return node

    def auto_create_refusal(self) -> str | None:
        """Why no more entities may be made on demand (``BrokerConfig.max_auto_created`` reached), or None.

        A bound on what clients can make the broker hold by naming addresses: each entity
        costs memory even when empty (figures in docs/limits-and-security.md).
        """
        limit = self.config.max_auto_created
        if limit is None or len(self.auto_created) < limit:
            return None
        return (
            f"{len(self.auto_created)} entities were created on demand, the most BrokerConfig.max_auto_created "
            f"({limit}) allows: declare the entity up front, delete unused ones, or raise max_auto_created"
        )

    def unresolved(self, address: str, capabilities: frozenset[str] = frozenset()) -> str:
        """Why :meth:`resolve` found no node for ``address`` (a name clash, the bound, or auto-create off)."""
        return self.refusal(address, capabilities).description or ""

    def refusal(self, address: str, capabilities: frozenset[str] = frozenset()) -> Error:
        """The error refusing a link or message to ``address`` that :meth:`resolve` found no node for:
        ``amqp:resource-limit-exceeded`` past ``max_auto_created``, otherwise ``amqp:not-found``."""
        name, _, _ = parse_address(address, capabilities)
        limit = self.auto_create_refusal() if self.config.auto_create and name and name not in self.nodes else None
        if limit is not None:
            return amqp_error(conditions.RESOURCE_LIMIT_EXCEEDED, limit)
        kinds = {name: node.KIND for name, node in self.nodes.items()}
        return amqp_error(conditions.NOT_FOUND, unresolved_reason(address, kinds, capabilities))

    def node_for_publish(self, address: str | None, message: StoredMessage, create: bool = True) -> Node | Error:
        """The node a message sent to ``address`` goes to (None: by its ``to``), or the error to reject it with.

        ``create=False`` finds only a node that exists (auto-create waits for the message to be published).
        """
        if address is None:
            props = message.properties
            to = props.to if props is not None else None
            if not isinstance(to, str) or not to:
                return amqp_error(conditions.INVALID_FIELD, "anonymous relay needs the message's 'to' property set")
            address = to
        node = self.resolve(address, create=create)
        if node is None:
            return self.refusal(address)
        return node

    def all_queues(self) -> Iterator[Queue]:
        """Every queue, topic subscriptions' included."""
        for node in list(self.nodes.values()):
            yield from node.queues()

    def queue_named(self, name: str) -> Queue:
        """A queue, or a topic subscription's queue, by name."""
        for queue in self.all_queues():
            if queue.name == name:
                return queue
        raise NodeError(f"no queue named {name!r}; known queues: {sorted(self.queues)}")

    def clear(self) -> None:
        self.generation += 1
        self.nodes.clear()
        for table in self.by_kind.values():
            table.clear()
        self.counters.clear()
        self.auto_created.clear()

    # ------------------------------------------------------------ timers (timers.py)

    def next_deadline(self) -> float | None:
        """The clock time of the next expiry in any node (a timer participant, timers.py).

        Walks every node: the timer asks when it wakes, not per message (:meth:`_expiry_added`).
        """
        expiries = [e for e in (node.next_expiry() for node in self.nodes.values()) if e is not None]
        self._deadline = min(expiries) if expiries else None
        return self._deadline

    def run_timers(self, now: float) -> None:
        """Expire what is due in every node, then dispatch (time may have changed what can go)."""
        for node in list(self.nodes.values()):
            node.expire(now)
            node.dispatch(now)

    # ------------------------------------------------------------ routing

    def route(self, node: Node, message: StoredMessage, now: float, source: Source = Source.API) -> Error | None:
        """Put a message on a node through the publish path (publish.py); the refusal for a limited source."""
        return self.publisher.publish(node, message, now, source)

    def dead_letter(self, queue: Queue, entry: Entry, reason: str, description: str | None) -> None:
        """Move an entry to its queue's dead-letter address with the reason in message-annotations.

        ``dead_letter_handlers`` see the entry first, in order; the first that takes it ends it there.
        """
        for handler in self.dead_letter_handlers:
            if handler(queue, entry, reason, description):
                return
        address = queue.options.dead_letter_address
        if address is None:
            address = queue.name + DEFAULT_DEAD_LETTER_SUFFIX
        if not address or address == queue.name:
            return
        annotations: dict[Any, Any] = {symbol("x-opt-deadletter-reason"): reason}
        if description is not None:
            annotations[symbol("x-opt-deadletter-description")] = description
        entry.annotate(annotations)
        now = self.now()
        target = self.resolve(address) or self.declare_queue(address)
        # A queue that keeps dead letters never expires them, so the copy carries no
        # ttl (else a spent one, 0, which tells any later hop it is dead, §3.2.1).
        payload = entry.payload_for_delivery(now, keep_ttl=target.DEAD_LETTER_TTL)
        queue.counters.dead_lettered += 1
        self.publisher.publish(target, StoredMessage(payload, now), now, Source.DEAD_LETTER)

    def _expiry_added(self, expires_at: float) -> None:
        """A node holds a message expiring at ``expires_at``: tell the timer only if it comes before
        the deadline the timer already wakes for.  Each telling makes the timer walk every node
        (:meth:`next_deadline`), so telling it of every message with a ttl that arrives in an empty
        queue cost O(nodes) per message: 1.27x the broker CPU per message at 100,000 queues
        (bench ``scale``, queues_ttl).  A later expiry is found when the timer next wakes."""
        deadline = self._deadline
        if deadline is not None and expires_at >= deadline:
            return
        self._deadline = expires_at
        self._timers_changed()

    # --------------------------------------------------------- snapshots

    def snapshot(self, name: str, now: float, run: Run | None = None, kind: str | None = None) -> Any:
        """The snapshot of a node (its kind's ``SNAPSHOT``) or of a topic subscription's queue, by name;
        ``kind`` given: only a node of that kind.  Counters now; a queue's messages are copied only when
        read (``run`` runs that copy in the broker's thread)."""
        node: Node | None = self.nodes.get(name)
        if node is not None and kind is not None and node.KIND != kind:
            node = None
        if node is None and kind in (None, QUEUE):
            node = next((queue for queue in self.all_queues() if queue.name == name), None)
        if node is None:
            known = sorted(self.nodes if kind is None else self.by_kind.get(kind, ()))
            raise NodeError(f"no {kind or 'node'} named {name!r}; known {kind or 'node'}s: {known}")
        return node.snapshot(now, run)

    def queue_snapshot(self, name: str, now: float, run: Run | None = None) -> QueueSnapshot:
        return cast("QueueSnapshot", self.snapshot(name, now, run, QUEUE))

    def stream_snapshot(self, name: str) -> StreamSnapshot:
        return cast("StreamSnapshot", self.snapshot(name, self.now(), kind=STREAM))

    def topic_snapshot(self, name: str) -> TopicSnapshot:
        return cast("TopicSnapshot", self.snapshot(name, self.now(), kind=TOPIC))
