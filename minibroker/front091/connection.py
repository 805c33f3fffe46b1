"""An AMQP 0-9-1 client connection on the broker: the sans-I/O engine glued to the broker's nodes.

The server hands a connection whose protocol header is ``AMQP 0 0 9 1`` (§4.2.2) to
:class:`Connection091` (registered in :mod:`minibroker.front091`); it satisfies the server's
``ServedConnection`` protocol (``minibroker.broker.frontends``), feeds bytes to the 0-9-1 engine
(:class:`minibroker.amqp091.connection.Connection`, which runs the handshake and channels) and
acts on what it reports: methods and publishes go to the :class:`~.channel.Channel` they came
on; a closed channel or connection gives back what it held.

Logins: ``guest``/``guest`` works unless configured otherwise, as on a fresh RabbitMQ; the
broker's ``users`` (and ``RabbitMQOptions.users``) log in too.  The virtual host is ``/``, or one
of ``RabbitMQOptions.vhosts`` (all of them the same nodes here); another is refused with 530.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..amqp091 import errors as codes
from ..amqp091.connection import Connection, ConnectionConfig
from ..amqp091.errors import AMQP091Error
from ..amqp091.events import (
    Answer,
    ChannelClosed,
    ChannelOpened,
    ConnectionClosed,
    ConnectionOpened,
    Event,
    MethodReceived,
    Published,
)
from ..amqp091.observed import MethodFrame
from ..broker.client_connection import OUTPUT_BOUND
from .access import Access
from .channel import Channel
from .confirms import Confirms
from .vhost import vhost_of

if TYPE_CHECKING:
    from ..broker.engine import Broker

__all__ = ["Connection091", "SERVER_PROPERTIES"]

#: What RabbitMQ 3.x announces in ``connection.start``; clients turn features on by these
#: capabilities (pika: publisher confirms, basic.nack, consumer cancel notifications).
CAPABILITIES: dict[str, Any] = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "per_consumer_qos": True,
    "authentication_failure_close": True,
    "consumer_priorities": True,
    "direct_reply_to": True,
}
#: ``product`` is RabbitMQ's, as the broker minibroker answers as: clients and their suites read
#: it to tell RabbitMQ's extensions are there (amqplib's checks ``product == 'RabbitMQ'``);
#: ``information`` says which broker it is.
SERVER_PROPERTIES: dict[str, Any] = {
    "product": "RabbitMQ",
    "platform": "Python",
    "information": "minibroker, an AMQP 1.0 and 0-9-1 broker for tests, answering as RabbitMQ",
    "capabilities": CAPABILITIES,
}
#: RabbitMQ's default user on a fresh install.
DEFAULT_USERS = {"guest": "guest"}


class _Hold:
    """Output a ``delay`` fault holds: ``start`` bytes of the engine's output go before it, the rest waits."""

    __slots__ = ("start", "data", "done")

    def __init__(self, start: int) -> None:
        self.start = start
        self.data = bytearray()
        self.done = False


class Connection091:
    """One AMQP 0-9-1 client connection as the broker and the server see it."""

    def __init__(self, broker: Broker, notify: Callable[[], None], peer: str) -> None:
        self.broker = broker
        self.notify = notify
        self.peer = peer
        self.open = True
        self.throttled = False
        self.transport_backlog: int | None = None
        # The server's per-read flags (frontends.ReadState): 0-9-1 logins are not held, a refused
        # one is reported in ``login_failed``, and the engine handles a read whole.
        self.hold_logins = self.login_held = self.login_failed = self.backlogged = False
        config = broker.config
        rabbitmq = config.layers.get("rabbitmq")  # the RabbitMQ layer's options (users, virtual hosts)
        self._users = {**DEFAULT_USERS, **(dict(rabbitmq.users) if rabbitmq is not None else {}), **config.users}
        self._vhosts = tuple(rabbitmq.vhosts) if rabbitmq is not None else ("/",)
        self.engine = Connection(
            ConnectionConfig(
                server_properties=SERVER_PROPERTIES,
                # No bound configured: RabbitMQ's own (128 MiB), checked from the content header.
                max_message_size=config.max_message_size or ConnectionConfig.max_message_size,
                handshake_timeout=config.handshake_timeout if config.handshake_timeout is not None else float("inf"),
                # The heartbeat offered in tune (§4.2.7): the 1.0 idle timeout in whole seconds
                # (60 by default, RabbitMQ's own); None or 0 offers none.
                heartbeat=math.ceil(config.idle_timeout) if config.idle_timeout else 0,
            ),
            self,
        )
        self.vhost = vhost_of(broker)
        if broker.alarm is not None:
            self.engine.block(broker.alarm)
        self.channels: dict[int, Channel] = {}
        #: Output held by a ``delay`` fault (.faults), from the frame it fired on.
        self._hold: _Hold | None = None
        #: Channels holding publisher confirms, sent when the read that routed them is handled.
        self._confirming: list[Confirms] = []
        #: The logged-in user under ``BrokerConfig.permissions`` (access.py), set by ``connection.open``.
        self.access = Access(None, None, "/")
        # The broker's tap sees this connection's methods while it has observers (broker/tap.py).
        broker.tap.watch(self)
        self.tap_changed(broker.tap.active)

    # ------------------------------------------------------------ the tap

    def tap_changed(self, active: bool) -> None:
        """The tap gained its first observer or lost its last: hook the engine to it, or unhook it."""
        self.engine.hook = self if active else None

    @property
    def container_id(self) -> str | None:
        """What names this client in the frame log and the picture, as a 1.0 container-id does:
        the ``connection_name`` its client announced in ``start-ok`` (pika's
        ``client_properties``), else its ``product``; None before ``start-ok``."""
        properties = self.engine.client_properties
        name = properties.get("connection_name") or properties.get("product")
        return str(name) if name else None

    def frame_in(self, channel: int, frame: MethodFrame) -> None:
        self.broker.tap.frame_in(self, channel, frame)

    def frame_out(self, channel: int, frame: MethodFrame | None, data: bytes) -> bytes:
        return self.broker.tap.frame_out(self, channel, frame, data)

    def write(self, data: bytes) -> None:
        """Send ``data`` as it is (frames an observer withheld) and wake this connection's writer."""
        self.engine.send_raw(data)
        self.broker.mark_dirty(self)
        self.broker.flush()

    # ------------------------------------------------------------ Gatekeeper

    def login(self, user: str, password: str) -> bool:
        accepted = self._users.get(user) == password
        # Counted by the server against the peer's address (broker/logins.py), as a failed SASL
        # login is; 0-9-1 logins are not held back, the refused one is closed at once (403).
        self.login_failed = not accepted
        return accepted

    def open_vhost(self, user: str, vhost: str) -> str | None:
        """530 for a virtual host the broker does not have, or past ``max_connections`` (counted
        over both protocols from their ``open``, as RabbitMQ words its connection limit)."""
        if vhost not in self._vhosts:
            return f"vhost {vhost} not found"
        limit = self.broker.config.max_connections
        if self.broker.opened_connections() >= limit:
            return f"access to vhost '{vhost}' refused for user '{user}': connection limit ({limit}) is reached"
        return None

    # ------------------------------------------------------ ServedConnection

    @property
    def protocol(self) -> Connection091:
        """The server's per-read flags live on the connection itself."""
        return self

    @property
    def finished(self) -> bool:
        return self.engine.finished

    @property
    def handshaking(self) -> bool:
        return self.engine.vhost is None and not self.engine.finished and self.open

    def receive_data(self, data: bytes, max_frames: int | None = None) -> None:
        self._run(lambda: self.engine.receive_data(data))

    def data_to_send(self) -> bytes:
        if self.throttled and self.transport_backlog is None:
            self.output_drained()
        data = self.engine.data_to_send()
        hold = self._hold
        if hold is None:
            return data
        if hold.done:  # the delay is over: what it held goes first, in order
            self._hold = None
            return bytes(hold.data) + data
        sent, hold.start = data[: hold.start], 0
        hold.data += data[len(sent) :]
        return sent

    def tick(self, now: float) -> float | None:
        """Heartbeats and the handshake timeout at ``now``; the next deadline.

        The server's writer calls this each time it wakes and takes the output right after, so
        only a tick that ended something (events) is run through the broker: waking this
        connection's writer for a tick that did nothing woke it again at once, a busy loop of
        ~12,000 turns a second per idle connection.
        """
        deadline = self.engine.tick(now)
        events = self.engine.take_events()
        if events:
            self._run(lambda: events)
        return deadline

    def output_full(self) -> bool:
        """Whether the output queued here is over ``OUTPUT_BOUND``: consumers get no credit until it drains."""
        if self.engine.output_size + (self.transport_backlog or 0) <= OUTPUT_BOUND:
            return False
        self.throttled = True
        return True

    def output_drained(self) -> None:
        if not self.throttled or not self.open:
            return
        self.throttled = False
        self._run(self._pump)

    def _pump(self) -> list[Event]:
        """Room opened in the output: every channel's consumers may send again."""
        for channel in list(self.channels.values()):
            channel.pump()
        return []

    def connection_lost(self) -> None:
        if self.open:
            self._run(self.engine.connection_lost)
            self.broker.forget_connection(self)

    def release(self) -> None:
        self.connection_lost()
        self.transport_backlog = None
        self.throttled = False

    def close_forced(self) -> None:
        """The broker stops or resets: 320 CONNECTION_FORCED, as RabbitMQ closes connections when it stops."""
        self.engine.close(None)
        self._run(self.engine.take_events)

    def alarm(self, reason: str | None) -> None:
        if reason is not None:
            self.engine.block(reason)
            self.broker.mark_dirty(self)
            self.broker.flush()
        else:
            self._run(self.engine.unblock)

    @property
    def read_paused(self) -> bool:
        """A publish came under the broker's alarm: the server reads nothing more until it clears."""
        return self.engine.read_paused

    def mark_dirty(self) -> None:
        self.broker.mark_dirty(self)

    # ------------------------------------------------------ faults (.faults)

    def fail(self, number: int, error: AMQP091Error) -> None:
        """Close channel ``number`` (a soft code) or the connection (a hard one) with ``error``."""
        if not self.open:
            return
        if error.closes_connection:
            self.engine.close(error)
        else:
            self.engine.close_channel(number, error)
        self._run(self.engine.take_events)

    def drop(self) -> None:
        """Drop the connection with no ``connection.close``, as a crash or a cut cable: what was
        queued before still goes out, then the socket closes; the channels give back what they held."""
        if not self.open:
            return
        self.connection_lost()
        self.notify()  # its writer wakes, finds it finished and closes the socket

    def hold(self) -> None:
        """Hold the output from what is queued next until the fault's timer (.faults) calls :meth:`release_hold`."""
        if self._hold is None:
            self._hold = _Hold(self.engine.output_size)

    def release_hold(self) -> None:
        if self._hold is not None and self.open:
            self._hold.done = True
            self.mark_dirty()
    def confirms_due(self, confirms: Confirms) -> None:
        self._confirming.append(confirms)

    def _flush_confirms(self) -> None:
        """One ``basic.ack`` per confirming channel for the publishes of this read, not one per publish."""
        if self._confirming:
            due, self._confirming = self._confirming, []
            for confirms in due:
                confirms.flush()

    # ---------------------------------------------------------------- events

    def _run(self, step: Callable[[], list[Event]]) -> None:
        """Run an engine step and act on its events; a broker bug closes this connection (541), no other."""
        try:
            for event in step():
                self._event(event)
            self._flush_confirms()
        except Exception as exc:
            self.broker.errors.append(exc)
            self.engine.close(AMQP091Error(codes.INTERNAL_ERROR, f"broker error: {type(exc).__name__}: {exc}"))
            try:
                for event in self.engine.take_events():
                    self._event(event)
            except Exception as second:
                self.broker.errors.append(second)
        self.broker.mark_dirty(self)
        self.broker.flush()

    def _event(self, event: Event) -> None:
        if isinstance(event, MethodReceived):
            self._on_channel(event.channel, lambda channel: channel.handle(event.method))
        elif isinstance(event, Published):
            self._on_channel(event.channel, lambda channel: channel.publish(event.method, event.properties, event.body, event.header_size))
        elif isinstance(event, Answer):
            # The engine's close-ok (or the like) after the replies to the methods before it,
            # the confirms of the publishes before it included (all channels' for channel 0).
            for number, confirming in self.channels.items():
                if event.channel in (0, number):
                    confirming.confirms.flush()
            self.engine.send(event.channel, event.method)
        elif isinstance(event, ChannelOpened):
            self.channels[event.channel] = Channel(self, event.channel)
        elif isinstance(event, ChannelClosed):
            channel = self.channels.pop(event.channel, None)
            if channel is not None:
                channel.confirms.flush()
                channel.close()
        elif isinstance(event, ConnectionClosed):
            for channel in list(self.channels.values()):
                channel.confirms.flush()
                channel.close()
            self.channels.clear()
            self.vhost.connection_closed(self)
        elif isinstance(event, ConnectionOpened):
            # The engine answered open-ok; channels come next, each checked as this user.
            self.access = Access(self.broker.permissions, event.user, event.vhost)

    def _on_channel(self, number: int, act: Callable[[Channel], None]) -> None:
        channel = self.channels.get(number)
        if channel is None:
            return  # closed by an earlier event of this read
        try:
            act(channel)
        except AMQP091Error as error:
            channel.confirms.flush()  # the publishes routed before the error are confirmed before the close
            if error.closes_connection:
                self.engine.close(error)
            else:
                self.engine.close_channel(number, error)
            for event in self.engine.take_events():
                self._event(event)
