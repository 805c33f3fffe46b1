"""Events the 0-9-1 engine reports to its owner after reading bytes (cf. ``minibroker.protocol.events``).

Each is an immutable named tuple.  The handshake (start, tune, open) and channel open/close are
answered by the engine itself (a close-ok after reported methods as an :class:`Answer`, for the
owner to send in order); what it reports is what a broker must act on.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .errors import AMQP091Error
from .methods import BasicPublish, Method
from .properties import BasicProperties

__all__ = [
    "Answer",
    "ChannelClosed",
    "ChannelOpened",
    "ConnectionClosed",
    "ConnectionOpened",
    "Event",
    "MethodReceived",
    "Published",
]


class ConnectionOpened(NamedTuple):
    """``connection.open`` was accepted and ``open-ok`` sent: channels may be opened."""

    user: str
    vhost: str
    client_properties: dict[str, Any]


class ChannelOpened(NamedTuple):
    channel: int


class MethodReceived(NamedTuple):
    """A method of the exchange, queue, basic, confirm or tx class (or channel.flow) on an open channel."""

    channel: int
    method: Method


class Published(NamedTuple):
    """A ``basic.publish`` with its whole content: properties and body (§2.3.5.2)."""

    channel: int
    method: BasicPublish
    properties: BasicProperties
    body: bytes
    #: The content header frame's payload size, as received (what the message's properties take).
    header_size: int


class ChannelClosed(NamedTuple):
    """A channel is gone: the peer closed it (we answered close-ok) or we did (``error`` says why).

    Reported when the channel stops being usable, so what it held (consumers, unacknowledged
    deliveries) can be given back at once, before a ``close-ok`` the peer may never send.
    """

    channel: int
    error: AMQP091Error | None
    by_peer: bool


class ConnectionClosed(NamedTuple):
    """The connection is over (every open channel was reported closed first)."""

    error: AMQP091Error | None
    by_peer: bool


class Answer(NamedTuple):
    """A reply of the engine's own (``channel.close-ok``, ``connection.close-ok``) to a request
    that came after methods it reported from the same read: the owner sends it with
    ``Connection.send`` once it has answered those, so replies leave in the order the requests
    came, as RabbitMQ's channel process answers a channel's methods one after the other (a client
    that sends ``basic.cancel`` and ``channel.close`` without waiting must see cancel-ok first:
    py-amqp fails on a cancel-ok for a channel it has closed)."""

    channel: int
    method: Method


Event = ConnectionOpened | ChannelOpened | MethodReceived | Published | ChannelClosed | ConnectionClosed | Answer
