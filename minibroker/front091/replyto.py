"""RabbitMQ's direct reply-to (``amq.rabbitmq.reply-to``, rabbitmq.com/docs/direct-reply-to).

An RPC client consumes from the pseudo-queue ``amq.rabbitmq.reply-to`` in no-ack mode and
publishes its requests with ``reply-to: amq.rabbitmq.reply-to``; the broker rewrites that to
``amq.rabbitmq.reply-to.<token>``, a name only this channel answers to.  A server publishing its
reply to the default exchange with that routing key reaches the consumer directly: the reply is
never stored in a queue, so it is lost when the consumer is gone (RabbitMQ: "if the RPC client's
channel or connection is gone, the reply is unroutable").

The rules and texts are RabbitMQ 3.10's, checked against it:

* consuming without no-ack: 406 ``reply consumer cannot acknowledge``; a second reply consumer
  on the channel: 406 ``reply consumer already set``;
* publishing with ``reply-to: amq.rabbitmq.reply-to`` from a channel without a reply consumer:
  406 ``fast reply consumer does not exist``;
* a reply to an unknown token, to the bare name, or through any exchange but the default one
  routes nowhere (``basic.return`` 312 when mandatory);
* no permission is checked on the pseudo-queue: RabbitMQ's ``basic.consume`` clause for it does
  not call ``check_read_permitted`` (a user without read on any queue consumed replies there, in
  3.10); the request and the reply each need write on their exchange, as any publish.
"""

from __future__ import annotations

import base64
import uuid
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..amqp091.properties import BasicProperties

__all__ = ["REPLY_TO", "REPLY_PREFIX", "ReplyConsumer", "ReplyTargets"]

REPLY_TO = "amq.rabbitmq.reply-to"
REPLY_PREFIX = REPLY_TO + "."


class ReplyConsumer(Protocol):
    """What a reply is handed to: a channel with a reply consumer (``.channel.Channel``, a floor
    above this module, described here rather than imported)."""

    def deliver_reply(self, routing_key: str, properties: BasicProperties, body: bytes) -> None: ...


class ReplyTargets:
    """The channels with a reply consumer, by the token their requests' ``reply-to`` carries."""

    def __init__(self) -> None:
        self._channels: dict[str, ReplyConsumer] = {}

    def register(self, channel: ReplyConsumer) -> str:
        """A new token for ``channel``'s reply consumer (random: a reply cannot guess its way in)."""
        token = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self._channels[token] = channel
        return token

    def unregister(self, token: str) -> None:
        self._channels.pop(token, None)

    def find(self, exchange: str, routing_key: str) -> ReplyConsumer | None:
        """The channel a publish to ``exchange`` with ``routing_key`` replies to, if any."""
        if exchange or not routing_key.startswith(REPLY_PREFIX):
            return None
        return self._channels.get(routing_key[len(REPLY_PREFIX) :])

    def clear(self) -> None:
        self._channels.clear()
