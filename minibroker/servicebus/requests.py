"""Request/response nodes: a client's sending link carries requests, its receiving link the answers.

This is the AMQP management pattern Service Bus uses for claims-based
security (``$cbs``) and for each entity's ``$management`` node: a request's
application-properties name the ``operation``; the response goes to the
client's link whose source is the request's ``reply-to`` (or the node's own
address), with ``correlation-id`` set to the request's ``message-id`` and the
status in application-properties.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from ..amqp.errors import AMQPDecodeError
from ..amqp.message import Message, decode_message, encode_message
from ..amqp.messaging import Accepted, Properties, Rejected
from ..amqp.performatives import amqp_error
from ..broker.extension import ExtensionLink
from ..broker.replies import ReplyLink
from ..broker.roles import ReplySink
from ..protocol.endpoints import Delivery, Link

if TYPE_CHECKING:
    from ..broker.client_connection import BrokerConnection

__all__ = ["Response", "RequestLink", "ReplyLink", "Handler"]



class Response(NamedTuple):
    """An answer: HTTP-like status, its description, a body value and extra application-properties."""

    status: int
    description: str
    body: Any = None
    properties: dict[str, Any] | None = None


#: Turns a decoded request into its response.
Handler = Callable[[Message], Response]




class RequestLink(ExtensionLink):
    """The broker's receiving half of a pair: each message is a request for ``handler``."""

    def __init__(
        self,
        connection: BrokerConnection,
        link: Link,
        address: str,
        handler: Handler,
        status_field: str,
        description_field: str,
    ) -> None:
        self.connection = connection
        self.link = link
        self.address = address
        self.handler = handler
        self.status_field = status_field
        self.description_field = description_field

    def on_message(self, delivery: Delivery) -> None:
        engine = self.connection.engine
        try:
            request = decode_message(delivery.payload)
        except AMQPDecodeError as exc:
            if not delivery.remote_settled:
                engine.settle(delivery, Rejected(error=amqp_error("amqp:decode-error", f"malformed request: {exc}")))
            return
        if not delivery.remote_settled:
            engine.settle(delivery, Accepted())
        response = self.handler(request)
        properties = request.properties or Properties()
        reply = self._reply_link(properties.reply_to)
        if reply is None:
            return  # nobody to answer (the client attached no receiving link): as a real node, drop it
        application_properties: dict[str, Any] = {
            self.status_field: response.status,
            self.description_field: response.description,
        }
        if response.properties:
            application_properties.update(response.properties)
        answer = Message(
            body=response.body,
            properties=Properties(correlation_id=properties.message_id, to=properties.reply_to),
            application_properties=application_properties,
        )
        reply.send(encode_message(answer))

    def _reply_link(self, reply_to: Any) -> ReplySink | None:
        """The client's receiving link for answers: the one named by reply-to, else the one on this node."""
        fallback = None
        for session in self.connection.engine.sessions.values():
            for link in session.links_by_handle.values():
                sink: ReplySink | None = link.context.reply_sink if link.context is not None else None
                if sink is not None:
                    if sink.address == reply_to:
                        return sink
                    if sink.address == self.address:
                        fallback = sink
        return fallback
