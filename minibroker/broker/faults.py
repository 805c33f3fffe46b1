"""Faults as data: what goes wrong, where, and when.

A test declares how the broker should misbehave, the way a real broker or a real
network does, and later asserts that it did::

    fault = broker.faults.detach_link(address="jobs", after=1)
    ...                                   # the client's second job: its link is detached
    assert fault.fired == 1

A :class:`Fault` has

* a **kind**: what the broker does instead of behaving (see :data:`KINDS`);
* a **target**: ``address`` (the node a link or message is for; ``None`` for any),
  and optionally ``link`` and ``connection``: a link name / container-id, or a
  predicate on it;
* a **trigger**: ``after=N`` lets the first N matching events pass, ``times=N``
  limits how often it fires (default 1; ``None`` for always), ``when=`` a
  predicate on the message (or, for ``delay``, the performative), and
  ``probability=p`` with ``seed=`` for reproducible chaos; ``must_fire=True``
  makes :meth:`FaultSet.check` fail when the fault never fired.

A matching event is offered to the faults in the order they were added; the first
that fires acts on it and the event goes no further. Every firing is kept in
:attr:`FaultSet.history` (what, where, when on the broker's clock, which frame).

This module is pure data: :mod:`.injection` applies a fired fault with protocol
methods. The registry runs every change through ``marshal`` so that
``ThreadedBroker.faults`` can be used from the test's thread.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import field, replace
from typing import Any, TypedDict, Unpack

from ..amqp import errors as conditions
from ..records import record

__all__ = [
    "AMQP091_KINDS", "FAULT_KINDS", "Fault", "FaultBuilder", "FaultKind", "FaultNotFired", "FaultPlan", "FaultSet", "Firing", "KINDS",
    "Site", "Trigger", "fault_kind",
]  # fmt: skip

@record(frozen=True, slots=True)
class FaultKind:
    """One kind of fault: one row of :data:`FAULT_KINDS`, the only place a kind is defined."""

    #: The name (``Fault.kind``, the :class:`FaultSet` method that declares it).
    name: str
    #: The events it is offered: ``attach`` (a client's attach), ``transfer`` (a message in either
    #: direction), ``delivery`` (a message the broker sends), ``publish`` (a message a client
    #: sends), ``frame`` (any frame the broker sends), ``credit`` (credit the broker grants a
    #: producer), ``discharge`` (a commit); AMQP 0-9-1's own: ``channel`` (a message on a channel),
    #: ``consumer`` (a delivery to a consumer), ``declare`` (a queue or exchange declare), ``alarm``
    #: (a publish).
    point: str
    #: What the injector does when it fires (injection.py dispatches on it; each is one method there).
    action: str
    #: Parameters that have a default (``repr`` leaves them out when unchanged).
    defaults: Mapping[str, Any] = field(default_factory=dict)
    #: Whether ``fault_plans`` may draw it: it needs nothing from the test once declared
    #: (``delay`` wants a time scale, ``stall_credit`` a ``cancel()``).
    plannable: bool = True
    #: Whether ``fault_plans`` draws it when not told which kinds (``fail_discharge`` only matters
    #: to a scenario that commits transactions, so it is drawn only when named).
    planned_by_default: bool = True
    #: Whether it names a node address (``fail_discharge`` acts on a commit, of no one node).
    addressed: bool = True


#: Every fault kind, one row each.  A kind not here cannot be declared (``Fault`` raises).
FAULT_KINDS: dict[str, FaultKind] = {
    row.name: row
    for row in (
        FaultKind("release", "delivery", "release", {"at": "delivery"}),
        FaultKind("modify", "delivery", "modify", {"delivery_failed": True, "undeliverable_here": False, "at": "delivery"}),
        FaultKind("reject_publish", "publish", "reject", {"error": str(conditions.RESOURCE_LIMIT_EXCEEDED)}),
        FaultKind("detach_link", "transfer", "detach", {"error": str(conditions.DETACH_FORCED)}),
        FaultKind("close_connection", "transfer", "close", {"error": str(conditions.CONNECTION_FORCED)}),
        FaultKind("drop_connection", "transfer", "drop"),
        FaultKind("refuse_attach", "attach", "refuse", {"error": str(conditions.UNAUTHORIZED_ACCESS)}),
        FaultKind("delay", "frame", "hold", {"frames": None}, plannable=False, planned_by_default=False),
        FaultKind("stall_credit", "credit", "stall", plannable=False, planned_by_default=False),
        FaultKind("fail_discharge", "discharge", "rollback", planned_by_default=False, addressed=False),
        # AMQP 0-9-1 only (minibroker.front091.faults applies them; the points are 0-9-1's own, so
        # the AMQP 1.0 injector never meets them).  drop_connection, close_connection, release,
        # modify, reject_publish and delay above apply to 0-9-1 connections too.
        FaultKind("close_channel", "channel", "close_channel", {"code": 406, "text": None}, planned_by_default=False),
        FaultKind("cancel_consumer", "consumer", "cancel", planned_by_default=False),
        FaultKind("refuse_declare", "declare", "refuse_declare", {"code": 403, "text": None}, planned_by_default=False),
        FaultKind(
            "block_publishers", "alarm", "alarm", {"reason": "low on memory", "seconds": 0.2}, planned_by_default=False
        ),
    )
}

#: The kinds that act on AMQP 0-9-1 connections, in shrinking order (likeliest culprits first):
#: ``fault_plans(addresses=..., kinds=AMQP091_KINDS)`` searches them for a pika or kombu scenario.
AMQP091_KINDS: tuple[str, ...] = (
    "release", "drop_connection", "close_connection", "reject_publish", "close_channel", "cancel_consumer",
    "refuse_declare", "block_publishers", "modify",
)  # fmt: skip

#: Each kind and the events it is offered (derived from :data:`FAULT_KINDS`).
KINDS: dict[str, str] = {name: row.point for name, row in FAULT_KINDS.items()}

#: Parameters of each kind that have a default (derived from :data:`FAULT_KINDS`).
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    name: dict(row.defaults) for name, row in FAULT_KINDS.items() if row.defaults
}


def fault_kind(name: str) -> FaultKind:
    """The row of a kind; an unknown kind raises, naming the known ones."""
    row = FAULT_KINDS.get(name)
    if row is None:
        raise ValueError(f"unknown fault kind {name!r}; use one of {sorted(FAULT_KINDS)}")
    return row


#: Frame names ``delay(frames=...)`` accepts: the performatives the broker sends (AMQP 1.0), and
#: the AMQP 0-9-1 methods a 0-9-1 delay can start from (a delivery, a publisher confirm).
FRAME_NAMES = frozenset({"open", "begin", "attach", "flow", "transfer", "disposition", "detach", "end", "close"})
AMQP091_FRAME_NAMES = frozenset({"basic.deliver", "basic.ack", "basic.nack"})

Match = str | Callable[[str], Any] | None


class Trigger(TypedDict, total=False):
    """Target refinements and trigger of a fault (keyword arguments of every :class:`FaultSet` method)."""

    link: Match
    connection: Match
    after: int
    times: int | None
    when: Callable[[Any], Any] | None
    probability: float | None
    seed: int | None
    must_fire: bool


class FaultNotFired(AssertionError):
    """Faults declared ``must_fire=True`` never fired: the scenario did not reach them."""


@record(frozen=True, slots=True)
class Site:
    """Where an event happens: the client's container-id, the link's name and the node's address."""

    connection: str
    link: str | None
    address: str | None
    #: The frame the event is about, e.g. ``transfer delivery-id=3`` or ``attach 'orders-receiver'``.
    frame: str


@record(frozen=True, slots=True)
class Firing:
    """One time a fault acted: which fault, on the broker's clock, where, and on which frame."""

    fault: str
    kind: str
    at: float
    connection: str
    link: str | None
    address: str | None
    frame: str


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _matches(match: Match, value: str | None) -> bool:
    if match is None:
        return True
    if value is None:
        return False
    if isinstance(match, str):
        return match == value
    return bool(match(value))


class Fault:
    """One declared fault; ``fired`` counts its firings, ``cancel()`` retires it.

    Safe to read from any thread; ``cancel()`` runs in the broker's thread.
    """

    def __init__(
        self,
        kind: str,
        address: str | None = None,
        *,
        params: dict[str, Any] | None = None,
        link: Match = None,
        connection: Match = None,
        after: int = 0,
        times: int | None = 1,
        when: Callable[[Any], Any] | None = None,
        probability: float | None = None,
        seed: int | None = None,
        must_fire: bool = False,
    ) -> None:
        fault_kind(kind)  # an unknown kind raises
        if address is not None and not isinstance(address, str):
            raise TypeError(f"address must be a node address (str) or None for any, got {address!r}")
        if not _is_int(after) or after < 0:
            raise ValueError(f"after={after!r}: give the number of matching events to let pass (0 or more)")
        if times is not None and (not _is_int(times) or times < 1):
            raise ValueError(f"times={times!r}: give how often the fault fires (1 or more), or None for always")
        if probability is not None and (not _is_number(probability) or not 0 < probability <= 1):
            raise ValueError(f"probability={probability!r}: give a chance in (0, 1]")
        if seed is not None and probability is None:
            raise ValueError("seed= only makes sense with probability=; add probability=p, or drop seed")
        self.kind = kind
        self.address = address
        self.params: dict[str, Any] = {**DEFAULT_PARAMS.get(kind, {}), **(params or {})}
        self.link = link
        self.connection = connection
        self.after = after
        self.times = times
        self.when = when
        self.probability = probability
        self.seed = seed
        self.must_fire = must_fire
        #: Events that matched target and ``when`` (including those ``after`` let pass).
        self.seen = 0
        #: How many times the fault acted.
        self.fired = 0
        self.cancelled = False
        self._random = random.Random(seed)
        self._registry: FaultSet | None = None

    @property
    def point(self) -> str:
        """The events this fault is offered (see :data:`KINDS`)."""
        return KINDS[self.kind]

    @property
    def done(self) -> bool:
        """Cancelled, or fired as often as ``times`` allows."""
        return self.cancelled or (self.times is not None and self.fired >= self.times)

    def targets(self, site: Site) -> bool:
        """Whether ``site`` is among this fault's targets (address, link, connection)."""
        if self.address is not None and site.address != self.address:
            return False
        return _matches(self.link, site.link) and _matches(self.connection, site.connection)

    def consider(self, site: Site, subject: Callable[[], Any]) -> bool:
        """Offer one event at ``site``; ``subject()`` gives what ``when`` receives. True when it fires."""
        if self.done or not self.targets(site):
            return False
        if self.when is not None and not self.when(subject()):
            return False
        self.seen += 1
        if self.seen <= self.after:
            return False
        if self.probability is not None and self._random.random() >= self.probability:
            return False
        self.fired += 1
        return True

    def copy(self) -> Fault:
        """A fresh fault with the same kind, target and trigger (nothing fired, not installed)."""
        return Fault(
            self.kind,
            self.address,
            params=self.params,
            link=self.link,
            connection=self.connection,
            after=self.after,
            times=self.times,
            when=self.when,
            probability=self.probability,
            seed=self.seed,
            must_fire=self.must_fire,
        )

    def cancel(self) -> None:
        """Retire the fault: it fires no more (a stalled producer gets its credit)."""
        if self._registry is None:
            self.cancelled = True
        else:
            self._registry.cancel(self)

    def __repr__(self) -> str:
        """Code that declares this fault again: ``faults.detach_link(address='jobs', after=1)``."""
        args = [repr(self.params["seconds"])] if self.kind == "delay" else []
        if self.address is not None:
            args.append(f"address={self.address!r}")
        defaults = DEFAULT_PARAMS.get(self.kind, {})
        args += [f"{k}={v!r}" for k, v in self.params.items() if k != "seconds" and (k not in defaults or v != defaults[k])]
        for name, default in _TRIGGER_DEFAULTS.items():
            if name == "times" and self.kind == "stall_credit":
                default = None
            value = getattr(self, name)
            if value != default:
                shown = getattr(value, "__name__", None) if callable(value) else None
                args.append(f"{name}={shown or repr(value)}")
        return f"faults.{self.kind}({', '.join(args)})"


@record(frozen=True)
class FaultPlan:
    """Faults to install together, e.g. one drawn by ``minibroker.testing.fault_plans``.

    Its ``repr`` is code: ``[faults.release(address='jobs'), faults.drop_connection(address='out')]``
    pastes into a test as ``faults = broker.faults`` followed by those calls.
    """

    faults: tuple[Fault, ...] = ()

    def install(self, faults: FaultSet) -> list[Fault]:
        """Declare a fresh copy of each fault on ``faults`` (e.g. ``broker.faults``); returns them."""
        return [faults.add(fault.copy()) for fault in self.faults]

    def __repr__(self) -> str:
        return repr(list(self.faults))


_TRIGGER_DEFAULTS: dict[str, Any] = {
    "link": None, "connection": None, "after": 0, "times": 1, "when": None,
    "probability": None, "seed": None, "must_fire": False,
}  # fmt: skip


#: When a ``release``/``modify`` fault settles: right after sending, or in place of the client's outcome.
SETTLE_AT = ("delivery", "outcome")


def _check_at(at: str) -> str:
    if at not in SETTLE_AT:
        raise ValueError(
            f"at={at!r}: use 'delivery' (the broker settles right after sending) or 'outcome' (the broker "
            "takes this outcome instead of the client's)"
        )
    return at


#: AMQP 0-9-1 reply codes a fault may close with (0-9-1 §1.2; RabbitMQ's names).
_REPLY_CODES = frozenset({311, 312, 313, 320, 402, 403, 404, 405, 406, 501, 502, 503, 504, 505, 506, 530, 540, 541})


def _reply_code(code: int) -> int:
    if not _is_int(code) or code not in _REPLY_CODES:
        raise ValueError(
            f"code={code!r}: give an AMQP 0-9-1 error reply code, one of {sorted(_REPLY_CODES)} (e.g. 406 "
            "PRECONDITION_FAILED closes the channel, 320 CONNECTION_FORCED the connection)"
        )
    return code


def _direct(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


class FaultSet:
    """The faults declared on one broker, and the history of their firings.

    ``marshal(fn, *args)`` runs ``fn`` in the broker's thread; ``on_change(live)`` is
    told whether any fault is still live, so that the broker checks for faults only
    while there are some.
    """

    def __init__(self) -> None:
        self.marshal: Callable[..., Any] = _direct
        self.on_change: Callable[[bool], None] | None = None
        self.on_cancel: Callable[[Fault], None] | None = None
        self._faults: list[Fault] = []
        self._history: list[Firing] = []
        #: The points (see :data:`KINDS`) some live fault is offered: the injector asks this first.
        self.points: frozenset[str] = frozenset()

    # ------------------------------------------------------------ declaring

    def detach_link(
        self, address: str | None = None, *, error: str = conditions.DETACH_FORCED, **trigger: Unpack[Trigger]
    ) -> Fault:
        """On a message to or from ``address``, detach its link with ``error`` (Part 2 §2.6.5).

        A message the client sends is not taken (its delivery stays unsettled); one the
        broker sends goes back to the queue as modified(delivery-failed).
        """
        return self._add(Fault("detach_link", address, params={"error": str(error)}, **trigger))

    def close_connection(
        self, address: str | None = None, *, error: str = conditions.CONNECTION_FORCED, **trigger: Unpack[Trigger]
    ) -> Fault:
        """On a message to or from ``address``, close its connection with ``error`` (Part 2 §2.4.3)."""
        return self._add(Fault("close_connection", address, params={"error": str(error)}, **trigger))

    def drop_connection(self, address: str | None = None, **trigger: Unpack[Trigger]) -> Fault:
        """On a message to or from ``address``, drop the socket with no close frame (a crash, a cut cable)."""
        return self._add(Fault("drop_connection", address, **trigger))

    def release(self, address: str | None = None, *, at: str = "delivery", **trigger: Unpack[Trigger]) -> Fault:
        """A message sent from ``address`` comes back ``released`` (Part 3 §3.4.4).

        ``at="delivery"``: right after sending it, the broker settles it on its own, as the spec
        lets a sender do at any time.  ``at="outcome"``: the broker waits for the client's outcome
        and takes ``released`` instead (the client's accept is lost): the client sees its
        settlement go through and the message come again, which clients that cannot take a
        delivery the broker settled first (python-qpid-proton's ``BlockingReceiver``) survive.
        """
        return self._add(Fault("release", address, params={"at": _check_at(at)}, **trigger))

    def modify(
        self,
        address: str | None = None,
        *,
        delivery_failed: bool = True,
        undeliverable_here: bool = False,
        at: str = "delivery",
        **trigger: Unpack[Trigger],
    ) -> Fault:
        """A message sent from ``address`` comes back ``modified`` (Part 3 §3.4.5); ``at`` as for :meth:`release`."""
        params = {"delivery_failed": delivery_failed, "undeliverable_here": undeliverable_here, "at": _check_at(at)}
        return self._add(Fault("modify", address, params=params, **trigger))

    def refuse_attach(
        self, address: str | None = None, *, error: str = conditions.UNAUTHORIZED_ACCESS, **trigger: Unpack[Trigger]
    ) -> Fault:
        """Refuse a client's attach to ``address`` with ``error`` (Part 2 §2.6.3: null terminus, then detach)."""
        return self._add(Fault("refuse_attach", address, params={"error": str(error)}, **trigger))

    def reject_publish(
        self,
        address: str | None = None,
        *,
        error: str = conditions.RESOURCE_LIMIT_EXCEEDED,
        **trigger: Unpack[Trigger],
    ) -> Fault:
        """Answer a message sent to ``address`` with ``rejected`` and ``error``; it is not stored (Part 3 §3.4.2)."""
        return self._add(Fault("reject_publish", address, params={"error": str(error)}, **trigger))

    def delay(
        self, seconds: float, address: str | None = None, *, frames: str | None = None, **trigger: Unpack[Trigger]
    ) -> Fault:
        """Hold a connection's output for ``seconds`` of broker-clock time from a frame of kind ``frames``.

        ``frames`` is a performative name (``"disposition"``, ``"flow"``, ``"transfer"`` ...) or
        ``None`` for any. Everything the connection sends meanwhile waits too, in order, as
        on a slow network. With a ``ManualClock`` the output goes when the test advances it.
        """
        if not _is_number(seconds):
            raise TypeError(f"delay({seconds!r}): give the delay as a number of seconds (int or float), e.g. delay(5)")
        if not seconds > 0:
            raise ValueError(f"delay({seconds!r}): give a positive number of seconds")
        if frames is not None and frames not in FRAME_NAMES | AMQP091_FRAME_NAMES:
            raise ValueError(
                f"frames={frames!r}: use one of {sorted(FRAME_NAMES)} (AMQP 1.0), {sorted(AMQP091_FRAME_NAMES)} "
                "(AMQP 0-9-1) or None for any"
            )
        return self._add(Fault("delay", address, params={"seconds": seconds, "frames": frames}, **trigger))

    def stall_credit(self, address: str | None = None, **trigger: Unpack[Trigger]) -> Fault:
        """Grant producers on ``address`` no credit until the fault is cancelled (Part 2 §2.6.7)."""
        trigger.setdefault("times", None)  # every producer that attaches, until cancelled
        return self._add(Fault("stall_credit", address, **trigger))

    def fail_discharge(self, **trigger: Unpack[Trigger]) -> Fault:
        """Answer a commit with ``amqp:transaction:rollback``; nothing of the transaction happens (Part 4 §4.4)."""
        return self._add(Fault("fail_discharge", **trigger))

    # ------------------------------------------------ AMQP 0-9-1 only

    def close_channel(
        self, address: str | None = None, *, code: int = 406, text: str | None = None, **trigger: Unpack[Trigger]
    ) -> Fault:
        """On a 0-9-1 message to or from ``address``, close its channel with ``code`` (0-9-1 §1.2).

        A soft code (311-406, e.g. 406 PRECONDITION_FAILED) closes the channel (``channel.close``),
        a hard one (e.g. 320 CONNECTION_FORCED, 541) the connection (``connection.close``), as
        RabbitMQ does.  ``text`` follows RabbitMQ's ``"PRECONDITION_FAILED - "`` prefix; None
        names the fault.  A publish it fires on is not taken; a delivery goes back to the queue,
        redelivered (what a closed channel held, §1.8).
        """
        return self._add(Fault("close_channel", address, params={"code": _reply_code(code), "text": text}, **trigger))

    def cancel_consumer(self, address: str | None = None, **trigger: Unpack[Trigger]) -> Fault:
        """On a delivery from ``address`` to a 0-9-1 consumer, the broker cancels that consumer.

        A client that announced the ``consumer_cancel_notify`` capability (pika, kombu, aio-pika
        do) is sent ``basic.cancel``, as RabbitMQ tells it when the queue is deleted or fails
        over; another's consumer just ends.  The delivery itself stays the channel's to acknowledge.
        """
        return self._add(Fault("cancel_consumer", address, **trigger))

    def refuse_declare(
        self, address: str | None = None, *, code: int = 403, text: str | None = None, **trigger: Unpack[Trigger]
    ) -> Fault:
        """Answer a 0-9-1 ``queue.declare`` or ``exchange.declare`` of ``address`` with ``code``.

        403 ACCESS_REFUSED (the default) comes with RabbitMQ's words for a missing permission
        (``access to queue 'jobs' in vhost '/' refused for user 'guest'``); another code with
        ``text`` (None names the fault).  Soft codes close the channel, hard ones the connection.
        """
        return self._add(Fault("refuse_declare", address, params={"code": _reply_code(code), "text": text}, **trigger))

    def block_publishers(
        self, address: str | None = None, *, reason: str = "low on memory", seconds: float = 0.2, **trigger: Unpack[Trigger]
    ) -> Fault:
        """On a 0-9-1 publish to ``address``, raise the broker's resource alarm for ``seconds`` of broker-clock time.

        What ``broker.block_publishers(reason)`` does, as RabbitMQ's memory alarm: publishing
        connections are told ``connection.blocked`` with ``reason`` and not read until the alarm
        clears, ``seconds`` later (``connection.unblocked``; with a ``ManualClock`` when the test
        advances it).  The publish that raised it is taken.
        """
        if not _is_number(seconds) or not seconds > 0:
            raise ValueError(f"seconds={seconds!r}: give how long the alarm stays raised, a positive number of seconds")
        return self._add(Fault("block_publishers", address, params={"reason": reason, "seconds": seconds}, **trigger))

    def add(self, fault: Fault) -> Fault:
        """Install a :class:`Fault` built elsewhere (e.g. one drawn by ``minibroker.testing.fault_plans``)."""
        if fault._registry is not None:
            raise ValueError(f"{fault!r} is already installed; build a new Fault to install it again")
        return self._add(fault)

    # ------------------------------------------------------------ inspecting

    # Reads copy a list in one step (atomic under the GIL): no trip to the broker's thread.

    @property
    def history(self) -> tuple[Firing, ...]:
        """Every firing so far, oldest first."""
        return tuple(self._history)

    def __iter__(self) -> Any:
        return iter(tuple(self._faults))

    def __len__(self) -> int:
        return len(self._faults)

    @property
    def empty(self) -> bool:
        """No fault installed and none ever fired (since the last :meth:`clear`)."""
        return not self._faults and not self._history

    def check(self) -> None:
        """Raise :class:`FaultNotFired` naming every ``must_fire`` fault that never fired."""
        silent = [f for f in tuple(self._faults) if f.must_fire and not f.fired]
        if silent:
            lines = "\n".join(
                f"  {f!r}: {f.seen} matching event(s)" + (f", all let pass by after={f.after}" if f.seen else "")
                for f in silent
            )
            raise FaultNotFired(
                f"{len(silent)} fault(s) declared must_fire=True never fired:\n{lines}\n"
                "the scenario never reached them: check the address, the trigger, or what the test does"
            )

    def clear(self) -> None:
        """Cancel every fault and forget the history (between two test cases)."""
        if self._faults or self._history:
            self.marshal(self._clear)

    def cancel(self, fault: Fault) -> None:
        """Retire ``fault`` (same as ``fault.cancel()``)."""
        self.marshal(self._cancel, fault)

    # ------------------------------------------------ broker-thread side

    def live(self, point: str) -> list[Fault]:
        """The faults not yet done that are offered events of ``point``, in declaration order."""
        return [f for f in self._faults if f.point == point and not f.done]

    def record(self, fault: Fault, site: Site, now: float) -> None:
        """Note a firing (the injector, once it has acted, asks :meth:`has_live` whether to stay on)."""
        self._history.append(Firing(repr(fault), fault.kind, now, site.connection, site.link, site.address, site.frame))
        if fault.done:
            self._refresh_points()

    def moved(self, firing: Firing, now: float, frame: str) -> Firing | None:
        """A firing acts later than it fired, on another frame (``at="outcome"``: the broker
        takes the client's disposition, Part 2 §2.7.6, as the fault's outcome): the history shows
        it there, at ``now``.  Returns the firing as now recorded; None when the history was
        cleared meanwhile."""
        for index, recorded in enumerate(self._history):
            if recorded is firing:
                self._history[index] = moved = replace(firing, at=now, frame=frame)
                return moved
        return None

    def _add(self, fault: Fault) -> Fault:
        fault._registry = self
        self.marshal(self._install, fault)
        return fault

    def _install(self, fault: Fault) -> None:
        self._faults.append(fault)
        self._changed()

    def _cancel(self, fault: Fault) -> None:
        if fault.cancelled:
            return
        fault.cancelled = True
        if self.on_cancel is not None:
            self.on_cancel(fault)
        self._changed()

    def _clear(self) -> None:
        for fault in self._faults:
            self._cancel(fault)
        self._faults.clear()
        self._history.clear()
        self._changed()

    def has_live(self) -> bool:
        """Whether a fault may still fire (broker thread)."""
        return any(not f.done for f in self._faults)

    def _refresh_points(self) -> None:
        self.points = frozenset(f.point for f in self._faults if not f.done)

    def _changed(self) -> None:
        self._refresh_points()
        if self.on_change is not None:
            self.on_change(self.has_live())


class FaultBuilder(FaultSet):
    """Builds faults without a broker, to install later (``FaultPlan``, the pytest marker)::

        from minibroker.testing import faults

        @pytest.mark.amqp_broker(faults=[faults.release(address="jobs")])

    The same calls as ``broker.faults``; the faults it returns are installed as fresh copies.
    """

    def _add(self, fault: Fault) -> Fault:
        return fault
