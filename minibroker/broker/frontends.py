"""Wire front ends: the protocol header a connection starts with names the front end that serves it.

A client's first 8 bytes are its protocol header (AMQP 1.0 Part 2 §2.2, AMQP 0-9-1 §4.2.2), so
one port can serve several protocols, as RabbitMQ serves AMQP 0-9-1 and 1.0 on 5672.  The server
reads them once per connection and asks :func:`front_end_for` which factory builds the
connection; a front end registers its header(s) with :func:`register_front_end` from its own
package, so the broker core names none of them.  A header nobody registered is served by the
broker's own AMQP 1.0 connection, which answers a wrong header as Part 2 §2.2 says (its own
header, then the socket is closed).

:class:`ServedConnection` is everything the server's read/write loop needs of a connection,
whatever its protocol; :class:`ReadState` the per-read flags it checks (held logins, a backlog of
frames still to handle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["FrontEndFactory", "ReadState", "ServedConnection", "front_end_for", "register_front_end"]

#: The length of every AMQP protocol header ("AMQP" and four octets).
HEADER_SIZE = 8


class ReadState(Protocol):
    """What the server's reader asks after each read (the AMQP 1.0 engine's login hold and frame backlog)."""

    #: Set by the server when the peer's address guessed passwords: its PLAIN logins wait their turn.
    hold_logins: bool
    #: A login is waiting for its turn (the server sleeps, then clears this and reads on).
    login_held: bool
    #: A login failed in the last read (the server counts it against the peer's address).
    login_failed: bool
    #: Frames were left unhandled by the last read's bound (``max_frames``): handle them before reading again.
    backlogged: bool
    @property
    def read_paused(self) -> bool:
        """Do not read until this clears (an AMQP 0-9-1 publisher blocked by the broker's resource alarm)."""


class ServedConnection(Protocol):
    """One client connection as the server drives it: bytes in, bytes out, time, teardown."""

    peer: str
    #: False once the broker has forgotten it (it gets no more wake-ups).
    open: bool
    #: Routing to it stopped because its output was over the bound; resumes on ``output_drained``.
    throttled: bool
    #: Bytes the transport holds for it, unwritten (kept up to date by the server's sender).
    transport_backlog: int | None

    @property
    def protocol(self) -> ReadState: ...

    @property
    def finished(self) -> bool:
        """Nothing more will be read or written: close the transport once the output is sent."""

    @property
    def handshaking(self) -> bool:
        """Still in its handshake (it holds no ``max_connections`` slot; ``max_handshakes`` bounds these)."""

    def receive_data(self, data: bytes, max_frames: int | None = None) -> None: ...

    def data_to_send(self) -> bytes: ...

    def tick(self, now: float) -> float | None:
        """Timeouts and heartbeats at server time ``now``; the next deadline."""

    def output_drained(self) -> None: ...

    def connection_lost(self) -> None: ...

    def release(self) -> None:
        """The transport is closed: free what the connection holds."""

    def close_forced(self) -> None:
        """The broker is stopping or resetting: close with the protocol's "forced" condition."""

    def alarm(self, reason: str | None) -> None:
        """The broker's resource alarm is raised (``reason``) or cleared (None): see ``Broker.block_publishers``."""

    def notify(self) -> None:
        """Have its output written (the broker calls it when work for another connection queued some)."""


#: Builds the connection for a header: (broker, wake-up callback, peer address).  The broker is
#: ``engine.Broker``, typed Any as ``extension.LayerFactory`` types it: the engine imports this
#: registry, so naming the engine here would close a circle; each factory annotates its own.
FrontEndFactory = Callable[[Any, Callable[[], None], str], ServedConnection]

_FRONT_ENDS: dict[bytes, FrontEndFactory] = {}


def register_front_end(header: bytes, factory: FrontEndFactory) -> None:
    """Serve connections that start with ``header`` (8 bytes) with connections ``factory`` builds."""
    if len(header) != HEADER_SIZE:
        raise ValueError(f"a protocol header is {HEADER_SIZE} bytes, got {len(header)}: {header!r}")
    _FRONT_ENDS[header] = factory


def front_end_for(header: bytes) -> FrontEndFactory | None:
    """The factory registered for ``header``; None: the broker's own AMQP 1.0 connection serves it."""
    return _FRONT_ENDS.get(header)
