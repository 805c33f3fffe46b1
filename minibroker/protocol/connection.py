"""The sans-I/O AMQP 1.0 engine for one accepted connection (Part 2, Part 5).

Theory of operation.  A :class:`Connection` is bytes in, events out, bytes
queued, and nothing else: it never touches a socket or a clock.

* :meth:`Connection.receive_data` appends bytes to a buffer and reads as
  many whole units as it holds.  Before AMQP frames flow, a unit is a
  protocol header or a SASL frame (``_state.Phase``: the SASL header and the
  bare AMQP header are both accepted on one port, §2.2 and Part 5 §5.1;
  SASL ANONYMOUS and PLAIN are offered; a bare AMQP header is anonymous when
  that is allowed).  Then each unit is a frame: its header is read by
  :func:`~.framing.frame_header`, its performative decoded, and a handler
  per performative (``_dispatch``) updates the session and link endpoints
  (:mod:`.endpoints`) and appends events (:mod:`.events`) for the broker.
  An incomplete frame stays buffered for the next call.
* Every state change of the connection, a session or a link goes through
  :func:`~._state.advance`; a frame the state does not allow is a protocol
  error.  Errors carry their scope (:mod:`.errors`): a link error detaches
  that link, a session error ends that session, anything else closes the
  connection, always with the condition the specification names.
* The broker answers through method calls (``accept_link``, ``refuse_link``,
  ``grant_credit``, ``send_transfer``, ``settle``, ``detach_link``,
  ``end_session``, ``close``), which queue frames.  Dispositions are
  coalesced into ranges and written before the next non-transfer frame.
  :meth:`Connection.data_to_send` drains what is queued.
* Time comes in only through :meth:`Connection.tick` (idle time-out, §2.4.5).
* A ``hook`` (:mod:`.hooks`) sees every frame read and written; with none
  set the cost is one ``is None`` test per frame, and a hook never changes
  the bytes (the single-frame transfer fast path stays the fast path).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..amqp import codec
from ..amqp import errors as conditions
from ..amqp.composite import Composite
from ..amqp.errors import AMQPDecodeError
from ..amqp.messaging import Accepted
from ..amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
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
    amqp_error,
)
from ..amqp.sasl_frames import SASL_AUTH, SASL_OK, SaslInit, SaslMechanisms, SaslOutcome
from ..amqp.types import symbol
from . import events as ev
from . import sasl
from ._state import ConnectionState, Input, LinkState, Phase, SessionState, advance
from .endpoints import SERIAL_MOD, Delivery, Link, Session
from .errors import AMQPProtocolError, ConnectionError_, LinkError, SessionError, framing_error
from .framing import (
    AMQP_HEADER,
    EMPTY_FRAME,
    FRAME_AMQP,
    FRAME_SASL,
    MIN_MAX_FRAME_SIZE,
    SASL_HEADER,
    FrameHeaderError,
    frame,
    frame_header,
)
from .hooks import FrameHook
from .transfers import (
    DISPOSITION_LIST8,
    TRANSFER_LIST8,
    accepted_disposition_frame,
    read_disposition,
    read_transfer,
    settled_transfer_frames,
    transfer_frame,
)

__all__ = ["Connection", "ConnectionConfig"]

#: The session incoming window we advertise; replenished when half is used (§2.5.6).
#: The largest a serial number allows (RFC-1982, §2.8.9): flow control is link credit's job.
INCOMING_WINDOW = 2**31 - 1
#: Serial-number distances at or beyond half the space are "behind", not "ahead" (RFC-1982, §2.8.9).
SERIAL_HALF = 2**31
#: Bytes a transfer frame spends before its payload: the 8-byte frame header (§2.3.1) plus a
#: bound on the transfer's own fields (handle, delivery-id, message-format, settled, more:
#: at most 5 bytes each, and the list and descriptor headers) besides its delivery-tag.
TRANSFER_OVERHEAD = 8 + 64
#: §2.8.7: a delivery-tag is at most 32 bytes; the fast path's list8 relies on it.
MAX_TAG = 32
#: Transfer frames one delivery may take (§2.6.14 lets a delivery span any number): 65,536 frames of
#: the smallest legal max-frame-size (512 bytes) carry 32 MiB, of ours (256 KiB) 16 GiB; a peer that
#: splits finer, or sends empty continuation frames, is sending frames, not a message.
MAX_FRAGMENTS = 2**16
#: Bytes of attach frames the links of one connection may hold together (a link keeps its attach
#: and termini while it lives).  A usual attach is a few hundred bytes; 16 MiB is 16 KiB for each
#: of 1024 links, where max-frame-size alone would allow 256 MiB.
MAX_ATTACH_BYTES = 16 * 1024 * 1024


@dataclass(slots=True)
class ConnectionConfig:
    """What the engine offers in ``open``/``begin`` and how it authenticates."""

    container_id: str = "minibroker"
    #: Largest frame we take (§2.7.1): room for a 256 KiB message in one transfer.
    max_frame_size: int = 256 * 1024
    #: Sessions per connection and links per session we allow (§2.7.1, §2.7.2): a test's
    #: clients use a handful; the bound keeps a misbehaving peer's tables small.
    channel_max: int = 255
    handle_max: int = 1023
    #: Seconds of silence from the peer after which the connection is closed
    #: (advertised as idle-time-out, §2.4.5); None disables it.
    idle_timeout: float | None = 60.0
    #: Seconds from the first :meth:`Connection.tick` (the transport's start) to the peer's
    #: ``open``, SASL included, before the connection is closed; None: no bound.  Unlike the
    #: idle time-out, bytes trickling in do not extend it.
    handshake_timeout: float | None = 10.0
    #: SASL PLAIN users, name -> password (never shown in repr).
    users: dict[str, str] = field(default_factory=dict, repr=False)
    allow_anonymous: bool = True
    #: Largest message accepted from the peer, advertised in attach (§2.7.3); None: no limit.
    max_message_size: int | None = None
    #: Deliveries the peer sent on one link that it has not settled yet (rcv-settle-mode ``second``,
    #: §2.6.12: we keep each until the peer settles): at this many the link gets no more credit, and
    #: credit comes back as the peer settles.  The default matches the broker's ``link_credit``.
    max_unsettled_incoming: int = 1000
    #: The same over all links of the connection together (each kept delivery is ~0.4 KiB of
    #: bookkeeping, never the message: 16,384 of them ~6 MiB).
    max_unsettled_incoming_total: int = 16384
    offered_capabilities: tuple[str, ...] = ()
    properties: dict[str, Any] = field(default_factory=dict)
    #: Asked about the peer's ``open`` (its hostname) before we answer it: an error ends the
    #: connection there, with no ``open`` and no ``close`` of ours (the transport just closes), as
    #: RabbitMQ 4 refuses an ``open`` naming a virtual host it does not have.  None accepts any.
    open_refusal: Callable[[str | None], Error | None] | None = field(default=None, repr=False)
    #: With ``receive_data(..., max_frames)``, a receiving peer's attach ends the batch, so its
    #: answer is written before the flow read with it turns into transfers: RabbitMQ 4's order,
    #: which rabbitmq-amqp-python-client 0.6.0's consumer relies on.  It costs a write and a
    #: scheduler pass per such attach (500 pipelined in one read: ~40 -> ~80 ms), so only the
    #: RabbitMQ identity turns it on.
    attach_answer_alone: bool = False


class Connection:
    """One connection's protocol state, from the protocol header to ``close``."""

    def __init__(self, config: ConnectionConfig | None = None, hook: FrameHook | None = None) -> None:
        self.config = config or ConnectionConfig()
        #: Sees every frame read and written (:mod:`.hooks`); None costs one test per frame.
        self.hook = hook
        self.state = ConnectionState.START
        self.user: str | None = None
        self.remote_container_id: str | None = None
        #: The peer's ``open`` properties (§2.7.1), e.g. the product and user-agent an SDK names itself by.
        self.remote_properties: dict[Any, Any] | None = None
        self.remote_max_frame_size = MIN_MAX_FRAME_SIZE
        self.remote_idle_timeout: float | None = None
        self.remote_channel_max = 65535  # §2.7.1 default: the whole ushort range
        #: True once the transport should be closed after flushing what is queued.
        self.finished = False
        self.sessions: dict[int, Session] = {}  # by the peer's channel
        #: Links we have answered (accepted or refused) and not yet forgotten: what ``max_links``
        #: counts, so attaches read in one burst are accepted in order up to the limit.
        self.links_answered = 0
        #: Set when ``receive_data(..., max_frames=N)`` left buffered frames to handle.
        self.backlogged = False
        #: Never set here: AMQP 1.0 producers are held back by credit, not by stopping reads.
        self.read_paused = False
        #: Bytes of the deliveries in progress (multi-frame, not yet complete) over all links: at
        #: most ``max_message_size``, so a connection holds one message's worth, not one per link.
        self.assembling = 0
        #: Bytes of the attach frames of the links in the tables (``MAX_ATTACH_BYTES``).
        self.attach_bytes = 0
        self._frame_size = 0  # of the frame being handled
        #: Receiving links whose credit is held back until the peer settles (``grant_credit``).
        self._starved: dict[Link, None] = {}
        self._sessions_local: dict[int, Session] = {}
        #: Protocol headers and SASL before the AMQP frames (``_state.PHASE_TRANSITIONS``).
        self.phase = Phase.AWAIT_HEADER
        #: The SASL exchange ended with a failed login (Part 5 §5.3.3.6 ``auth``).
        self.login_failed = False
        #: Set by the server for a peer address that guessed passwords (broker/logins.py): a PLAIN
        #: sasl-init is then left unread, with ``login_held`` set, until the server clears both.
        self.hold_logins = False
        self.login_held = False
        self._in = b""
        self._out: list[bytes] = []
        #: Bytes of frames queued in ``_out`` (protocol headers aside): the broker stops routing
        #: messages to a connection whose output, here and in the transport, is over its bound.
        self.output_size = 0
        self._events: list[ev.Event] = []
        self._received = False
        self._sent = False
        self._last_received: float | None = None
        self._started: float | None = None  # the first tick: when the handshake time-out starts
        self._last_sent: float | None = None
        # Dispositions not yet written, coalesced into ranges: key -> [session, role, first, last, settled, state]
        self._dispositions: dict[tuple[int, bool, bool, type], list[Any]] = {}
        self._disposition_ranges: list[list[Any]] = []  # closed ranges, in order
        #: The open range ``settle`` last grew or started (one of ``_dispositions``' values): the
        #: next delivery of the same session, role and state usually extends it.
        self._last_disposition: list[Any] | None = None
        self._dispatch: dict[type, Callable[[int, Any, bytes], None]] = {
            Open: self._on_open,
            Begin: self._on_begin,
            Attach: self._on_attach,
            Flow: self._on_flow,
            Transfer: self._on_transfer,
            Disposition: self._on_disposition,
            Detach: self._on_detach,
            End: self._on_end,
            Close: self._on_close,
        }

    # ------------------------------------------------------------------ I/O

    def receive_data(self, data: bytes, max_frames: int | None = None) -> list[ev.Event]:
        """Take bytes from the peer; return the events they caused.

        With ``max_frames``, at most that many frames are handled; the rest stay buffered and
        :attr:`backlogged` says so: call again (with ``b""``) to go on.  A server does this to
        let other connections run between batches of a peer's tiny frames.  With it and
        ``attach_answer_alone``, a receiving peer's attach also ends the batch, so the caller
        writes the attach answer before the link's first transfer (RabbitMQ's order).
        """
        if data:
            self._received = True
        if self.finished:
            return []
        self._in = self._in + data if self._in else bytes(data)
        self.backlogged = False
        try:
            self._process(max_frames)
        except AMQPProtocolError as exc:
            self._fail(exc)
        events, self._events = self._events, []
        return events

    def data_to_send(self) -> bytes:
        """Bytes queued for the peer since the last call."""
        if self._dispositions:
            self._flush_disposition()
        if not self._out:
            return b""
        self._sent = True
        data = b"".join(self._out)
        self._out = []
        self.output_size = 0
        return data

    def tick(self, now: float) -> float | None:
        """Run the idle-timeout rules (§2.4.5) at time ``now``; return the next deadline.

        Sends an empty frame when nothing was sent for half the peer's
        idle-time-out, and closes with ``amqp:resource-limit-exceeded`` when
        nothing arrived for our own.
        """
        if self._received or self._last_received is None:
            self._last_received = now
            self._received = False
        if self._sent or self._last_sent is None:
            self._last_sent = now
            self._sent = False
        if self._started is None:
            self._started = now
        if self.finished or self.state is ConnectionState.END:
            return None
        deadlines = []
        handshake = self.config.handshake_timeout
        if handshake is not None and self.state in (ConnectionState.START, ConnectionState.HDR_EXCH):
            due = self._started + handshake
            if now >= due:
                self._fail(
                    ConnectionError_(
                        conditions.RESOURCE_LIMIT_EXCEEDED,
                        f"no open within {handshake:g} s of connecting (the handshake time-out); "
                        "send the protocol header, SASL and open at once",
                    )
                )
                return None
            deadlines.append(due)
        if self.remote_idle_timeout:
            due = self._last_sent + self.remote_idle_timeout / 2
            if now >= due:
                self._out.append(EMPTY_FRAME if self.hook is None else self.hook.frame_out(0, None, EMPTY_FRAME))
                self._last_sent = now
                due = now + self.remote_idle_timeout / 2
            deadlines.append(due)
        timeout = self.config.idle_timeout
        if timeout:  # also before the protocol header and during SASL: a silent socket is closed too
            due = self._last_received + timeout
            if now >= due:
                self._fail(
                    ConnectionError_(
                        conditions.RESOURCE_LIMIT_EXCEEDED,
                        f"no frame received for {timeout:g} s (idle-time-out, Part 2 §2.4.5)",
                    )
                )
                return None
            deadlines.append(due)
        return min(deadlines) if deadlines else None

    def send_raw(self, data: bytes) -> None:
        """Queue ``data`` as it is: e.g. a frame a hook held back (``frame_out``) and now lets go."""
        self._out.append(data)
        self.output_size += len(data)

    def discard_buffers(self) -> None:
        """The transport is gone: drop every byte held for it (input not yet read, output not yet
        written, dispositions not yet sent) now, not when a collection breaks this object's cycles."""
        self.finished = True
        self._in = b""
        self._out = []
        self.output_size = 0
        self._dispositions = {}
        self._disposition_ranges = []
        self._last_disposition = None
        self._events = []
        self._starved = {}
        self.hook = None

    def local_session(self, channel: int) -> Session | None:
        """The session we write on ``channel`` (our own channel number, as in frames we send)."""
        return self._sessions_local.get(channel)

    def take_events(self) -> list[ev.Event]:
        """Events raised by calls other than :meth:`receive_data` (e.g. a timeout)."""
        events, self._events = self._events, []
        return events

    # -------------------------------------------------------------- parsing

    def _process(self, max_frames: int | None) -> None:
        buf = self._in
        pos = 0
        end = len(buf)
        frames = 0
        try:
            while not self.finished:
                if max_frames is not None and frames >= max_frames:
                    self.backlogged = end - pos >= 8  # whole frames may be left: the caller goes on
                    break
                phase = self.phase
                if phase is Phase.AWAIT_HEADER or phase is Phase.AUTHENTICATED:
                    if end - pos < 8:
                        if not b"AMQP".startswith(buf[pos : pos + 4]):
                            self._bad_header(buf[pos:])
                        break
                    self._on_header(buf[pos : pos + 8])
                    pos += 8
                    continue
                if end - pos < 8:
                    break
                try:
                    size, doff, frame_type, channel = frame_header(buf, pos, self.config.max_frame_size)
                except FrameHeaderError as exc:
                    raise framing_error(str(exc)) from None
                if end - pos < size:
                    break
                frame_end = pos + size
                body = pos + doff * 4
                pos = frame_end
                frames += 1
                if body == frame_end:
                    continue  # an empty frame: keep-alive (§2.4.5)
                if phase is Phase.SASL:
                    if frame_type != FRAME_SASL:
                        raise framing_error(f"expected a SASL frame, got frame type {frame_type}")
                    if self.hold_logins and sasl.is_plain_init(buf[body:frame_end]):
                        pos = frame_end - size  # judged when the server lets it go (its turn)
                        self.login_held = True
                        break
                    self._on_sasl_frame(buf[body:frame_end])
                    continue
                if frame_type != FRAME_AMQP:
                    raise framing_error(f"expected an AMQP frame (type 0), got type {frame_type}")
                if (
                    buf.startswith(DISPOSITION_LIST8, body)
                    and self.hook is None
                    and self.state is ConnectionState.OPENED
                ):
                    # The usual disposition, read without building a Disposition (transfers.py).
                    read = read_disposition(buf, body, frame_end)
                    if read is not None and read[5] == frame_end:
                        try:
                            self._disposition(channel, read[0], read[1], read[2], read[3], read[4])
                        except (LinkError, SessionError) as exc:
                            self._fail(exc)
                            if self.finished:
                                break
                        continue
                if (
                    buf.startswith(TRANSFER_LIST8, body)
                    and self.hook is None
                    and self.state is ConnectionState.OPENED
                ):
                    # The usual transfer, read without building a Transfer (transfers.py).
                    fields = read_transfer(buf, body, frame_end)
                    if fields is not None:
                        handle, delivery_id, tag, message_format, settled, more, perf_end = fields
                        try:
                            self._transfer(
                                channel, handle, delivery_id, tag, message_format, settled, more, None, False,
                                buf[perf_end:frame_end],
                            )
                        except (LinkError, SessionError) as exc:
                            self._fail(exc)
                            if self.finished:
                                break
                        continue
                try:
                    performative, perf_end = codec.decode_at(buf, body)
                    if perf_end > frame_end:
                        raise AMQPDecodeError(f"performative runs {perf_end - frame_end} bytes past its frame")
                except AMQPDecodeError as exc:
                    raise ConnectionError_(conditions.DECODE_ERROR, f"undecodable frame body: {exc}") from None
                handler = self._dispatch.get(type(performative))
                if handler is None:
                    raise ConnectionError_(
                        conditions.DECODE_ERROR,
                        f"frame body is not a performative: {type(performative).__name__}",
                    )
                if self.hook is not None:
                    self.hook.frame_in(channel, performative)
                if self.state is ConnectionState.CLOSE_SENT and not isinstance(performative, Close):
                    continue  # discarding until the peer's close (§2.4.3)
                if self.state is ConnectionState.HDR_EXCH and not isinstance(performative, (Open, Close)):
                    raise ConnectionError_(
                        conditions.ILLEGAL_STATE,
                        f"{type(performative).__name__.lower()} on channel {channel} before open "
                        "(the first frame after the protocol header is open, Part 2 §2.4.1)",
                    )
                try:
                    self._frame_size = size
                    handler(channel, performative, buf[perf_end:frame_end] if perf_end < frame_end else b"")
                except (LinkError, SessionError) as exc:
                    # Only that link or session ends; the frames after it in this read still count.
                    self._fail(exc)
                    if self.finished:
                        break
                except TypeError as exc:
                    # Decoding does not check field types: e.g. a list where a handle belongs ends up here.
                    raise ConnectionError_(
                        conditions.DECODE_ERROR,
                        f"{type(performative).__name__.lower()} has a field of the wrong type: {exc}",
                    ) from None
                if (
                    max_frames is not None
                    and type(performative) is Attach
                    and performative.role
                    and self.config.attach_answer_alone
                ):
                    # A receiving peer's attach ends the pass: the caller writes our answer before
                    # the flow read with it turns into transfers, so the answer leaves in a write of
                    # its own, as RabbitMQ's does (a blocking client, Proton's BlockingConnection, can
                    # then return the link before a message handler runs).  Once per attach.
                    self.backlogged = end - pos >= 8
                    break
        finally:
            self._in = buf[pos:] if pos < end else b""

    def _bad_header(self, got: bytes) -> None:
        self._out.append(AMQP_HEADER)
        self.finished = True
        error = Error(
            condition=conditions.FRAMING_ERROR,
            description=f"unsupported protocol header {got!r}; this server speaks AMQP 1.0 {AMQP_HEADER!r} "
            f"and SASL {SASL_HEADER!r} (Part 2 §2.2)",
        )
        self._events.append(ev.ConnectionClosed(error, by_peer=False))

    def _on_header(self, header: bytes) -> None:
        if header == SASL_HEADER and self.phase is Phase.AWAIT_HEADER:
            self.phase = advance(self.phase, Input.RECV_SASL_HEADER, "endpoint")
            self._out.append(SASL_HEADER)
            offered = sasl.mechanisms(self.config.users, self.config.allow_anonymous)
            self._send_sasl(SaslMechanisms(sasl_server_mechanisms=offered))
            return
        if header == AMQP_HEADER and (self.phase is Phase.AUTHENTICATED or self.config.allow_anonymous):
            self.phase = advance(self.phase, Input.RECV_HEADER, "endpoint")
            self._out.append(AMQP_HEADER)
            self.state = advance(self.state, Input.RECV_HEADER, "endpoint")
            return
        if header == AMQP_HEADER:
            # Anonymous access is off: say we need SASL, then close (Part 5 §5.1).
            self._out.append(SASL_HEADER)
            self.finished = True
            self._events.append(
                ev.ConnectionClosed(
                    Error(condition=conditions.UNAUTHORIZED_ACCESS, description="SASL authentication required"),
                    by_peer=False,
                )
            )
            return
        self._bad_header(header)

    def _send_sasl(self, body: Composite) -> None:
        out = bytearray()
        body.encode_into(out)
        data = frame(0, out, FRAME_SASL)
        if self.hook is not None:
            data = self.hook.frame_out(0, body, data)
        self._out.append(data)

    def _on_sasl_frame(self, data: bytes) -> None:
        try:
            init = codec.decode(data)
        except AMQPDecodeError as exc:
            raise ConnectionError_(conditions.DECODE_ERROR, f"undecodable SASL frame: {exc}") from None
        if self.hook is not None:
            self.hook.frame_in(0, sasl.redacted(init))  # observers and the frame log never see a password
        if not isinstance(init, SaslInit):
            raise framing_error(f"expected sasl-init, got {type(init).__name__}")
        passed, self.user = sasl.authenticate(init, self.config.users, self.config.allow_anonymous)
        code = SASL_OK if passed else SASL_AUTH
        self._send_sasl(SaslOutcome(code=code))
        if code == SASL_OK:
            self.phase = advance(self.phase, Input.SEND_SASL_OK, "endpoint")
        else:
            self.login_failed = True  # counted per peer address by the server (broker/logins.py)
            self.finished = True
            self._events.append(
                ev.ConnectionClosed(
                    Error(condition=conditions.UNAUTHORIZED_ACCESS, description="SASL authentication failed"),
                    by_peer=False,
                )
            )

    # ------------------------------------------------------------- frames out

    def _send(self, channel: int, performative: Composite, payload: bytes = b"") -> None:
        if self._dispositions:
            self._flush_disposition()
        self._write(channel, performative, payload)

    def _write(self, channel: int, performative: Composite, payload: bytes = b"") -> None:
        out = bytearray()
        performative.encode_into(out)
        if payload:
            out += payload
        data = frame(channel, out)
        if self.hook is not None:
            data = self.hook.frame_out(channel, performative, data)
        self._out.append(data)
        self.output_size += len(data)

    # ---------------------------------------------------------- connection

    def _on_open(self, channel: int, open_: Open, payload: bytes) -> None:
        self.state = advance(self.state, Input.RECV_OPEN, "endpoint")
        self.remote_container_id = open_.container_id
        self.remote_properties = open_.properties
        refusal = self.config.open_refusal(open_.hostname) if self.config.open_refusal is not None else None
        if refusal is not None:
            # Unanswered: the peer reads the end of the stream (what RabbitMQ does), and the
            # broker's observers get the reason with the ConnectionClosed event.
            self.finished = True
            self._events.append(ev.ConnectionClosed(refusal, by_peer=False))
            return
        self.remote_max_frame_size = max(MIN_MAX_FRAME_SIZE, min(open_.max_frame_size, self.config.max_frame_size))
        self.remote_channel_max = open_.channel_max
        self.remote_idle_timeout = open_.idle_time_out / 1000 if open_.idle_time_out else None
        idle_ms = int(self.config.idle_timeout * 1000) if self.config.idle_timeout else None
        self._send(
            0,
            Open(
                container_id=self.config.container_id,
                max_frame_size=self.config.max_frame_size,
                channel_max=self.config.channel_max,
                idle_time_out=idle_ms,
                offered_capabilities=[symbol(c) for c in self.config.offered_capabilities] or None,
                properties={symbol(k): v for k, v in self.config.properties.items()} or None,
            ),
        )
        self.state = advance(self.state, Input.SEND_OPEN, "endpoint")
        self._events.append(ev.ConnectionOpened(open_.container_id, open_.hostname, self.user))

    def _on_close(self, channel: int, close: Close, payload: bytes) -> None:
        self.state = advance(self.state, Input.RECV_CLOSE, "endpoint")
        self._teardown(None)
        if self.state is ConnectionState.CLOSE_RCVD:
            self._send(0, Close())
            self.state = advance(self.state, Input.SEND_CLOSE, "endpoint")
            self._events.append(ev.ConnectionClosed(close.error, by_peer=True))
        self.finished = True

    def close(self, error: Error | None = None) -> None:
        """Close the connection (§2.4.3); the transport closes once this is flushed."""
        if self.state in (ConnectionState.CLOSE_SENT, ConnectionState.END) or self.finished:
            return
        if self.state is ConnectionState.START:
            self.finished = True
            self._events.append(ev.ConnectionClosed(error, by_peer=False))
            return
        if self.state is ConnectionState.HDR_EXCH:
            # An error before open: send open first, then close (§2.4.1).
            self._send(0, Open(container_id=self.config.container_id))
        self._teardown(error)
        self._send(0, Close(error=error))
        self.state = advance(self.state, Input.SEND_CLOSE, "endpoint")
        self.finished = True
        self._events.append(ev.ConnectionClosed(error, by_peer=False))

    def _teardown(self, error: Error | None) -> None:
        """Report every link and session as gone, once, when the connection ends."""
        for session in list(self.sessions.values()):
            self._drop_session(session, error)

    def _fail(self, exc: AMQPProtocolError) -> None:
        error = amqp_error(exc.condition, exc.description)
        if isinstance(exc, LinkError):
            session = self.sessions.get(exc.channel)
            link = session.links_by_remote.get(exc.handle) if session else None
            if link is not None and link.state is LinkState.ATTACHED:
                self.detach_link(link, error)
                self._events.append(ev.LinkDetached(link, True, error))
                return
        if isinstance(exc, SessionError):
            session = self.sessions.get(exc.channel)
            if session is not None and session.state is SessionState.MAPPED:
                self.end_session(session, error)
                return
        self.close(error)

    # ------------------------------------------------------------- sessions

    def _session(self, channel: int) -> Session:
        session = self.sessions.get(channel)
        if session is None:
            raise framing_error(f"frame on channel {channel}, which has no session (send begin first)")
        return session

    def _on_begin(self, channel: int, begin: Begin, payload: bytes) -> None:
        if begin.remote_channel is not None:
            raise ConnectionError_(
                conditions.NOT_ALLOWED,
                f"begin on channel {channel} names remote-channel {begin.remote_channel}, "
                "but this server never begins sessions itself",
            )
        if channel > self.config.channel_max:
            raise framing_error(f"channel {channel} exceeds channel-max {self.config.channel_max}")
        if channel in self.sessions:
            raise ConnectionError_(conditions.ILLEGAL_STATE, f"channel {channel} already has a session")
        local = next(c for c in range(len(self._sessions_local) + 1) if c not in self._sessions_local)
        session = Session(local, channel, min(begin.handle_max, self.config.handle_max))
        session.state = advance(session.state, Input.RECV_BEGIN, f"on channel {channel}")
        session.next_incoming_id = begin.next_outgoing_id
        session.remote_incoming_window = begin.incoming_window
        session.remote_outgoing_window = begin.outgoing_window
        session.incoming_window = INCOMING_WINDOW
        self.sessions[channel] = session
        self._sessions_local[local] = session
        self._send(
            local,
            Begin(
                remote_channel=channel,
                next_outgoing_id=session.next_outgoing_id,
                incoming_window=session.incoming_window,
                outgoing_window=session.outgoing_window,
                handle_max=session.handle_max,
            ),
        )
        session.state = advance(session.state, Input.SEND_BEGIN, f"on channel {channel}")
        self._events.append(ev.SessionBegun(session))

    def _on_end(self, channel: int, end: End, payload: bytes) -> None:
        session = self._session(channel)
        session.state = advance(session.state, Input.RECV_END, f"on channel {channel}")
        if session.state is SessionState.END_RCVD:
            self._send(session.channel, End())
            self._session_gone(session, end.error)
            session.state = advance(session.state, Input.SEND_END, f"on channel {channel}")
        self._unmap(session)

    def end_session(self, session: Session, error: Error | None = None) -> None:
        """End a session (§2.5.7); its links are reported detached."""
        if session.state is not SessionState.MAPPED:
            return
        self._send(session.channel, End(error=error))
        session.state = advance(session.state, Input.SEND_END, f"on channel {session.remote_channel}")
        self._session_gone(session, error)

    def _drop_session(self, session: Session, error: Error | None) -> None:
        """The connection ended: the session goes with it."""
        if session.state is SessionState.MAPPED or session.state is SessionState.END_RCVD:
            self._session_gone(session, error)
        session.state = advance(session.state, Input.CONNECTION_ENDED, f"on channel {session.remote_channel}")
        self._unmap(session)

    def _session_gone(self, session: Session, error: Error | None) -> None:
        """Report the session ended, after its links; they are detached without being closed (§2.6.5)."""
        for link in list(session.links_by_handle.values()):
            self.attach_bytes -= link.attach_size
            if link.state is not LinkState.ATTACH_RCVD:
                self.links_answered -= 1
            if link.state is not LinkState.DETACHED:
                self._events.append(ev.LinkDetached(link, False, error))
            link.state = advance(link.state, Input.SESSION_ENDED, repr(link.name))
            link.credit = 0
            # The link may live on in reference cycles until a collection: its buffers need not.
            self._drop_incoming(link)
            self._starved.pop(link, None)
            link.outgoing = None
            link.unsettled.clear()
        session.links_by_handle.clear()
        session.links_by_remote.clear()
        session.outgoing_unsettled.clear()
        session.incoming_unsettled.clear()
        self._events.append(ev.SessionEnded(session, error))

    def _unmap(self, session: Session) -> None:
        """Forget an ended session's channels (its state is already UNMAPPED)."""
        self.sessions.pop(session.remote_channel, None)
        self._sessions_local.pop(session.channel, None)

    # ---------------------------------------------------------------- links

    def _link(self, session: Session, handle: int | None, what: str) -> Link:
        link = session.links_by_remote.get(handle) if handle is not None else None
        if link is None:
            raise SessionError(
                conditions.UNATTACHED_HANDLE,
                f"{what} names handle {handle}, which is not attached on channel {session.remote_channel}",
                session.remote_channel,
            )
        return link

    def _on_attach(self, channel: int, attach: Attach, payload: bytes) -> None:
        session = self._session(channel)
        if session.state is not SessionState.MAPPED:
            return  # discarding after we ended the session
        if attach.handle > session.handle_max:
            raise ConnectionError_(
                conditions.FRAMING_ERROR,
                f"attach handle {attach.handle} exceeds handle-max {session.handle_max}",
            )
        if attach.handle in session.links_by_remote:
            raise SessionError(
                conditions.HANDLE_IN_USE, f"handle {attach.handle} is already attached", channel
            )
        size = self._frame_size
        if self.attach_bytes + size > MAX_ATTACH_BYTES:
            raise ConnectionError_(
                conditions.RESOURCE_LIMIT_EXCEEDED,
                f"the links of this connection hold {self.attach_bytes} bytes of attach frames; one more of "
                f"{size} bytes would pass {MAX_ATTACH_BYTES} (detach links, or send smaller termini)",
            )
        handles = session.links_by_handle
        local = next(h for h in range(len(handles) + 1) if h not in handles)
        link = Link(session, attach, local)
        link.attach_size = size
        link.receive_limit = None if link.is_sender else self.config.max_message_size  # accept_link may lower it
        self.attach_bytes += size
        session.links_by_remote[attach.handle] = link
        handles[local] = link
        self._events.append(ev.LinkAttached(link))

    def accept_link(
        self,
        link: Link,
        *,
        source: Any,
        target: Any,
        snd_settle_mode: int | None = None,
        rcv_settle_mode: int | None = None,
        offered_capabilities: list[str] | None = None,
        properties: dict[Any, Any] | None = None,
        max_message_size: int | None = None,
    ) -> None:
        """Answer the peer's attach, establishing the link (§2.6.3).

        ``max_message_size`` lowers, for a link the peer sends on, the connection's
        max-message-size (a service's own quota); larger messages end the link with
        ``amqp:link:message-size-exceeded`` (§2.7.3).  A no-op when the link is already
        gone: the peer may end the session or close the connection in the same bytes as the attach.
        """
        if link.state is not LinkState.ATTACH_RCVD:
            return
        if not link.is_sender:
            limit = self.config.max_message_size
            link.receive_limit = min(limit, max_message_size) if limit and max_message_size else (limit or max_message_size)
        link.source = source
        link.target = target
        if snd_settle_mode is not None:
            link.snd_settle_mode = snd_settle_mode
        if rcv_settle_mode is not None:
            link.rcv_settle_mode = rcv_settle_mode
        self._send(
            link.session.channel,
            Attach(
                name=link.name,
                handle=link.handle,
                role=ROLE_SENDER if link.is_sender else ROLE_RECEIVER,
                snd_settle_mode=link.snd_settle_mode,
                rcv_settle_mode=link.rcv_settle_mode,
                source=source,
                target=target,
                initial_delivery_count=link.delivery_count if link.is_sender else None,
                max_message_size=link.receive_limit,
                offered_capabilities=[symbol(c) for c in offered_capabilities] if offered_capabilities else None,
                properties=properties,
            ),
        )
        link.state = advance(link.state, Input.SEND_ATTACH, repr(link.name))
        self.links_answered += 1

    def refuse_link(self, link: Link, error: Error) -> None:
        """Refuse a link: attach with a null source or target, then detach (§2.6.3)."""
        if link.state is not LinkState.ATTACH_RCVD:
            return  # already gone with its session or connection
        self._send(
            link.session.channel,
            Attach(
                name=link.name,
                handle=link.handle,
                role=ROLE_SENDER if link.is_sender else ROLE_RECEIVER,
                source=None if link.is_sender else link.source,
                target=link.target if link.is_sender else None,
                initial_delivery_count=0 if link.is_sender else None,
            ),
        )
        link.state = advance(link.state, Input.SEND_ATTACH, repr(link.name))
        self.links_answered += 1
        self.detach_link(link, error)

    def detach_link(self, link: Link, error: Error | None = None, closed: bool = True) -> None:
        """Detach a link from our side (§2.6.5); the peer's detach completes it."""
        if link.state is not LinkState.ATTACHED:
            return
        self._send(link.session.channel, Detach(handle=link.handle, closed=closed, error=error))
        link.state = advance(link.state, Input.SEND_DETACH, repr(link.name))
        self._forget_deliveries(link)

    def _forget_deliveries(self, link: Link) -> None:
        session = link.session
        table = session.outgoing_unsettled if link.is_sender else session.incoming_unsettled
        for delivery_id in link.unsettled:
            table.pop(delivery_id, None)
        link.unsettled.clear()
        self._drop_incoming(link)
        self._starved.pop(link, None)
        link.outgoing = None
        link.credit = 0  # nothing more may be sent on it (§2.6.7), even for events still queued

    def _on_detach(self, channel: int, detach: Detach, payload: bytes) -> None:
        session = self._session(channel)
        if session.state is not SessionState.MAPPED:
            return
        link = self._link(session, detach.handle, "detach")
        if link.state is not LinkState.ATTACH_RCVD:
            self.links_answered -= 1
        if link.state is LinkState.ATTACH_RCVD:
            # The peer detached before we answered its attach (both in one write):
            # answer the attach, echoing its termini, so the detach below completes it.
            self._send(
                session.channel,
                Attach(
                    name=link.name,
                    handle=link.handle,
                    role=ROLE_SENDER if link.is_sender else ROLE_RECEIVER,
                    source=link.source,
                    target=link.target,
                    initial_delivery_count=0 if link.is_sender else None,
                ),
            )
            link.state = advance(link.state, Input.SEND_ATTACH, repr(link.name))
        link.state = advance(link.state, Input.RECV_DETACH, repr(link.name))
        if link.state is LinkState.DETACH_RCVD:
            self._send(session.channel, Detach(handle=link.handle, closed=detach.closed))
            link.state = advance(link.state, Input.SEND_DETACH, repr(link.name))
            self._events.append(ev.LinkDetached(link, detach.closed, detach.error))
        self._forget_deliveries(link)
        del session.links_by_remote[detach.handle]
        self.attach_bytes -= link.attach_size
        session.links_by_handle.pop(link.handle, None)

    # ----------------------------------------------------------------- flow

    def _on_flow(self, channel: int, flow: Flow, payload: bytes) -> None:
        session = self._session(channel)
        if session.state is not SessionState.MAPPED:
            return
        was_blocked = session.remote_incoming_window <= 0
        next_incoming = flow.next_incoming_id if flow.next_incoming_id is not None else 0
        session.remote_incoming_window = (
            next_incoming + flow.incoming_window - session.next_outgoing_id
        ) % SERIAL_MOD
        if session.remote_incoming_window > SERIAL_HALF:
            session.remote_incoming_window = 0  # the peer has not seen all we sent yet
        session.remote_outgoing_window = flow.outgoing_window
        if was_blocked and session.remote_incoming_window > 0:
            for waiting in list(session.links_by_handle.values()):
                if waiting.outgoing is not None:
                    self._send_frames(waiting)
        if flow.handle is None:
            if flow.echo:
                self._send_session_flow(session)
            if was_blocked and session.remote_incoming_window > 0:
                self._events.append(ev.SessionWindowOpened(session))
            return
        link = self._link(session, flow.handle, "flow")
        if link.state is not LinkState.ATTACHED and link.state is not LinkState.ATTACH_RCVD:
            return  # sent before the peer saw our detach: no credit for a link we are ending
        if link.is_sender:
            # §2.6.7: link-credit(snd) = delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)
            peer_count = flow.delivery_count if flow.delivery_count is not None else 0
            credit = flow.link_credit or 0
            link.credit = max(0, (peer_count + credit - link.delivery_count) % SERIAL_MOD)
            if link.credit > SERIAL_HALF:
                # Serial numbers wrap (RFC-1982): a difference over half the space is negative.
                # The flow was stale (it counted fewer deliveries than we have sent since):
                # the credit it granted is already used up, not four billion messages.
                link.credit = 0
            link.drain = flow.drain
            link.flow_properties = flow.properties
            self._events.append(ev.CreditChanged(link, flow.drain, flow.properties))
        else:
            link.available = flow.available or 0
            if flow.delivery_count is not None:
                # The sender's delivery-count is authoritative (§2.6.7): transfers it says it
                # made (e.g. consuming credit on drain) use up the credit we granted.
                advanced = (flow.delivery_count - link.delivery_count) % SERIAL_MOD
                if 0 < advanced < SERIAL_HALF:
                    link.credit = max(0, link.credit - advanced)
                    link.delivery_count = flow.delivery_count
        if flow.echo:
            self.send_link_flow(link)
        if was_blocked and session.remote_incoming_window > 0:
            self._events.append(ev.SessionWindowOpened(session))

    def _send_session_flow(self, session: Session) -> None:
        self._send(
            session.channel,
            Flow(
                next_incoming_id=session.next_incoming_id,
                incoming_window=session.incoming_window,
                next_outgoing_id=session.next_outgoing_id,
                outgoing_window=session.outgoing_window,
            ),
        )

    def send_link_flow(self, link: Link, echo: bool = False) -> None:
        """Send the link's flow state (§2.7.4); nothing while the link is not attached both ways."""
        if link.state is not LinkState.ATTACHED:
            return
        session = link.session
        self._send(
            session.channel,
            Flow(
                next_incoming_id=session.next_incoming_id,
                incoming_window=session.incoming_window,
                next_outgoing_id=session.next_outgoing_id,
                outgoing_window=session.outgoing_window,
                handle=link.handle,
                delivery_count=link.delivery_count,
                link_credit=link.credit,
                available=link.available if link.is_sender else None,
                drain=link.drain,
                echo=echo,
            ),
        )

    def grant_credit(self, link: Link, credit: int) -> None:
        """Set the credit of a link the peer sends on, and tell the peer (§2.6.7).

        The credit is capped so that the deliveries the peer has not settled, plus the ones it
        may still send, stay within ``max_unsettled_incoming``; the rest is granted as it settles.
        """
        if not link.is_sender:
            link.wanted_credit = credit
            config = self.config
            kept = sum(len(session.incoming_unsettled) for session in self.sessions.values())  # <= 256 sessions
            room = min(
                config.max_unsettled_incoming - len(link.unsettled), config.max_unsettled_incoming_total - kept
            )
            if credit > room:
                credit = max(0, room)
                self._starved[link] = None
            else:
                self._starved.pop(link, None)
        link.credit = credit
        self.send_link_flow(link)

    def drained(self, link: Link) -> None:
        """Answer a drain request once nothing more can be sent (§2.6.7).

        The remaining credit is consumed by advancing the delivery-count, and
        a flow tells the peer so, even when no message was sent.
        """
        if not link.drain or link.state is not LinkState.ATTACHED:
            return
        link.delivery_count = (link.delivery_count + link.credit) % SERIAL_MOD
        link.credit = 0
        self.send_link_flow(link)
        link.drain = False

    # ------------------------------------------------------------- transfer

    def _on_transfer(self, channel: int, transfer: Transfer, payload: bytes) -> None:
        self._transfer(
            channel,
            transfer.handle,
            transfer.delivery_id,
            transfer.delivery_tag,
            transfer.message_format,
            transfer.settled,
            transfer.more,
            transfer.state,
            transfer.aborted,
            payload,
        )

    def _transfer(
        self,
        channel: int,
        handle: int,
        delivery_id: int | None,
        tag: bytes | None,
        message_format: int | None,
        settled: bool | None,
        more: bool,
        state: Any,
        aborted: bool,
        payload: bytes,
    ) -> None:
        """A transfer's fields (§2.7.5), from :meth:`_on_transfer` or read directly (transfers.py)."""
        session = self.sessions.get(channel)
        if session is None:
            session = self._session(channel)  # raises
        if session.state is not SessionState.MAPPED:
            return
        link = session.links_by_remote.get(handle)
        if link is None:
            link = self._link(session, handle, "transfer")  # raises
        session.next_incoming_id = (session.next_incoming_id + 1) % SERIAL_MOD
        session.incoming_window -= 1
        if session.incoming_window < 0:
            raise SessionError(
                conditions.WINDOW_VIOLATION,
                f"transfer beyond the session incoming window of {INCOMING_WINDOW}",
                channel,
            )
        if session.incoming_window < INCOMING_WINDOW // 2:
            session.incoming_window = INCOMING_WINDOW
            self._send_session_flow(session)
        if link.state is not LinkState.ATTACHED:
            return  # the link is being detached; late transfers are dropped
        if link.is_sender:
            raise LinkError(
                conditions.NOT_ALLOWED,
                f"transfer on link {link.name!r}, where the broker is the sender",
                channel,
                handle,
            )
        delivery = link.incoming
        if delivery is None:
            if link.credit <= 0:
                raise LinkError(
                    conditions.TRANSFER_LIMIT_EXCEEDED,
                    f"transfer on link {link.name!r} without link credit (wait for a flow granting credit)",
                    channel,
                    handle,
                )
            if delivery_id is None or tag is None:
                raise LinkError(
                    conditions.INVALID_FIELD,
                    "the first transfer of a delivery must carry delivery-id and delivery-tag",
                    channel,
                    handle,
                )
            if len(tag) > MAX_TAG:  # held for as long as the delivery is unsettled: the spec's bound
                raise LinkError(
                    conditions.INVALID_FIELD,
                    f"a delivery-tag is at most {MAX_TAG} bytes (Part 2 §2.8.7), got {len(tag)}",
                    channel,
                    handle,
                )
            settled = bool(settled) or link.snd_settle_mode == 1
            delivery = Delivery(delivery_id, tag, link, False)
            delivery.remote_settled = settled
            delivery.message_format = message_format or 0
            delivery.state = state
            link.credit -= 1
            link.delivery_count = (link.delivery_count + 1) % SERIAL_MOD
        elif delivery_id is not None and delivery_id != delivery.delivery_id:
            raise LinkError(
                conditions.INVALID_FIELD,
                f"transfer continues delivery {delivery.delivery_id} but names delivery-id {delivery_id}",
                channel,
                handle,
            )
        else:
            if settled:
                delivery.remote_settled = True
            if state is not None:
                delivery.state = state
        if aborted:
            self._drop_incoming(link)  # an aborted delivery is discarded (§2.6.14)
            return
        if more or delivery.frames is not None:
            # One growing buffer and a frame count: each frame costs its own bytes, never the
            # fragments before it, and empty continuation frames count against MAX_FRAGMENTS.
            if delivery.frames is None:
                delivery.frames = bytearray()
            link.incoming = delivery
            delivery.frames += payload
            self.assembling += len(payload)
            delivery.sent += 1
            if delivery.sent > MAX_FRAGMENTS:
                self._drop_incoming(link)
                raise LinkError(
                    conditions.RESOURCE_LIMIT_EXCEEDED,
                    f"a delivery may span at most {MAX_FRAGMENTS} transfer frames; send larger frames "
                    f"(up to max-frame-size {self.config.max_frame_size})",
                    channel,
                    handle,
                )
            if link.receive_limit:
                self._check_size(link, len(delivery.frames), channel, handle)
            limit = self.config.max_message_size
            if limit and self.assembling > limit:
                # All deliveries in progress on this connection together: one message's worth.
                self._drop_incoming(link)
                raise LinkError(
                    conditions.RESOURCE_LIMIT_EXCEEDED,
                    f"deliveries in progress on this connection hold over {limit} bytes (max-message-size); "
                    "finish one delivery before starting the next",
                    channel,
                    handle,
                )
            if more:
                return
            delivery.payload = bytes(delivery.frames)
            self._drop_incoming(link)
        else:  # the common single-frame message: no list to build
            if link.receive_limit:
                self._check_size(link, len(payload), channel, handle)
            delivery.payload = payload
        link.incoming = None
        if not delivery.remote_settled:
            session.incoming_unsettled[delivery.delivery_id] = delivery
            if link.rcv_settle_mode:  # second: we keep it until the peer settles, so it counts per link
                link.unsettled[delivery.delivery_id] = delivery
        self._events.append(ev.MessageReceived(link, delivery))

    def _drop_incoming(self, link: Link) -> None:
        """The link's delivery in progress is complete, aborted or refused: stop counting its bytes."""
        delivery = link.incoming
        if delivery is not None:
            if delivery.frames is not None:
                self.assembling -= len(delivery.frames)
                delivery.frames = None
            link.incoming = None

    def _check_size(self, link: Link, size: int, channel: int, handle: int) -> None:
        """Enforce the max-message-size we advertised for links the peer sends on (§2.7.3)."""
        limit = link.receive_limit
        if limit and size > limit:
            self._drop_incoming(link)
            raise LinkError(
                conditions.MESSAGE_SIZE_EXCEEDED,
                f"a message of {size} bytes or more exceeds this link's max-message-size {limit}: "
                "send messages of at most that size",
                channel,
                handle,
            )

    def can_send(self, link: Link) -> bool:
        """Whether a transfer may go out now: link credit and session window allow it."""
        return (
            link.credit > 0 and link.session.remote_incoming_window > 0 and link.state is LinkState.ATTACHED
        )

    def send_transfer(
        self, link: Link, tag: bytes, payload: bytes, settled: bool = False, state: Any = None
    ) -> Delivery:
        """Send a message on a sending link, split to max-frame-size (§2.6.12, §2.7.5).

        Transfers are written straight away; pending dispositions are not
        flushed first, since no transfer depends on them.  A message of several
        frames goes out as far as the peer's session window allows (§2.5.6); the
        rest follows when a flow opens the window, and until then the link takes
        no new delivery (``link.outgoing`` is set).
        """
        session = link.session
        delivery_id = session.next_delivery_id
        session.next_delivery_id = (delivery_id + 1) % SERIAL_MOD
        delivery = Delivery(delivery_id, tag, link, settled)
        room = self.remote_max_frame_size - TRANSFER_OVERHEAD - len(tag)
        if len(payload) <= room and state is None and len(tag) <= MAX_TAG:
            data = transfer_frame(session.channel, link.handle, delivery_id, tag, settled, payload)
            if self.hook is not None:
                # The hook sees what the bytes encode; the bytes stay those of the fast path.
                transfer = Transfer(
                    handle=link.handle, delivery_id=delivery_id, delivery_tag=tag, message_format=0, settled=settled
                )
                data = self.hook.frame_out(session.channel, transfer, data)
            self._out.append(data)
            self.output_size += len(data)
            session.next_outgoing_id = (session.next_outgoing_id + 1) % SERIAL_MOD
            session.remote_incoming_window -= 1
        else:
            delivery.payload = payload
            delivery.state = state
            delivery.sent = 0
            link.outgoing = delivery
            self._send_frames(link)
        link.delivery_count = (link.delivery_count + 1) % SERIAL_MOD
        link.credit -= 1
        if not settled:
            session.outgoing_unsettled[delivery_id] = delivery
            link.unsettled[delivery_id] = delivery
        return delivery

    def send_settled(self, link: Link, tag: bytes, payload: bytes) -> bool:
        """Send a pre-settled delivery of one frame and keep no :class:`Delivery` for it; False if
        it needs :meth:`send_transfer` (more than one frame, a long tag, or a hook watching frames).

        A pre-settled delivery is never settled again (§2.6.12), so nothing refers to it once
        written: readers of a stream send one per message, and the object would be garbage at once.
        """
        if self.hook is not None or len(payload) > self.remote_max_frame_size - TRANSFER_OVERHEAD - len(tag):
            return False
        if len(tag) > MAX_TAG:
            return False
        session = link.session
        delivery_id = session.next_delivery_id
        session.next_delivery_id = (delivery_id + 1) % SERIAL_MOD
        data = transfer_frame(session.channel, link.handle, delivery_id, tag, True, payload)
        self._out.append(data)
        self.output_size += len(data)
        session.next_outgoing_id = (session.next_outgoing_id + 1) % SERIAL_MOD
        session.remote_incoming_window -= 1
        link.delivery_count = (link.delivery_count + 1) % SERIAL_MOD
        link.credit -= 1
        return True

    def settled_run_room(self) -> int | None:
        """The largest payload :meth:`send_settled_run` sends in one frame, or None when a hook
        watches frames (each delivery must then go through :meth:`send_transfer`)."""
        if self.hook is not None:
            return None
        return self.remote_max_frame_size - TRANSFER_OVERHEAD - 4

    def send_settled_run(self, link: Link, tag: int, payloads: list[bytes], lead: bytes = b"", number: int = 0) -> None:
        """:meth:`send_settled` for many deliveries at once: one frame each, delivery-tags the
        4-byte numbers from ``tag`` on (``transfers.settled_transfer_frames``, also for ``lead``
        and ``number``: bytes every payload starts with), written as one string.

        The caller checks what :meth:`send_settled` would: no hook and every payload (with its
        lead and number) at most :meth:`settled_run_room`; and that the link's credit and the
        session's outgoing window (§2.5.6, §2.6.7) take them all.
        """
        count = len(payloads)
        if not count:
            return
        session = link.session
        delivery_id = session.next_delivery_id
        data = settled_transfer_frames(session.channel, link.handle, delivery_id, tag, payloads, lead, number)
        self._out.append(data)
        self.output_size += len(data)
        session.next_delivery_id = (delivery_id + count) % SERIAL_MOD
        session.next_outgoing_id = (session.next_outgoing_id + count) % SERIAL_MOD
        session.remote_incoming_window -= count
        link.delivery_count = (link.delivery_count + count) % SERIAL_MOD
        link.credit -= count

    def _send_frames(self, link: Link) -> None:
        """Write the frames of the link's multi-frame delivery that the session window allows."""
        delivery = link.outgoing
        if delivery is None:
            return
        session = link.session
        payload = delivery.payload
        room = self.remote_max_frame_size - TRANSFER_OVERHEAD - len(delivery.tag)
        while session.remote_incoming_window > 0 and link.state is LinkState.ATTACHED:
            offset = delivery.sent
            if offset == 0:
                transfer = Transfer(
                    handle=link.handle,
                    delivery_id=delivery.delivery_id,
                    delivery_tag=delivery.tag,
                    message_format=0,
                    settled=delivery.settled,
                    state=delivery.state,
                )
            else:
                transfer = Transfer(handle=link.handle)
            transfer.more = offset + room < len(payload)
            self._write(session.channel, transfer, payload[offset : offset + room])
            delivery.sent = offset + room
            session.next_outgoing_id = (session.next_outgoing_id + 1) % SERIAL_MOD
            session.remote_incoming_window -= 1
            if not transfer.more:
                link.outgoing = None
                delivery.payload = b""
                return

    # ---------------------------------------------------------- disposition

    def _on_disposition(self, channel: int, disposition: Disposition, payload: bytes) -> None:
        self._disposition(
            channel, disposition.role, disposition.first, disposition.last, disposition.settled, disposition.state
        )

    def _disposition(
        self, channel: int, role: bool, first: int, last: int | None, settled: bool, state: Any
    ) -> None:
        """A disposition's fields (§2.7.6), from :meth:`_on_disposition` or read directly (transfers.py)."""
        session = self._session(channel)
        if session.state is not SessionState.MAPPED:
            return
        last = last if last is not None else first
        width = (last - first) % SERIAL_MOD
        if width >= SERIAL_HALF:
            # RFC-1982 (§2.8.9): last is "before" first, so the range names nothing sensible.
            raise SessionError(
                conditions.INVALID_FIELD, f"disposition range {first}..{last} ends before it starts", channel
            )
        # The peer as receiver settles what we sent; as sender, what we received.
        table = session.outgoing_unsettled if role == ROLE_RECEIVER else session.incoming_unsettled
        # The work is bounded by the unsettled deliveries, not by the range the peer names: a wide
        # range walks the table (kept in delivery-id order, as ids are assigned), a narrow one the ids.
        if width == 0:
            ids: Any = (first,)  # the usual case, one delivery: no generator per disposition
        elif width < len(table):
            if first + width < SERIAL_MOD:
                ids = range(first, first + width + 1)  # no wrap: a plain range
            else:
                ids = ((first + offset) % SERIAL_MOD for offset in range(width + 1))
        else:
            ids = [delivery_id for delivery_id in table if (delivery_id - first) % SERIAL_MOD <= width]
        released = False
        for delivery_id in ids:
            delivery = table.get(delivery_id)
            if delivery is not None:
                delivery.state = state if state is not None else delivery.state
                if settled:
                    delivery.remote_settled = True
                    del table[delivery_id]
                    delivery.link.unsettled.pop(delivery_id, None)
                    released = released or not delivery.link.is_sender
                self._events.append(ev.DeliveryUpdated(delivery.link, delivery, state, settled))
        if released and self._starved:  # the peer settled: the credit held back is granted now
            for link in list(self._starved):
                if link.state is LinkState.ATTACHED:
                    self.grant_credit(link, link.wanted_credit)
                else:
                    self._starved.pop(link, None)

    def settle(self, delivery: Delivery, state: Any, settled: bool = True) -> None:
        """Tell the peer a delivery's state, settling it (§2.7.6).

        Dispositions are coalesced into ``first..last`` ranges of consecutive
        delivery-ids with the same state, and written before any frame other
        than a transfer (which they never need to precede) and at the latest
        when output is collected.
        """
        link = delivery.link
        session = link.session
        if settled:
            delivery.settled = True
            if link.is_sender:
                session.outgoing_unsettled.pop(delivery.delivery_id, None)
                link.unsettled.pop(delivery.delivery_id, None)
            else:
                session.incoming_unsettled.pop(delivery.delivery_id, None)
                if link.rcv_settle_mode:
                    link.unsettled.pop(delivery.delivery_id, None)
        if not link.is_sender:
            # The outcome is decided: the message is in a node now, if anywhere; waiting for the
            # peer to settle (rcv-settle-mode second) holds the delivery's state, not its bytes.
            delivery.payload = b""
        if session.state is not SessionState.MAPPED:
            return
        role = ROLE_SENDER if link.is_sender else ROLE_RECEIVER
        delivery_id = delivery.delivery_id
        last = self._last_disposition
        if (
            last is not None
            and last[0] is session
            and last[1] is role
            and last[4] is settled
            and last[5] is state
            and (last[3] + 1) % SERIAL_MOD == delivery_id
        ):
            last[3] = delivery_id  # the usual case: the next delivery, the same outcome object
            return
        key = (id(session), role, settled, type(state))
        pending = self._dispositions.get(key)
        if pending is not None:
            if (pending[3] + 1) % SERIAL_MOD == delivery_id and (pending[5] is state or pending[5] == state):
                pending[3] = delivery_id
                self._last_disposition = pending
                return
            self._disposition_ranges.append(pending)
        pending = self._dispositions[key] = [session, role, delivery_id, delivery_id, settled, state]
        self._last_disposition = pending

    def _flush_disposition(self) -> None:
        ranges = self._disposition_ranges
        ranges.extend(self._dispositions.values())
        self._dispositions = {}
        self._disposition_ranges = []
        self._last_disposition = None
        for session, role, first, last, settled, state in ranges:
            if session.state is not SessionState.MAPPED:
                continue
            if type(state) is Accepted and self.hook is None:
                # The usual outcome, written directly (transfers.py): the same bytes as below.
                data = accepted_disposition_frame(session.channel, role, first, last if last != first else None, settled)
                self._out.append(data)
                self.output_size += len(data)
            else:
                self._write(
                    session.channel,
                    Disposition(
                        role=role, first=first, last=last if last != first else None, settled=settled, state=state
                    ),
                )
