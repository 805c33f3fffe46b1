"""The RabbitMQ layer's links: the management pair, publishers to v2 addresses, and consumers.

* :class:`ManagementRequests` / ``broker.replies.ReplyLink``: the client's
  sending and receiving links on ``/management``; an answer goes back on the
  receiving link of the same connection (the same session first), as
  RabbitMQ pairs them; a request the user may not make ends the session.
* :class:`Publisher`: a client's sending link to ``/exchanges/...``,
  ``/queues/...`` or the null address; each message is routed through the
  exchanges (:meth:`RabbitMQLayer.publish`) and settled ``accepted``,
  ``released`` (no queue took it, as RabbitMQ 4 answers an unroutable
  message) or ``rejected``.
* :class:`RabbitConsumer`: a consumer of a ``/queues/`` address; every
  delivery carries message-annotations (RabbitMQ's ``x-exchange`` and
  ``x-routing-key``, which its client reads), a single-active-consumer
  queue gives credit to its first consumer only, ``modified`` with
  undeliverable-here discards, as RabbitMQ 4 does, and its end starts an
  ``x-expires`` queue's idle time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..amqp import codec
from ..amqp import errors as conditions
from ..amqp.composite import Composite, DescribedValue
from ..amqp.errors import AMQPDecodeError
from ..amqp.message import Message, decode_message, encode_message
from ..amqp.messaging import Accepted, AmqpValue, Modified, Properties, Rejected
from ..amqp.performatives import Error, amqp_error
from ..amqp.transactions import TransactionalState
from ..amqp.types import symbol
from ..broker.extension import ExtensionLink
from ..broker.links import ConsumerLink
from ..broker.publish import format_refusal
from ..broker.roles import ReplySink
from ..broker.stored import Entry, StoredMessage
from ..protocol.endpoints import Delivery, Link
from .management import AccessRefused, Requester, handle_request

if TYPE_CHECKING:
    from ..broker.client_connection import BrokerConnection
    from .addresses import Destination
    from .host import RabbitMQHost

__all__ = ["ManagementRequests", "Publisher", "RabbitConsumer", "X_EXCHANGE", "X_ROUTING_KEY"]

X_EXCHANGE = symbol("x-exchange")
X_ROUTING_KEY = symbol("x-routing-key")




class ManagementRequests(ExtensionLink):
    """The broker's receiving half of the management pair: each message is a request.

    A request the user has no right to make ends this link's session with
    ``amqp:unauthorized-access`` (:class:`~.management.AccessRefused`), as RabbitMQ 4 does.
    """

    def __init__(self, layer: RabbitMQHost, connection: BrokerConnection, link: Link) -> None:
        self.layer = layer
        self.connection = connection
        self.link = link

    def on_message(self, delivery: Delivery) -> None:
        engine = self.connection.engine
        try:
            request = _decode_request(delivery.payload)
        except (AMQPDecodeError, IndexError) as exc:
            if not delivery.remote_settled:
                engine.settle(delivery, Rejected(error=amqp_error(conditions.DECODE_ERROR, f"malformed request: {exc}")))
            return
        if not delivery.remote_settled:
            engine.settle(delivery, Accepted())
        requester = Requester(self.layer.broker.permissions, engine.user)  # each request is authorised itself
        try:
            response = handle_request(self.layer, request, requester)
        except AccessRefused as refused:
            # RabbitMQ 4 answers no status here: check_resource_access exits with a protocol error and
            # the session ends with it (Part 2 §2.5.7); the connection and its other sessions stay.
            engine.end_session(self.link.session, amqp_error(conditions.UNAUTHORIZED_ACCESS, str(refused)))
            return
        self.layer.broker.flush()  # queues purged or deleted: their consumers and waiters see it
        reply = self._replies()
        if reply is None:
            return  # no receiving link to answer on: the answer is dropped, as RabbitMQ does
        request_id = request.properties.message_id if request.properties is not None else None
        answer = Message(
            body=response.body,
            properties=Properties(correlation_id=request_id, subject=str(response.status)),
        )
        reply.send(encode_message(answer))

    def _replies(self) -> ReplySink | None:
        """This connection's receiving link on ``/management``: in this link's session if there is one."""
        fallback = None
        for session in self.connection.engine.sessions.values():
            for link in session.links_by_handle.values():
                sink: ReplySink | None = link.context.reply_sink if link.context is not None else None
                if sink is not None:
                    if session is self.link.session:
                        return sink
                    fallback = sink
        return fallback


def _decode_request(payload: bytes) -> Message:
    """A management request, its sections taken in any order.

    RabbitMQ's Python client (0.6.0) sends a request without a body (DELETE,
    GET) with its null amqp-value section *before* the properties, which
    Part 3 §3.2 does not allow; RabbitMQ answers it, so this node reads the
    sections whatever their order (only here: published messages are checked).
    """
    try:
        return decode_message(payload)
    except AMQPDecodeError:
        pass
    request = Message()
    pos = 0
    while pos < len(payload):
        section, pos = codec.decode_at(payload, pos)
        if isinstance(section, Properties):
            request.properties = section
        elif isinstance(section, AmqpValue):
            request.body = section.value
        elif not isinstance(section, DescribedValue | Composite):
            raise AMQPDecodeError(f"a message is a sequence of sections; got a bare {type(section).__name__}")
    return request


class Publisher(ExtensionLink):
    """A client's sending link to a v2 address (``destination``) or to the null address (each message's ``to``)."""

    def __init__(self, layer: RabbitMQHost, connection: BrokerConnection, link: Link, destination: Destination | None):
        self.layer = layer
        self.connection = connection
        self.link = link
        self.destination = destination

    def on_message(self, delivery: Delivery) -> None:
        outcome: Any = format_refusal(delivery)
        if outcome is None:
            if isinstance(delivery.state, TransactionalState):
                outcome = Rejected(
                    error=amqp_error(
                        conditions.NOT_IMPLEMENTED,
                        "transactions are not taken on RabbitMQ addresses (RabbitMQ 4 has no AMQP 1.0 transactions)",
                    )
                )
            else:
                now = self.layer.broker.now()
                try:
                    message = StoredMessage(delivery.payload, now)
                except (AMQPDecodeError, IndexError) as exc:
                    outcome = Rejected(error=amqp_error(conditions.DECODE_ERROR, f"malformed message: {exc}"))
                else:
                    denied = self._relay_refusal(message)
                    outcome = Rejected(error=denied) if denied is not None else self.layer.publish(
                        self.destination, message, now
                    )
        if not delivery.remote_settled:
            self.connection.engine.settle(delivery, outcome)

    def _relay_refusal(self, message: StoredMessage) -> Error | None:
        """On the null address, the user's right to send to each message's ``to`` (permissions.py)."""
        permissions = self.layer.broker.permissions
        if self.destination is not None or permissions is None:
            return None  # a named target was checked when the link attached
        to = message.properties.to if message.properties is not None else None
        return permissions.relay_refusal(self.connection.engine.user, to)


class RabbitConsumer(ConsumerLink):
    """A consumer of a ``/queues/`` address (see the module's docstring)."""

    single_active = False
    #: Told (queue name, clock time) when this consumer's link ends: a queue's x-expires counts from then.
    on_end: Callable[[str, float], None] | None = None

    def finish(self, closed: bool, now: float) -> None:
        super().finish(closed, now)
        if self.on_end is not None:
            self.on_end(self.queue.name, now)

    def credit(self) -> int:
        if self.single_active and self.queue.consumers and self.queue.consumers[0] is not self:
            return 0  # x-single-active-consumer: the first attached consumer gets every message
        return super().credit()

    def on_outcome(self, delivery: Delivery, state: Any, settled: bool) -> None:
        if isinstance(state, Modified) and state.undeliverable_here:
            # RabbitMQ 4: modified with undeliverable-here discards the message (dead-letters
            # it when the queue does), its annotations merged first; the client's
            # discard_with_annotations sends exactly this.
            entry = self.unsettled.get(delivery.delivery_id)
            if entry is not None and state.message_annotations:
                entry.annotate(dict(state.message_annotations))
            state = Rejected()
        super().on_outcome(delivery, state, settled)

    def payload(self, entry: Entry) -> bytes:
        if not entry.merged_annotations():
            # A message that reached the queue another way (a plain address, the Python API)
            # gets what RabbitMQ's default exchange would have added.
            entry.annotate({X_EXCHANGE: "", X_ROUTING_KEY: self.queue.name})
        return super().payload(entry)
