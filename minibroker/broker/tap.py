"""The broker's one observation point: every inbound event and every frame, in and out.

Theory of operation.  Each client connection has a protocol state machine
(:class:`~minibroker.protocol.connection.Connection`) that turns bytes into
frames and events, and frames into bytes.  Everything the broker sees of a
client and everything it says to one passes four places, and the
:class:`Tap` owned by the broker (``broker.tap``) is the only thing that
watches them:

``frame_in(connection, channel, performative)``
    a frame was decoded (before the broker acts on it): an AMQP performative
    (Part 2 §2.7) or a SASL frame body (Part 5 §5.3); on an AMQP 0-9-1
    connection a :class:`~minibroker.amqp091.observed.MethodFrame` (a method,
    with its content for a ``basic.publish``: one call per message).  Observe only.
``event_in(connection, event) -> event | None``
    a protocol event (:mod:`minibroker.protocol.events`: an attach, a message,
    a disposition, a flow, a detach, ...) is about to be handled by the
    broker.  Return it to let it through, another event to replace it, or
    None to swallow it; an observer that swallows an event acts on it
    itself through ``connection.protocol`` (e.g. ``refuse_link``, ``settle``,
    ``detach_link``).  ``event.link.address`` names the node for link events.
``frame_out(connection, channel, performative, frame) -> bytes``
    a frame is about to be queued for the client: ``frame`` is its encoded
    bytes (header included), ``performative`` what they encode (None for an
    empty keep-alive frame or a 0-9-1 heartbeat; a 0-9-1 ``MethodFrame`` with
    its content's frames in ``frame`` for a delivery).  Return ``frame`` to send it, other bytes to
    replace it, or ``b""`` to withhold it; a withheld frame can be sent
    later with ``connection.write(frame)`` (a delay).
    ``Tap.address_of(connection, channel, performative)`` names the node of
    the link an ``attach``, ``detach``, ``flow`` or ``transfer`` belongs to.
``delivery_out(connection, consumer, entry, delivery)``
    the semantic side of an outgoing ``transfer``: the broker just sent a
    message to one of its consumers (:class:`~.consuming.NodeConsumer`).
    ``entry`` is the queue entry the consumer now holds unsettled (None when
    it went out settled, or to a browser), ``delivery`` the protocol's
    delivery.  Observe only: an observer that acts on it (a delivery fault)
    does so after the batch, as the broker holds them all then.

(``frame_out`` of the transfer's frames comes too; ``delivery_out`` saves an
observer that wants the consumer or entry from finding them from the frame.)

Both wire protocols feed ``frame_in`` and ``frame_out``, each with its own frame
objects; :mod:`.wireframes` describes either the same way (name, key fields,
body, one-line summary), and the frame log's records
(:class:`~.statistics.FrameRecord`) answer with it.  ``event_in`` and
``delivery_out`` are AMQP 1.0's (an AMQP 0-9-1 connection does not call them),
and ``connection.protocol`` is the protocol's own connection object: an observer
that acts on a connection checks which kind it has.

Observers are called in installation order; each sees what the one before
returned.  Install with ``broker.tap.install(observer)`` (it returns the
observer) and remove with ``broker.tap.remove(observer)``; subclass
:class:`Observer` and override only what you need.  The frame log
(``BrokerConfig.frame_log``) is such an observer.

Cost: with no observer installed the engines have no hook, so a frame costs
one ``hook is None`` test and a batch of events one test of
:attr:`Tap.active`.  Front ends other than AMQP 1.0's set and clear their
engines' hooks by watching the tap (:meth:`Tap.watch`).  Installing an observer never changes how a frame is
encoded: the bytes a client receives are the same with and without one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from weakref import WeakSet

from ..amqp.performatives import Attach, Detach, Flow, Transfer
from ..protocol import events as ev
from ..protocol.endpoints import Delivery
from .stored import Entry

if TYPE_CHECKING:
    from .statistics import FrameRecord

__all__ = ["Tap", "Observer", "TapConnection", "TapWatcher", "FrameLog", "TraceObserver", "FrameTrace"]


class TapConnection(Protocol):
    """A client connection as observers see it."""

    @property
    def peer(self) -> str:
        """The client's transport address (``host:port``)."""

    @property
    def container_id(self) -> str | None:
        """The container-id of the client's ``open`` (None before it); on AMQP 0-9-1 the
        connection name or product its client announced in ``connection.start-ok``."""

    @property
    def protocol(self) -> Any:
        """The connection's protocol object: for AMQP 1.0 its state machine (a
        :class:`~minibroker.protocol.connection.Connection`: sessions, links and the calls that
        send frames); for AMQP 0-9-1 the front end's connection."""

    @property
    def engine(self) -> Any:
        """The older name of ``protocol`` (for AMQP 0-9-1: its sans-I/O engine)."""

    def write(self, data: bytes) -> None:
        """Send ``data`` as it is (e.g. a frame an observer withheld earlier) and wake the writer."""


class Observer:
    """Base class of what a :class:`Tap` calls; every method passes things through unchanged."""

    def frame_in(self, connection: TapConnection, channel: int, performative: Any) -> None:
        """A frame arrived from the client (decoded, not yet acted on)."""

    def event_in(self, connection: TapConnection, event: ev.Event) -> ev.Event | None:
        """An event is about to be handled: return it, a replacement, or None to swallow it."""
        return event

    def frame_out(self, connection: TapConnection, channel: int, performative: Any, frame: bytes) -> bytes:
        """A frame is about to be sent: return it, replacement bytes, or ``b""`` to withhold it."""
        return frame

    def delivery_out(self, connection: TapConnection, consumer: Any, entry: Entry | None, delivery: Delivery) -> None:
        """The broker sent ``consumer`` a message: ``entry`` is what it holds unsettled (None if nothing)."""


AnyObserver = TypeVar("AnyObserver", bound=Observer)


class TapWatcher(Protocol):
    """Told when the tap gains its first observer or loses its last (a front end's connection,
    which sets or clears its engine's frame hook then)."""

    def tap_changed(self, active: bool) -> None: ...


class Tap:
    """The ordered observers of every connection of one broker."""

    def __init__(self, on_change: Callable[[bool], None]) -> None:
        self._observers: tuple[Observer, ...] = ()
        self._on_change = on_change  # told whether any observer is installed, to set the engines' hooks
        # Other front ends' connections, held weakly: one that is gone needs no telling.
        self._watchers: WeakSet[TapWatcher] = WeakSet()
        #: Whether an observer is installed (the one test paid when none is).
        self.active = False

    @property
    def observers(self) -> tuple[Observer, ...]:
        return self._observers

    def install(self, observer: AnyObserver) -> AnyObserver:
        """Add ``observer`` after those installed before it; return it."""
        if observer in self._observers:
            raise ValueError(f"{observer!r} is already installed; remove it before installing it again")
        self._observers += (observer,)
        self._changed()
        return observer

    def remove(self, observer: Observer) -> None:
        """Remove an installed observer."""
        if observer not in self._observers:
            raise ValueError(f"{observer!r} is not installed (install it with tap.install first)")
        self._observers = tuple(o for o in self._observers if o is not observer)
        self._changed()

    def watch(self, watcher: TapWatcher) -> None:
        """Tell ``watcher`` each time :attr:`active` changes, for as long as it lives."""
        self._watchers.add(watcher)

    def _changed(self) -> None:
        active = bool(self._observers)
        if active != self.active:
            self.active = active
            self._on_change(active)
            for watcher in list(self._watchers):
                watcher.tap_changed(active)

    # ------------------------------------------------------ the four places

    def frame_in(self, connection: TapConnection, channel: int, performative: Any) -> None:
        for observer in self._observers:
            observer.frame_in(connection, channel, performative)

    def events_in(self, connection: TapConnection, events: list[ev.Event]) -> list[ev.Event]:
        passed = []
        for event in events:
            current: ev.Event | None = event
            for observer in self._observers:
                current = observer.event_in(connection, event)
                if current is None:
                    break
                event = current
            if current is not None:
                passed.append(current)
        return passed

    def frame_out(self, connection: TapConnection, channel: int, performative: Any, frame: bytes) -> bytes:
        for observer in self._observers:
            frame = observer.frame_out(connection, channel, performative, frame)
            if not frame:
                break
        return frame

    def delivery_out(self, connection: TapConnection, consumer: Any, entry: Entry | None, delivery: Delivery) -> None:
        for observer in self._observers:
            observer.delivery_out(connection, consumer, entry, delivery)

    # ------------------------------------------------------------ helpers

    @staticmethod
    def address_of(connection: TapConnection, channel: int, performative: Any) -> str | None:
        """The address of the link an outgoing frame on our ``channel`` belongs to, if any.

        ``attach``, ``detach``, ``flow`` and ``transfer`` name a link by its
        handle (§2.6.2); other frames (``open``, ``begin``, a session ``flow``,
        a ``disposition``, which names deliveries, ...) give None.
        """
        if not isinstance(performative, (Attach, Detach, Flow, Transfer)):
            return None  # not a link's frame (another wire protocol's frames never are these)
        session = connection.protocol.local_session(channel)  # an AMQP 1.0 connection's
        handle = performative.handle
        if session is None or handle is None:
            return None
        link = session.links_by_handle.get(handle)
        address = link.address if link is not None else None
        return address if isinstance(address, str) else None


#: A frame as the log keeps it: the fields of a :class:`FrameRecord`, built only when read.
_Row = tuple[float, str, str, int, Any]


class FrameLog(Observer):
    """Keeps the last ``size`` frames of every connection (``BrokerConfig.frame_log``).

    Rows are plain tuples (a frozen dataclass costs several times more to build, on every
    frame); :meth:`records` turns the ones asked for into :class:`FrameRecord` objects.
    """

    def __init__(self, size: int, now: Callable[[], float]) -> None:
        self._rows: deque[_Row] = deque(maxlen=size)
        self._now = now

    def records(self, last: int | None = None) -> list[FrameRecord]:
        """The kept frames, oldest first; the ``last`` N if given."""
        from .statistics import FrameRecord  # the snapshots' module loads when first asked for

        rows = list(self._rows)
        return [FrameRecord(*row) for row in (rows[-last:] if last else rows)]

    def clear(self) -> None:
        self._rows.clear()

    def frame_in(self, connection: TapConnection, channel: int, performative: Any) -> None:
        self._record(connection, "in", channel, performative)

    def frame_out(self, connection: TapConnection, channel: int, performative: Any, frame: bytes) -> bytes:
        if performative is not None:  # keep-alives are not logged
            self._record(connection, "out", channel, performative)
        return frame

    def _record(self, connection: TapConnection, direction: str, channel: int, performative: Any) -> None:
        name = f"{connection.peer} {connection.container_id or ''}".strip()
        self._rows.append((self._now(), name, direction, channel, performative))


#: A plain function told of every frame: (connection, "in" or "out", channel, performative).
FrameTrace = Callable[[Any, str, int, Any], None]


class TraceObserver(Observer):
    """Calls a plain function for every frame (``Broker(trace=...)``)."""

    def __init__(self, trace: FrameTrace) -> None:
        self.trace = trace

    def frame_in(self, connection: TapConnection, channel: int, performative: Any) -> None:
        self.trace(connection, "in", channel, performative)

    def frame_out(self, connection: TapConnection, channel: int, performative: Any, frame: bytes) -> bytes:
        if performative is not None:
            self.trace(connection, "out", channel, performative)
        return frame
