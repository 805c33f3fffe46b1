"""A Service Bus receiver's link: lock-token delivery tags, broker annotations, settled echoes.

Peek-lock (rcv-settle-mode second): each delivery's tag is a fresh lock
token and carries ``x-opt-sequence-number``, ``x-opt-enqueued-time`` and
``x-opt-locked-until``.  The receiver's disposition is answered by a settled
disposition with the outcome applied, which the SDK waits for:

* complete = ``accepted``; defer = ``modified(undeliverable-here)`` (held aside
  for receive-by-sequence-number); abandon = any other ``modified`` (the Python
  SDK sets delivery-failed, the JS SDK does not; Service Bus counts both);
  dead-letter = ``rejected`` with ``com.microsoft:dead-letter``, echoed as a
  plain ``rejected``;
* a lock that is gone is answered ``rejected`` with ``com.microsoft:message-lock-lost``.

Receive-and-delete (sender settle mode settled) forgets each message as it goes out.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from ..amqp.messaging import Accepted, Modified, Received, Rejected, Released
from ..amqp.performatives import amqp_error
from ..broker.client_connection import BrokerConnection
from ..broker.extension import ExtensionConsumer
from ..broker.queue import Queue
from ..broker.stored import Entry
from ..protocol.endpoints import Delivery, Link
from .sections import delivery_payload
from .settlement import DEAD_LETTER, Settlement

__all__ = ["ServiceBusConsumer", "LOCK_LOST"]

LOCK_LOST = "com.microsoft:message-lock-lost"
_DEAD_LETTER_REASON = "DeadLetterReason"
_DEAD_LETTER_DESCRIPTION = "DeadLetterErrorDescription"


class ServiceBusConsumer(ExtensionConsumer):
    """The broker's sending link to a Service Bus receiver."""

    def __init__(
        self, settlement: Settlement, connection: BrokerConnection, link: Link, queue: Queue, link_id: int,
        now: Callable[[], float],
    ) -> None:  # fmt: skip
        super().__init__(
            connection, link, queue, link_id, now, browse=False, selector=None, default_outcome=None, outcomes=None
        )
        self.settlement = settlement
        self.client = connection  # typed as the broker's connection (``connection`` is the links' narrow view)

    def lock_until(self, now: float) -> float | None:
        """When a message delivered now stops being locked (None: never by itself)."""
        return now + self.settlement.lock_duration(self.queue)

    def deliver(self, entry: Entry) -> None:
        now = self.now()
        token = uuid.uuid4()
        settled = self.presettled
        until = None if settled else self.lock_until(now)
        payload = delivery_payload(entry, now, until if until is not None else self.shown_until(now))
        connection = self.connection
        delivery = connection.engine.send_transfer(self.link, token.bytes_le, payload, settled)
        connection.mark_dirty()
        if settled:
            self.queue.accept(entry)  # receive-and-delete
            self.offer(None, delivery)
            return
        self.unsettled[delivery.delivery_id] = entry
        self.settlement.lock(self.queue, entry, self, delivery, until, token)
        self.offer(entry, delivery)

    def shown_until(self, now: float) -> float | None:
        """The locked-until a message shows when its own lock does not expire (see sessions)."""
        return None

    def forget(self, delivery: Delivery) -> None:
        """The message of ``delivery`` was settled another way: it is no longer this link's."""
        self.unsettled.pop(delivery.delivery_id, None)

    def on_outcome(self, delivery: Delivery, state: Any, settled: bool) -> None:
        if state is None or isinstance(state, Received):
            if not settled:
                return
            state = Modified(delivery_failed=True)  # settled with no outcome: as abandoned
        engine = self.connection.engine
        settlement = self.settlement
        entry = self.unsettled.pop(delivery.delivery_id, None)
        lock = settlement.locks.get(uuid.UUID(bytes_le=delivery.tag))
        if entry is None or lock is None:
            if not settled:
                engine.settle(delivery, Rejected(error=amqp_error(LOCK_LOST, "the lock on this message has expired")))
            return
        settlement.locks.remove(lock)
        queue = self.queue
        now = self.now()
        echo = state
        if isinstance(state, Accepted):
            queue.accept(entry)
        elif isinstance(state, Released):
            queue.release(entry, now)
        elif isinstance(state, Modified) and state.undeliverable_here:
            settlement.defer(queue, entry)
        elif isinstance(state, Rejected):
            error = state.error
            info = dict(error.info or {}) if error is not None else {}
            reason = info.get(_DEAD_LETTER_REASON)
            description = info.get(_DEAD_LETTER_DESCRIPTION)
            if reason is None and error is not None and str(error.condition) != DEAD_LETTER:
                reason, description = str(error.condition), error.description
            settlement.dead_letter(queue, entry, reason, description)
            echo = Rejected()  # an error in the echo would tell the SDK the dead-lettering failed
        else:  # an abandon, delivery-failed or not: Service Bus counts every one
            annotations = state.message_annotations if isinstance(state, Modified) else None
            settlement.abandon(queue, entry, now, annotations)
        if not settled:
            engine.settle(delivery, echo)
        queue.dispatch(now)
