"""The server side of an AMQP 0-9-1 connection, sans-I/O: bytes in, events out, bytes out.

h2's shape (``receive_data(bytes) -> list[Event]``, method calls queue frames,
``data_to_send()`` drains them) over the codec of this package.  The engine runs the handshake
itself (0-9-1 specification §2.2.4: protocol header, ``start`` / ``start-ok``, ``tune`` /
``tune-ok``, ``open`` / ``open-ok``), asking a :class:`Gatekeeper` whether a login and a
virtual host are allowed; opens and closes channels (§2.2.5); reassembles a ``basic.publish``
from its method, content header and body frames (§2.3.5.2, §4.2.6); keeps heartbeats
(§4.2.7); and closes a channel for a soft error and the connection for a hard one (§1.2).
What it reports (:mod:`.events`) is what a broker acts on: methods of the exchange, queue,
basic, confirm and tx classes, and complete published messages.

Error codes and texts follow RabbitMQ where the specification leaves a choice, because clients
and their tests match on them (``rabbit_reader.erl`` for the connection, ``rabbit_channel.erl``
for channels).  Time is passed in: :meth:`Connection.tick` takes ``now``.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, Final, Protocol

from . import errors as codes
from ._state import HANDSHAKE, ChannelState, ConnectionState
from .errors import AMQP091Error, FrameError
from .events import (
    Answer,
    ChannelClosed,
    ChannelOpened,
    ConnectionClosed,
    ConnectionOpened,
    Event,
    MethodReceived,
    Published,
)
from .frames import (
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_MIN_SIZE,
    HEARTBEAT,
    PROTOCOL_HEADER,
    Frame,
    FrameReader,
    content_frames,
    method_frame,
)
from .methods import (
    AccessRequest,
    AccessRequestOk,
    BasicAck,
    BasicCancel,
    BasicConsume,
    BasicGet,
    BasicNack,
    BasicPublish,
    BasicQos,
    BasicRecover,
    BasicRecoverAsync,
    BasicReject,
    ChannelClose,
    ChannelCloseOk,
    ChannelFlow,
    ChannelFlowOk,
    ChannelOpen,
    ChannelOpenOk,
    ConfirmSelect,
    ConnectionBlocked,
    ConnectionClose,
    ConnectionCloseOk,
    ConnectionOpen,
    ConnectionOpenOk,
    ConnectionStart,
    ConnectionStartOk,
    ConnectionTune,
    ConnectionTuneOk,
    ConnectionUnblocked,
    ConnectionUpdateSecret,
    ConnectionUpdateSecretOk,
    ExchangeBind,
    ExchangeDeclare,
    ExchangeDelete,
    ExchangeUnbind,
    Method,
    QueueBind,
    QueueDeclare,
    QueueDelete,
    QueuePurge,
    QueueUnbind,
    TxCommit,
    TxRollback,
    TxSelect,
    decode_method,
)
from .observed import FrameHook, MethodFrame, redacted
from .properties import BASIC_CLASS_ID, BasicProperties, decode_content_header
from .values import read_table

__all__ = ["CLOSING_TIMEOUT", "Connection", "ConnectionConfig", "Gatekeeper"]

#: Seconds a ``connection.close`` of ours waits for the peer's ``close-ok`` before the
#: connection is dropped anyway (RabbitMQ's ``CLOSING_TIMEOUT`` in ``rabbit_reader``, 30 s).
CLOSING_TIMEOUT: Final = 30.0

#: Methods a client may send on an open channel that the broker acts on (the specification's
#: "accepted-by server" methods of these classes, plus RabbitMQ's extensions).  Any other method
#: there is answered as RabbitMQ answers it: 503 COMMAND_INVALID, "unimplemented method".
BROKER_METHODS: Final = frozenset(
    {
        ChannelFlow,
        ChannelFlowOk,
        ExchangeDeclare,
        ExchangeDelete,
        ExchangeBind,
        ExchangeUnbind,
        QueueDeclare,
        QueueBind,
        QueuePurge,
        QueueDelete,
        QueueUnbind,
        BasicQos,
        BasicConsume,
        BasicCancel,
        BasicGet,
        BasicAck,
        BasicReject,
        BasicRecoverAsync,
        BasicRecover,
        BasicNack,
        ConfirmSelect,
        TxSelect,
        TxCommit,
        TxRollback,
    }
)

_LOGIN_REFUSED: Final = (
    "Login was refused using authentication mechanism {mechanism}. For details see the broker logfile."
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConnectionConfig:
    """What the server offers in ``start`` and ``tune``, and the bounds it keeps.

    The defaults are RabbitMQ 3.x's (``rabbitmq.conf``: ``channel_max`` 2047, ``frame_max``
    131072, ``heartbeat`` 60, ``max_message_size`` 128 MiB, ``handshake_timeout`` 10 s).
    """

    server_properties: dict[str, Any] = dataclasses.field(default_factory=dict)
    channel_max: int = 2047
    frame_max: int = 131072
    heartbeat: int = 60
    max_message_size: int = 128 * 1024 * 1024
    handshake_timeout: float = 10.0
    mechanisms: tuple[str, ...] = ("PLAIN", "AMQPLAIN")


class Gatekeeper(Protocol):
    """Who may log in and use which virtual host: the broker's users and permissions."""

    def login(self, user: str, password: str) -> bool: ...

    def open_vhost(self, user: str, vhost: str) -> str | None:
        """None when ``user`` may use ``vhost``; else the reason, sent with 530 NOT_ALLOWED."""
        ...


@dataclasses.dataclass(slots=True)
class _Content:
    """A ``basic.publish`` whose content header or body frames are still coming (§4.2.6)."""

    method: BasicPublish
    properties: BasicProperties | None = None
    header_size: int = 0
    size: int = 0
    parts: list[bytes] = dataclasses.field(default_factory=list)
    received: int = 0


class Connection:
    """One client's 0-9-1 connection, server side.  Feed it bytes; it returns events and queues bytes."""

    def __init__(self, config: ConnectionConfig, gatekeeper: Gatekeeper) -> None:
        self.config = config
        self.gatekeeper = gatekeeper
        self.state = ConnectionState.AWAIT_HEADER
        #: Open (or closing) channels.
        self.channels: dict[int, ChannelState] = {}
        self.user: str | None = None
        self.vhost: str | None = None
        self.client_properties: dict[str, Any] = {}
        #: Negotiated in tune / tune-ok (§4.2.3, §2.2.4 "tune").
        self.frame_max = config.frame_max
        self.channel_max = config.channel_max
        self.heartbeat = 0
        self._header = b""
        self._reader = FrameReader(config.frame_max)
        self._content: dict[int, _Content] = {}
        self._out = bytearray()
        self._events: list[Event] = []
        self._mechanism = "PLAIN"
        # Heartbeat and handshake bookkeeping (§4.2.7): activity is noted as a flag and turned
        # into a time at the next tick, so reading and writing never need the clock.
        self._started: float | None = None
        self._read_since_tick = False
        self._wrote_since_tick = False
        self._last_read = 0.0
        self._last_write = 0.0
        self._unframed = False
        # The broker's resource alarm (RabbitMQ's connection.blocked extension): its reason while
        # raised; whether this connection published, was told, and stopped being read.
        self._alarm: str | None = None
        self._published = False
        self._told_blocked = False
        #: Reading stopped: a publish came while the alarm was raised (the server reads no more).
        self.read_paused = False
        #: Frames read but not handled when reading stopped, handled by :meth:`unblock`.
        self._held: list[Frame] = []
        #: When our ``connection.close`` was first seen by ``tick`` (None: not closing).
        self._closing_since: float | None = None
        #: Told of every method in and out while set (:mod:`.observed`); the broker's tap sets it
        #: only while it has observers, so an unobserved connection pays one ``is None`` test.
        self.hook: FrameHook | None = None

    # ------------------------------------------------------------------ output

    def data_to_send(self) -> bytes:
        data = bytes(self._out)
        self._out.clear()
        return data

    @property
    def output_size(self) -> int:
        return len(self._out)

    @property
    def finished(self) -> bool:
        """Nothing more will be read or written: the transport may be closed once output is sent."""
        return self.state is ConnectionState.CLOSED

    def send(self, channel: int, method: Method) -> None:
        """Queue a method frame (a reply, or a server-initiated method such as ``basic.cancel``)."""
        data = method_frame(channel, method)
        if self.hook is not None:
            data = self.hook.frame_out(channel, MethodFrame(method), data)
        self._out += data
        self._wrote_since_tick = True

    def send_content(self, channel: int, method: Method, properties: BasicProperties, body: bytes | memoryview) -> None:
        """Queue a method with content (``basic.deliver``, ``get-ok``, ``return``), split by ``frame_max``.

        ``body``: bytes, or a view of them (a converted publish's body, ``front091/conversion.py``)."""
        if self.hook is None:
            self._out += method_frame(channel, method)
            self._out += content_frames(channel, properties, body, self.frame_max)
        else:  # one entry per message: the method with its content
            data = method_frame(channel, method) + content_frames(channel, properties, body, self.frame_max)
            self._out += self.hook.frame_out(channel, MethodFrame(method, properties, bytes(body)), data)
        self._wrote_since_tick = True

    def send_raw(self, data: bytes) -> None:
        """Queue ``data`` as it is: frames an observer withheld from ``frame_out`` earlier (a delay)."""
        self._out += data
        self._wrote_since_tick = True

    # ------------------------------------------------------------------ closing

    def close_channel(self, channel: int, error: AMQP091Error) -> None:
        """Close ``channel`` for a soft error (§1.2): ``channel.close`` sent, the channel reported closed."""
        if self.channels.get(channel) is not ChannelState.OPEN:
            return
        self.send(channel, ChannelClose(
            reply_code=error.reply_code, reply_text=error.reply_text,
            class_id=error.class_id, method_id=error.method_id,
        ))  # fmt: skip
        self.channels[channel] = ChannelState.CLOSING
        self._content.pop(channel, None)
        self._events.append(ChannelClosed(channel, error, by_peer=False))

    def close(self, error: AMQP091Error | None = None) -> None:
        """Close the connection (a hard error, or the broker stopping: 320 CONNECTION_FORCED)."""
        if self.state in (ConnectionState.CLOSING, ConnectionState.CLOSED):
            return
        if self.state is ConnectionState.AWAIT_HEADER:
            self._end(error, by_peer=False)
            return
        error = error or AMQP091Error(codes.CONNECTION_FORCED, "broker forced connection closure with reason 'shutdown'")
        self.send(0, ConnectionClose(
            reply_code=error.reply_code, reply_text=error.reply_text,
            class_id=error.class_id, method_id=error.method_id,
        ))  # fmt: skip
        self._close_channels(error)
        self.state = ConnectionState.CLOSING
        self.read_paused = False  # a blocked publisher is read again: its close-ok must be seen
        self._events.append(ConnectionClosed(error, by_peer=False))

    def connection_lost(self) -> list[Event]:
        """The transport is gone: every channel and the connection end as if closed by the peer."""
        if self.state is not ConnectionState.CLOSED:
            was_open = self.state not in (ConnectionState.CLOSING,)
            self._close_channels(None)
            self.state = ConnectionState.CLOSED
            if was_open:
                self._events.append(ConnectionClosed(None, by_peer=True))
        return self.take_events()

    def _close_channels(self, error: AMQP091Error | None) -> None:
        for channel, state in list(self.channels.items()):
            if state is ChannelState.OPEN:
                self._events.append(ChannelClosed(channel, error, by_peer=error is None))
        self.channels.clear()
        self._content.clear()

    def _end(self, error: AMQP091Error | None, by_peer: bool) -> None:
        self._close_channels(error)
        self.state = ConnectionState.CLOSED
        self._events.append(ConnectionClosed(error, by_peer))

    # ------------------------------------------------------------------ input

    def take_events(self) -> list[Event]:
        events, self._events = self._events, []
        return events

    def receive_data(self, data: bytes) -> list[Event]:
        """Read ``data``; return the events it completes.  Protocol errors close as §1.2 says."""
        if self.state is ConnectionState.CLOSED or not data:
            return self.take_events()
        self._read_since_tick = True
        if self.state is ConnectionState.AWAIT_HEADER:
            data = self._protocol_header(data)
            if not data:
                return self.take_events()
        if self._unframed:
            return self.take_events()  # the stream lost its framing: nothing after can be read
        try:
            frames = self._held + self._reader.feed(data)
            self._held = []
        except FrameError as error:
            # No frame boundary can be trusted after this (§4.2.3), so what follows is dropped
            # unread, not buffered while the peer keeps writing and never answers our close.
            self._unframed = True
            self._reader = FrameReader(self.frame_max)
            self.close(error)
            return self.take_events()
        self._handle(frames)
        return self.take_events()

    def _handle(self, frames: list[Frame]) -> None:
        for at, frame in enumerate(frames):
            if self.finished:  # a frame before this one ended the connection
                break
            if self.read_paused:  # a publish under the alarm: the rest waits for unblock()
                self._held = frames[at:]
                break
            try:
                self._frame(frame)
            except AMQP091Error as error:
                if error.closes_connection or frame.channel == 0:
                    self.close(error)
                else:
                    self.close_channel(frame.channel, error)

    # ------------------------------------------------------------------ alarm

    def block(self, reason: str) -> None:
        """The broker's resource alarm is raised (RabbitMQ's "Blocked Connection Notifications"):
        a connection that has published is told ``connection.blocked`` now (if its client
        announced the capability), any other at its first publish; each stops being read once it
        publishes, its publishes so far kept."""
        self._alarm = reason
        if self._published:
            self._tell_blocked()

    def unblock(self) -> list[Event]:
        """The alarm is cleared: ``connection.unblocked`` to those told, reading resumes with the frames held."""
        self._alarm = None
        if self._told_blocked and self.state is ConnectionState.OPEN:
            self.send(0, ConnectionUnblocked())
        self._told_blocked = False
        if self.read_paused:
            self.read_paused = False
            held, self._held = self._held, []
            self._handle(held)
        return self.take_events()

    def _tell_blocked(self) -> None:
        capabilities = self.client_properties.get("capabilities")
        announced = isinstance(capabilities, dict) and capabilities.get("connection.blocked") is True
        if announced and not self._told_blocked and self.state is ConnectionState.OPEN:
            assert self._alarm is not None
            self.send(0, ConnectionBlocked(reason=self._alarm))
            self._told_blocked = True

    def _protocol_header(self, data: bytes) -> bytes:
        """Read the 8-byte protocol header (§4.2.2); a wrong one is answered with ours and a close."""
        wanted = 8 - len(self._header)
        self._header += data[:wanted]
        if len(self._header) < 8:
            return b""
        if self._header != PROTOCOL_HEADER:
            # §4.2.2: "the server MUST respond with a valid protocol header and then close the socket".
            self._out += PROTOCOL_HEADER
            self._end(None, by_peer=False)
            return b""
        self.state = ConnectionState.AWAIT_START_OK
        self.send(0, ConnectionStart(
            server_properties=self.config.server_properties,
            mechanisms=" ".join(self.config.mechanisms).encode(),
            locales=b"en_US",
        ))  # fmt: skip
        return data[wanted:]

    def _frame(self, frame: Frame) -> None:
        if frame.type == FRAME_HEARTBEAT:
            if frame.channel != 0:
                raise AMQP091Error(
                    codes.UNEXPECTED_FRAME, f"heartbeat frame on channel {frame.channel} (heartbeats use channel 0, §4.2.7)"
                )
            return
        if self.state is ConnectionState.CLOSING:
            self._closing(frame)
        elif self.state in HANDSHAKE:
            self._handshake(frame)
        elif frame.channel == 0:
            self._connection_method(frame)
        else:
            self._channel_frame(frame)

    def _decode(self, frame: Frame) -> Method:
        """The method a frame carries, told to the hook unless content follows it (told whole, later)."""
        method = decode_method(frame.payload)
        if self.hook is not None and not method.HAS_CONTENT:
            self.hook.frame_in(frame.channel, MethodFrame(redacted(method)))  # never a password
        return method

    def _closing(self, frame: Frame) -> None:
        """After our connection.close only close and close-ok count (§2.2.4)."""
        if frame.type != FRAME_METHOD or frame.channel != 0:
            return
        method = self._decode(frame)
        if isinstance(method, ConnectionClose):
            self.send(0, ConnectionCloseOk())
            self.state = ConnectionState.CLOSED
        elif isinstance(method, ConnectionCloseOk):
            self.state = ConnectionState.CLOSED

    # ------------------------------------------------------------------ handshake

    def _handshake(self, frame: Frame) -> None:
        expected = HANDSHAKE[self.state]
        if frame.type != FRAME_METHOD or frame.channel != 0:
            raise AMQP091Error(
                codes.UNEXPECTED_FRAME, f"expected {expected.NAME} on channel 0, got a frame of type {frame.type}"
                f" on channel {frame.channel}"
            )
        method = self._decode(frame)
        if isinstance(method, ConnectionClose):
            self.send(0, ConnectionCloseOk())
            self._end(None, by_peer=True)
            return
        if not isinstance(method, expected):
            raise AMQP091Error(
                codes.COMMAND_INVALID, f"expected {expected.NAME}, got {method.NAME}", method.CLASS_ID, method.METHOD_ID
            )
        if isinstance(method, ConnectionStartOk):
            self._start_ok(method)
        elif isinstance(method, ConnectionTuneOk):
            self._tune_ok(method)
        elif isinstance(method, ConnectionOpen):
            self._open(method)
        else:  # secure-ok: no mechanism offered here takes a second step
            raise AMQP091Error(codes.COMMAND_INVALID, "connection.secure-ok without a connection.secure", 10, 21)

    def _start_ok(self, method: ConnectionStartOk) -> None:
        self.client_properties = method.client_properties
        mechanism = method.mechanism
        if mechanism not in self.config.mechanisms:
            raise AMQP091Error(
                codes.COMMAND_INVALID,
                f"unknown authentication mechanism '{mechanism}' (offered: {' '.join(self.config.mechanisms)})",
                10, 11,
            )  # fmt: skip
        self._mechanism = mechanism
        credentials = _credentials(mechanism, method.response)
        if credentials is None or not self.gatekeeper.login(*credentials):
            # RabbitMQ names no method here (class 0, method 0), and closes at once: its
            # authentication_failure_close capability, which clients of RabbitMQ 3.x rely on.
            raise AMQP091Error(codes.ACCESS_REFUSED, _LOGIN_REFUSED.format(mechanism=mechanism))
        self.user = credentials[0]
        self.state = ConnectionState.AWAIT_TUNE_OK
        self.send(0, ConnectionTune(
            channel_max=self.config.channel_max, frame_max=self.config.frame_max, heartbeat=self.config.heartbeat,
        ))  # fmt: skip

    def _tune_ok(self, method: ConnectionTuneOk) -> None:
        # RabbitMQ's checks (rabbit_reader:validate_negotiated_integer_value): 0 means "no limit",
        # i.e. the server's own; more than the server offered, or a frame_max under the minimum,
        # is 530 NOT_ALLOWED.
        frame_max = method.frame_max or self.config.frame_max
        channel_max = method.channel_max or self.config.channel_max
        if frame_max < FRAME_MIN_SIZE:
            raise AMQP091Error(codes.NOT_ALLOWED, f"frame_max={frame_max} < {FRAME_MIN_SIZE} min size", 10, 31)
        if frame_max > self.config.frame_max:
            raise AMQP091Error(codes.NOT_ALLOWED, f"frame_max={frame_max} > {self.config.frame_max} max size", 10, 31)
        if channel_max > self.config.channel_max:
            raise AMQP091Error(
                codes.NOT_ALLOWED, f"channel_max={channel_max} > {self.config.channel_max} max size", 10, 31
            )
        self.frame_max = self._reader.frame_max = frame_max
        self.channel_max = channel_max
        self.heartbeat = method.heartbeat
        self.state = ConnectionState.AWAIT_OPEN

    def _open(self, method: ConnectionOpen) -> None:
        assert self.user is not None  # set by start-ok, which AWAIT_OPEN comes after
        refusal = self.gatekeeper.open_vhost(self.user, method.virtual_host)
        if refusal is not None:
            raise AMQP091Error(codes.NOT_ALLOWED, refusal, 10, 40)
        self.vhost = method.virtual_host
        self.state = ConnectionState.OPEN
        self.send(0, ConnectionOpenOk())
        self._events.append(ConnectionOpened(self.user, method.virtual_host, self.client_properties))

    # ------------------------------------------------------------------ open connection

    def _connection_method(self, frame: Frame) -> None:
        if frame.type != FRAME_METHOD:
            raise AMQP091Error(codes.UNEXPECTED_FRAME, "expected method frame, got non method frame instead")
        method = self._decode(frame)
        if isinstance(method, ConnectionClose):
            self._answer(0, ConnectionCloseOk())
            self._end(None, by_peer=True)
        elif isinstance(method, ConnectionUpdateSecret):
            # Nothing here expires with a token, so a new secret changes nothing (RabbitMQ's OAuth 2 extension).
            self._answer(0, ConnectionUpdateSecretOk())
        elif isinstance(method, ConnectionBlocked | ConnectionUnblocked | ConnectionCloseOk):
            return  # a client's own blocked notices, and a stray close-ok, need no answer
        else:
            # RabbitMQ's words for a handshake method, or another class's, after the handshake.
            raise AMQP091Error(
                codes.CHANNEL_ERROR, "unexpected method in connection state running", method.CLASS_ID, method.METHOD_ID
            )

    def _channel_frame(self, frame: Frame) -> None:
        channel = frame.channel
        state = self.channels.get(channel)
        if state is ChannelState.CLOSING:
            # §2.2.5.2: after our channel.close, everything but close and close-ok is discarded
            # (content frames of a publish the close cut short included).
            if frame.type == FRAME_METHOD:
                method = self._decode(frame)
                if isinstance(method, ChannelClose):
                    self.send(channel, ChannelCloseOk())
                if isinstance(method, ChannelClose | ChannelCloseOk):
                    del self.channels[channel]
            return
        content = self._content.get(channel)
        if content is not None:
            self._content_frame(channel, content, frame)
            return
        if frame.type != FRAME_METHOD:
            raise AMQP091Error(codes.UNEXPECTED_FRAME, "expected method frame, got non method frame instead")
        method = self._decode(frame)
        if isinstance(method, ChannelOpen):
            if state is not None:
                raise AMQP091Error(codes.CHANNEL_ERROR, "second 'channel.open' seen", 20, 10)
            if len(self.channels) >= self.channel_max:
                # RabbitMQ bounds how many channels are open, not their numbers (any of 1-65535;
                # aiormq's suite opens 65535): rabbit_reader:create_channel's words, for no method.
                raise AMQP091Error(
                    codes.NOT_ALLOWED,
                    f"number of channels opened ({len(self.channels)}) has reached the negotiated channel_max ({self.channel_max})",
                )  # fmt: skip
            self.channels[channel] = ChannelState.OPEN
            self.send(channel, ChannelOpenOk())
            self._events.append(ChannelOpened(channel))
            return
        if state is None:
            raise AMQP091Error(codes.CHANNEL_ERROR, "expected 'channel.open'", method.CLASS_ID, method.METHOD_ID)
        if isinstance(method, ChannelClose):
            self._answer(channel, ChannelCloseOk())
            del self.channels[channel]
            self._content.pop(channel, None)
            self._events.append(ChannelClosed(channel, None, by_peer=True))
        elif isinstance(method, BasicPublish):
            self._content[channel] = _Content(method)
        elif isinstance(method, AccessRequest):
            self._answer(channel, AccessRequestOk())  # deprecated realms: RabbitMQ grants ticket 1
        elif type(method) in BROKER_METHODS:
            self._events.append(MethodReceived(channel, method))
        else:
            # A method only a server sends (declare-ok, deliver, ...), or close-ok with no close.
            raise AMQP091Error(codes.COMMAND_INVALID, "unimplemented method", method.CLASS_ID, method.METHOD_ID)

    def _answer(self, channel: int, method: Method) -> None:
        """Send the engine's own reply now, or as an :class:`Answer` event after methods of the
        same read still to be answered by the owner: on this channel, or on any for channel 0
        (RabbitMQ sends connection.close-ok once every channel has finished its work).  Looked
        up only for these rare replies, so a publish costs nothing more."""
        if any(
            isinstance(event, MethodReceived | Published) and (channel == 0 or event.channel == channel)
            for event in self._events
        ):
            self._events.append(Answer(channel, method))
        else:
            self.send(channel, method)

    def _content_frame(self, channel: int, content: _Content, frame: Frame) -> None:
        """The content header and body frames of a publish (§4.2.6), and nothing else, until complete."""
        if content.properties is None:
            if frame.type != FRAME_HEADER:
                raise AMQP091Error(
                    codes.UNEXPECTED_FRAME,
                    f"expected content header for class {BASIC_CLASS_ID}, got non content header frame instead",
                    60, 40,
                )  # fmt: skip
            header = decode_content_header(frame.payload)
            if header.class_id != BASIC_CLASS_ID:
                raise AMQP091Error(
                    codes.UNEXPECTED_FRAME, f"expected content header for class 60, got one for class {header.class_id}",
                    60, 40,
                )  # fmt: skip
            if header.body_size > self.config.max_message_size:
                # Checked from the header, before any body is held (RabbitMQ 3.8+: a channel error).
                del self._content[channel]
                raise AMQP091Error(
                    codes.PRECONDITION_FAILED,
                    f"message size {header.body_size} is larger than configured max size {self.config.max_message_size}",
                    60, 40,
                )  # fmt: skip
            content.properties = header.properties
            content.header_size = len(frame.payload)
            content.size = header.body_size
        elif frame.type != FRAME_BODY:
            raise AMQP091Error(codes.UNEXPECTED_FRAME, "expected content body, got non content body frame instead", 60, 40)
        else:
            content.received += len(frame.payload)
            if content.received > content.size:
                raise FrameError(
                    f"content body of {content.received} bytes is larger than the {content.size} its header declared",
                    60, 40,
                )  # fmt: skip
            if len(self._content) > 1 and content.received < content.size:
                # Publishes interleaved on several channels: together they hold at most one
                # message's worth, not one per channel (2,047 of 128 MiB otherwise).
                held = sum(other.received for other in self._content.values())
                if held > self.config.max_message_size:
                    del self._content[channel]
                    raise AMQP091Error(
                        codes.PRECONDITION_FAILED,
                        f"publishes in progress on this connection's channels hold {held} bytes together, more "
                        f"than the max message size {self.config.max_message_size}; finish one before the next",
                        60, 40,
                    )  # fmt: skip
            content.parts.append(frame.payload)
        if content.received == content.size:
            del self._content[channel]
            body = content.parts[0] if len(content.parts) == 1 else b"".join(content.parts)
            if self.hook is not None:
                self.hook.frame_in(channel, MethodFrame(content.method, content.properties, body))
            self._events.append(Published(channel, content.method, content.properties, body, content.header_size))
            self._published = True
            if self._alarm is not None:
                self._tell_blocked()
                self.read_paused = True

    # ------------------------------------------------------------------ time

    def tick(self, now: float) -> float | None:
        """Run the handshake timeout and heartbeats at ``now``; return when to tick next (None: never)."""
        if self.state is ConnectionState.CLOSED:
            return None
        if self._started is None:
            self._started = self._last_read = self._last_write = now
        if self.state is ConnectionState.CLOSING:
            # RabbitMQ waits CLOSING_TIMEOUT for close-ok, then drops the socket (rabbit_reader).
            if self._closing_since is None:
                self._closing_since = now
            deadline = self._closing_since + CLOSING_TIMEOUT
            if now >= deadline:
                self.state = ConnectionState.CLOSED  # its channels were ended by close()
                return None
            return deadline
        if self.state is not ConnectionState.OPEN:
            deadline = self._started + self.config.handshake_timeout
            if now >= deadline:
                # RabbitMQ closes the socket of a handshake that takes too long without a close.
                self._end(AMQP091Error(codes.CONNECTION_FORCED, "handshake timeout"), by_peer=False)
                return None
            return deadline
        if self._read_since_tick or self.read_paused:
            # Not reading a blocked publisher is our doing: its silence is no missed heartbeat.
            self._last_read, self._read_since_tick = now, False
        if self._wrote_since_tick:
            self._last_write, self._wrote_since_tick = now, False
        if not self.heartbeat:
            return None
        # §4.2.7: a peer silent for more than two heartbeat intervals is taken as gone.
        if now - self._last_read >= 2 * self.heartbeat:
            self._end(
                AMQP091Error(codes.CONNECTION_FORCED, f"missed heartbeats from client, timeout: {self.heartbeat}s"),
                by_peer=False,
            )
            return None
        if now - self._last_write >= self.heartbeat:
            self._out += HEARTBEAT if self.hook is None else self.hook.frame_out(0, None, HEARTBEAT)
            self._last_write = now
        return min(self._last_read + 2 * self.heartbeat, self._last_write + self.heartbeat)


_LENGTH = struct.Struct(">I")


def _credentials(mechanism: str, response: bytes) -> tuple[str, str] | None:
    """(user, password) from a PLAIN (RFC 4616) or AMQPLAIN response; None when it is malformed."""
    try:
        if mechanism == "PLAIN":
            _authzid, name, secret = response.split(b"\x00")
            return name.decode("utf-8"), secret.decode("utf-8")
        # AMQPLAIN: a field table's entries without the table's length prefix (RabbitMQ's
        # rabbit_auth_mechanism_amqplain), LOGIN and PASSWORD as long strings.
        table, _end = read_table(_LENGTH.pack(len(response)) + response, 0)
        user, password = table.get("LOGIN"), table.get("PASSWORD")
        if not isinstance(user, str) or not isinstance(password, str):
            return None
        return user, password
    except (ValueError, AMQP091Error):
        return None
