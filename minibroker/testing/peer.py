"""An in-memory AMQP 1.0 *client* peer for unit tests of the engine and the broker.

No sockets, threads or sleeps: :class:`Peer` builds the bytes a client would
send (protocol headers, SASL frames and every transport performative of OASIS
AMQP 1.0 Part 2 §2.7) and keeps the session and link counters a client must
keep (§2.5.6 transfer ids and windows, §2.6.7 delivery-count and link-credit).
(:class:`Peer` and the frame reader live in :mod:`minibroker.protocol.peer`, below the
broker, so that ``minibroker.Client`` uses them without it.)  :class:`Pump` feeds those bytes to a protocol :class:`~minibroker.protocol.Connection`
or a broker's :class:`~minibroker.broker.engine.BrokerConnection` (optionally one
byte at a time) and parses what comes back into :class:`Frame` tuples::

    broker = Broker()
    peer = Peer()
    pump = connect(broker, peer)
    frames = pump.send(peer.header() + peer.open() + peer.begin())
    assert frames.names() == ["ProtocolHeader", "Open", "Begin"]
    pump.send(peer.attach_receiver("r", "q", handle=0) + peer.flow(0, credit=10))

:func:`exchange` is the one-shot form: feed bytes, return the frames written back
(pass ``peer=`` so the peer also learns the server's credit and ids)::

    conn = broker.connect(lambda: None)
    frames = exchange(conn, peer.header() + peer.open() + peer.begin(), peer=peer)

For a bare protocol ``Connection``, ``connect(conn, peer, on_event=auto_accept(conn))``
accepts every attach and grants credit, as a permissive broker would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..broker.engine import Broker
from ..protocol.connection import Connection
from ..protocol.events import LinkAttached
from ..protocol.peer import Frame as Frame
from ..protocol.peer import FrameReader as FrameReader
from ..protocol.peer import Frames as Frames
from ..protocol.peer import Peer as Peer
from ..protocol.peer import PeerLink as PeerLink
from ..protocol.peer import PeerSession as PeerSession
from ..protocol.peer import ProtocolHeader as ProtocolHeader
from ..protocol.peer import parse_frames as parse_frames

__all__ = [
    "Frame", "Frames", "Peer", "PeerLink", "PeerSession", "ProtocolHeader", "Pump", "Transport",
    "FrameReader", "auto_accept", "connect", "exchange", "parse_frames",
]  # fmt: skip


# --------------------------------------------------------------------------- driving a transport


class Transport(Protocol):
    """What a :class:`Pump` drives: a protocol ``Connection`` or a ``BrokerConnection``."""

    def receive_data(self, data: bytes) -> Any: ...

    def data_to_send(self) -> bytes: ...

    @property
    def finished(self) -> bool: ...


class Pump:
    """Feeds a :class:`Transport` and reads back what it writes, as :class:`Frames`.

    ``trickle=True`` feeds one byte at a time (output is read after every
    byte).  Events returned by a protocol ``Connection`` are kept in
    :attr:`events` and, if ``on_event`` is given, passed to it as soon as they
    are returned (so a test can answer an attach before the next byte); every
    frame read back is kept in :attr:`frames` and, when a :class:`Peer` is
    given, passed to :meth:`Peer.observe`.
    """

    def __init__(
        self,
        target: Transport,
        peer: Peer | None = None,
        *,
        trickle: bool = False,
        on_event: Callable[[Any], None] | None = None,
    ) -> None:
        self.target = target
        self.peer = peer
        self.trickle = trickle
        self.on_event = on_event
        self.events: list[Any] = []
        self.frames = Frames()
        self._reader = FrameReader()

    def send(self, data: bytes, *, trickle: bool | None = None) -> Frames:
        """Feed ``data``; return the frames written back meanwhile."""
        out = Frames()
        if trickle if trickle is not None else self.trickle:
            for i in range(len(data)):
                self._feed(data[i : i + 1])
                out += self.read()
        else:
            self._feed(data)
            out += self.read()
        return out

    def _feed(self, data: bytes) -> None:
        events = self.target.receive_data(data)
        if isinstance(events, list):
            self.events += events
            if self.on_event is not None:
                for event in events:
                    self.on_event(event)

    def read(self) -> Frames:
        """Frames written since the last read (e.g. after a broker call or ``tick``)."""
        frames = self._reader.feed(self.target.data_to_send())
        self.frames += frames
        if self.peer is not None:
            self.peer.observe(frames)
        return frames

    def take_events(self) -> list[Any]:
        """Events collected so far, clearing the list."""
        events, self.events = self.events, []
        return events

    @property
    def finished(self) -> bool:
        """Whether the server wants the transport closed."""
        return self.target.finished


def auto_accept(connection: Connection, credit: int = 100) -> Callable[[Any], None]:
    """An ``on_event`` reaction for a bare protocol ``Connection`` that plays a permissive broker.

    Every attached link is accepted with the peer's own termini (§2.6.3) and a
    link the peer sends on is granted ``credit`` (§2.6.7)::

        conn = Connection()
        pump = connect(conn, peer, on_event=auto_accept(conn))
    """

    def react(event: Any) -> None:
        if isinstance(event, LinkAttached):
            link = event.link
            connection.accept_link(link, source=link.source, target=link.target)
            if not link.is_sender:
                connection.grant_credit(link, credit)

    return react


def connect(
    target: Transport | Broker,
    peer: Peer | None = None,
    *,
    trickle: bool = False,
    on_event: Callable[[Any], None] | None = None,
) -> Pump:
    """A :class:`Pump` on ``target``: a ``Connection``, a ``BrokerConnection``, or a ``Broker``
    (which is asked for a new connection with a no-op wake-up callback)."""
    if isinstance(target, Broker):
        target = target.connect(lambda: None, "minibroker.testing")
    return Pump(target, peer, trickle=trickle, on_event=on_event)


def exchange(target: Transport, data: bytes, *, trickle: bool = False, peer: Peer | None = None) -> Frames:
    """Feed ``data`` to ``target`` and return the frames it wrote back (events are dropped; see :class:`Pump`)."""
    return Pump(target, peer, trickle=trickle).send(data)
