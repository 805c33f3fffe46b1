"""A Service Bus sender's link: what the service does to a message before an entity holds it.

Service Bus settles what it receives at once (the SDK asks for receiver
settle mode second but waits for a settled disposition), so the link is
answered with rcv-settle-mode first.  Each message (a batch carries several)
goes through :class:`Publisher` (the layer): it stamps a message-id when the
sender set none, drops duplicates, holds messages that carry a scheduled
enqueue time, and publishes the rest through the broker's publish path.

A transactional transfer (Part 3 §4.4.2) is refused: the layer does not stage
Service Bus sends in transactions, and publishing one at once would store it
(and remember its id for duplicate detection) even if the transaction rolled
back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..amqp import errors as conditions
from ..amqp.errors import AMQPDecodeError
from ..amqp.messaging import Rejected
from ..amqp.performatives import amqp_error
from ..amqp.transactions import TransactionalState
from ..broker.client_connection import BrokerConnection
from ..broker.extension import ExtensionLink
from ..broker.publish import format_refusal, messages_of
from ..broker.stored import StoredMessage
from ..protocol.endpoints import Delivery, Link

__all__ = ["Publisher", "SenderLink"]


class Publisher(Protocol):
    def publish(self, address: str, messages: list[StoredMessage], now: float) -> Any:
        """Take the messages sent to entity ``address``; the outcome for their delivery."""


class SenderLink(ExtensionLink):
    """The broker's receiving half of a Service Bus sender, bound to one entity."""

    message_point = "publish"

    def __init__(
        self, connection: BrokerConnection, link: Link, address: str, publisher: Publisher, now: Callable[[], float]
    ) -> None:
        self.connection = connection
        self.link = link
        self.address = address
        self.entity = address
        self.publisher = publisher
        self.now = now

    def on_message(self, delivery: Delivery) -> None:
        engine = self.connection.engine
        outcome: Any = format_refusal(delivery)
        state = delivery.state
        if outcome is None and isinstance(state, TransactionalState):
            reason = "minibroker takes no transactional Service Bus sends: send without a transaction"
            outcome = TransactionalState(txn_id=state.txn_id, outcome=Rejected(error=amqp_error(conditions.NOT_IMPLEMENTED, reason)))
        if outcome is None:
            now = self.now()
            try:
                messages = messages_of(delivery, now)
            except (AMQPDecodeError, IndexError) as exc:  # that message's problem, not the session's
                outcome = Rejected(error=amqp_error(conditions.DECODE_ERROR, f"malformed message, not stored: {exc}"))
            else:
                outcome = self.publisher.publish(self.entity, messages, now)
        if not delivery.remote_settled:
            engine.settle(delivery, outcome)
