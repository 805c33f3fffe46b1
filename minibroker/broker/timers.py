"""The broker's timers: every part with deadlines registers once, and is asked in one place.

A part with deadlines (the router's node expiries, transaction timeouts, the
fault injector's delays, a layer's locks and scheduled messages) is a
:class:`TimerParticipant`: it says when it next needs the clock and does what
is due at ``now``.  The broker registers each when it exists (the injector
registers itself only while it is live), the server's timer task sleeps
until :meth:`Timers.next_deadline`, and :meth:`Timers.run` runs them all, in
registration order.  No part reads the wall clock: ``now`` comes in.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["TimerParticipant", "Timers"]


class TimerParticipant(Protocol):
    """A part of the broker with deadlines."""

    def next_deadline(self) -> float | None:
        """The clock time it next needs to run at, or None."""

    def run_timers(self, now: float) -> None:
        """Do what is due at ``now``."""


class Timers:
    """The registered participants, in registration order."""

    def __init__(self) -> None:
        self._participants: dict[TimerParticipant, None] = {}  # an insertion-ordered set

    def add(self, participant: TimerParticipant) -> None:
        self._participants[participant] = None

    def discard(self, participant: TimerParticipant) -> None:
        self._participants.pop(participant, None)

    def __contains__(self, participant: object) -> bool:
        return participant in self._participants

    def next_deadline(self) -> float | None:
        """The earliest deadline of any participant, or None."""
        deadlines = [d for d in (p.next_deadline() for p in self._participants) if d is not None]
        return min(deadlines) if deadlines else None

    def run(self, now: float) -> None:
        """Run every participant's timers at ``now``."""
        for participant in list(self._participants):
            participant.run_timers(now)
