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
* Receivers get :class:`~minibroker.servicebus.consumer.ServiceBusConsumer`
  links (peek-lock with lock tokens, or receive-and-delete).
* Each entity's ``$management`` node (:mod:`~minibroker.servicebus.management`).
* Timers on the broker's clock: lock expiry and scheduled messages.
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from sortedcontainers import SortedList

from ..amqp import errors as conditions
from ..amqp.performatives import RCV_FIRST, amqp_error
from ..broker.config import ServiceBusOptions
from ..broker.publish import Source
from ..broker.queue import Queue
from ..broker.router import NodeError
from ..broker.stored import Entry, StoredMessage
from ..broker.topic import Topic
from ..protocol.endpoints import Delivery, Link
from .addresses import CBS, SUBSCRIPTIONS, Entity, node_name, parse_address
from .consumer import DEAD_LETTER, ServiceBusConsumer
from .locks import DEFERRED, Lock, LockTable
from .management import Management, put_token
from .requests import Handler, ReplyLink, RequestLink
from .sections import (
    DEAD_LETTER_SOURCE,
    ENQUEUED_TIME,
    LOCKED_UNTIL,
    SEQUENCE_NUMBER,
    millis,
    with_annotations,
    with_application_properties,
)
from .sessions import LOCKED_UNTIL_UTC, SESSION_FILTER, SessionConsumer, Sessions, ticks

if TYPE_CHECKING:
    from ..broker.engine import Broker, BrokerConnection

__all__ = ["ServiceBusLayer"]

TIMEOUT = "com.microsoft:timeout"
SESSION_CANNOT_BE_LOCKED = "com.microsoft:session-cannot-be-locked"


class ServiceBusLayer:
    """Service Bus semantics for the connections that authenticated through ``$cbs``."""

    def __init__(self, broker: Broker, options: ServiceBusOptions | None = None) -> None:
        self.broker = broker
        self.options = options or ServiceBusOptions()
        self.locks = LockTable()
        self.sessions = Sessions()
        #: Deferred messages by (node, sequence number): acquired, owned by DEFERRED.
        self.deferred: dict[tuple[str, int], tuple[Queue, Entry]] = {}
        self._scheduled: dict[tuple[str, int], tuple[Queue | Topic, bytes]] = {}
        self._due = SortedList()  # (enqueue time, node, sequence number)
        self._topic_numbers: dict[str, int] = {}
        self._clients: weakref.WeakSet[BrokerConnection] = weakref.WeakSet()
        self._entities: weakref.WeakSet[Queue] = weakref.WeakSet()
        self._link_ids = itertools.count(-1, -1)  # apart from the broker's own (positive) link ids
        broker.router.dead_letter_hook = self._dead_lettering
        self._declare()

    def _declare(self) -> None:
        for name in self.options.queues:
            self.entity_queue(self.broker.declare_queue(name))
        for topic, subscriptions in self.options.topics.items():
            for subscription in subscriptions:
                self.subscription_queue(topic, subscription, create=True)

    # ------------------------------------------------------------ attach

    def attach(self, connection: BrokerConnection, link: Link) -> bool:
        address = link.address
        if not isinstance(address, str):
            return False
        if address == CBS:
            self._clients.add(connection)
            self._attach_pair(connection, link, CBS, put_token, "status-code", "status-description")
            return True
        if connection not in self._clients:
            return False
        entity = parse_address(address)
        if entity.management:
            handler = Management(self, entity).handle
            self._attach_pair(connection, link, node_name(address), handler, "statusCode", "statusDescription")
            return True
        if link.is_sender:
            self._attach_receiver(connection, link, entity)
            return True
        if entity.subscription is not None or entity.dead_letter:
            connection.engine.refuse_link(
                link, amqp_error(conditions.NOT_ALLOWED, f"cannot send to {entity.node!r}: send to its queue or topic")
            )
            return True
        link.target = dataclasses.replace(link.target, address=entity.name)
        # Service Bus settles what it receives at once (the SDK asks for mode second but
        # waits for a settled disposition): answer the attach with rcv-settle-mode first.
        link.rcv_settle_mode = RCV_FIRST
        return False  # the broker attaches the sender to the entity's node

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
            engine.refuse_link(link, amqp_error(conditions.NOT_FOUND, queue))
            return
        filters = getattr(link.source, "filter", None) or {}
        if SESSION_FILTER in filters:
            self._attach_session_receiver(connection, link, queue, filters[SESSION_FILTER])
            return
        consumer = ServiceBusConsumer(self, connection, link, queue, next(self._link_ids))
        link.context = consumer
        engine.accept_link(link, source=link.source, target=link.target)
        self.broker.add_consumer(consumer)

    def _attach_session_receiver(self, connection: BrokerConnection, link: Link, queue: Queue, wanted: Any) -> None:
        """Lock a session (the one asked for, or any free one with messages) to this receiver."""
        engine = connection.engine
        session = wanted if isinstance(wanted, str) else self.sessions.free_session(queue)
        if session is None:
            engine.refuse_link(link, amqp_error(TIMEOUT, f"no free session with messages in {queue.name!r}"))
            return
        if self.sessions.holder(queue, session) is not None:
            engine.refuse_link(
                link, amqp_error(SESSION_CANNOT_BE_LOCKED, f"session {session!r} of {queue.name!r} is locked by another receiver")
            )
            return
        consumer = SessionConsumer(self, connection, link, queue, next(self._link_ids), session)
        link.context = consumer
        self.sessions.lock(consumer)
        source = dataclasses.replace(link.source, filter={**link.source.filter, SESSION_FILTER: session})
        until = self.broker.clock.now() + self.options.lock_duration
        engine.accept_link(link, source=source, target=link.target, properties={LOCKED_UNTIL_UTC: ticks(until)})
        self.broker.add_consumer(consumer)

    # ----------------------------------------------------------- entities

    def queue_for(self, entity: Entity) -> Queue | str:
        """The queue an entity's messages are received from, or why there is none."""
        auto_create = self.broker.config.auto_create
        if entity.subscription is not None and not entity.dead_letter:
            try:
                queue = self.subscription_queue(entity.name, entity.subscription, create=auto_create)
            except NodeError as exc:  # e.g. a queue of the topic's name, auto-created by an earlier sender
                return f"{exc}; declare the topic in ServiceBusOptions.topics before anything is sent to it"
            if queue is None:
                return f"no subscription {entity.node!r} (auto-create is off; declare it in ServiceBusOptions.topics)"
            return queue
        node = self.broker.resolve(entity.node)
        if isinstance(node, Topic):
            return f"{entity.name!r} is a topic: receive from one of its subscriptions, {entity.name}/{SUBSCRIPTIONS}/<name>"
        if node is None:
            return f"no queue {entity.node!r} (auto-create is off; declare it in ServiceBusOptions.queues)"
        if not isinstance(node, Queue):
            return f"{entity.name!r} is a {node.KIND}, not a queue"
        return self.entity_queue(node)

    def node_for(self, entity: Entity) -> Queue | Topic | str:
        """The node an entity's ``$management`` acts on: its queue, or a topic for a sender's requests."""
        if entity.subscription is None and not entity.dead_letter:
            node = self.broker.topics.get(entity.name)
            if node is not None:
                return node
        return self.queue_for(entity)

    def subscription_queue(self, topic_name: str, name: str, create: bool) -> Queue | None:
        """A topic's named subscription (durable: it keeps messages while no receiver is attached)."""
        topic = self.broker.topics.get(topic_name)
        if topic is None:
            if not create:
                return None
            topic = self.broker.declare_topic(topic_name)
        key = f"{topic_name}/{SUBSCRIPTIONS}/{name}"
        subscription = topic.subscriptions.get(key)
        if subscription is None:
            if not create:
                return None
            subscription = self.broker.router.subscribe(topic, key, True, None)
            subscription.links = 0  # it exists without receivers, as a configured subscription does
            # Its dead letters stay its own: <topic>/Subscriptions/<name>/$DeadLetterQueue.
            queue = subscription.queue
            queue.options = dataclasses.replace(queue.options, dead_letter_address=None)
        return self.entity_queue(subscription.queue)

    def entity_queue(self, queue: Queue) -> Queue:
        """Give a queue Service Bus dead-lettering: reason and description in application-properties."""
        if queue in self._entities:
            return queue
        self._entities.add(queue)
        limit = self.options.max_delivery_count
        if queue.options.max_delivery_count != limit:
            queue.options = dataclasses.replace(queue.options, max_delivery_count=limit)
        return queue

    def _dead_lettering(self, source: Queue, entry: Entry, reason: str, description: str | None) -> None:
        """The router's dead-letter hook: an entity's dead letters carry Service Bus's properties."""
        if source not in self._entities:
            return
        if reason != DEAD_LETTER:  # the broker's own reason (expiry, delivery limit)
            entry.message = with_application_properties(entry.message, _reason(reason, description))
        entry.annotate({DEAD_LETTER_SOURCE: source.name})

    # --------------------------------------------------------- deliveries

    def outgoing(self, entry: Entry, now: float, locked_until: float | None) -> bytes:
        """The bytes of a delivery: the message with the broker's annotations."""
        extra: dict[Any, Any] = {SEQUENCE_NUMBER: entry.seq, ENQUEUED_TIME: millis(entry.message.arrived_at)}
        if locked_until is not None:
            extra[LOCKED_UNTIL] = millis(locked_until)
        return with_annotations(entry.payload_for_delivery(now), extra)

    def lock(
        self, queue: Queue, entry: Entry, owner: Any, delivery: Delivery | None, until: float,
        token: uuid.UUID | None = None,
    ) -> Lock:  # fmt: skip
        first = self.locks.next_expiry()
        lock = self.locks.add(queue, entry, owner, delivery, until, token)
        if first is None or until < first:
            self._timers_changed()
        return lock

    def release_lock(self, lock: Lock) -> None:
        """Take a lock's message from its holder (settled another way, e.g. by ``$management``)."""
        self.locks.remove(lock)
        owner = lock.owner
        if isinstance(owner, ServiceBusConsumer) and lock.delivery is not None:
            owner.unsettled.pop(lock.delivery.delivery_id, None)

    def defer(self, queue: Queue, entry: Entry) -> None:
        """Set a message aside: only receive-by-sequence-number gets it again."""
        entry.owner = DEFERRED
        self.deferred[(queue.name, entry.seq)] = (queue, entry)

    def complete(self, queue: Queue, entry: Entry) -> None:
        self.deferred.pop((queue.name, entry.seq), None)
        queue.accept(entry)

    def abandon(self, queue: Queue, entry: Entry, now: float, annotations: dict[Any, Any] | None) -> None:
        """A failed delivery: count it; at ``max_delivery_count`` dead-letter the message."""
        limit = self.options.max_delivery_count
        if entry.delivery_count + 1 >= limit:
            entry.delivery_count += 1
            self.dead_letter(
                queue, entry, "MaxDeliveryCountExceeded", f"Message could not be consumed after {limit} delivery attempts."
            )
        elif entry.owner is DEFERRED:  # an abandoned deferred message stays deferred
            entry.delivery_count += 1
            if annotations:
                entry.annotate(annotations)
        else:
            queue.modify(entry, now, True, False, annotations, None)

    def dead_letter(self, queue: Queue, entry: Entry, reason: str | None, description: str | None) -> None:
        """Move a message to its entity's ``$DeadLetterQueue`` with the reason in application-properties."""
        properties = _reason(reason, description)
        if properties:
            entry.message = with_application_properties(entry.message, properties)
        self.deferred.pop((queue.name, entry.seq), None)
        self.entity_queue(queue)
        queue.reject(entry, DEAD_LETTER, description)

    # --------------------------------------------------------- scheduling

    def schedule(self, node: Queue | Topic, message: StoredMessage, at: float) -> int:
        """Hold a message until clock time ``at``; returns its sequence number."""
        if isinstance(node, Queue):
            number = node.reserve_seq()
        else:
            number = self._topic_numbers.get(node.name, 0) + 1
            self._topic_numbers[node.name] = number
        self._scheduled[(node.name, number)] = (node, message.payload)
        first = self._due[0][0] if self._due else None
        self._due.add((at, node.name, number))
        if first is None or at < first:
            self._timers_changed()
        return number

    def cancel(self, node: Queue | Topic, number: int) -> bool:
        return self._scheduled.pop((node.name, number), None) is not None

    def _enqueue_scheduled(self, now: float) -> None:
        while self._due and self._due[0][0] <= now:
            _at, name, number = self._due.pop(0)
            scheduled = self._scheduled.pop((name, number), None)
            if scheduled is None:
                continue  # cancelled
            node, payload = scheduled
            seq = number if isinstance(node, Queue) else None  # a queue reserved the number (schedule)
            self.broker.router.publisher.publish(node, StoredMessage(payload, now), now, Source.SCHEDULE, seq)

    # ------------------------------------------------------------- timers

    def next_deadline(self) -> float | None:
        deadlines = [d for d in (self.locks.next_expiry(), self._due[0][0] if self._due else None) if d is not None]
        return min(deadlines) if deadlines else None

    def run_timers(self, now: float) -> None:
        for lock in self.locks.expire(now):
            owner = lock.owner
            if owner is DEFERRED:
                continue  # a deferred message's lock ends; the message stays deferred
            if isinstance(owner, ServiceBusConsumer) and lock.delivery is not None:
                owner.unsettled.pop(lock.delivery.delivery_id, None)
            self.abandon(lock.queue, lock.entry, now, None)
            lock.queue.dispatch(now)
        self._enqueue_scheduled(now)

    def _timers_changed(self) -> None:
        if self.broker.on_timers_changed is not None:
            self.broker.on_timers_changed()

    def reset(self) -> None:
        self.locks.clear()
        self.sessions.clear()
        self.deferred.clear()
        self._scheduled.clear()
        self._due.clear()
        self._topic_numbers.clear()
        self._clients = weakref.WeakSet()
        self._entities = weakref.WeakSet()
        self._declare()


def _reason(reason: str | None, description: str | None) -> dict[str, Any]:
    properties = {}
    if reason is not None:
        properties["DeadLetterReason"] = str(reason)
    if description is not None:
        properties["DeadLetterErrorDescription"] = str(description)
    return properties
