"""The router: every node of the broker, found by address, and where messages go.

It owns the queues, topics and streams (broker paper 2.1: an address names a node),
creates them on demand when ``auto_create`` is on, makes the queues of
dynamic nodes (2.3.13) and topic subscriptions (2.3.11), routes a message
to a node and dead-letters what a queue gives up on.  It knows nothing of
connections or links: time comes in as ``now``, and it tells its owner of a
new expiry (``on_timers_changed``) and of a deleted node (``on_deleted``,
so that links to it can be detached) through callbacks, the way
:class:`~minibroker.broker.queue.Queue` takes its own.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from ..amqp import errors as conditions
from ..amqp.performatives import Error, amqp_error
from ..amqp.types import symbol
from .addresses import QUEUE_PREFIX, TOPIC_CAPABILITIES, TOPIC_PREFIX, parse_address, unresolved_reason
from .capture import Run
from .config import DEFAULT_DEAD_LETTER_SUFFIX, BrokerConfig, QueueOptions, StreamOptions
from .filters import selector_matches
from .queue import Queue
from .selector import Selector
from .statistics import (
    NodeCounters,
    QueuedMessages,
    QueueSnapshot,
    StreamMessages,
    StreamSnapshot,
    SubscriptionSnapshot,
    TopicSnapshot,
)
from .stored import Entry, StoredMessage
from .stream import Stream
from .topic import Subscription, Topic

__all__ = ["Router", "NodeError", "Node", "QUEUE_PREFIX", "TOPIC_PREFIX", "TOPIC_CAPABILITIES", "DYNAMIC_PREFIX"]

#: Addresses the broker makes up for dynamic nodes (broker paper 2.3.13) start with this.
DYNAMIC_PREFIX = "$dynamic/"

Node = Queue | Topic | Stream


class NodeError(LookupError):
    """A node that does not exist, or exists with another kind, for the Python API."""


class Router:
    """Address -> node, on-demand and dynamic nodes, routing and dead-lettering."""

    def __init__(
        self,
        config: BrokerConfig,
        now: Callable[[], float],
        on_timers_changed: Callable[[], None],
        on_deleted: Callable[[str, Queue | None, Topic | None], None],
    ) -> None:
        self.config = config
        self.now = now
        self._timers_changed = on_timers_changed
        self._on_deleted = on_deleted
        self.queues: dict[str, Queue] = {}
        self.topics: dict[str, Topic] = {}
        self.streams: dict[str, Stream] = {}
        self.counters: dict[str, NodeCounters] = {}
        #: Observes every message routed to a node: (node name, message); see ``route``.
        self.on_route: Callable[[str, StoredMessage], None] | None = None

    # -------------------------------------------------------------- nodes

    def declare_queue(self, name: str, options: QueueOptions | None = None, temporary: bool = False) -> Queue:
        """Create a queue, or return the existing one of that name."""
        if name in self.topics:
            raise NodeError(f"{name!r} is a topic; a queue and a topic cannot share a name")
        if name in self.streams:
            raise NodeError(f"{name!r} is a stream; a queue and a stream cannot share a name")
        queue = self.queues.get(name)
        if queue is None:
            if options is None:
                options = self.config.queue_defaults
                if name.endswith(DEFAULT_DEAD_LETTER_SUFFIX):
                    options = dataclasses.replace(options, dead_letter_address="")
            counters = self.counters.setdefault(name, NodeCounters())
            queue = Queue(name, options, counters, self.dead_letter, temporary, self._expiry_added)
            queue.keeps_expired = name.endswith(DEFAULT_DEAD_LETTER_SUFFIX)
            self.queues[name] = queue
        elif options is not None and options != queue.options:
            queue.options = options
        return queue

    def declare_topic(self, name: str) -> Topic:
        """Create a topic, or return the existing one of that name."""
        if name in self.queues:
            raise NodeError(f"{name!r} is a queue; a queue and a topic cannot share a name")
        if name in self.streams:
            raise NodeError(f"{name!r} is a stream; a topic and a stream cannot share a name")
        topic = self.topics.get(name)
        if topic is None:
            topic = Topic(name, self.counters.setdefault(name, NodeCounters()))
            self.topics[name] = topic
        return topic

    def declare_stream(self, name: str, options: StreamOptions | None = None) -> Stream:
        """Create a stream, or return the existing one of that name (with ``options``, if given)."""
        other = "queue" if name in self.queues else "topic" if name in self.topics else None
        if other is not None:
            raise NodeError(f"{name!r} is a {other}; a {other} and a stream cannot share a name")
        stream = self.streams.get(name)
        if stream is None:
            counters = self.counters.setdefault(name, NodeCounters())
            stream = Stream(name, options or StreamOptions(), counters, self._expiry_added)
            self.streams[name] = stream
        elif options is not None and options != stream.options:
            stream.options = options
            stream.expire(self.now())  # a smaller limit applies at once
        return stream

    def declare_dynamic(self) -> tuple[str, Queue]:
        """A temporary queue under a fresh address, for a dynamic terminus (broker paper 2.3.13)."""
        address = f"{DYNAMIC_PREFIX}{uuid.uuid4().hex}"
        return address, self.declare_queue(address, temporary=True)

    def delete_node(self, name: str) -> None:
        """Delete a queue or topic; the owner's ``on_deleted`` detaches the links to it."""
        queue = self.queues.pop(name, None)
        topic = self.topics.pop(name, None)
        stream = self.streams.pop(name, None)
        if queue is None and topic is None and stream is None:
            raise NodeError(f"no queue, topic or stream named {name!r}")
        self.counters.pop(name, None)
        self._on_deleted(name, queue, topic)

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
        subscription = topic.subscriptions.get(key) if durable else None
        if subscription is not None:
            subscription.links += 1  # e.g. a client reconnecting before its old connection is noticed gone
            subscription.selector = selector
            return subscription
        options = self.config.queue_defaults
        if options.dead_letter_address is None:  # a subscription dead-letters for its topic
            options = dataclasses.replace(options, dead_letter_address=topic.name + DEFAULT_DEAD_LETTER_SUFFIX)
        queue = Queue(key, options, NodeCounters(), self.dead_letter, not durable, self._expiry_added)
        subscription = Subscription(key, queue, durable, selector)
        topic.subscriptions[key] = subscription
        return subscription

    def resolve(self, address: str, capabilities: frozenset[str] = frozenset()) -> Node | None:
        """Find (or, with auto-create, create) the node an address names (broker paper 2.1).

        ``queue://name`` is a queue, ``topic://name`` a topic, ``stream://name`` a
        stream; a plain name is whichever exists, else a queue, or a topic when
        the terminus carries the ``topic`` capability.
        """
        name, kind, explicit = parse_address(address, capabilities)
        if not explicit:
            if name in self.queues:
                return self.queues[name]
            if name in self.topics:
                return self.topics[name]
            if name in self.streams:
                return self.streams[name]
        if kind == "queue" and name in self.queues:
            return self.queues[name]
        if kind == "topic" and name in self.topics:
            return self.topics[name]
        if kind == "stream" and name in self.streams:
            return self.streams[name]
        taken = name in self.queues or name in self.topics or name in self.streams
        if not name or not self.config.auto_create or taken:
            return None
        if kind == "stream":
            return self.declare_stream(name)
        return self.declare_queue(name) if kind == "queue" else self.declare_topic(name)

    def unresolved(self, address: str, capabilities: frozenset[str] = frozenset()) -> str:
        """Why :meth:`resolve` found no node for ``address`` (a name clash, or auto-create off)."""
        return unresolved_reason(address, self.queues, self.topics, capabilities, self.streams)

    def node_for_publish(self, address: str | None, message: StoredMessage) -> Node | Error:
        """The node a message sent to ``address`` goes to (None: by its ``to``), or the error to reject it with."""
        if address is None:
            props = message.properties
            to = props.to if props is not None else None
            if not isinstance(to, str) or not to:
                return amqp_error(conditions.INVALID_FIELD, "anonymous relay needs the message's 'to' property set")
            address = to
        node = self.resolve(address)
        if node is None:
            return amqp_error(conditions.NOT_FOUND, self.unresolved(address))
        return node

    def all_queues(self) -> Iterator[Queue]:
        """Every queue, topic subscriptions' included."""
        yield from self.queues.values()
        for topic in self.topics.values():
            for subscription in topic.subscriptions.values():
                yield subscription.queue

    def queue_named(self, name: str) -> Queue:
        """A queue, or a topic subscription's queue, by name."""
        for queue in self.all_queues():
            if queue.name == name:
                return queue
        raise NodeError(f"no queue named {name!r}; known queues: {sorted(self.queues)}")

    def clear(self) -> None:
        self.queues.clear()
        self.topics.clear()
        self.streams.clear()
        self.counters.clear()

    # ------------------------------------------------------------ routing

    def route(self, node: Node, message: StoredMessage, now: float) -> None:
        """Put a message on a node and hand it to a consumer if one can take it."""
        if self.on_route is not None:  # observation point: every message a node receives
            self.on_route(node.name, message)
        if isinstance(node, Queue):
            if node.enqueue(message, now) is not None:
                node.dispatch(now)
        elif isinstance(node, Stream):
            node.put(message, now)
            node.dispatch(now)
        else:
            for queue in node.publish(message, now, selector_matches):
                queue.dispatch(now)

    def dead_letter(self, queue: Queue, entry: Entry, reason: str, description: str | None) -> None:
        """Move an entry to its queue's dead-letter address with the reason in message-annotations."""
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
        payload = entry.payload_for_delivery(now, keep_ttl=not isinstance(target, Queue))
        queue.counters.dead_lettered += 1
        self.route(target, StoredMessage(payload, now), now)

    def _expiry_added(self, expires_at: float) -> None:
        self._timers_changed()

    # --------------------------------------------------------- snapshots

    def queue_snapshot(self, name: str, now: float, run: Run | None = None) -> QueueSnapshot:
        """Counters now; messages copied only when read (``run`` runs that copy in the broker's thread)."""
        queue = self.queues.get(name) or self.queue_named(name)
        return QueueSnapshot(
            name=queue.name,
            depth=queue.depth,
            available=queue.available_count,
            acquired=queue.depth - queue.available_count,
            consumers=len(queue.consumers),
            messages=QueuedMessages(queue.capture(run), now),
            statistics=queue.counters.freeze(),
        )

    def stream_snapshot(self, name: str) -> StreamSnapshot:
        """The stream's offsets and counters now, and its messages (shared, immutable: no copy of bytes)."""
        stream = self.streams.get(name)
        if stream is None:
            raise NodeError(f"no stream named {name!r}; known streams: {sorted(self.streams)}")
        log = stream.log
        return StreamSnapshot(
            name=name,
            first_offset=log.first_offset,
            last_offset=log.next_offset - 1,
            count=log.count,
            bytes=log.bytes,
            readers=len(stream.readers),
            options=stream.options,
            messages=StreamMessages(tuple(stream.messages())),
            statistics=stream.counters.freeze(),
        )

    def topic_snapshot(self, name: str) -> TopicSnapshot:
        topic = self.topics.get(name)
        if topic is None:
            raise NodeError(f"no topic named {name!r}; known topics: {sorted(self.topics)}")
        return TopicSnapshot(
            name=name,
            subscriptions=tuple(
                SubscriptionSnapshot(s.queue.name, s.durable, s.attached, s.queue.depth)
                for s in topic.subscriptions.values()
            ),
            statistics=topic.counters.freeze(),
        )
