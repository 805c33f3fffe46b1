"""The Service Bus layer: what Azure Service Bus clients need on top of the AMQP broker.

It is enabled by ``BrokerConfig(servicebus=ServiceBusOptions(...))``, or
with default options when a client first attaches ``$cbs`` (every Service
Bus SDK authenticates that way before anything else).  Only connections that
attached ``$cbs`` get Service Bus semantics; plain AMQP clients of the same
broker see plain AMQP 1.0.

* ``$cbs``: claims-based security; every ``put-token`` is answered 202.
* Entity addresses (``amqps://host:port/orders``, ``orders/$DeadLetterQueue``,
  ``topic/Subscriptions/name``) are reduced to nodes; a subscription is a
  named, durable subscription queue of its topic.
* Senders get :class:`~minibroker.servicebus.sending.SenderLink` links: the
  layer stamps message-ids and holds scheduled messages, then publishes
  through the broker's publish path.
* Receivers get :class:`~minibroker.servicebus.consumer.ServiceBusConsumer`
  links (peek-lock with lock tokens, or receive-and-delete), or
  :class:`~minibroker.servicebus.sessions.SessionConsumer` links for sessions.
* Each entity's ``$management`` node (:mod:`~minibroker.servicebus.management`).
* Timers on the broker's clock: message and session lock expiry, scheduled messages.

The parts below the layer do not know it: they call down into
:class:`~minibroker.servicebus.settlement.Settlement` to settle, and the
layer sees the broker only through :class:`~minibroker.broker.layers.LayerHost`; which connections
authenticated is the shared claims component's (:mod:`.claims`), which takes ``$cbs``.
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections import deque
from typing import Any, NamedTuple

from ..amqp import errors as conditions
from ..amqp.messaging import Accepted, Properties, Rejected
from ..amqp.performatives import RCV_FIRST, Error, amqp_error
from ..amqp.types import symbol, ulong
from ..broker.client_connection import BrokerConnection, ConnectionIdentity
from ..broker.layers import LayerHost
from ..broker.node import Node
from ..broker.permissions import ANONYMOUS_USER
from ..broker.publish import Source
from ..broker.queue import Queue
from ..broker.router import NodeError
from ..broker.stored import StoredMessage
from ..broker.topic import SubscriptionRules, Topic
from ..protocol import LinkState
from ..protocol.endpoints import Link
from .addresses import SUBSCRIPTIONS, Entity, node_name, parse_address
from .claims import claims_of
from .consumer import ServiceBusConsumer
from .duplicates import MAX_ID_LENGTH, DuplicateDetection, id_too_long
from .management import Management
from .options import SERVICE_BUS_MESSAGE_SIZE, EntityProperties, ServiceBusOptions
from .requests import Handler, ReplyLink, RequestLink
from .rules import Rules, RuleSet
from .scheduler import Scheduler
from .sections import SCHEDULED_ENQUEUE_TIME, with_properties
from .sending import SenderLink
from .sessions import LOCKED_UNTIL_UTC, SESSION_FILTER, SESSION_LOCK_LOST, SessionConsumer, Sessions, ticks
from .settlement import Settlement

__all__ = ["ServiceBusLayer"]

TIMEOUT = "com.microsoft:timeout"
SESSION_CANNOT_BE_LOCKED = "com.microsoft:session-cannot-be-locked"
#: Service Bus forwards a message through at most 4 entities.
MAX_FORWARD_HOPS = 4
#: The link property in which a client gives its operation timeout (milliseconds).
OPERATION_TIMEOUT = symbol("com.microsoft:timeout")
#: How long a session receiver's attach waits for a free session when its client names no timeout
#: (seconds on the broker's clock; the SDKs' default operation timeout).
SESSION_WAIT = 60.0
#: Receivers that may wait for a session at once: each holds an unanswered attach, so they are bounded.
MAX_WAITING = 1000
#: The link property in which Service Bus tells a sender the largest batch it takes; azure-servicebus
#: sizes ``create_message_batch()`` from it (without it: 256 KB, or 1 MB once max-message-size is).
MAX_BATCH_SIZE = symbol("com.microsoft:max-message-batch-size")
#: Largest batch by tier: a Premium entity takes messages up to 100 MB, but batches of at most 1 MB
#: (Azure Service Bus, "Large message support": batching is not supported above 1 MB).
BATCH_SIZE = {"basic": 256 * 1024, "standard": 256 * 1024, "premium": 1024 * 1024}


class _Waiting(NamedTuple):
    connection: BrokerConnection
    link: Link
    queue: Queue
    deadline: float


class ServiceBusLayer:
    """Service Bus semantics for the connections that authenticated through ``$cbs``."""

    #: Connections present themselves as the broker's own.
    identity: ConnectionIdentity | None = None

    def __init__(self, broker: LayerHost, options: ServiceBusOptions | None = None) -> None:
        self.broker = broker
        #: Which connections attached ``$cbs`` (the component shared with the Event Hubs layer).
        self.claims = claims_of(broker)
        self.options = options or ServiceBusOptions()
        #: What senders' attach answers advertise: the tier's quota (Azure Service Bus quotas).
        self.max_message_size = SERVICE_BUS_MESSAGE_SIZE[self.options.tier]
        self.settlement = Settlement(self.options, self.broker.timers_changed)
        self.sessions = Sessions(self._session_unlocked, self.options.max_session_state_size)
        self.scheduler = Scheduler(self._enqueue_scheduled, self.broker.timers_changed)
        self.rules = Rules(self.options.rules)
        self.duplicates = DuplicateDetection()
        self._forward_depth = 0  # subscriptions forwarding into topics, nested: bounded by MAX_FORWARD_HOPS
        self._waiting: list[_Waiting] = []  # session receivers waiting for a free session, oldest first
        self._link_ids = itertools.count(-1, -1)  # apart from the broker's own (positive) link ids
        broker.router.dead_letter_handlers.append(self.settlement.dead_lettering)
        self._declare()

    def now(self) -> float:
        return self.broker.now()

    def _declare(self) -> None:
        for name in self.options.queues:
            self.settlement.entity_queue(self.broker.declare_queue(name), self.options.entities.get(name))
        for topic, subscriptions in self.options.topics.items():
            self.broker.declare_topic(topic)
            for subscription in subscriptions:
                self.subscription_queue(topic, subscription, create=True)

    # ------------------------------------------------------------ attach

    def opened(self, connection: BrokerConnection, hostname: str | None) -> Error | None:
        return None  # any hostname: the SDKs name the namespace's host

    def attach(self, connection: BrokerConnection, link: Link) -> bool:
        address = link.address
        if not isinstance(address, str):
            return False
        if not self.claims.authenticated(connection):
            return False
        entity = parse_address(address)
        if entity.management:
            handler = Management(self, entity, connection.engine.user).handle
            self._attach_pair(connection, link, node_name(address), handler, "statusCode", "statusDescription")
            return True
        if link.is_sender:
            self._attach_receiver(connection, link, entity)
            return True
        self._attach_sender(connection, link, entity)
        return True

    def _attach_sender(self, connection: BrokerConnection, link: Link, entity: Entity) -> None:
        engine = connection.engine
        if entity.subscription is not None or entity.dead_letter:
            engine.refuse_link(
                link, amqp_error(conditions.NOT_ALLOWED, f"cannot send to {entity.node!r}: send to its queue or topic")
            )
            return
        if self.broker.resolve(entity.name) is None:
            refusal = self.broker.router.refusal(entity.name)
            if refusal.condition == conditions.NOT_FOUND:
                refusal.description = f"no queue or topic {entity.name!r} (auto-create is off; declare it in ServiceBusOptions)"
            engine.refuse_link(link, refusal)
            return
        link.context = SenderLink(connection, link, entity.name, self, self.now)
        # Service Bus settles what it receives at once (the SDK asks for mode second but
        # waits for a settled disposition): answer the attach with rcv-settle-mode first.
        # max-message-size is the tier's quota (ServiceBusOptions.tier); the service, like AMQP
        # (Part 2 §2.7.3), ends the link of a larger message with amqp:link:message-size-exceeded.
        link.rcv_settle_mode = RCV_FIRST
        engine.accept_link(
            link,
            source=link.source,
            target=link.target,
            max_message_size=self.max_message_size,
            properties={MAX_BATCH_SIZE: ulong(BATCH_SIZE[self.options.tier])},
        )
        engine.grant_credit(link, self.broker.config.link_credit)

    def _attach_pair(
        self, connection: BrokerConnection, link: Link, address: str, handler: Handler, status: str, description: str
    ) -> None:
        engine = connection.engine
        if link.is_sender:
            link.context = ReplyLink(connection, link, address)
            engine.accept_link(link, source=link.source, target=link.target)
        else:
            link.context = RequestLink(connection, link, address, handler, status, description)
            engine.accept_link(link, source=link.source, target=link.target)
            engine.grant_credit(link, self.broker.config.link_credit)

    def _attach_receiver(self, connection: BrokerConnection, link: Link, entity: Entity) -> None:
        engine = connection.engine
        queue = self.queue_for(entity)
        if isinstance(queue, str):
            limited = queue == self.broker.router.auto_create_refusal()
            engine.refuse_link(link, amqp_error(conditions.RESOURCE_LIMIT_EXCEEDED if limited else conditions.NOT_FOUND, queue))
            return
        filters = getattr(link.source, "filter", None) or {}
        if SESSION_FILTER in filters:
            self._attach_session_receiver(connection, link, queue, filters[SESSION_FILTER])
            return
        properties = self.settlement.properties(queue)
        if properties is not None and properties.requires_session and not entity.dead_letter:
            reason = f"{entity.node!r} requires sessions: receive from a session (a session id, or the next available)"
            engine.refuse_link(link, amqp_error(conditions.NOT_ALLOWED, reason))
            return
        consumer = ServiceBusConsumer(self.settlement, connection, link, queue, next(self._link_ids), self.now)
        link.context = consumer
        engine.accept_link(link, source=link.source, target=link.target)
        self.broker.add_consumer(consumer)

    def _attach_session_receiver(self, connection: BrokerConnection, link: Link, queue: Queue, wanted: Any) -> None:
        """Lock a session (the one asked for, or any free one with messages) to this receiver."""
        engine = connection.engine
        session = wanted if isinstance(wanted, str) else self.sessions.free_session(queue)
        if session is None:
            # As the service does: the attach waits for a session to become free, up to the
            # client's operation timeout (a link property, in milliseconds) or the service's.
            timeout = (link.attach.properties or {}).get(OPERATION_TIMEOUT)
            wait = int(timeout) / 1000 if isinstance(timeout, int) and timeout > 0 else SESSION_WAIT
            if len(self._waiting) >= MAX_WAITING:
                engine.refuse_link(link, amqp_error(conditions.RESOURCE_LIMIT_EXCEEDED, "too many receivers wait for a session"))
                return
            self._waiting.append(_Waiting(connection, link, queue, self.now() + wait))
            self.broker.timers_changed()
            return
        self._lock_session(connection, link, queue, session)

    def _lock_session(self, connection: BrokerConnection, link: Link, queue: Queue, session: str) -> None:
        engine = connection.engine
        if self.sessions.holder(queue, session) is not None:
            engine.refuse_link(
                link, amqp_error(SESSION_CANNOT_BE_LOCKED, f"session {session!r} of {queue.name!r} is locked by another receiver")
            )
            return
        until = self.now() + self.settlement.lock_duration(queue)
        consumer = SessionConsumer(
            self.settlement, self.sessions, connection, link, queue, next(self._link_ids), self.now, session, until
        )
        link.context = consumer
        self.sessions.lock(consumer)
        self.broker.timers_changed()
        source = dataclasses.replace(link.source, filter={**link.source.filter, SESSION_FILTER: session})
        engine.accept_link(link, source=source, target=link.target, properties={LOCKED_UNTIL_UTC: ticks(until)})
        self.broker.add_consumer(consumer)

    # ----------------------------------------------------------- entities

    def queue_for(self, entity: Entity) -> Queue | str:
        """The queue an entity's messages are received from, or why there is none."""
        auto_create = self.broker.config.auto_create
        if entity.subscription is not None and not entity.dead_letter:
            try:
                queue = self.subscription_queue(entity.name, entity.subscription, create=auto_create, on_demand=True)
            except NodeError as exc:  # e.g. a queue of the topic's name, auto-created by an earlier sender
                return f"{exc}; declare the topic in ServiceBusOptions.topics before anything is sent to it"
            if queue is None:
                limit = self.broker.router.auto_create_refusal() if auto_create else None
                return limit or f"no subscription {entity.node!r} (auto-create is off; declare it in ServiceBusOptions.topics)"
            return queue
        node = self.broker.resolve(entity.node)
        if isinstance(node, Topic):
            return f"{entity.name!r} is a topic: receive from one of its subscriptions, {entity.name}/{SUBSCRIPTIONS}/<name>"
        if node is None:
            limit = self.broker.router.auto_create_refusal() if auto_create else None
            return limit or f"no queue {entity.node!r} (auto-create is off; declare it in ServiceBusOptions.queues)"
        if not isinstance(node, Queue):
            return f"{entity.name!r} is a {node.KIND}, not a queue"
        return self.settlement.entity_queue(node, self.options.entities.get(node.name))

    def node_for(self, entity: Entity) -> Queue | Topic | str:
        """The node an entity's ``$management`` acts on: its queue, or a topic for a sender's requests."""
        if entity.subscription is None and not entity.dead_letter:
            node = self.broker.topics.get(entity.name)
            if node is not None:
                return node
        return self.queue_for(entity)

    def refusal(self, user: str | None, right: str, address: str) -> str | None:
        """Why ``user`` may not use ``right`` on ``address`` (``BrokerConfig.permissions``), or None."""
        permissions = self.broker.permissions
        if permissions is None or permissions.allows(user, right, address):
            return None
        return f"user {user or ANONYMOUS_USER!r} has no {right!r} permission on {address!r}"

    def subscription_queue(self, topic_name: str, name: str, create: bool, on_demand: bool = False) -> Queue | None:
        """A topic's named subscription (durable: it keeps messages while no receiver is attached).

        ``on_demand``: a client named it, so what is created counts against
        ``BrokerConfig.max_auto_created`` (None once that is reached).
        """
        router = self.broker.router
        topic = self.broker.topics.get(topic_name)
        if topic is None:
            if not create or (on_demand and router.auto_create_refusal() is not None):
                return None
            topic = self.broker.declare_topic(topic_name)
            if on_demand:
                router.auto_created.add(topic_name)
        key = f"{topic_name}/{SUBSCRIPTIONS}/{name}"
        subscription = topic.subscriptions.get(key)
        if subscription is None:
            if not create or (on_demand and router.auto_create_refusal() is not None):
                return None
            if on_demand:
                router.auto_created.add(key)
            subscription = router.subscribe(topic, key, True, None)
            subscription.links = 0  # it exists without receivers, as a configured subscription does
            ruleset = self.rules.for_subscription(topic_name, name, key, self.now())
            properties = self.options.entities.get(f"{topic_name}/{name}")
            forward_to = properties.forward_to if properties is not None else None
            subscription.rules = ruleset if not forward_to else self._forwarding(ruleset, forward_to)
            # Its dead letters stay its own: <topic>/Subscriptions/<name>/$DeadLetterQueue.
            queue = subscription.queue
            queue.options = dataclasses.replace(queue.options, dead_letter_address=None)
        return self.settlement.entity_queue(subscription.queue, self._subscription_properties(topic_name, name))

    def _subscription_properties(self, topic: str, name: str) -> EntityProperties | None:
        """A subscription's settings; its topic's time-to-live caps its own."""
        own = self.options.entities.get(f"{topic}/{name}")
        topic_ttl = (self.options.entities.get(topic) or EntityProperties()).default_message_time_to_live
        if topic_ttl is None:
            return own
        own = own or EntityProperties()
        ttl = own.default_message_time_to_live
        return dataclasses.replace(own, default_message_time_to_live=topic_ttl if ttl is None else min(ttl, topic_ttl))

    # ------------------------------------------------------------ sending

    def publish(self, address: str, messages: list[StoredMessage], now: float) -> Any:
        """What a Service Bus entity does with messages sent to it (see :mod:`.sending`).

        A message-id or session id over 128 characters refuses the whole delivery (a batch too, as
        the service does) with ``com.microsoft:argument-out-of-range``, before anything is stored.
        A duplicate-detecting entity remembers an id only once its message is stored or scheduled.
        """
        node = _entity(self.broker.resolve(address))
        if node is None:
            return _rejected(amqp_error(conditions.NOT_FOUND, f"no queue or topic {address!r}"))
        refused = _overlong_id(messages)
        if refused is not None:
            return _rejected(refused)
        entity = self.options.entities.get(address) or _NO_ENTITY
        detecting = entity.requires_duplicate_detection
        publisher = self.broker.router.publisher
        outcomes: list[Any] = []
        for message in messages:
            properties = message.properties
            message_id = properties.message_id if properties is not None else None
            key = None
            if message_id is None:
                # The service gives every message an id; the JS SDK relies on it to settle.
                stamped = dataclasses.replace(properties or _NO_PROPERTIES, message_id=uuid.uuid4().hex)
                message = with_properties(message, stamped)
            elif detecting:
                key = str(message_id)
                if self.duplicates.is_duplicate(address, key, now, entity.duplicate_detection_history_time_window):
                    outcomes.append(Accepted())  # as the service: the sender is told it arrived; it is not kept
                    continue
            at = (message.message_annotations or {}).get(SCHEDULED_ENQUEUE_TIME)
            if at is not None and int(at) / 1000 > now:
                refusal = self.scheduler.refusal(node, message)  # it counts against the entity's bounds now
                if refusal is None:
                    self.scheduler.schedule(node, message, int(at) / 1000)
            else:
                refusal = publisher.publish(self._forward_target(node), message, now, Source.CLIENT)
            if refusal is None:
                if key is not None:  # stored or scheduled: only now is a message with this id kept
                    self.duplicates.remember(address, key, now)
                outcomes.append(Accepted())
            else:
                outcomes.append(_rejected(refusal))
        if self._waiting:
            self._serve_after_publish(node, messages, now)
        rejected = [o for o in outcomes if isinstance(o, Rejected)]
        return rejected[0] if rejected else Accepted()

    def _forward_target(self, node: Queue | Topic) -> Queue | Topic:
        """Where a message for ``node`` ends up: queues with ``forward_to`` pass it on (at most 4 hops, as
        Service Bus allows)."""
        for _hop in range(MAX_FORWARD_HOPS):
            properties = self.options.entities.get(node.name)
            if properties is None or not properties.forward_to or not isinstance(node, Queue):
                break
            target = _entity(self.broker.resolve(properties.forward_to))
            if target is None:
                break  # nowhere to go (auto-create off): it stays
            node = target
        return node

    def _forwarding(self, ruleset: RuleSet, target_name: str) -> SubscriptionRules:
        """A subscription's rules that pass what they take on to ``target_name`` instead of keeping it."""

        def forward(message: StoredMessage) -> list[StoredMessage]:
            target = _entity(self.broker.resolve(target_name))
            copies = ruleset(message)
            if target is None or self._forward_depth >= MAX_FORWARD_HOPS:
                return copies  # nowhere to go, or a forwarding loop: the subscription keeps them
            self._forward_depth += 1
            try:
                for copy in copies:
                    self.broker.router.publisher.publish(self._forward_target(target), copy, self.now(), Source.FORWARD)
            finally:
                self._forward_depth -= 1
            return []

        return forward

    def _enqueue_scheduled(self, node: Queue | Topic, message: StoredMessage, number: int, now: float) -> None:
        target = self._forward_target(node)  # a forwarding queue passes it on when it comes due
        seq = number if target is node else None  # the number the node reserved (a topic's is ignored)
        self.broker.router.publisher.publish(target, message, now, Source.SCHEDULE, seq)

    # ------------------------------------------------------------- timers

    def _session_unlocked(self) -> None:
        if self._waiting:
            self._serve_waiting(self.now())

    def _serve_after_publish(self, node: Queue | Topic, messages: list[StoredMessage], now: float) -> None:
        """Wake the receivers waiting for a session that these messages may have given them.

        Receivers wait because their queue had no free session; a send can free only the sessions
        of its own messages, on the queues it reached.  When all those are held (a flood into one
        locked session, say) nothing is scanned: the scan costs the queue's depth, and it ran once per
        waiting receiver on every send (10,000 messages, 100 receivers waiting: 304 ms a send).
        """
        sessions = {
            m.properties.group_id for m in messages if m.properties is not None and isinstance(m.properties.group_id, str)
        }
        if not sessions:
            return
        target = self._forward_target(node)
        reached = {queue.name for queue in target.queues()}  # the queue itself, or a topic's subscriptions
        if self.sessions.any_free(reached, sessions):
            self._serve_waiting(now, reached)

    def _serve_waiting(self, now: float, queues: set[str] | None = None) -> None:
        """Give free sessions to receivers waiting for one (on ``queues``, or all); refuse those whose
        wait is over.  Each queue is scanned once, however many receivers wait on it."""
        waiting, self._waiting = self._waiting, []
        free: dict[str, deque[str]] = {}
        for item in waiting:
            connection, link, queue, deadline = item
            if link.state is not LinkState.ATTACH_RCVD:
                continue  # the client gave up (detached, or its connection went)
            session = None
            if queues is None or queue.name in queues:
                if queue.name not in free:
                    free[queue.name] = deque(self.sessions.free_sessions(queue))
                candidates = free[queue.name]
                session = candidates.popleft() if candidates else None
            if session is not None:
                self._lock_session(connection, link, queue, session)
            elif deadline <= now:
                connection.engine.refuse_link(link, amqp_error(TIMEOUT, f"no free session with messages in {queue.name!r}"))
            else:
                self._waiting.append(item)
                continue
            connection.mark_dirty()

    def next_deadline(self) -> float | None:
        waits = min((item.deadline for item in self._waiting), default=None)
        due = (self.settlement.locks.next_expiry(), self.sessions.next_expiry(), self.scheduler.next_due(), waits)
        deadlines = [d for d in due if d is not None]
        return min(deadlines) if deadlines else None

    def run_timers(self, now: float) -> None:
        self.settlement.expire(now)
        for consumer in self.sessions.expire(now):
            # The session lock is gone: so is the receiver (its messages come back, counted).
            error = amqp_error(SESSION_LOCK_LOST, f"the lock on session {consumer.session_id!r} has expired")
            self.broker.detach_link(consumer.client, consumer.link, error)
            consumer.client.mark_dirty()
        self.scheduler.run(now)
        if self._waiting:
            self._serve_waiting(now)


    def reset(self) -> None:
        self.settlement.clear()
        self.sessions.clear()
        self.scheduler.clear()
        self.rules.clear()
        self.duplicates.clear()
        self._waiting = []
        self._declare()


_NO_PROPERTIES = Properties()
_NO_ENTITY = EntityProperties()
#: The condition Service Bus answers an argument out of its range with (the SDKs map it to an
#: ArgumentOutOfRangeException / ServiceBusError, and do not retry it).
ARGUMENT_OUT_OF_RANGE = "com.microsoft:argument-out-of-range"


def _entity(node: Node | None) -> Queue | Topic | None:
    """The Service Bus entity ``node`` is: a queue or a topic (the service has no other kind; a
    stream, such as an event hub's partition, is no entity a Service Bus sender can reach)."""
    return node if isinstance(node, (Queue, Topic)) else None


def _rejected(error: Error) -> Rejected:
    """A refused send as the service words it: the error carries an ``info`` map (azure-servicebus reads
    condition, description and info by position, and a shorter error leaves its send waiting forever)."""
    return Rejected(error=Error(condition=error.condition, description=error.description, info=error.info or {}))


def _overlong_id(messages: list[StoredMessage]) -> Error | None:
    """The error for a message-id or session id (group-id) over 128 characters, as Service Bus refuses them."""
    for message in messages:
        properties = message.properties
        if properties is None:
            continue
        for field, value in (("MessageId", properties.message_id), ("SessionId", properties.group_id)):
            if id_too_long(value):
                assert isinstance(value, (str, bytes))
                return amqp_error(
                    ARGUMENT_OUT_OF_RANGE,
                    f"the {field} is {len(value)} long; Service Bus takes at most {MAX_ID_LENGTH} characters: "
                    "use a shorter id (a hash of a long key, for instance). Nothing of this delivery was stored",
                )
    return None
