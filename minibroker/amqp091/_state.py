"""Every state an AMQP 0-9-1 connection and its channels pass through, in one place.

Theory of operation.  The server side of 0-9-1 is a conversation the server leads: it answers
the protocol header with ``connection.start``, a ``start-ok`` with ``tune``, and ``open`` with
``open-ok`` (0-9-1 specification §2.2.4 "Connection" and the class grammar in §1.4.2:
``connection = open-connection *use-connection close-connection``).  Each step expects exactly
one method; anything else in a handshake state is a protocol violation that closes the
connection (RabbitMQ answers 503 COMMAND_INVALID or 505 UNEXPECTED_FRAME; here, the codes it
uses are in :data:`HANDSHAKE` beside the method each state waits for).

Once open, a connection carries channels.  A channel is opened by ``channel.open`` and is then
either OPEN or CLOSING: closed by us with ``channel.close`` and waiting for the peer's
``close-ok``.  §2.2.5.2 "Channel" and RabbitMQ: "after sending channel.close, any received
methods except channel.close and channel.close-ok MUST be discarded".  A channel whose content
is half-received (a ``basic.publish`` whose header or body frames are still coming) accepts
only those frames (§4.2.6: "a peer MUST NOT interleave ... content frames on one channel").

Connection close mirrors channel close: after we send ``connection.close`` everything but
``close`` / ``close-ok`` is discarded (§2.2.4 "close").
"""

from __future__ import annotations

import enum
from typing import Final

from .methods import ConnectionOpen, ConnectionSecureOk, ConnectionStartOk, ConnectionTuneOk, Method

__all__ = ["ChannelState", "ConnectionState", "HANDSHAKE"]


class ConnectionState(enum.Enum):
    """Where a 0-9-1 connection is, as the server sees it."""

    AWAIT_HEADER = "AWAIT_HEADER"  # nothing read yet
    AWAIT_START_OK = "AWAIT_START_OK"  # connection.start sent
    AWAIT_SECURE_OK = "AWAIT_SECURE_OK"  # connection.secure sent (a mechanism that needs a second step)
    AWAIT_TUNE_OK = "AWAIT_TUNE_OK"  # connection.tune sent
    AWAIT_OPEN = "AWAIT_OPEN"  # tune-ok read
    OPEN = "OPEN"  # open-ok sent: channels may be used
    CLOSING = "CLOSING"  # our connection.close sent: waiting for close-ok
    CLOSED = "CLOSED"  # close-ok sent or read, or the transport is gone


class ChannelState(enum.Enum):
    """Where one channel is (§2.2.5)."""

    OPEN = "OPEN"
    CLOSING = "CLOSING"  # our channel.close sent: waiting for close-ok, discarding the rest


#: Handshake state -> the one method it takes.  Anything else in that state is answered with
#: the reply code beside it (what RabbitMQ sends: 505 UNEXPECTED_FRAME for a frame that is not a
#: method frame, 503 COMMAND_INVALID for the wrong method).
HANDSHAKE: Final[dict[ConnectionState, type[Method]]] = {
    ConnectionState.AWAIT_START_OK: ConnectionStartOk,
    ConnectionState.AWAIT_SECURE_OK: ConnectionSecureOk,
    ConnectionState.AWAIT_TUNE_OK: ConnectionTuneOk,
    ConnectionState.AWAIT_OPEN: ConnectionOpen,
}
