"""RabbitMQ's queue TTL (``x-expires``): a queue unused for that long is deleted.

"Unused" (RabbitMQ's "Time-To-Live and Expiration", queue TTL): no consumers, not redeclared and
not read with ``basic.get`` (or a ``GET`` through ``/management``) since.  The time is the broker's
clock, so a ``ManualClock`` drives it in tests.  One :class:`QueueExpiry` per owner of queue
declarations: the RabbitMQ 4 layer (AMQP 1.0 ``/management``) and the AMQP 0-9-1 virtual host;
each tells it when a queue is used, and it asks the owner to delete one whose time is up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from .arguments import QueueSpec

if TYPE_CHECKING:
    from ..broker.queue import Queue

__all__ = ["QueueExpiry"]


class QueueExpiry:
    """Idle times of ``x-expires`` queues; a timer participant (``minibroker.broker.timers``)."""

    def __init__(
        self,
        specs: Mapping[str, QueueSpec],
        queue: Callable[[str], Queue | None],
        now: Callable[[], float],
        delete: Callable[[str], object],
        timers_changed: Callable[[], None],
    ) -> None:
        self._specs = specs
        self._queue = queue
        self._now = now
        self._delete = delete
        self._timers_changed = timers_changed
        #: Queue name -> when it was last used, for the queues with ``x-expires``.
        self.idle_since: dict[str, float] = {}

    def used(self, name: str) -> None:
        """``name`` was declared or read, or lost its last consumer: its idle time starts again."""
        spec = self._specs.get(name)
        if spec is None or spec.expires is None:
            return
        now = self._now()
        first = self.next_deadline()
        self.idle_since[name] = now
        if first is None or now + spec.expires < first:
            self._timers_changed()  # this queue is now the first due: the timer must wake sooner

    def forget(self, name: str) -> None:
        self.idle_since.pop(name, None)

    def clear(self) -> None:
        self.idle_since.clear()

    def _expires_at(self, name: str, since: float) -> float | None:
        spec = self._specs.get(name)
        queue = self._queue(name)
        if spec is None or spec.expires is None or queue is None or queue.consumers:
            return None  # in use: its time starts again when its last consumer goes
        return since + spec.expires

    def next_deadline(self) -> float | None:
        """When the first unused ``x-expires`` queue is due."""
        deadlines = [at for name, since in self.idle_since.items() if (at := self._expires_at(name, since)) is not None]
        return min(deadlines) if deadlines else None

    def run_timers(self, now: float) -> None:
        for name, since in list(self.idle_since.items()):
            at = self._expires_at(name, since)
            if at is not None and at <= now:
                self._delete(name)
