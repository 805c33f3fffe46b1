"""How Service Bus settles a message: complete, abandon, defer, dead-letter, and the locks that allow it.

Every part of the layer that settles (a receiver's disposition, the
``$management`` node's ``update-disposition``, a lock or session expiring)
calls down into :class:`Settlement`, so the rules are in one place:

* complete removes the message;
* abandon counts a delivery (every abandon counts, whatever the outcome's
  ``delivery-failed`` says: the JS SDK sends ``modified`` without it) and at
  ``max_delivery_count`` dead-letters with reason ``MaxDeliveryCountExceeded``;
* defer sets the message aside for receive-by-sequence-number;
* dead-letter moves it to the entity's ``$DeadLetterQueue`` with
  ``DeadLetterReason`` / ``DeadLetterErrorDescription`` in application-properties.
"""

from __future__ import annotations

import dataclasses
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from ..broker.queue import Queue
from ..broker.stored import Entry
from ..protocol.endpoints import Delivery
from .locks import DEFERRED, Holder, Lock, LockTable
from .options import EntityProperties, ServiceBusOptions
from .sections import DEAD_LETTER_SOURCE, with_application_properties

__all__ = ["Settlement", "DEAD_LETTER", "MAX_DELIVERY_COUNT_EXCEEDED"]

#: The condition of a receiver's ``rejected`` that dead-letters (and the reason the layer passes its queue).
DEAD_LETTER = "com.microsoft:dead-letter"
MAX_DELIVERY_COUNT_EXCEEDED = "MaxDeliveryCountExceeded"


class Settlement:
    """Locks, deferred messages and the outcomes Service Bus applies to them."""

    def __init__(self, options: ServiceBusOptions, timers_changed: Callable[[], None]) -> None:
        self.options = options
        self.locks = LockTable()
        #: Deferred messages by (node, sequence number): acquired, owned by DEFERRED.
        self.deferred: dict[tuple[str, int], tuple[Queue, Entry]] = {}
        self._timers_changed = timers_changed
        self._entities: weakref.WeakKeyDictionary[Queue, EntityProperties] = weakref.WeakKeyDictionary()

    def entity_queue(self, queue: Queue, properties: EntityProperties | None = None) -> Queue:
        """Make a queue a Service Bus entity with ``properties``: its delivery limit, lock duration,
        time-to-live and expiry dead-lettering, and dead letters as :meth:`dead_lettering` makes them."""
        if queue in self._entities:
            return queue
        self._entities[queue] = properties = properties or EntityProperties()
        ttl = properties.default_message_time_to_live
        queue.options = dataclasses.replace(
            queue.options,
            max_delivery_count=properties.max_delivery_count or self.options.max_delivery_count,
            # The entity's time-to-live is the default and the most a message gets (a shorter one of its own stands).
            default_ttl=ttl if ttl is not None else queue.options.default_ttl,
            max_ttl=ttl if ttl is not None else queue.options.max_ttl,
            dead_letter_on_expiry=properties.dead_lettering_on_message_expiration,
            dead_letter_address=properties.forward_dead_lettered_messages_to or queue.options.dead_letter_address,
        )
        return queue

    def lock_duration(self, queue: Queue) -> float:
        """How long a peek-lock (or a session lock) on this entity lasts."""
        properties = self._entities.get(queue)
        duration = properties.lock_duration if properties is not None else None
        return duration if duration is not None else self.options.lock_duration

    def properties(self, queue: Queue) -> EntityProperties | None:
        return self._entities.get(queue)

    def dead_lettering(self, source: Queue, entry: Entry, reason: str, description: str | None) -> bool:
        """A router's dead-letter handler: an entity's dead letters carry Service Bus's properties,
        then go where the router sends them (the entity's ``$deadletterqueue``)."""
        if source not in self._entities:
            return False
        if reason != DEAD_LETTER:  # the broker's own reason (expiry, delivery limit)
            entry.message = with_application_properties(entry.message, _reason(reason, description))
        entry.annotate({DEAD_LETTER_SOURCE: source.name})
        return False

    def lock(
        self, queue: Queue, entry: Entry, owner: Holder, delivery: Delivery | None, until: float | None,
        token: uuid.UUID | None = None,
    ) -> Lock:  # fmt: skip
        """Lock a message to ``owner`` until ``until`` (None: while its session is locked)."""
        first = self.locks.next_expiry()
        lock = self.locks.add(queue, entry, owner, delivery, until, token)
        if until is not None and (first is None or until < first):
            self._timers_changed()
        return lock

    def release_lock(self, lock: Lock) -> None:
        """Take a lock's message from its holder (settled another way, e.g. by ``$management``)."""
        self.locks.remove(lock)
        if lock.delivery is not None:
            lock.owner.forget(lock.delivery)

    def defer(self, queue: Queue, entry: Entry) -> None:
        """Set a message aside: only receive-by-sequence-number gets it again."""
        entry.owner = DEFERRED
        self.deferred[(queue.name, entry.seq)] = (queue, entry)

    def complete(self, queue: Queue, entry: Entry) -> None:
        self.deferred.pop((queue.name, entry.seq), None)
        queue.accept(entry)

    def abandon(self, queue: Queue, entry: Entry, now: float, annotations: dict[Any, Any] | None) -> None:
        """A failed delivery: count it; at ``max_delivery_count`` dead-letter the message."""
        limit = queue.options.max_delivery_count
        if entry.delivery_count + 1 >= limit:
            entry.delivery_count += 1
            self.dead_letter(
                queue, entry, MAX_DELIVERY_COUNT_EXCEEDED, f"Message could not be consumed after {limit} delivery attempts."
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

    def expire(self, now: float) -> None:
        """Locks due at ``now`` end: their messages are abandoned (a deferred one stays deferred)."""
        for lock in self.locks.expire(now):
            owner = lock.owner
            if owner is DEFERRED:
                continue  # a deferred message's lock ends; the message stays deferred
            if lock.delivery is not None:
                owner.forget(lock.delivery)
            self.abandon(lock.queue, lock.entry, now, None)
            lock.queue.dispatch(now)

    def clear(self) -> None:
        self.locks.clear()
        self.deferred.clear()
        self._entities = weakref.WeakKeyDictionary()


def _reason(reason: str | None, description: str | None) -> dict[str, Any]:
    properties = {}
    if reason is not None:
        properties["DeadLetterReason"] = str(reason)
    if description is not None:
        properties["DeadLetterErrorDescription"] = str(description)
    return properties
