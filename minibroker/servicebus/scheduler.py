"""Scheduled messages: held until their enqueue time on the broker's clock, then published.

A message is scheduled by ``com.microsoft:schedule-message`` or by being sent
with the ``x-opt-scheduled-enqueue-time`` annotation (as Service Bus does for
a plain send).  Its sequence number is given when it is scheduled, so it can be
cancelled (``cancel-scheduled-message``) until it is due.

A scheduled message counts against its entity's bounds (``max_depth``,
``max_bytes``) when it is scheduled, with the messages already waiting for it,
as the service counts scheduled messages in the entity's size: a client cannot
park more in a bounded queue by scheduling than by sending.  When it comes due
it is put whatever the room then (it was taken; nothing taken is lost).
"""

from __future__ import annotations

from collections.abc import Callable

from sortedcontainers import SortedList

from ..amqp.performatives import Error
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
        self._scheduled: dict[tuple[str, int], tuple[Queue | Topic, StoredMessage]] = {}
        self._waiting: dict[str, dict[int, StoredMessage]] = {}  # by node name: what it will get
        self._due = SortedList()  # (enqueue time, node, sequence number)
        self._own_numbers: dict[str, int] = {}

    def refusal(self, node: Queue | Topic, message: StoredMessage) -> Error | None:
        """The error to refuse scheduling ``message`` for ``node`` with (it would not fit beside what the
        node holds and what is scheduled for it), or None."""
        if not node.limited:
            return None  # the common case: nothing to count
        return node.admit(message, list(self._waiting.get(node.name, {}).values()))

    def schedule(self, node: Queue | Topic, message: StoredMessage, at: float) -> int:
        """Hold a message until clock time ``at``; returns its sequence number."""
        number = node.reserve_seq()  # a queue's own arrival number: its copy arrives as if sent then
        if number is None:  # a topic numbers nothing (each subscription numbers its copies): count here
            number = self._own_numbers.get(node.name, 0) + 1
            self._own_numbers[node.name] = number
        self._scheduled[(node.name, number)] = (node, message)
        self._waiting.setdefault(node.name, {})[number] = message
        first = self.next_due()
        self._due.add((at, node.name, number))
        if first is None or at < first:
            self._timers_changed()
        return number

    def cancel(self, node: Queue | Topic, number: int) -> bool:
        self._forget(node.name, number)
        return self._scheduled.pop((node.name, number), None) is not None

    def _forget(self, name: str, number: int) -> None:
        waiting = self._waiting.get(name)
        if waiting is not None:
            waiting.pop(number, None)
            if not waiting:
                del self._waiting[name]

    def next_due(self) -> float | None:
        return self._due[0][0] if self._due else None

    def run(self, now: float) -> None:
        """Publish what is due at ``now``, arriving now."""
        while self._due and self._due[0][0] <= now:
            _at, name, number = self._due.pop(0)
            scheduled = self._scheduled.pop((name, number), None)
            if scheduled is None:
                continue  # cancelled
            self._forget(name, number)
            node, message = scheduled
            self._enqueue(node, StoredMessage(message.payload, now), number, now)

    def clear(self) -> None:
        self._scheduled.clear()
        self._waiting.clear()
        self._due.clear()
        self._own_numbers.clear()
