"""Faults on AMQP 0-9-1 connections: ``broker.faults`` acting on pika, kombu and aio-pika clients.

Theory of operation.  Faults are declared once, for both protocols, in
:mod:`minibroker.broker.faults`; the AMQP 1.0 injector (:mod:`minibroker.broker.injection`) applies
them to 1.0 connections through the broker's tap.  A 0-9-1 connection does not pass the tap, so
its channel asks this module at four places, and only while a fault is live (``broker.injector``
is not None, one test per message otherwise):

* a **publish** (``basic.publish``, its address the exchange, or the routing key through the
  default exchange): ``reject_publish`` drops it and, under publisher confirms, nacks it (RabbitMQ's
  ``x-overflow: reject-publish`` answer); ``block_publishers`` raises the broker's resource alarm
  (``connection.blocked``) and clears it later on the broker's clock; ``close_channel``,
  ``close_connection`` and ``drop_connection`` end the channel or connection before it is taken;
* a **delivery** (``basic.deliver`` from a queue, its address the queue): ``release`` / ``modify``
  put it back on the queue, redelivered (the client's late acknowledgement of the tag is a no-op,
  or with ``at="outcome"`` is taken as a requeue); ``cancel_consumer`` sends ``basic.cancel``;
  ``close_channel``, ``close_connection`` and ``drop_connection`` as above (what the channel held
  goes back, redelivered, 0-9-1 §1.8);
* a **declare** (``queue.declare`` / ``exchange.declare``): ``refuse_declare`` answers with a
  channel (or connection) error, 403 ACCESS_REFUSED in RabbitMQ's words by default;
* an outgoing **delivery or confirm** (``basic.deliver``, ``basic.ack``, ``basic.nack``):
  ``delay`` holds the connection's output from that frame on for its seconds, in order.

Each firing is counted and recorded in ``broker.faults`` as a 1.0 one is, so ``fault.fired``,
``must_fire``, ``broker.faults.history``, the failure report and ``fault_plans`` treat both
protocols alike.  A delivery fault acts after the batch (``FaultInjector.later``: the queue is
mid-dispatch when it fires); publish and declare faults act at once, through the channel
error path a real refusal takes.  Publishes in a transaction (``tx.select``), ``basic.get`` and
stream deliveries are not offered.  Kinds with no 0-9-1 meaning (``detach_link``,
``refuse_attach``, ``stall_credit``, ``fail_discharge``) are never offered 0-9-1 events, so they
neither fire nor count here.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Protocol

from ..amqp091 import errors as codes
from ..amqp091.errors import AMQP091Error
from ..broker.faults import Fault, Site, fault_kind

if TYPE_CHECKING:
    from ..amqp091.connection import Connection
    from ..broker.engine import Broker

__all__ = ["ACTIONS", "FaultChannel", "FaultConnection", "FaultTimers", "on_declare", "on_delivery", "on_publish", "delay"]

#: What a publish, a delivery and a declare may meet: the points offered (in that order) and the
#: actions (``FaultKind.action``) that mean something there.
_PUBLISH = (("publish", "alarm", "channel", "transfer"), frozenset({"reject", "alarm", "close_channel", "close", "drop"}))
_DELIVERY = (
    ("delivery", "consumer", "channel", "transfer"),
    frozenset({"release", "modify", "cancel", "close_channel", "close", "drop"}),
)
#: A no-ack delivery is settled as it goes: nothing to put back.
_NO_ACK_DELIVERY = (_DELIVERY[0], _DELIVERY[1] - {"release", "modify"})
_DECLARE = (("declare",), frozenset({"refuse_declare"}))
#: Every action (``FaultKind.action``) this module takes on 0-9-1 connections.
ACTIONS = _PUBLISH[1] | _DELIVERY[1] | _DECLARE[1] | {"hold"}


class FaultConnection(Protocol):
    """What this module calls on a 0-9-1 connection (``.connection.Connection091``)."""

    @property
    def broker(self) -> Broker: ...

    @property
    def peer(self) -> str: ...

    @property
    def engine(self) -> Connection: ...

    def fail(self, number: int, error: AMQP091Error) -> None: ...

    def drop(self) -> None: ...

    def hold(self) -> None: ...

    def release_hold(self) -> None: ...


class FaultChannel(Protocol):
    """What this module calls on a 0-9-1 channel (``.channel.Channel``)."""

    @property
    def number(self) -> int: ...

    @property
    def connection(self) -> FaultConnection: ...

    @property
    def confirming(self) -> bool: ...

    def nack_publish(self) -> None: ...

    def requeue_delivery(self, tag: int, delivery_failed: bool | None, at_outcome: bool) -> None: ...

    def cancel_consumer(self, tag: str) -> None: ...


def _site(channel: FaultChannel, link: str | None, address: str | None, frame: str) -> Site:
    connection = channel.connection
    name = connection.engine.client_properties.get("connection_name")
    return Site(name if isinstance(name, str) and name else connection.peer, link, address, frame)


def _fire(broker: Broker, offered: tuple[tuple[str, ...], Collection[str]], site: Site, subject: Callable[[], Any]) -> Fault | None:
    """The first live fault, among those offered at ``site`` whose action means something here, that fires."""
    faults = broker.faults
    points, actions = offered
    live = faults.points
    for point in points:
        if point not in live:
            continue
        for fault in faults.live(point):
            if fault_kind(fault.kind).action in actions and fault.consider(site, subject):
                faults.record(fault, site, broker.clock.now())
                return fault
    return None


def _error(fault: Fault, channel: FaultChannel, class_id: int, method_id: int) -> AMQP091Error:
    """The error a ``close_channel`` (its code) or ``close_connection`` (320 CONNECTION_FORCED) closes with."""
    if fault_kind(fault.kind).action == "close":
        return AMQP091Error(codes.CONNECTION_FORCED, f"closed by {fault!r}", class_id, method_id)
    text = fault.params.get("text") or f"channel {channel.number} closed by {fault!r}"
    return AMQP091Error(fault.params["code"], text, class_id, method_id)


# ------------------------------------------------------------------ the four places


def on_publish(channel: FaultChannel, exchange: str, routing_key: str, subject: Callable[[], Any]) -> bool:
    """A ``basic.publish`` a fault may meet; True when the message is not to be taken.

    A channel or connection error is raised (the channel's usual error path closes it).
    """
    connection = channel.connection
    broker = connection.broker
    address = exchange or routing_key  # through the default exchange, the routing key names the queue
    frame = f"basic.publish channel={channel.number} exchange={exchange!r} routing-key={routing_key!r}"
    fault = _fire(broker, _PUBLISH, _site(channel, None, address, frame), subject)
    if fault is None:
        return False
    action = fault_kind(fault.kind).action
    if action == "reject":
        channel.nack_publish()  # under confirms; without, dropped unseen, as RabbitMQ's reject-publish does
        return True
    if action == "alarm":
        params = fault.params
        broker.block_publishers(params["reason"])
        timers_of(broker).clear_alarm(params["reason"], broker.clock.now() + params["seconds"])
        return False  # the publish that found the alarm raised is taken (RabbitMQ reads it)
    if action == "drop":
        connection.drop()
        return True
    raise _error(fault, channel, 60, 40)  # close_channel, close_connection


def on_delivery(
    channel: FaultChannel, tag: int, consumer_tag: str, queue: str, acknowledged: bool, subject: Callable[[], Any]
) -> None:
    """A ``basic.deliver`` just sent from ``queue`` (``acknowledged``: not no-ack): a fault it meets acts after the batch."""
    connection = channel.connection
    broker = connection.broker
    injector = broker.injector
    assert injector is not None  # asked only while faults are live
    frame = f"basic.deliver channel={channel.number} delivery-tag={tag}"
    offered = _DELIVERY if acknowledged else _NO_ACK_DELIVERY
    fault = _fire(broker, offered, _site(channel, consumer_tag, queue, frame), subject)
    if fault is None:
        return
    action = fault_kind(fault.kind).action
    if action in ("release", "modify"):
        failed = fault.params["delivery_failed"] if action == "modify" else None
        at_outcome = fault.params.get("at") == "outcome"
        injector.later(lambda: channel.requeue_delivery(tag, failed, at_outcome))
    elif action == "cancel":
        injector.later(lambda: channel.cancel_consumer(consumer_tag))
    elif action == "drop":
        injector.later(connection.drop)
    else:  # close_channel, close_connection
        error = _error(fault, channel, 0, 0)  # no method of the client's caused it
        injector.later(lambda: connection.fail(channel.number, error))


def on_declare(channel: FaultChannel, kind: str, name: str, class_id: int) -> None:
    """A ``queue.declare`` or ``exchange.declare`` of ``name``: raises the refusal a fault answers it with."""
    connection = channel.connection
    frame = f"{kind}.declare {name!r} channel={channel.number}"
    fault = _fire(connection.broker, _DECLARE, _site(channel, None, name, frame), lambda: name)
    if fault is None:
        return
    code, text = fault.params["code"], fault.params.get("text")
    if text is None and code == codes.ACCESS_REFUSED:  # RabbitMQ's words for a missing permission
        text = f"access to {kind} '{name}' in vhost '{connection.engine.vhost}' refused for user '{connection.engine.user}'"
    raise AMQP091Error(code, text or f"{kind}.declare of '{name}' refused by {fault!r}", class_id, 10)


def delay(channel: FaultChannel, method: str, address: str | None) -> None:
    """The broker is about to send ``method`` (``basic.deliver``, ``basic.ack``, ``basic.nack``):
    a ``delay`` fault may hold the connection's output from it on."""
    broker = channel.connection.broker
    if "frame" not in broker.faults.points:
        return
    site = _site(channel, None, address, f"{method} channel={channel.number}")
    for fault in broker.faults.live("frame"):
        if fault.params["frames"] in (None, method) and fault.consider(site, lambda: method):
            now = broker.clock.now()
            broker.faults.record(fault, site, now)
            channel.connection.hold()
            timers_of(broker).hold(channel.connection, now + fault.params["seconds"])
            return


# ------------------------------------------------------------------ deadlines


class FaultTimers:
    """A broker's 0-9-1 fault deadlines: held output to let go, a fault's alarm to clear (timers.py)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = weakref.ref(broker)
        self._holds: dict[FaultConnection, float] = {}
        self._alarm: tuple[str, float] | None = None

    def hold(self, connection: FaultConnection, until: float) -> None:
        self._holds[connection] = until
        self._changed()

    def clear_alarm(self, reason: str, at: float) -> None:
        self._alarm = (reason, at)
        self._changed()

    def _changed(self) -> None:
        broker = self._broker()
        if broker is None:
            return
        broker.timers.add(self)
        broker.timers_changed()  # the server's timer task re-reads the next deadline

    def next_deadline(self) -> float | None:
        deadlines = list(self._holds.values())
        if self._alarm is not None:
            deadlines.append(self._alarm[1])
        return min(deadlines, default=None)

    def run_timers(self, now: float) -> None:
        """Let held output go and clear the alarm once their time has come."""
        for connection, until in list(self._holds.items()):
            if until <= now:
                del self._holds[connection]
                connection.release_hold()
        broker = self._broker()
        if self._alarm is not None and self._alarm[1] <= now:
            reason, _at = self._alarm
            self._alarm = None
            if broker is not None and broker.alarm == reason:  # not cleared (or raised anew) meanwhile
                broker.unblock_publishers()
        if broker is not None and not self._holds and self._alarm is None:
            broker.timers.discard(self)


_TIMERS: weakref.WeakKeyDictionary[Any, FaultTimers] = weakref.WeakKeyDictionary()


def timers_of(broker: Broker) -> FaultTimers:
    """The one :class:`FaultTimers` of ``broker``."""
    timers = _TIMERS.get(broker)
    if timers is None:
        timers = _TIMERS[broker] = FaultTimers(broker)
    return timers
