"""Injectable time for the broker: nothing below the server reads the wall clock.

Times are seconds since the Unix epoch, as AMQP timestamps are (Part 1
§1.6.20, milliseconds); TTL and absolute-expiry-time are reckoned against them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "ClockListeners", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """Where the broker reads the time: ``now() -> float`` (seconds since the epoch).

    Anyone may subscribe to any clock, whatever its kind (trio's instruments model: a list
    anyone registers into, not a slot a type test guards): a listener is called with the new
    time whenever the clock jumps.  Only a ``stepped`` clock jumps (ManualClock.advance); one
    whose time passes by itself never calls its listeners, and whoever waits for a deadline on
    it sleeps until then (the server's timer task).
    """

    @property
    def stepped(self) -> bool:
        """Whether time moves only when someone moves it (then no task waits for deadlines)."""

    def now(self) -> float: ...

    def subscribe(self, listener: Callable[[float], None]) -> None:
        """Call ``listener(now)`` each time the clock jumps (the broker's expiry, a server's timers)."""

    def unsubscribe(self, listener: Callable[[float], None]) -> None:
        """Stop calling ``listener`` (one that is not subscribed: nothing happens)."""


class ClockListeners:
    """The listeners of a clock (:meth:`Clock.subscribe`): a clock class inherits them."""

    stepped = False

    def __init__(self) -> None:
        self._listeners: list[Callable[[float], None]] = []

    def subscribe(self, listener: Callable[[float], None]) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[float], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _jumped(self, now: float) -> None:
        for listener in list(self._listeners):  # a listener may unsubscribe itself
            listener(now)


class SystemClock(ClockListeners):
    """The real clock (``time.time``): its time passes by itself, so it never calls its listeners."""

    def now(self) -> float:
        return time.time()

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock(ClockListeners):
    """A clock that moves only when a test says so.

    ``advance(seconds)`` moves it forward and immediately runs the broker's
    expiry, so TTL tests need no sleeps::

        clock = ManualClock()
        with ThreadedBroker(clock=clock) as broker:
            ...
            broker.clock.advance(30)
    """

    stepped = True

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        super().__init__()
        self._start = float(start)
        self._now = self._start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (>= 0) and run whatever became due."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back: advance({seconds}) needs seconds >= 0")
        self._now += seconds
        self._jumped(self._now)
        return self._now

    def rewind(self) -> None:
        """Back to the start time, for a broker reset to empty (it holds no expiry times then)."""
        self._now = self._start

    def __repr__(self) -> str:
        return f"ManualClock(now={self._now})"
