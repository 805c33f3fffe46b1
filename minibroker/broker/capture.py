"""What a queue held at one moment, copied only if someone reads it.

A queue snapshot must cost the same at depth 10 and at depth 1,000,000: a test
polling ``broker.queue("q").depth`` must not pay for the messages it never
looks at.  So a snapshot records only counters, plus a :class:`Capture`: a
promise of the queue's contents at that moment.  The contents are copied
(payloads and per-message state, not decoded) at whichever comes first:

* someone reads the snapshot's ``messages`` (the copy then runs in the
  broker's thread, through the ``run`` callable the inspection API gives);
* the queue is about to change: :meth:`Queue._changing` fills the pending
  capture first, so the snapshot still shows the queue as it was.

The queue holds its pending capture weakly: a snapshot that was dropped
unread (the usual ``.depth`` poll) costs nothing when the queue changes.
Messages are decoded one by one when they are read
(:class:`~minibroker.broker.statistics.QueuedMessages`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from .stored import ACQUIRED, Entry

__all__ = ["Capture", "Contents", "QueuedRow", "Run"]

#: One captured message: a detached copy of its queue entry, and whether it was acquired.
QueuedRow = tuple[Entry, bool]

#: Runs a function in the broker's thread (the inspection API's ``_inspect``).
Run = Callable[[Callable[[], None]], None]


class Contents(Protocol):
    """What a capture needs of a queue: its entries in delivery order."""

    def entries(self) -> Iterator[Entry]: ...


def _direct(fn: Callable[[], None]) -> None:
    fn()


class Capture:
    """The contents of one queue at one moment, copied at most once.

    Rows hold detached copies of the entries (the message is shared: its bytes never
    change), so one capture serves snapshots taken at different clock times.
    """

    __slots__ = ("_queue", "_rows", "_run", "__weakref__")

    def __init__(self, queue: Contents, run: Run | None = None) -> None:
        self._queue: Contents | None = queue
        self._rows: list[QueuedRow] | None = None
        self._run = run or _direct

    @property
    def filled(self) -> bool:
        return self._rows is not None

    def fill(self) -> None:
        """Copy the queue's contents now (in the broker's thread); later calls do nothing."""
        queue = self._queue
        if queue is None:
            return
        self._rows = [(entry.detached(), entry.state == ACQUIRED) for entry in queue.entries()]
        self._queue = None

    def rows(self) -> list[QueuedRow]:
        """The copied contents, copying them first (in the broker's thread) if nothing has yet."""
        if self._rows is None:
            self._run(self.fill)
        assert self._rows is not None
        return self._rows
