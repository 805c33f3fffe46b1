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
  per performative (``_HANDLERS``) updates the session and link endpoints
  (:mod:`.endpoints`) and appends events (:mod:`.events`) for the broker.
  Once open, with no hook, the usual transfers and dispositions are read in
  one loop straight from the frames (:mod:`.runs`) until a frame of another
  shape comes, which is read the general way.
  An incomplete frame stays buffered for the next call.
* The connection keeps the framing, the dispatch and the connection's own
  states (headers, SASL, ``open``, ``close``, time-outs).  The handlers of
  the other performatives are plain functions beside the endpoints they
  change: :mod:`.sessions` (begin, end), :mod:`.links` (attach, detach),
  :mod:`.flow`, :mod:`.deliveries` (transfer) and :mod:`.dispositions`; they
  see the connection as an :class:`~._engine.Engine`, and the broker's calls
  among them are bound here as methods, so a call costs what a method does.
* Every state change of the connection, a session or a link goes through
  :func:`~._state.advance`; a frame the state does not allow is a protocol
  error, and the states in which a frame is ignored are named beside the
  tables (``_state.SESSION_HANDLES`` and the like).  Errors carry their
  scope (:mod:`.errors`): a link error detaches that link, a session error
  ends that session, anything else closes the connection, always with the
  condition the specification names.
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
from typing import Any, ClassVar

from ..amqp import codec
from ..amqp import errors as conditions
from ..amqp.composite import Composite
from ..amqp.errors import AMQPDecodeError
from ..amqp.performatives import (
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
from . import deliveries, dispositions, flow, links, sasl, sessions
from . import events as ev
from ._state import (
    CONNECTION_AWAITS_OPEN,
    CONNECTION_CLOSING,
    CONNECTION_DISCARDING,
    LINK_TRANSFERS,
    SESSION_HANDLES,
    ConnectionState,
    Input,
    Phase,
    advance,
)
from .config import ConnectionConfig
from .deliveries import MAX_FRAGMENTS
from .endpoints import INCOMING_WINDOW, Link, Session
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
from .links import MAX_ATTACH_BYTES
from .runs import read_run

# The limits and the window are the handler modules' own; named here too, as they always were.
__all__ = ["Connection", "ConnectionConfig", "INCOMING_WINDOW", "MAX_ATTACH_BYTES", "MAX_FRAGMENTS"]

# The phases and the state the frame loop tests per frame, as plain names: an enum member read
# through its class costs a metaclass attribute lookup (about ten times a global's).
_AWAIT_HEADER, _SASL, _AUTHENTICATED, _FRAMES = Phase.AWAIT_HEADER, Phase.SASL, Phase.AUTHENTICATED, Phase.FRAMES
_OPENED = ConnectionState.OPENED

#: A performative's handler: the connection, the channel, the performative, the frame's payload.
Handler = Callable[["Connection", int, Any, bytes], None]


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
        #: Frames the last ``receive_data`` handled (what a caller's pass budget counts).
        self.frames_taken = 0
        #: Set when the last ``receive_data`` stopped before its ``max_frames`` for the caller to
        #: write first (a receiving peer's attach answered alone) or to wait (a held login).
        self.ended_early = False
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
        #: Where the unread part of ``_in`` starts: a pass that stopped at ``max_frames`` leaves the
        #: buffer as it is and goes on from here, so a read taken in steps is not copied per step.
        self._in_pos = 0
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
            self._received = True  # read by tick(), which holds the clock: nothing here reads time
        self.frames_taken = 0
        self.ended_early = False
        if self.finished:
            # Closed or failed: what a peer sends after our close is not read (§2.4.3), and the
            # frames a pass left before the close are not waiting any more.
            self.backlogged = False
            return []
        # Usually ``_in`` is empty (whole frames were taken): the chunk is kept as it came, no copy.
        if data:
            self._in = self._in[self._in_pos :] + data if self._in else bytes(data)
            self._in_pos = 0
        self.backlogged = False
        try:
            self._process(max_frames)
        except AMQPProtocolError as exc:
            # The error names its scope (errors.py): a link or session error ends only that
            # endpoint; the frames already handled in this read keep their events.
            self._fail(exc)
        events, self._events = self._events, []
        return events

    def data_to_send(self) -> bytes:
        """Bytes queued for the peer since the last call."""
        if self._dispositions:
            # Settlements wait here to be merged into ranges (one disposition for many
            # deliveries, §2.7.6); they must go out now, before the caller writes.
            dispositions.flush(self)
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
        # receive_data and the writes only flag that traffic happened; the time of it is taken
        # here, from the caller's clock, so this module never reads one (a ManualClock drives it).
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
        self._in_pos = 0
        self._out = []
        self.output_size = 0
        self._dispositions = {}
        self._disposition_ranges = []
        self._last_disposition = None
        self._events = []
        self._starved = {}
        self.hook = None  # the tap's observers hold their own references; a gone transport needs none

    def local_session(self, channel: int) -> Session | None:
        """The session we write on ``channel`` (our own channel number, as in frames we send)."""
        return self._sessions_local.get(channel)

    def take_events(self) -> list[ev.Event]:
        """Events raised by calls other than :meth:`receive_data` (e.g. a timeout)."""
        events, self._events = self._events, []
        return events

    # -------------------------------------------------------------- parsing

    def _process(self, max_frames: int | None) -> None:
        """Handle the whole units buffered in ``_in`` (at most ``max_frames`` frames); keep the rest."""
        buf = self._in
        pos = self._in_pos
        end = len(buf)
        frames = 0
        # Asked once per call, not per frame: whether a receiving peer's attach ends the pass.
        alone = max_frames is not None and self.config.attach_answer_alone
        try:
            while not self.finished:
                if max_frames is not None and frames >= max_frames:
                    self.backlogged = end - pos >= 8  # whole frames may be left: the caller goes on
                    break
                phase = self.phase
                if phase is _FRAMES and self.hook is None and self.state is _OPENED:
                    # The usual transfers and dispositions, read in one loop without building a
                    # performative (runs.py); it stops at a frame of another shape, which goes on
                    # to the codec below.  No hook may watch: it is owed the decoded performative.
                    pos, taken = read_run(self, buf, pos, end, max_frames - frames if max_frames is not None else end)
                    if taken:
                        frames += taken
                        continue
                elif phase is _AWAIT_HEADER or phase is _AUTHENTICATED:
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
                    break  # an incomplete frame waits for the rest of its bytes
                frame_end = pos + size
                body = pos + doff * 4
                pos = frame_end
                frames += 1
                if body == frame_end:
                    continue  # an empty frame: keep-alive (§2.4.5); counted, so a flood of them yields too
                if phase is _SASL:
                    if not self._sasl_unit(buf[body:frame_end], frame_type):
                        pos = frame_end - size  # held: judged when the server lets it go (its turn)
                        self.ended_early = True
                        break
                    continue
                if frame_type != FRAME_AMQP:
                    raise framing_error(f"expected an AMQP frame (type 0), got type {frame_type}")
                if self._decoded(buf, body, frame_end, channel, size) and alone:
                    # A receiving peer's attach ends the pass: the caller writes our answer before
                    # the flow read with it turns into transfers, so the answer leaves in a write of
                    # its own, as RabbitMQ's does (a blocking client, Proton's BlockingConnection, can
                    # then return the link before a message handler runs).  Once per attach.
                    self.backlogged = end - pos >= 8
                    self.ended_early = True
                    break
        finally:
            # What was not handled (a partial frame, or frames past max_frames) waits for the next
            # call, also when a handler raised: the frames before it were handled and are not re-read.
            if pos >= end:
                self._in, self._in_pos = b"", 0
            elif self.backlogged:
                self._in_pos = pos  # whole frames wait: the next call reads on from here
            else:
                self._in, self._in_pos = buf[pos:], 0  # a partial frame (or what a failure left)
            self.frames_taken = frames

    def _decoded(self, buf: bytes, body: int, frame_end: int, channel: int, size: int) -> bool:
        """Decode the frame's performative and hand it to its handler; True for a receiving peer's attach."""
        try:
            performative, perf_end = codec.decode_at(buf, body)
            if perf_end > frame_end:
                raise AMQPDecodeError(f"performative runs {perf_end - frame_end} bytes past its frame")
        except AMQPDecodeError as exc:
            raise ConnectionError_(conditions.DECODE_ERROR, f"undecodable frame body: {exc}") from None
        handler = self._HANDLERS.get(type(performative))
        if handler is None:
            raise ConnectionError_(
                conditions.DECODE_ERROR,
                f"frame body is not a performative: {type(performative).__name__}",
            )
        if self.hook is not None:
            self.hook.frame_in(channel, performative)  # before the state checks: the log shows what came, also if refused
        if self.state is CONNECTION_DISCARDING and not isinstance(performative, Close):
            return False  # discarding until the peer's close (§2.4.3)
        if self.state is CONNECTION_AWAITS_OPEN and not isinstance(performative, (Open, Close)):
            raise ConnectionError_(
                conditions.ILLEGAL_STATE,
                f"{type(performative).__name__.lower()} on channel {channel} before open "
                "(the first frame after the protocol header is open, Part 2 §2.4.1)",
            )
        try:
            self._frame_size = size
            handler(self, channel, performative, buf[perf_end:frame_end] if perf_end < frame_end else b"")
        except (LinkError, SessionError) as exc:
            # Only that link or session ends; the frames after it in this read still count.
            self._fail(exc)
        except TypeError as exc:
            # Decoding does not check field types: e.g. a list where a handle belongs ends up here.
            raise ConnectionError_(
                conditions.DECODE_ERROR,
                f"{type(performative).__name__.lower()} has a field of the wrong type: {exc}",
            ) from None
        # ``role`` true: the peer receives (§2.6.3), so the broker will send on this link and its
        # answer must leave before the transfers (see ``attach_answer_alone`` in _process).
        return type(performative) is Attach and bool(performative.role) and not self.finished

    def _sasl_unit(self, body: bytes, frame_type: int) -> bool:
        """A frame of the SASL exchange (Part 5 §5.3); False when a PLAIN login is held back."""
        if frame_type != FRAME_SASL:
            raise framing_error(f"expected a SASL frame, got frame type {frame_type}")
        if self.hold_logins and sasl.is_plain_init(body):
            self.login_held = True
            return False
        self._on_sasl_frame(body)
        return True

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
        """Queue a frame after the dispositions still pending (a flow or detach must not overtake them)."""
        if self._dispositions:
            dispositions.flush(self)
        self._write(channel, performative, payload)

    def _write(self, channel: int, performative: Composite, payload: bytes = b"") -> None:
        """Queue a frame now: a transfer or a disposition, which nothing pending need precede."""
        out = bytearray()  # performative and payload in one buffer: the frame is built with one copy
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
        """The peer's open: ours answers it at once, unless ``open_refusal`` turns it away (§2.4.1)."""
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
        # We never write frames larger than our own maximum either, nor below the spec's floor (§2.7.1).
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
        """The peer's close: answer it, unless it answers ours (§2.4.3); either way the transport ends."""
        self.state = advance(self.state, Input.RECV_CLOSE, "endpoint")
        self._teardown(None)
        if self.state is ConnectionState.CLOSE_RCVD:  # the peer began: it is owed our close
            self._send(0, Close())
            self.state = advance(self.state, Input.SEND_CLOSE, "endpoint")
            self._events.append(ev.ConnectionClosed(close.error, by_peer=True))
        self.finished = True

    def close(self, error: Error | None = None) -> None:
        """Close the connection (§2.4.3); the transport closes once this is flushed."""
        if self.state in CONNECTION_CLOSING or self.finished:
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
            sessions.drop_session(self, session, error)

    def _fail(self, exc: AMQPProtocolError) -> None:
        """End what the error's scope names (:mod:`.errors`): a link, a session, or the connection."""
        error = amqp_error(exc.condition, exc.description)
        if isinstance(exc, LinkError):
            session = self.sessions.get(exc.channel)
            link = session.links_by_remote.get(exc.handle) if session else None
            if link is not None and link.state is LINK_TRANSFERS:
                # Our detach closes the link; the event is raised here, as the peer's detach
                # that completes it raises none (it answers ours).
                self.detach_link(link, error)
                self._events.append(ev.LinkDetached(link, True, error))
                return
        if isinstance(exc, SessionError):
            session = self.sessions.get(exc.channel)
            if session is not None and session.state is SESSION_HANDLES:
                self.end_session(session, error)
                return
        # No narrower scope, or the link or session is already ending: the connection goes.
        self.close(error)

    # ------------------------------------------------------------ endpoints

    def _session(self, channel: int) -> Session:
        """The session on the peer's ``channel``, or a connection error."""
        session = self.sessions.get(channel)
        if session is None:
            raise framing_error(f"frame on channel {channel}, which has no session (send begin first)")
        return session

    def _link(self, session: Session, handle: int | None, what: str) -> Link:
        """The link on the peer's ``handle``, or a session error ``amqp:unattached-handle``."""
        link = session.links_by_remote.get(handle) if handle is not None else None
        if link is None:
            raise SessionError(
                conditions.UNATTACHED_HANDLE,
                f"{what} names handle {handle}, which is not attached on channel {session.remote_channel}",
                session.remote_channel,
            )
        return link

    #: The handler of each performative (Part 2 §2.7): the connection's own for open and close,
    #: the rest beside the endpoints they change.
    _HANDLERS: ClassVar[dict[type, Handler]] = {
        Open: _on_open,
        Begin: sessions.on_begin,
        Attach: links.on_attach,
        Flow: flow.on_flow,
        Transfer: deliveries.on_transfer,
        Disposition: dispositions.on_disposition,
        Detach: links.on_detach,
        End: sessions.on_end,
        Close: _on_close,
    }

    # The broker's calls on sessions, links and deliveries: functions of the handler modules,
    # bound here as methods (no call in between; see the module docstring).
    end_session = sessions.end_session
    accept_link = links.accept_link
    refuse_link = links.refuse_link
    detach_link = links.detach_link
    send_link_flow = flow.send_link_flow
    grant_credit = flow.grant_credit
    drained = flow.drained
    can_send = deliveries.can_send
    send_transfer = deliveries.send_transfer
    send_settled = deliveries.send_settled
    settled_run_room = deliveries.settled_run_room
    send_settled_run = deliveries.send_settled_run
    send_run = deliveries.send_run
    settle = dispositions.settle
    settle_received = dispositions.settle_received
