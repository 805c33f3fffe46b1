"""Applying faults: an observer on the broker's tap (:mod:`.tap`) that makes :mod:`.faults` happen.

While a fault is live the :class:`FaultInjector` is installed on ``broker.tap``
(and ``broker.injector`` is set); otherwise neither exists and the broker pays
only the tap's own ``is None`` tests. Through the tap it sees:

* every inbound event (``event_in``): an attach to refuse, a message to reject,
  a message whose link or connection should go, a commit to fail. The event is
  swallowed, and so is what follows it on a link or connection that is going;
  the action itself runs after the batch (:meth:`FaultInjector.run_pending`,
  from ``Broker.flush``), so that what the client sent before it is handled
  first, in order;
* every outgoing frame (``frame_out``): a ``delay`` withholds the connection's
  frames from the matching one on and lets them go, in order, when the
  broker's clock reaches the end of the delay; a ``stall_credit`` withholds the
  flows granting a producer credit; a transfer is noted so that, once the
  broker has recorded the delivery, :meth:`FaultInjector.run_pending` may
  release, modify, detach or disconnect it.

Each action uses the protocol state machine's own operations: ``refuse_link`` and
``detach_link`` (Part 2 §2.6.3, §2.6.5), ``close`` (§2.4.3), ``settle`` with
released / modified (Part 3 §3.4.4-5) or rejected (§3.4.2), ``send_link_flow``
(§2.6.7), and the transaction coordinator's rollback (Part 4 §4.4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

from ..amqp import errors as conditions
from ..amqp.message import decode_message
from ..amqp.messaging import Modified, Received, Rejected, Released
from ..amqp.performatives import Error, Flow, amqp_error
from ..amqp.transactions import Discharge, TransactionalState
from ..protocol import LinkState
from ..protocol import events as ev
from ..protocol.endpoints import Delivery, Link
from .client_connection import BrokerConnection
from .clock import Clock
from .config import BrokerConfig
from .faults import Fault, FaultSet, Firing, Site, fault_kind
from .roles import LinkRole
from .stored import Entry
from .tap import Observer, Tap, TapConnection
from .timers import Timers
from .transactions import TransactionManager

#: The actions (faults.FAULT_KINDS) that end a link or a connection: any point may fire them.
_DISCONNECTS = frozenset({"detach", "close", "drop"})
#: Every action the injector takes; a kind whose action is not here raises where it fires.
ACTIONS = _DISCONNECTS | {"release", "modify", "reject", "refuse", "hold", "stall", "rollback"}

__all__ = ["ACTIONS", "FaultInjector", "InjectionHost"]


#: Points offered a message a client sends, and a message the broker sends.
_INBOUND_MESSAGE = frozenset({"publish", "transfer", "discharge"})
_OUTBOUND_MESSAGE = frozenset({"delivery", "transfer"})


def _nothing() -> None:
    """The subject of a delivery whose sender kept no message (a fault's ``when=`` sees None)."""
    return None


class _Hold:
    """Frames of one connection withheld until ``until`` (broker clock), in order."""

    __slots__ = ("until", "frames")

    def __init__(self, until: float) -> None:
        self.until = until
        self.frames: list[bytes] = []


class InjectionHost(Protocol):
    """What the injector needs of the broker (``minibroker.broker.engine.Broker``)."""

    tap: Tap
    clock: Clock
    config: BrokerConfig
    transactions: TransactionManager
    injector: FaultInjector | None
    timers: Timers

    def detach_link(self, connection: BrokerConnection, link: Link, error: Error) -> None: ...


class FaultInjector(Observer):
    """Applies a broker's :class:`FaultSet` to its connections, installed on the tap while needed."""

    def __init__(self, broker: InjectionHost, faults: FaultSet, timers_changed: Callable[[], None]) -> None:
        self.broker = broker
        self.faults = faults
        self._timers_changed = timers_changed
        # A fault fires while the tap is inside the protocol's event or frame loop, where
        # detaching, closing or settling would change what is being iterated (and a
        # broker handler may still be about to act on the same event).  So firing only
        # records what to do; the broker runs it from flush(), after the whole batch,
        # through run_pending().
        self._actions: list[Callable[[], None]] = []  # run after the batch that fired them
        # Deliveries sent this batch (the tap's delivery_out), offered to delivery faults after it.
        self._sent: list[tuple[BrokerConnection, LinkRole, int]] = []  # (connection, the link's role, id)
        self._going: set[Any] = set()  # connections and links whose remaining events this batch are dropped
        self._silenced: set[BrokerConnection] = set()  # dropped: not even a close frame goes out
        self._holds: dict[BrokerConnection, _Hold] = {}
        self._stalled: dict[Fault, dict[Link, BrokerConnection]] = {}
        #: Deliveries whose client outcome a ``release``/``modify`` fault with ``at="outcome"`` replaces.
        #: One entry per firing (kept to move it to the disposition it acts on); it goes when the
        #: outcome arrives or its link is gone.
        self._replaced: dict[Delivery, tuple[Released | Modified, Firing]] = {}
        faults.on_change = self._update
        faults.on_cancel = self._cancelled

    # ------------------------------------------------------- on and off

    def _update(self, live: bool) -> None:
        """Stay on the tap while a fault is live or work is left (held frames, pending actions)."""
        broker = self.broker
        self._forget_ended()
        wanted = live or bool(self._holds or self._actions or self._sent or self._replaced)
        if wanted and broker.injector is None:
            broker.injector = broker.tap.install(self)
            broker.timers.add(self)
        elif not wanted and broker.injector is self:
            broker.tap.remove(self)
            broker.timers.discard(self)
            broker.injector = None

    def _forget_ended(self) -> None:
        """Links that ended took their deliveries back (§3.4.5): no outcome of theirs will come."""
        for gone in [d for d in self._replaced if d.link.state is not LinkState.ATTACHED]:
            del self._replaced[gone]

    def _cancelled(self, fault: Fault) -> None:
        for link, connection in self._stalled.pop(fault, {}).items():
            if connection.open and link.state is LinkState.ATTACHED:
                connection.protocol.send_link_flow(link)  # the credit the broker granted all along
                connection.mark_dirty()

    def _fire(self, point: str, site: Site, subject: Callable[[], Any]) -> Fault | None:
        for fault in self.faults.live(point):
            if fault.consider(site, subject):
                self.faults.record(fault, site, self.broker.clock.now())
                return fault
        return None

    def _site(self, connection: TapConnection, link: Link | None, address: Any, frame: str) -> Site:
        return Site(
            connection.container_id or connection.peer,
            link.name if link is not None else None,
            address if isinstance(address, str) else None,
            frame,
        )

    # -------------------------------------------------------- inbound

    def event_in(self, connection: TapConnection, event: ev.Event) -> ev.Event | None:
        # Called for every inbound event while a fault is live: each test is ordered cheapest and
        # likeliest first, and the event's kind compared by identity (no isinstance walk).
        if connection in self._going:
            return None  # closed or dropped by a fault: the rest of what it sent is never read
        kind = type(event)
        points = self.faults.points
        if kind is ev.LinkAttached:
            assert isinstance(event, ev.LinkAttached)
            if "attach" not in points:
                return event
            return None if self._attach(self._own(connection), event.link) else event
        # Only while a delivery waits for its client outcome to be replaced (at="outcome").
        if kind is ev.DeliveryUpdated and self._replaced:
            assert isinstance(event, ev.DeliveryUpdated)
            return self._replace_outcome(event)
        if kind is ev.MessageReceived:
            assert isinstance(event, ev.MessageReceived)
            if self._going and event.link in self._going:
                return None  # a transfer behind a detach is dropped, as the protocol drops late ones
            if not points.isdisjoint(_INBOUND_MESSAGE) and self._message(self._own(connection), event):
                return None
        return event

    def _replace_outcome(self, event: ev.DeliveryUpdated) -> ev.DeliveryUpdated:
        """The client's outcome of a delivery a fault fired on (``at="outcome"``) becomes the fault's."""
        if isinstance(event.state, TransactionalState):
            return event  # a transactional outcome stays the transaction's (Part 4 §4.4.2)
        if event.state is None or isinstance(event.state, Received):
            if not event.settled:
                return event  # progress, not an outcome (§3.4.1): the outcome is still to come
        replaced = self._replaced.pop(event.delivery, None)
        if replaced is None:
            return event
        outcome, firing = replaced
        # The firing is shown where it acted: on the client's disposition, not the transfer before it.
        client = type(event.state).__name__.lower() if event.state is not None else "settlement"
        frame = f"disposition delivery-id={int(event.delivery.delivery_id)} (the client's {client}, taken as {type(outcome).__name__.lower()})"
        self.faults.moved(firing, self.broker.clock.now(), frame)
        self._update(self.faults.has_live())
        return event._replace(state=outcome)

    def _own(self, connection: TapConnection) -> BrokerConnection:
        return cast("BrokerConnection", connection)  # the tap reports this broker's connections

    def _attach(self, connection: BrokerConnection, link: Link) -> bool:
        if link.state is not LinkState.ATTACH_RCVD:
            return False
        site = self._site(connection, link, link.address, f"attach {link.name!r}")
        fault = self._fire("attach", site, lambda: link.attach)
        if fault is None:
            return False
        error = self._error(fault, f"refused by {fault!r}")
        self._actions.append(lambda: connection.protocol.refuse_link(link, error))
        return True

    def _message(self, connection: BrokerConnection, event: ev.MessageReceived) -> bool:
        link, delivery = event.link, event.delivery
        owner: LinkRole | None = link.context
        # The role says which point its messages meet: a producer's (or a layer's publishing
        # link's) go into a node, the coordinator's are declares and discharges.
        point = owner.message_point if owner is not None else None
        if point == "discharge":
            return self._discharge(connection, event)
        if point != "publish":
            return False
        assert owner is not None
        decoded: list[Any] = []

        # Decoded at most once, and only if a fault's ``when=`` (or an anonymous relay's ``to``)
        # asks: a fault aimed at another address never pays for decoding.
        def subject() -> Any:
            if not decoded:
                decoded.append(decode_message(delivery.payload))
            return decoded[0]

        address = owner.address
        if address is None:  # anonymous relay: the message's ``to`` names the node
            address = getattr(subject().properties, "to", None)
        site = self._site(connection, link, address, f"transfer delivery-id={int(delivery.delivery_id)}")
        fault = self._fire("publish", site, subject) or self._fire("transfer", site, subject)
        if fault is None:
            return False
        action = fault_kind(fault.kind).action
        if action == "reject":
            error = self._error(fault, f"rejected by {fault!r}")

            def reject() -> None:
                if not delivery.remote_settled and link.state is LinkState.ATTACHED:
                    connection.protocol.settle(delivery, Rejected(error=error))
                    credit = self.broker.config.link_credit
                    if link.credit <= credit // 2:  # as the broker tops up a producer's credit
                        connection.protocol.grant_credit(link, credit)
                connection.mark_dirty()

            self._actions.append(reject)
        elif action in _DISCONNECTS:
            self._going.add(link if action == "detach" else connection)
            self._actions.append(lambda: self._disconnect(fault, connection, link))
        else:
            raise ValueError(f"{fault!r} fired on a publish, but its action {action!r} is not one a publish can take")
        return True

    def _discharge(self, connection: BrokerConnection, event: ev.MessageReceived) -> bool:
        if "discharge" not in self.faults.points:
            return False
        delivery = event.delivery
        try:
            body = decode_message(delivery.payload).body
        except Exception:  # malformed: the coordinator answers it
            return False
        if not isinstance(body, Discharge) or body.fail:
            return False
        frame = f"transfer delivery-id={int(delivery.delivery_id)} (discharge)"
        fault = self._fire("discharge", self._site(connection, event.link, None, frame), lambda: body)
        if fault is None:
            return False

        def fail() -> None:
            outcome = self.broker.transactions.roll_back(body.txn_id, f"commit failed: {fault!r}")
            connection.protocol.settle(delivery, outcome)
            connection.mark_dirty()

        self._actions.append(fail)
        return True

    # -------------------------------------------------------- outbound

    def frame_out(self, connection: TapConnection, channel: int, performative: Any, frame: bytes) -> bytes:
        if connection in self._silenced:
            return b""  # dropped: not even the close that connection_lost() writes may reach the peer
        # A held connection's frames keep their order: everything after the first held one waits too.
        hold = self._holds.get(self._own(connection))
        if hold is not None:
            hold.frames.append(frame)
            return b""
        if performative is None or not isinstance(connection, BrokerConnection):
            return frame  # a keep-alive, or another wire protocol's frame: the faults here act on AMQP 1.0's
        points = self.faults.points
        if "frame" in points and self._delay(self._own(connection), channel, performative, frame):
            return b""
        if isinstance(performative, Flow) and performative.handle is not None and "credit" in points:
            if self._stall(self._own(connection), channel, performative):
                return b""
        return frame

    def delivery_out(
        self, connection: TapConnection, consumer: Any, entry: Entry | None, delivery: Delivery
    ) -> None:
        """A link's role sent a message: offered to delivery faults after the batch (``run_pending``)."""
        owned = self._own(connection)
        if owned in self._silenced or owned in self._holds:
            return  # dropped or held output is not on the wire (as frame_out withholds it)
        if consumer.address is None:
            return  # a link faults do not reach: they are aimed at addresses, and it names none
        if not self.faults.points.isdisjoint(_OUTBOUND_MESSAGE):
            self._sent.append((owned, consumer, delivery.delivery_id))

    def _link(self, connection: BrokerConnection, channel: int, performative: Any) -> Link | None:
        session = connection.protocol.local_session(channel)
        handle = getattr(performative, "handle", None)
        return session.links_by_handle.get(handle) if session is not None and handle is not None else None

    def _delay(self, connection: BrokerConnection, channel: int, performative: Any, frame: bytes) -> bool:
        name = type(performative).__name__.lower()
        link = self._link(connection, channel, performative)
        for fault in self.faults.live("frame"):
            if fault.params["frames"] not in (None, name):
                continue
            if link is not None:
                address = link.address
            else:  # a frame of no one link (disposition, end ...): on a connection that uses the address
                address = fault.address if self._uses(connection, fault.address) else None
            site = self._site(connection, link, address, name)
            if fault.consider(site, lambda: performative):
                now = self.broker.clock.now()
                hold = self._holds[connection] = _Hold(now + fault.params["seconds"])
                hold.frames.append(frame)
                self.faults.record(fault, site, now)
                self._timers_changed()
                return True
        return False

    def _uses(self, connection: BrokerConnection, address: str | None) -> bool:
        return any(
            link.address == address
            for session in connection.protocol.sessions.values()
            for link in session.links_by_handle.values()
        )

    def _stall(self, connection: BrokerConnection, channel: int, flow: Flow) -> bool:
        link = self._link(connection, channel, flow)
        if link is None or link.context is None or not link.context.credit_stalls or not flow.link_credit:
            return False  # only credit for producers; the transaction coordinator keeps its own
        site = self._site(connection, link, link.address, f"flow {link.name!r}")
        fault = self._fire("credit", site, lambda: flow)
        if fault is None:
            return False
        self._stalled.setdefault(fault, {})[link] = connection
        return True

    # ------------------------------------------------ after each batch

    def run_pending(self) -> None:
        """Run the actions inbound events fired, then offer the deliveries just sent to the faults."""
        while self._actions or self._sent:
            self._going.clear()
            actions, self._actions = self._actions, []
            for action in actions:
                action()
            sent, self._sent = self._sent, []
            for connection, role, delivery_id in sent:
                self._delivered(connection, role, delivery_id)
        self._update(self.faults.has_live())

    def _delivered(self, connection: BrokerConnection, role: LinkRole, delivery_id: int) -> None:
        """A delivery a link's role sent (a queue's consumer, a stream reader, a layer's link)."""
        link = role.link
        if not connection.open or link.state is not LinkState.ATTACHED:
            return
        # What the role kept of the message decides which faults may act: one it still holds
        # (unsettled) meets ``delivery`` faults and may be settled by them; one it kept nothing
        # of (pre-settled, or a layer's) only ``transfer`` faults that end the link or connection.
        subject = role.sent_message(delivery_id)
        site = self._site(connection, link, role.address, f"transfer delivery-id={int(delivery_id)}")
        fired = self._on_delivery(connection, link, site, subject or _nothing, subject is not None)
        if fired is None:
            return
        fault, outcome = fired
        delivery = link.unsettled.get(delivery_id)
        if fault.params.get("at") == "outcome" and role.outcome_faults:
            if delivery is not None:
                self._forget_ended()
                firing = self.faults.history[-1]  # the one just recorded, until the client's outcome comes
                waiting = self.faults.moved(firing, firing.at, f"{firing.frame} (waiting for the client's outcome)")
                self._replaced[delivery] = (outcome, waiting or firing)
            return
        role.fault_outcome(delivery_id, delivery, outcome)
        connection.mark_dirty()

    def _on_delivery(
        self, connection: BrokerConnection, link: Link, site: Site, subject: Callable[[], Any], has_message: bool
    ) -> tuple[Fault, Released | Modified] | None:
        """The fault a delivery meets (``delivery`` faults first, then ``transfer`` ones) and the
        outcome it settles the delivery with; None when no fault fired or it ended the link or
        connection instead (queue and stream deliveries decide this the same way)."""
        fault = self._fire("delivery", site, subject) if has_message else None
        fault = fault or self._fire("transfer", site, subject)
        if fault is None:
            return None
        action = fault_kind(fault.kind).action
        if action in _DISCONNECTS:
            self._disconnect(fault, connection, link)
            return None
        if action not in ("release", "modify"):
            raise ValueError(f"{fault!r} fired on a delivery, but its action {action!r} is not one a delivery can take")
        if action == "release":
            return fault, Released()
        params = fault.params
        return fault, Modified(delivery_failed=params["delivery_failed"], undeliverable_here=params["undeliverable_here"])

    # ------------------------------------------------------------ actions

    def _error(self, fault: Fault, description: str) -> Error:
        return amqp_error(fault.params.get("error", conditions.INTERNAL_ERROR), description)

    def _disconnect(self, fault: Fault, connection: BrokerConnection, link: Link) -> None:
        """The ``detach``, ``close`` or ``drop`` action (detach_link, close_connection, drop_connection)."""
        if not connection.open:
            return
        action = fault_kind(fault.kind).action
        if action == "detach":
            if link.state is LinkState.ATTACHED:
                self.broker.detach_link(connection, link, self._error(fault, f"link detached by {fault!r}"))
                connection.mark_dirty()
        elif action == "close":
            connection.close(self._error(fault, f"connection closed by {fault!r}"))
        elif action != "drop":
            raise ValueError(f"{fault!r}: action {action!r} does not end a link or connection")
        else:
            # What was queued before still goes out (it was on the wire); then nothing, not even a close.
            self._silenced.add(connection)
            try:
                connection.connection_lost()
            finally:
                self._silenced.discard(connection)
            connection.mark_dirty()  # its writer wakes, finds it finished and closes the socket

    # ------------------------------------------- other front ends' faults

    def later(self, action: Callable[[], None]) -> None:
        """Run ``action`` after the batch, with this injector's own (``run_pending``): how another
        front end (``minibroker.front091.faults``) acts on a fault it fired mid-batch."""
        self._actions.append(action)

    # ------------------------------------------------------------- timers

    def next_deadline(self) -> float | None:
        return min((hold.until for hold in self._holds.values()), default=None)

    def run_timers(self, now: float) -> None:
        """Let held frames go, in order, once their time has come."""
        for connection, hold in list(self._holds.items()):
            if hold.until <= now or not connection.open:
                del self._holds[connection]
                if connection.open:
                    connection.write(b"".join(hold.frames))
        self._update(self.faults.has_live())
