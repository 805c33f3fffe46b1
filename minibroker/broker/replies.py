"""The broker's sending half of a request/response pair, as the layers' management nodes use it.

A client that talks to a management node (Service Bus' and Event Hubs' ``$management`` and
``$cbs``, RabbitMQ 4's ``/management``) attaches a sending link for its requests and a receiving
link whose address its requests name in ``reply-to``; the responses go out on that link
pre-settled (Part 2 §2.6.12: the sender may settle at once, the client needs no outcome), as the
client's credit allows.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import TYPE_CHECKING, Any

from .extension import ExtensionLink

if TYPE_CHECKING:
    from ..protocol.endpoints import Link
    from .client_connection import BrokerConnection

__all__ = ["MAX_PENDING_REPLIES", "ReplyLink"]

_TAG = struct.Struct(">I")
#: Responses waiting for credit on one reply link.  A client that sends requests but never grants
#: credit holds at most these: past them the oldest response is dropped, as it would be by a
#: client that detached (every byte the broker holds for a peer has a bound).
MAX_PENDING_REPLIES = 1000


class ReplyLink(ExtensionLink):
    """Responses go out on it, pre-settled, as credit allows (at most ``MAX_PENDING_REPLIES`` wait)."""

    def __init__(self, connection: BrokerConnection, link: Link, address: str | None = None) -> None:
        self.connection = connection
        self.link = link
        self.address = address
        self.reply_sink = self
        self._pending: deque[bytes] = deque(maxlen=MAX_PENDING_REPLIES)
        self._tags = 0

    def send(self, payload: bytes) -> None:
        self._pending.append(payload)
        self.on_credit()

    def on_credit(self, properties: dict[Any, Any] | None = None, drain: bool = False) -> None:
        engine = self.connection.engine
        while self._pending and engine.can_send(self.link):
            self._tags += 1
            engine.send_transfer(self.link, _TAG.pack(self._tags & 0xFFFFFFFF), self._pending.popleft(), True)
            self.connection.mark_dirty()
