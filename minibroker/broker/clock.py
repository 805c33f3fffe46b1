"""Injectable time for the broker: nothing below the server reads the wall clock.

Times are seconds since the Unix epoch, as AMQP timestamps are (Part 1
§1.6.20, milliseconds); TTL and absolute-expiry-time are reckoned against them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """Anything with ``now() -> float`` (seconds since the epoch)."""

    def now(self) -> float: ...


class SystemClock:
    """The real clock (``time.time``)."""

    def now(self) -> float:
        return time.time()

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when a test says so.

    ``advance(seconds)`` moves it forward and immediately runs the broker's
    expiry, so TTL tests need no sleeps::

        clock = ManualClock()
        with ThreadedBroker(clock=clock) as broker:
            ...
            broker.clock.advance(30)
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._start = float(start)
        self._now = self._start
        self._listeners: list[Callable[[float], None]] = []

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (>= 0) and run whatever became due."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back: advance({seconds}) needs seconds >= 0")
        self._now += seconds
        for listener in list(self._listeners):
            listener(self._now)
        return self._now

    def rewind(self) -> None:
        """Back to the start time, for a broker reset to empty (it holds no expiry times then)."""
        self._now = self._start

    def subscribe(self, listener: Callable[[float], None]) -> None:
        """Call ``listener(now)`` after every advance (the broker's expiry hook)."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[float], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def __repr__(self) -> str:
        return f"ManualClock(now={self._now})"
