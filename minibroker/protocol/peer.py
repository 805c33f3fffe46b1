"""The client side of the wire, sans-IO: the bytes an AMQP 1.0 client sends, and frames read back.

:class:`Peer` builds the bytes a client would send (protocol headers, SASL
frames and every transport performative of OASIS AMQP 1.0 Part 2 §2.7) and
keeps the session and link counters a client must keep (§2.5.6 transfer ids
and windows, §2.6.7 delivery-count and link-credit); :class:`FrameReader`
and :func:`parse_frames` turn bytes written back into :class:`Frame` tuples.
No socket, thread or broker: ``minibroker.Client`` drives it over a socket,
and ``minibroker.testing`` (``Pump``, ``connect``) against a broker in memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field
from typing import Any, NamedTuple, TypeVar

from ..amqp import codec
from ..amqp.composite import Composite, generated_from_list
from ..amqp.messaging import Accepted, Source, Target
from ..amqp.performatives import (
    RCV_FIRST,
    ROLE_RECEIVER,
    ROLE_SENDER,
    SND_MIXED,
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    End,
    Error,
    Flow,
    Open,
    Transfer,
)
from ..amqp.sasl_frames import SaslInit, SaslOutcome
from ..amqp.types import symbol
from ..records import record
from .framing import (
    AMQP_HEADER,
    EMPTY_FRAME,
    FRAME_AMQP,
    FRAME_HEADER,
    FRAME_SASL,
    SASL_HEADER,
    FrameHeaderError,
    frame_header,
)
from .transfers import TRANSFER_LIST8, TransferTaker, read_transfer, take_transfers, transfer_frame

__all__ = [
    "Frame", "FrameReader", "Frames", "Peer", "PeerLink", "PeerSession", "ProtocolHeader", "parse_frames",
]  # fmt: skip

SERIAL_MOD = 2**32
#: The session windows the peer advertises unless told otherwise (§2.5.6).
DEFAULT_WINDOW = 2**31 - 1

P = TypeVar("P")


# --------------------------------------------------------------------------- frames read back


class ProtocolHeader(bytes):
    """An 8-byte protocol header read back (Part 2 §2.2, Part 5 §5.1); equal to its bytes."""

    @property
    def is_sasl(self) -> bool:
        """True for the SASL header (protocol id 3, Part 5 §5.1)."""
        return self == SASL_HEADER


class Frame(NamedTuple):
    """One frame read back: ``(channel, performative, payload)`` (Part 2 §2.3.2).

    ``performative`` is the decoded frame body (a performative of §2.7, a SASL
    frame body of Part 5 §5.3.3), a :class:`ProtocolHeader` for a protocol
    header, or ``None`` for an empty (keep-alive) frame (§2.4.5).  ``payload``
    holds the bytes after the performative: a transfer's message data.
    """

    channel: int
    performative: Any
    payload: bytes

    @property
    def name(self) -> str:
        """The performative's class name, ``"EmptyFrame"`` for an empty frame."""
        return "EmptyFrame" if self.performative is None else type(self.performative).__name__


class Frames(list[Frame]):
    """A list of :class:`Frame` with look-ups by performative type."""

    def names(self) -> list[str]:
        """Class names of the frames in order, e.g. ``["ProtocolHeader", "Open"]``."""
        return [f.name for f in self]

    def performatives(self) -> list[Any]:
        """The decoded bodies in order."""
        return [f.performative for f in self]

    def of(self, kind: type[P]) -> list[P]:
        """The performatives of one type, e.g. ``frames.of(Transfer)``."""
        return [f.performative for f in self if isinstance(f.performative, kind)]

    def one(self, kind: type[P]) -> P:
        """The only performative of a type; raises ``AssertionError`` unless there is exactly one."""
        found = self.of(kind)
        if len(found) != 1:
            raise AssertionError(f"expected one {kind.__name__}, got {len(found)} in {self.names()}")
        return found[0]

    def last(self, kind: type[P]) -> P:
        """The last performative of a type; raises ``AssertionError`` if there is none."""
        found = self.of(kind)
        if not found:
            raise AssertionError(f"no {kind.__name__} in {self.names()}")
        return found[-1]


class FrameReader:
    """Incremental parser of the bytes a server writes (Part 2 §2.2-§2.3, Part 5 §5.2).

    At a frame boundary, ``AMQP`` starts a protocol header (a frame that long
    would exceed 1 GiB); anything else is a frame header: SIZE, DOFF, TYPE,
    channel.  Bytes of an incomplete frame are kept for the next :meth:`feed`.
    """

    def __init__(self) -> None:
        self._buf = b""
        #: ``(channel, handle, count)`` of the deliveries the last :meth:`feed` handed to sinks
        #: (:func:`.transfers.take_transfers`), set even when that feed raised.
        self.taken: list[tuple[int, int, int]] = []

    @property
    def pending(self) -> bytes:
        """Bytes of a frame not yet complete."""
        return self._buf

    def feed(self, data: bytes, take: TransferTaker | None = None) -> Frames:
        """Add bytes; return the frames they completed.

        With ``take``, the whole single-frame deliveries that no other frame of this call
        precedes go to the sink ``take(channel, handle)`` gives for their link
        (:func:`.transfers.take_transfers`) and are not among the frames returned; a link it
        gives no sink for ends that, and its frames are returned as usual.  Only leading
        transfers are taken so that a caller handling them at once still sees every frame in
        the order the server sent them; :attr:`taken` says how many went to each link.
        """
        buf = self._buf + data
        out = Frames()
        self.taken = []
        pos = take_transfers(buf, take, self.taken) if take is not None else 0
        build_transfer: Any = None
        while len(buf) - pos >= 8:
            if buf[pos : pos + 4] == b"AMQP":
                out.append(Frame(0, ProtocolHeader(buf[pos : pos + 8]), b""))
                pos += 8
                continue
            try:
                size, doff, frame_type, channel = frame_header(buf, pos)
            except FrameHeaderError as exc:
                raise ValueError(f"malformed frame header at byte {pos}: {exc}") from None
            if len(buf) - pos < size:
                break
            start, stop = pos + doff * 4, pos + size
            pos = stop
            if frame_type not in (FRAME_AMQP, FRAME_SASL):
                raise ValueError(f"unknown frame type {frame_type}")
            if start == stop:
                out.append(Frame(channel, None, b""))
                continue
            if buf.startswith(TRANSFER_LIST8, start):
                # The usual transfer (a stream read is nearly all of them): read its fields
                # without the codec and build the Transfer it would (transfers.py; anything
                # unusual there returns None and goes to the codec below).
                fields = read_transfer(buf, start, stop)
                if fields is not None:
                    if build_transfer is None:
                        build_transfer = generated_from_list(Transfer)
                    out.append(Frame(channel, build_transfer(list(fields[:6])), buf[fields[6] : stop]))
                    continue
            body = buf[start:stop]
            performative, end = codec.decode_at(body, 0)
            out.append(Frame(channel, performative, body[end:]))
        self._buf = buf[pos:]
        return out


def parse_frames(data: bytes) -> Frames:
    """Parse a whole byte string of headers and frames; trailing partial bytes are an error."""
    reader = FrameReader()
    frames = reader.feed(data)
    if reader.pending:
        raise ValueError(f"{len(reader.pending)} trailing bytes do not make a whole frame")
    return frames


# --------------------------------------------------------------------------- the client peer


@record
class PeerLink:
    """The peer's end of a link (§2.6): its handle, role and flow-control counters (§2.6.7)."""

    name: str
    handle: int
    channel: int
    #: ``ROLE_SENDER`` if the peer sends on the link, ``ROLE_RECEIVER`` if it receives.
    role: bool
    delivery_count: int = 0
    #: The link-credit as the peer sees it: granted by the server for a sending
    #: link (§2.6.7 formula), granted by the peer itself for a receiving one.
    credit: int = 0
    remote_handle: int | None = None
    #: The server's attach, once it arrived.
    remote_attach: Attach | None = None
    #: Set when the server's detach arrived.
    remote_detach: Detach | None = None
    #: A multi-frame delivery is being sent (the last transfer had ``more``).
    sending_more: bool = False
    #: A multi-frame delivery is being received.
    receiving_more: bool = False
    available: int | None = None
    drain: bool = False

    @property
    def is_sender(self) -> bool:
        return self.role == ROLE_SENDER


@record
class PeerSession:
    """The peer's end of a session (§2.5) and its transfer bookkeeping (§2.5.6)."""

    channel: int
    next_outgoing_id: int = 0
    incoming_window: int = DEFAULT_WINDOW
    outgoing_window: int = DEFAULT_WINDOW
    #: The next delivery-id :meth:`Peer.transfer` assigns when given ``None``.
    next_delivery_id: int = 0
    #: The server's channel, from its ``begin`` (remote-channel names ours).
    remote_channel: int | None = None
    #: next-incoming-id: the server's next transfer-id, from its begin and transfers.
    next_incoming_id: int | None = None
    remote_incoming_window: int | None = None
    remote_outgoing_window: int | None = None
    remote_begin: Begin | None = None
    remote_end: End | None = None
    links: dict[int, PeerLink] = field(default_factory=dict)  # by our handle

    def link_by_remote(self, handle: int | None) -> PeerLink | None:
        for link in self.links.values():
            if link.remote_handle is not None and link.remote_handle == handle:
                return link
        return None


class Peer:
    """A client that writes AMQP bytes and keeps its protocol counters.

    Every builder returns bytes and updates the counters as if the bytes were
    sent; :meth:`observe` updates them from frames read back (a :class:`Pump`
    given the peer does this itself).  ``channel`` defaults to 0 everywhere.
    """

    def __init__(self, container_id: str = "minibroker-test-peer", max_frame_size: int = 65536) -> None:
        self.container_id = container_id
        self.max_frame_size = max_frame_size
        #: The server's max-frame-size from its open (§2.7.1); bounds transfer splitting.
        self.remote_max_frame_size = 512
        self.remote_open: Open | None = None
        self.remote_close: Close | None = None
        self.sasl_outcome: Any = None
        self.sessions: dict[int, PeerSession] = {}  # by our channel

    # ----------------------------------------------------------- raw frames

    @staticmethod
    def header() -> bytes:
        """The AMQP protocol header ``AMQP 0 1 0 0`` (Part 2 §2.2)."""
        return AMQP_HEADER

    @staticmethod
    def sasl_header() -> bytes:
        """The SASL protocol header ``AMQP 3 1 0 0`` (Part 5 §5.1)."""
        return SASL_HEADER

    @staticmethod
    def empty_frame() -> bytes:
        """An empty frame, the keep-alive of §2.4.5."""
        return EMPTY_FRAME

    @staticmethod
    def raw_frame(channel: int, body: bytes, frame_type: int = FRAME_AMQP, doff: int = 2) -> bytes:
        """A frame around arbitrary ``body`` bytes (§2.3.1), for malformed-input tests.

        ``doff`` words of header are written (extra ones zero-filled) even when
        that makes the frame invalid.
        """
        extended = b"\x00" * max(0, doff * 4 - 8)
        return FRAME_HEADER.pack(8 + len(extended) + len(body), doff, frame_type, channel) + extended + body

    def frame(self, channel: int, performative: Composite, payload: bytes = b"") -> bytes:
        """An AMQP frame (§2.3.2) carrying ``performative``; counters are updated as if it was sent."""
        self._sent(channel, performative)
        return self.raw_frame(channel, codec.encode(performative) + payload)

    @staticmethod
    def sasl_frame(body: Composite) -> bytes:
        """A SASL frame (Part 5 §5.3.1): type 1, channel 0."""
        return Peer.raw_frame(0, codec.encode(body), FRAME_SASL)

    # ------------------------------------------------------------------ SASL

    def sasl_init(
        self, mechanism: str, initial_response: bytes | None = None, hostname: str | None = None
    ) -> bytes:
        """``sasl-init`` choosing a mechanism (Part 5 §5.3.3.2)."""
        return self.sasl_frame(
            SaslInit(mechanism=symbol(mechanism), initial_response=initial_response, hostname=hostname)
        )

    def sasl_anonymous(self) -> bytes:
        """SASL header plus ``sasl-init`` ANONYMOUS (RFC 4505), ready to pipeline."""
        return self.sasl_header() + self.sasl_init("ANONYMOUS", b"")

    def sasl_plain(self, user: str, password: str) -> bytes:
        """SASL header plus ``sasl-init`` PLAIN (RFC 4616: authzid NUL user NUL password)."""
        response = b"\x00" + user.encode() + b"\x00" + password.encode()
        return self.sasl_header() + self.sasl_init("PLAIN", response)

    # ------------------------------------------------------------ connection

    def open(self, **fields: Any) -> bytes:
        """``open`` (§2.7.1); keyword arguments set :class:`Open` fields (e.g. ``idle_time_out`` ms)."""
        fields.setdefault("container_id", self.container_id)
        fields.setdefault("max_frame_size", self.max_frame_size)
        return self.frame(0, Open(**fields))

    def close(self, error: Error | None = None) -> bytes:
        """``close`` (§2.7.9)."""
        return self.frame(0, Close(error=error))

    def start(self, sasl: bool = False, channel: int = 0, **open_fields: Any) -> bytes:
        """Protocol header(s), ``open`` and ``begin`` in one go (pipelined, §2.4.1)."""
        head = self.sasl_anonymous() if sasl else b""
        return head + self.header() + self.open(**open_fields) + self.begin(channel)

    # --------------------------------------------------------------- session

    def session(self, channel: int = 0) -> PeerSession:
        """The session on ``channel``; ``KeyError`` names the channels there are."""
        try:
            return self.sessions[channel]
        except KeyError:
            raise KeyError(f"no session on channel {channel}; begun: {sorted(self.sessions)}") from None

    def begin(
        self,
        channel: int = 0,
        *,
        next_outgoing_id: int = 0,
        incoming_window: int = DEFAULT_WINDOW,
        outgoing_window: int = DEFAULT_WINDOW,
        **fields: Any,
    ) -> bytes:
        """``begin`` (§2.7.2) of a new session on ``channel``."""
        return self.frame(
            channel,
            Begin(
                next_outgoing_id=next_outgoing_id,
                incoming_window=incoming_window,
                outgoing_window=outgoing_window,
                **fields,
            ),
        )

    def end(self, channel: int = 0, error: Error | None = None) -> bytes:
        """``end`` (§2.7.8)."""
        return self.frame(channel, End(error=error))

    # ------------------------------------------------------------------ links

    def attach(
        self,
        name: str,
        handle: int,
        role: bool,
        *,
        source: Any = None,
        target: Any = None,
        channel: int = 0,
        **fields: Any,
    ) -> bytes:
        """``attach`` (§2.7.3) with any fields; ``role`` is the peer's role (§2.8.1)."""
        if role == ROLE_SENDER:
            fields.setdefault("initial_delivery_count", 0)
        return self.frame(
            channel, Attach(name=name, handle=handle, role=role, source=source, target=target, **fields)
        )

    def attach_sender(
        self,
        name: str,
        address: str | None,
        handle: int,
        *,
        channel: int = 0,
        snd_settle_mode: int = SND_MIXED,
        rcv_settle_mode: int = RCV_FIRST,
        source: Any = None,
        attach_fields: dict[str, Any] | None = None,
        **target_fields: Any,
    ) -> bytes:
        """Attach a link the peer sends on: target ``address`` (Part 3 §3.5.4) plus ``target_fields``.

        ``address=None`` asks for the anonymous relay; extra :class:`Attach`
        fields go in ``attach_fields``.
        """
        return self.attach(
            name,
            handle,
            ROLE_SENDER,
            source=source if source is not None else Source(address=name),
            target=Target(address=address, **target_fields),
            channel=channel,
            snd_settle_mode=snd_settle_mode,
            rcv_settle_mode=rcv_settle_mode,
            **(attach_fields or {}),
        )

    def attach_receiver(
        self,
        name: str,
        address: str | None,
        handle: int,
        *,
        channel: int = 0,
        snd_settle_mode: int = SND_MIXED,
        rcv_settle_mode: int = RCV_FIRST,
        target: Any = None,
        attach_fields: dict[str, Any] | None = None,
        **source_fields: Any,
    ) -> bytes:
        """Attach a link the peer receives on: source ``address`` (Part 3 §3.5.3) plus ``source_fields``.

        E.g. ``attach_receiver("r", "q", 0, distribution_mode="copy")``; extra
        :class:`Attach` fields go in ``attach_fields``.
        """
        return self.attach(
            name,
            handle,
            ROLE_RECEIVER,
            source=Source(address=address, **source_fields),
            target=target if target is not None else Target(address=name),
            channel=channel,
            snd_settle_mode=snd_settle_mode,
            rcv_settle_mode=rcv_settle_mode,
            **(attach_fields or {}),
        )

    def detach(
        self, handle: int, closed: bool = True, error: Error | None = None, *, channel: int = 0
    ) -> bytes:
        """``detach`` (§2.7.7); ``closed`` also closes the link (§2.6.6)."""
        return self.frame(channel, Detach(handle=handle, closed=closed, error=error))

    def link(self, handle: int, channel: int = 0) -> PeerLink:
        """The peer's link with ``handle`` on ``channel``."""
        session = self.session(channel)
        try:
            return session.links[handle]
        except KeyError:
            raise KeyError(
                f"no link with handle {handle} on channel {channel}: {sorted(session.links)}"
            ) from None

    # -------------------------------------------------------------------- flow

    def flow(
        self,
        handle: int | None = None,
        credit: int | None = None,
        *,
        channel: int = 0,
        drain: bool = False,
        echo: bool = False,
        delivery_count: int | None = None,
        available: int | None = None,
        properties: dict[Any, Any] | None = None,
        next_incoming_id: int | None = None,
        incoming_window: int | None = None,
        next_outgoing_id: int | None = None,
        outgoing_window: int | None = None,
    ) -> bytes:
        """``flow`` (§2.7.4) with the session's current counters.

        With a ``handle`` the link's delivery-count is filled in (§2.6.7); for a
        receiving link ``credit`` is the new link-credit; without ``credit`` the
        link-credit the peer last granted or was granted is repeated.
        """
        session = self.session(channel)
        link_fields: dict[str, Any] = {}
        if handle is not None:
            link = session.links.get(handle)
            count = delivery_count
            if count is None:
                count = link.delivery_count if link is not None else 0
            if credit is None:
                credit = link.credit if link is not None else 0
            link_fields = {
                "handle": handle,
                "delivery_count": count,
                "link_credit": credit,
                "available": available,
                "drain": drain,
            }
        return self.frame(
            channel,
            Flow(
                next_incoming_id=next_incoming_id
                if next_incoming_id is not None
                else session.next_incoming_id,
                incoming_window=incoming_window if incoming_window is not None else session.incoming_window,
                next_outgoing_id=next_outgoing_id
                if next_outgoing_id is not None
                else session.next_outgoing_id,
                outgoing_window=outgoing_window if outgoing_window is not None else session.outgoing_window,
                echo=echo,
                properties=properties,
                **link_fields,
            ),
        )

    # ---------------------------------------------------------------- transfer

    def transfer(
        self,
        handle: int,
        delivery_id: int | None,
        tag: bytes | None,
        payload: bytes,
        settled: bool = False,
        *,
        channel: int = 0,
        frame_payload: int | None = None,
        more: bool = False,
        aborted: bool = False,
        state: Any = None,
        message_format: int | None = 0,
        **fields: Any,
    ) -> bytes:
        """``transfer`` frames (§2.7.5) carrying one delivery (§2.6.12).

        ``delivery_id=None`` takes the session's next delivery-id (or, while a
        delivery is in progress on the link, continues it without one);
        ``tag=None`` makes a tag from the delivery-id.  The payload is split
        into frames of at most ``frame_payload`` bytes (default: whatever fits
        the server's max-frame-size); every frame but the last has ``more``.
        ``more=True`` leaves the delivery open for a later call;
        ``aborted=True`` marks the last frame aborted (§2.6.14).
        """
        session = self.session(channel)
        link = session.links.get(handle)
        continuing = link is not None and link.sending_more
        if not (continuing or fields or more or aborted or frame_payload is not None or state is not None) and (
            message_format == 0
        ):
            # The usual delivery (every message a sender sends): one frame written by the
            # broker's own writer when it fits, without a Transfer made and encoded twice.
            number = session.next_delivery_id if delivery_id is None else delivery_id
            label = number.to_bytes(4, "big") if tag is None else tag
            if len(label) <= 32:
                data = transfer_frame(channel, handle, number, label, settled, payload)
                if len(data) <= self.remote_max_frame_size:
                    self._sent_transfer(session, link, number, False)
                    return data
        first = Transfer(handle=handle, **fields)
        if not continuing or delivery_id is not None:
            if delivery_id is None:
                delivery_id = session.next_delivery_id
            if tag is None:
                tag = delivery_id.to_bytes(4, "big")
            first = Transfer(
                handle=handle,
                delivery_id=delivery_id,
                delivery_tag=tag,
                message_format=message_format,
                settled=settled,
                state=state,
                **fields,
            )
        out = bytearray()
        performative, rest = first, payload
        while True:
            performative.more, performative.aborted = (False, True) if aborted else (more, False)
            if len(rest) <= self._room(performative, frame_payload):
                out += self.frame(channel, performative, rest)
                break
            performative.more, performative.aborted = True, False
            room = self._room(performative, frame_payload)
            out += self.frame(channel, performative, rest[:room])
            performative, rest = Transfer(handle=handle), rest[room:]
        return bytes(out)

    def _room(self, performative: Transfer, frame_payload: int | None) -> int:
        """Payload bytes that fit in a frame with ``performative`` (§2.7.1 max-frame-size)."""
        if frame_payload is not None:
            return frame_payload
        return max(1, self.remote_max_frame_size - 8 - len(codec.encode(performative)))

    def disposition(
        self,
        first: int,
        last: int | None = None,
        *,
        settled: bool = True,
        state: Any = None,
        role: bool = ROLE_RECEIVER,
        channel: int = 0,
        batchable: bool = False,
    ) -> bytes:
        """``disposition`` (§2.7.6) for ``first..last``; the default settles as the receiver with accepted."""
        if state is None and settled:
            state = Accepted()
        return self.frame(
            channel,
            Disposition(role=role, first=first, last=last, settled=settled, state=state, batchable=batchable),
        )

    # ------------------------------------------------------------ bookkeeping

    def _sent(self, channel: int, performative: Composite) -> None:
        """Update the counters for a frame the peer sends."""
        if isinstance(performative, Begin):
            self.sessions[channel] = PeerSession(
                channel,
                next_outgoing_id=performative.next_outgoing_id,
                incoming_window=performative.incoming_window,
                outgoing_window=performative.outgoing_window,
            )
            return
        session = self.sessions.get(channel)
        if session is None:
            return  # a frame on an unbegun channel: deliberately malformed
        if isinstance(performative, Attach):
            new = PeerLink(performative.name, performative.handle, channel, performative.role)
            if performative.role == ROLE_SENDER:
                new.delivery_count = performative.initial_delivery_count or 0
            session.links[performative.handle] = new
        elif isinstance(performative, Flow):
            session.incoming_window = performative.incoming_window
            link = session.links.get(performative.handle) if performative.handle is not None else None
            if link is not None and not link.is_sender:
                if performative.link_credit is not None:
                    link.credit = performative.link_credit
                link.drain = performative.drain
        elif isinstance(performative, Transfer):
            more = bool(performative.more and not performative.aborted)
            self._sent_transfer(session, session.links.get(performative.handle), performative.delivery_id, more)
        elif isinstance(performative, Detach):
            session.links.pop(performative.handle, None)
        elif isinstance(performative, End):
            del self.sessions[channel]

    @staticmethod
    def _sent_transfer(session: PeerSession, link: PeerLink | None, delivery_id: int | None, more: bool) -> None:
        """Count a transfer frame the peer sends (§2.5.6, §2.6.7): the session's next outgoing id;
        the first frame of a delivery also takes its delivery-id and a unit of the link's credit."""
        session.next_outgoing_id = (session.next_outgoing_id + 1) % SERIAL_MOD
        starting = link is None or not link.sending_more
        if delivery_id is not None and starting:
            session.next_delivery_id = (delivery_id + 1) % SERIAL_MOD
        if link is not None:
            if starting:
                link.delivery_count = (link.delivery_count + 1) % SERIAL_MOD
                link.credit = max(0, link.credit - 1)
            link.sending_more = more

    def observe(self, frames: Iterable[Frame]) -> None:
        """Update the counters from frames the server sent (a :class:`Pump` calls this)."""
        for channel, performative, _payload in frames:
            if type(performative) is Transfer:
                # The usual frame first (a stream read is nearly all transfers): no test for the others.
                session = self._session_by_remote(channel)
                if session is not None:
                    self._transferred(session, performative.handle, performative.more and not performative.aborted)
            elif isinstance(performative, Open):
                self.remote_open = performative
                self.remote_max_frame_size = performative.max_frame_size
            elif isinstance(performative, Close):
                self.remote_close = performative
            elif isinstance(performative, SaslOutcome):
                self.sasl_outcome = performative
            elif isinstance(performative, Begin):
                mine = performative.remote_channel
                session = self.sessions.get(mine) if mine is not None else None
                if session is not None:
                    session.remote_channel = channel
                    session.remote_begin = performative
                    session.next_incoming_id = performative.next_outgoing_id
                    session.remote_incoming_window = performative.incoming_window
                    session.remote_outgoing_window = performative.outgoing_window
            elif isinstance(performative, Composite):
                session = self._session_by_remote(channel)
                if session is not None:
                    self._received(session, performative)

    def _session_by_remote(self, channel: int) -> PeerSession | None:
        for session in self.sessions.values():
            if session.remote_channel == channel:
                return session
        return None

    def _received(self, session: PeerSession, performative: Composite) -> None:
        if isinstance(performative, Attach):
            for named in session.links.values():
                if named.name == performative.name:
                    named.remote_handle = performative.handle
                    named.remote_attach = performative
                    if performative.role == ROLE_SENDER:
                        named.delivery_count = performative.initial_delivery_count or 0
        elif isinstance(performative, Flow):
            if performative.next_incoming_id is not None:
                # §2.5.6: remote-incoming-window = next-incoming-id(flow) + incoming-window(flow) - next-outgoing-id
                session.remote_incoming_window = (
                    performative.next_incoming_id + performative.incoming_window - session.next_outgoing_id
                ) % SERIAL_MOD
            else:
                session.remote_incoming_window = performative.incoming_window
            session.remote_outgoing_window = performative.outgoing_window
            link = session.link_by_remote(performative.handle) if performative.handle is not None else None
            if link is None:
                return
            link.available = performative.available
            if link.is_sender:
                # §2.6.7: link-credit(snd) = delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)
                count = performative.delivery_count if performative.delivery_count is not None else 0
                credit = (count + (performative.link_credit or 0) - link.delivery_count) % SERIAL_MOD
                link.credit = 0 if credit > 2**31 else credit
                link.drain = performative.drain
            else:
                if performative.delivery_count is not None and performative.link_credit is not None:
                    # the sender's view; after a drain it has consumed the credit
                    end = (link.delivery_count + link.credit) % SERIAL_MOD
                    link.delivery_count = performative.delivery_count
                    link.credit = min(
                        performative.link_credit, (end - performative.delivery_count) % SERIAL_MOD
                    )
        elif isinstance(performative, Transfer):
            self._transferred(session, performative.handle, performative.more and not performative.aborted)
        elif isinstance(performative, Detach):
            link = session.link_by_remote(performative.handle)
            if link is not None:
                link.remote_detach = performative
        elif isinstance(performative, End):
            session.remote_end = performative

    def count_transfers(self, channel: int, handle: int, count: int) -> None:
        """Count ``count`` whole single-frame deliveries the server sent on ``channel`` and ``handle``
        (none of them continuing a delivery), as :meth:`observe` counts their transfers."""
        session = self._session_by_remote(channel)
        if session is not None:
            self._transferred(session, handle, False, count)

    @staticmethod
    def _transferred(session: PeerSession, handle: int, more: bool, count: int = 1) -> None:
        """Count transfers the server sent: the session's next incoming id, the link's delivery-count
        and credit (§2.5.6, §2.6.7; a multi-frame delivery counts once).  ``more``: another
        frame of the same delivery follows the last of them."""
        if session.next_incoming_id is not None:
            session.next_incoming_id = (session.next_incoming_id + count) % SERIAL_MOD
        link = session.link_by_remote(handle)
        if link is not None:
            if not link.receiving_more:
                link.delivery_count = (link.delivery_count + count) % SERIAL_MOD
                link.credit = max(0, link.credit - count)
            link.receiving_more = more


# --------------------------------------------------------------------------- driving a server
