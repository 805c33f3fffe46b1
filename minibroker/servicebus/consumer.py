"""A Service Bus receiver's link: lock-token delivery tags, broker annotations, settled echoes.

Peek-lock (rcv-settle-mode second): each delivery's tag is a fresh lock
token and carries ``x-opt-sequence-number``, ``x-opt-enqueued-time`` and
``x-opt-locked-until``.  The receiver's disposition is answered by a settled
disposition with the outcome applied, which the SDK waits for:

* complete = ``accepted``; abandon = ``modified(delivery-failed)`` (delivery
  count + 1, dead-lettered at the maximum); defer = ``modified(undeliverable-here)``
  (held aside for receive-by-sequence-number); dead-letter = ``rejected`` with
  ``com.microsoft:dead-letter``, echoed as a plain ``rejected``;
* a lock that is gone is answered ``rejected`` with ``com.microsoft:message-lock-lost``.

Receive-and-delete (sender settle mode settled) forgets each message as it goes out.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from ..amqp.messaging import Accepted, Modified, Received, Rejected, Released
from ..amqp.performatives import amqp_error
from ..broker.extension import ExtensionConsumer
from ..broker.queue import Queue
from ..broker.stored import Entry
from ..protocol.endpoints import Delivery, Link

if TYPE_CHECKING:
    from ..broker.client_connection import BrokerConnection
    from .layer import ServiceBusLayer

__all__ = ["ServiceBusConsumer", "LOCK_LOST", "DEAD_LETTER"]

LOCK_LOST = "com.microsoft:message-lock-lost"
DEAD_LETTER = "com.microsoft:dead-letter"
_DEAD_LETTER_REASON = "DeadLetterReason"
_DEAD_LETTER_DESCRIPTION = "DeadLetterErrorDescription"


class ServiceBusConsumer(ExtensionConsumer):
    """The broker's sending link to a Service Bus receiver."""

    def __init__(
        self, layer: ServiceBusLayer, connection: BrokerConnection, link: Link, queue: Queue, link_id: int
    ) -> None:
        super().__init__(
            connection, link, queue, link_id, layer.broker.now,
            browse=False, selector=None, default_outcome=None, outcomes=None,
        )  # fmt: skip
        self.layer = layer

    def deliver(self, entry: Entry) -> None:
        layer = self.layer
        now = self.now()
        token = uuid.uuid4()
        settled = self.presettled
        until = None if settled else now + layer.options.lock_duration
        payload = layer.outgoing(entry, now, until)
        connection = self.connection
        delivery = connection.engine.send_transfer(self.link, token.bytes_le, payload, settled)
        connection.mark_dirty()
        if settled:
            self.queue.accept(entry)  # receive-and-delete
            self.offer(None, delivery)
            return
        assert until is not None
        self.unsettled[delivery.delivery_id] = entry
        layer.lock(self.queue, entry, self, delivery, until, token)
        self.offer(entry, delivery)

    def on_outcome(self, delivery: Delivery, state: Any, settled: bool) -> None:
        if state is None or isinstance(state, Received):
            if not settled:
                return
            state = Modified(delivery_failed=True)  # settled with no outcome: as abandoned
        engine = self.connection.engine
        layer = self.layer
        entry = self.unsettled.pop(delivery.delivery_id, None)
        lock = layer.locks.get(uuid.UUID(bytes_le=delivery.tag))
        if entry is None or lock is None:
            if not settled:
                engine.settle(delivery, Rejected(error=amqp_error(LOCK_LOST, "the lock on this message has expired")))
            return
        layer.locks.remove(lock)
        queue = self.queue
        now = self.now()
        echo = state
        if isinstance(state, Accepted):
            queue.accept(entry)
        elif isinstance(state, Released):
            queue.release(entry, now)
        elif isinstance(state, Modified):
            if state.undeliverable_here:
                layer.defer(queue, entry)
            elif state.delivery_failed:
                layer.abandon(queue, entry, now, state.message_annotations)
            else:
                queue.modify(entry, now, False, False, state.message_annotations, None)
        elif isinstance(state, Rejected):
            error = state.error
            info = dict(error.info or {}) if error is not None else {}
            reason = info.get(_DEAD_LETTER_REASON)
            description = info.get(_DEAD_LETTER_DESCRIPTION)
            if reason is None and error is not None and str(error.condition) != DEAD_LETTER:
                reason, description = str(error.condition), error.description
            layer.dead_letter(queue, entry, reason, description)
            echo = Rejected()  # an error in the echo would tell the SDK the dead-lettering failed
        else:
            layer.abandon(queue, entry, now, None)
        if not settled:
            engine.settle(delivery, echo)
        queue.dispatch(now)
