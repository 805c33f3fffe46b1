"""Service Bus sessions: messages grouped by session id, each session locked to one receiver.

A message's session id is its ``group-id`` (Part 3 §3.2.4).  A receiver
asks for a session with the ``com.microsoft:session-filter`` of its source
(a session id, or null for any free session with messages); the attach
answer names the session it got and carries ``com.microsoft:locked-until-utc``
(.NET ticks).  The session stays locked to that receiver until its link
ends; its state (bytes) is kept by ``get-session-state`` / ``set-session-state``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..amqp.types import symbol
from ..broker.queue import Queue
from ..broker.stored import AVAILABLE, Entry
from ..protocol.endpoints import Link
from .consumer import ServiceBusConsumer

if TYPE_CHECKING:
    from ..broker.client_connection import BrokerConnection
    from .layer import ServiceBusLayer

__all__ = ["SessionConsumer", "Sessions", "SESSION_FILTER", "LOCKED_UNTIL_UTC", "ticks", "session_of"]

SESSION_FILTER = symbol("com.microsoft:session-filter")
LOCKED_UNTIL_UTC = symbol("com.microsoft:locked-until-utc")
#: .NET ticks (100 ns) at the Unix epoch.
_TICKS_AT_EPOCH = 621_355_968_000_000_000


def ticks(seconds: float) -> int:
    """A clock time as .NET ticks, the unit of ``com.microsoft:locked-until-utc``."""
    return _TICKS_AT_EPOCH + int(seconds * 10_000_000)


def session_of(entry: Entry) -> str | None:
    properties = entry.message.properties
    group = properties.group_id if properties is not None else None
    return group if isinstance(group, str) else None


class SessionConsumer(ServiceBusConsumer):
    """A receiver locked to one session: it is given only that session's messages."""

    def __init__(
        self, layer: ServiceBusLayer, connection: BrokerConnection, link: Link, queue: Queue, link_id: int,
        session_id: str,
    ) -> None:  # fmt: skip
        super().__init__(layer, connection, link, queue, link_id)
        self.session_id = session_id

    def accepts(self, entry: Entry) -> bool:
        return session_of(entry) == self.session_id and super().accepts(entry)

    def end(self, closed: bool, now: float) -> None:
        super().end(closed, now)
        self.layer.sessions.unlock(self)


class Sessions:
    """Which receiver holds each session, and each session's state."""

    def __init__(self) -> None:
        self._owners: dict[tuple[str, str], SessionConsumer] = {}
        self._states: dict[tuple[str, str], bytes] = {}

    def free_session(self, queue: Queue) -> str | None:
        """The session of the first available message that no receiver holds."""
        for entry in queue.entries():
            session = session_of(entry)
            if entry.state == AVAILABLE and session is not None and (queue.name, session) not in self._owners:
                return session
        return None

    def holder(self, queue: Queue, session: str) -> SessionConsumer | None:
        return self._owners.get((queue.name, session))

    def lock(self, consumer: SessionConsumer) -> None:
        self._owners[(consumer.queue.name, consumer.session_id)] = consumer

    def unlock(self, consumer: SessionConsumer) -> None:
        key = (consumer.queue.name, consumer.session_id)
        if self._owners.get(key) is consumer:
            del self._owners[key]

    def state(self, queue: Queue, session: str) -> bytes | None:
        return self._states.get((queue.name, session))

    def set_state(self, queue: Queue, session: str, state: Any) -> None:
        if state is None:
            self._states.pop((queue.name, session), None)
        else:
            self._states[(queue.name, session)] = bytes(state)

    def clear(self) -> None:
        self._owners.clear()
        self._states.clear()
