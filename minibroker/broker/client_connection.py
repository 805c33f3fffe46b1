"""One client connection as the broker sees it, and what it needs of the broker that owns it.

The server feeds a :class:`BrokerConnection` bytes and asks it for bytes; the
connection runs its protocol state machine (Part 2) and hands the events to its
owner.  The owner is described by :class:`ConnectionOwner`, so this module
(and the layers that only need a connection: fault injection, the Service Bus
layer) does not import the broker engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol

from ..amqp.performatives import Error
from ..protocol import events as ev
from ..protocol.endpoints import Delivery
from ..records import record
from .config import BrokerConfig
from .tap import Tap

if TYPE_CHECKING:
    from ..protocol.connection import Connection
    from .roles import LinkRole
    from .stored import Entry

__all__ = ["ANONYMOUS_RELAY", "BrokerConnection", "ConnectionOwner", "ConnectionIdentity", "LayerHooks", "OUTPUT_BOUND", "OWN_IDENTITY"]

#: Offered in ``open`` so clients may send with a null target address (routing by ``to``).
ANONYMOUS_RELAY = "ANONYMOUS-RELAY"
#: Bytes of output queued for one client (in the engine and in the transport) beyond which the
#: broker routes no more messages to it and the server stops reading it, until it catches up.
#: 4 MiB is 16 frames of the default max-frame-size: plenty to keep a reading client busy.
OUTPUT_BOUND = 4 * 1024 * 1024


@record(frozen=True, slots=True)
class ConnectionIdentity:
    """How a layer makes every connection present itself (``layers.Layer.identity``)."""

    #: The ``open``'s properties (a product's client may check ``product`` and ``version``).
    properties: Mapping[str, Any]
    #: SASL PLAIN users added to ``BrokerConfig.users`` (which win on a clash).
    users: Mapping[str, str] = field(default_factory=dict)
    #: Write an attach answer before the transfers of the flow read with it (``ConnectionConfig``).
    attach_answer_alone: bool = False


#: The ``open`` properties of a broker no layer dresses up.
OWN_IDENTITY = ConnectionIdentity({"product": "minibroker"})


class LayerHooks(Protocol):
    """What a connection asks of its broker's layers (``layers.Layers``, which names this module for
    its hooks' connection type: so the dependency runs from layers.py to here, not back)."""

    def opened(self, connection: BrokerConnection, hostname: str | None) -> Error | None:
        """The client's ``open`` named ``hostname``: the error to refuse it with, or None (``Layer.opened``)."""

    def identity(self) -> ConnectionIdentity | None:
        """How connections present themselves, or None: :data:`OWN_IDENTITY`."""


class ConnectionOwner(Protocol):
    """What a connection calls on its broker (``minibroker.broker.engine.Broker``)."""

    config: BrokerConfig
    tap: Tap
    errors: list[Exception]
    #: Times output was queued for a connection (``mark_dirty``), ever: a pass counts it as work.
    woken: int

    @property
    def layers(self) -> LayerHooks:
        """The broker's layers (read only here)."""

    def handle(self, connection: BrokerConnection, events: list[ev.Event]) -> None: ...

    def act(self, connection: BrokerConnection, events: list[ev.Event]) -> None:
        """``handle`` without waking the other connections: the caller flushes."""

    def internalerror(self, connection: BrokerConnection, exc: Exception) -> None: ...

    def mark_dirty(self, connection: BrokerConnection) -> None: ...

    def flush(self) -> None: ...

    def forget_connection(self, connection: BrokerConnection) -> None: ...


class BrokerConnection:
    """One client connection as the broker sees it: its protocol state machine plus a wake-up callback."""

    def __init__(self, broker: ConnectionOwner, notify: Callable[[], None], peer: str) -> None:
        self.broker = broker
        self.notify = notify
        self.peer = peer
        config = broker.config
        identity = broker.layers.identity() or OWN_IDENTITY  # a layer may present the broker as its product
        users = {**identity.users, **config.users}
        # The protocol engine (its sessions, links, SASL and frame readers) loads with the first
        # client, not with the broker: a test that only uses the Python API never needs it.
        from ..protocol.connection import Connection, ConnectionConfig

        #: The connection's protocol state machine (minibroker.protocol): sessions, links, frames out.
        self.protocol = Connection(
            ConnectionConfig(
                container_id=config.container_id,
                max_frame_size=config.max_frame_size,
                idle_timeout=config.idle_timeout,
                handshake_timeout=config.handshake_timeout,
                users=users,
                allow_anonymous=config.allow_anonymous,
                max_message_size=config.max_message_size,
                max_unsettled_incoming=config.link_credit,
                channel_max=config.max_sessions - 1,
                offered_capabilities=(ANONYMOUS_RELAY,),
                properties=dict(identity.properties),
                open_refusal=self._open_refusal,
                attach_answer_alone=identity.attach_answer_alone,
                batch_events=True,  # a batch of messages is one event (policy.py), when no hook watches
            ),
            hook=self if broker.tap.active else None,
        )
        self.container_id: str | None = None
        self.open = True
        self.refusal: Error | None = None
        #: Bytes the transport holds for this client and has not written yet (kept up to date by
        #: the server as it writes); None: no transport (the in-memory peer of minibroker.testing).
        self.transport_backlog: int | None = None
        #: Set when routing to this client stopped because its output was full (:meth:`output_full`).
        self.throttled = False

    def _open_refusal(self, hostname: str | None) -> Error | None:
        """The broker's layers may refuse the client's ``open`` (``Layer.opened``), before it is answered."""
        return self.broker.layers.opened(self, hostname)

    @property
    def engine(self) -> Connection:
        """The older name of :attr:`protocol` (kept working for layers and tests written against it)."""
        return self.protocol

    def delivered(self, consumer: LinkRole, entry: Entry | None, delivery: Delivery) -> None:
        """A consumer on this connection was sent a message: the tap's semantic outbound point."""
        self.broker.tap.delivery_out(self, consumer, entry, delivery)

    # The protocol's frame hook (protocol.hooks.FrameHook), set while the broker's tap has observers.

    def frame_in(self, channel: int, performative: Any) -> None:
        self.broker.tap.frame_in(self, channel, performative)

    def frame_out(self, channel: int, performative: Any, frame: bytes) -> bytes:
        return self.broker.tap.frame_out(self, channel, performative, frame)

    def write(self, data: bytes) -> None:
        """Send ``data`` as it is (a frame an observer withheld) and wake this connection's writer."""
        self.protocol.send_raw(data)
        self.broker.mark_dirty(self)
        self.broker.flush()

    def receive_data(self, data: bytes, max_frames: int | None = None) -> None:
        """Bytes from the socket: run the protocol and the broker on them (``Connection.receive_data``).

        With ``max_frames`` (a server's pass) the pass is bounded by its work, not only by its
        frames: each frame read and each time output is queued for a connection (about one per
        delivery, ``Broker.mark_dirty``) count one, and a pass does at most ``2 * max_frames``
        (a frame and its delivery, ``max_frames`` times).  Frames are read in steps that double
        from one, so a frame whose message fans out to thousands of subscriptions ends the pass
        after itself, and ``protocol.backlogged`` says frames are left for the next.
        """
        try:
            if max_frames is None:
                self.broker.handle(self, self.protocol.receive_data(data))
            else:
                self._pass(data, max_frames)
        except Exception as exc:  # a broker bug must cost one connection, not the broker
            self.broker.internalerror(self, exc)

    def _pass(self, data: bytes, max_frames: int) -> None:
        """One server pass over ``data`` (and what is buffered): see :meth:`receive_data`."""
        protocol = self.protocol
        broker = self.broker
        budget = 2 * max_frames
        frames = spent = 0
        step = 1
        while True:
            woken = broker.woken
            broker.act(self, protocol.receive_data(data, step))
            data = b""
            taken = protocol.frames_taken
            frames += taken
            spent += taken + broker.woken - woken
            # Ended: nothing left, the protocol ended the pass (a receiving peer's attach is
            # answered alone, a login is held), the step read nothing (the protocol is closed), or
            # the pass's frames or work are spent.
            if not protocol.backlogged or protocol.ended_early or not taken or frames >= max_frames or spent >= budget:
                break
            step = min(2 * step, max_frames - frames, budget - spent)
        # The others are woken once per pass, as when a pass was one step: nothing runs between steps.
        broker.flush()

    def data_to_send(self) -> bytes:
        """Bytes to write; a failure to produce them closes this connection (amqp:internal-error)."""
        try:
            data = self.protocol.data_to_send()
        except Exception as exc:
            self.broker.internalerror(self, exc)
            return self.protocol.data_to_send()
        if self.throttled and self.transport_backlog is None:
            self.output_drained()  # in memory (minibroker.testing): what was taken is delivered
        return data

    def output_full(self) -> bool:
        """Whether output queued here is over :data:`OUTPUT_BOUND`; if so, routing resumes once it drains."""
        if self.protocol.output_size + (self.transport_backlog or 0) <= OUTPUT_BOUND:
            return False
        self.throttled = True
        return True

    def output_drained(self) -> None:
        """The transport wrote what it held: links that stopped for a full output may send again.

        Room opened for this client as when a session window opens (§2.5.6), so the broker's
        answer is the same: its consumers' queues dispatch again.
        """
        if not self.throttled or not self.open:
            return
        self.throttled = False
        sessions = list(self.protocol.sessions.values())
        if sessions:
            try:
                self.broker.handle(self, [ev.SessionWindowOpened(session) for session in sessions])
            except Exception as exc:
                self.broker.internalerror(self, exc)

    def tick(self, now: float) -> float | None:
        """Idle-timeout rules at server time ``now`` (monotonic); returns the next deadline."""
        deadline = self.protocol.tick(now)
        events = self.protocol.take_events()
        if events:
            try:
                self.broker.handle(self, events)
            except Exception as exc:
                self.broker.internalerror(self, exc)
        return deadline

    @property
    def finished(self) -> bool:
        return self.protocol.finished

    @property
    def handshaking(self) -> bool:
        """Its ``open`` has not come yet (and it is not gone): it holds no ``max_connections`` slot."""
        return self.container_id is None and self.open

    def close_forced(self) -> None:
        """The broker is stopping: ``close`` without an error, as :meth:`Broker.close_connections` sends it."""
        self.close(None)

    def alarm(self, reason: str | None) -> None:
        """The resource alarm is for AMQP 0-9-1 publishers; AMQP 1.0 producers are held back by credit."""

    def connection_lost(self) -> None:
        """The transport is gone: every link ends as if detached without closing."""
        if self.open:
            try:
                self.protocol.close(None)
                self.broker.handle(self, self.protocol.take_events())
            except Exception as exc:  # a broker bug must not take the server down
                self.broker.errors.append(exc)
            self.broker.forget_connection(self)

    def release(self) -> None:
        """The transport is closed: free what this connection holds at once (see ``Connection.discard_buffers``)."""
        self.connection_lost()
        self.protocol.discard_buffers()
        self.transport_backlog = None
        self.throttled = False

    def mark_dirty(self) -> None:
        """Output was queued here by work done for another connection: have it written."""
        self.broker.mark_dirty(self)

    def close(self, error: Error | None = None) -> None:
        self.protocol.close(error)
        self.broker.handle(self, self.protocol.take_events())
        self.broker.mark_dirty(self)
