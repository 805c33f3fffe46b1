"""Scheduled messages: held until their enqueue time on the broker's clock, then published.

A message is scheduled by ``com.microsoft:schedule-message`` or by being sent
with the ``x-opt-scheduled-enqueue-time`` annotation (as Service Bus does for
a plain send).  Its sequence number is given when it is scheduled, so it can be
cancelled (``cancel-scheduled-message``) until it is due.
"""

from __future__ import annotations

from collections.abc import Callable

from sortedcontainers import SortedList

from ..broker.queue import Queue
from ..broker.stored import StoredMessage
from ..broker.topic import Topic

__all__ = ["Scheduler", "Enqueue"]

#: Puts a due message on its node (queue: with the sequence number it was given).
Enqueue = Callable[[Queue | Topic, StoredMessage, int, float], None]


class Scheduler:
    """Messages waiting for their enqueue time, by (time, node, sequence number)."""

    def __init__(self, enqueue: Enqueue, timers_changed: Callable[[], None]) -> None:
        self._enqueue = enqueue
        self._timers_changed = timers_changed
        self._scheduled: dict[tuple[str, int], tuple[Queue | Topic, bytes]] = {}
        self._due = SortedList()  # (enqueue time, node, sequence number)
        self._topic_numbers: dict[str, int] = {}

    def schedule(self, node: Queue | Topic, message: StoredMessage, at: float) -> int:
        """Hold a message until clock time ``at``; returns its sequence number."""
        if isinstance(node, Queue):
            number = node.reserve_seq()
        else:
            number = self._topic_numbers.get(node.name, 0) + 1
            self._topic_numbers[node.name] = number
        self._scheduled[(node.name, number)] = (node, message.payload)
        first = self.next_due()
        self._due.add((at, node.name, number))
        if first is None or at < first:
            self._timers_changed()
        return number

    def cancel(self, node: Queue | Topic, number: int) -> bool:
        return self._scheduled.pop((node.name, number), None) is not None

    def next_due(self) -> float | None:
        return self._due[0][0] if self._due else None

    def run(self, now: float) -> None:
        """Publish what is due at ``now``, arriving now."""
        while self._due and self._due[0][0] <= now:
            _at, name, number = self._due.pop(0)
            scheduled = self._scheduled.pop((name, number), None)
            if scheduled is None:
                continue  # cancelled
            node, payload = scheduled
            self._enqueue(node, StoredMessage(payload, now), number, now)

    def clear(self) -> None:
        self._scheduled.clear()
        self._due.clear()
        self._topic_numbers.clear()
