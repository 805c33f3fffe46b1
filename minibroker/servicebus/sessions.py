"""Service Bus sessions: messages grouped by session id, each session locked to one receiver.

A message's session id is its ``group-id`` (Part 3 §3.2.4).  A receiver
asks for a session with the ``com.microsoft:session-filter`` of its source
(a session id, or null for any free session with messages); the attach
answer names the session it got and carries ``com.microsoft:locked-until-utc``
(.NET ticks).

As in Service Bus, the session lock holds the session's messages: they have
no lock of their own (the SDK shows ``locked_until_utc`` None), and stay
settleable while ``renew-session-lock`` keeps the session locked.  A session
lock that is not renewed expires after ``lock_duration``: the receiver's link
is detached with ``com.microsoft:session-lock-lost`` and its messages come
back with their delivery count raised.  The session's state (bytes) is kept
by ``get-session-state`` / ``set-session-state``.

Session state is bounded as the service bounds it: "the message session state
is an opaque binary object that can hold data of the size of one message,
which is 256 KB for Service Bus Standard, and 100 MB for Service Bus Premium"
(Azure Service Bus documentation, "Message sessions": session state), so one
state is at most ``ServiceBusOptions.max_session_state_size`` (256 KiB, the
Standard tier's).  What all sessions hold together is bounded too, in sessions
(:data:`MAX_SESSION_STATES`) and bytes (:data:`MAX_SESSION_STATE_BYTES`): the
service counts state against the entity's storage quota, and a state past the
bound is refused, never an older one dropped (a client's state is its own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sortedcontainers import SortedList

from ..amqp.types import symbol
from ..broker.client_connection import BrokerConnection
from ..broker.queue import Queue
from ..broker.stored import AVAILABLE, Entry
from ..protocol.endpoints import Link
from .consumer import ServiceBusConsumer
from .settlement import Settlement

__all__ = [
    "SessionConsumer", "Sessions", "StateRefused", "SESSION_FILTER", "LOCKED_UNTIL_UTC", "SESSION_LOCK_LOST",
    "MAX_SESSION_STATES", "MAX_SESSION_STATE_BYTES", "ticks", "session_of",
]  # fmt: skip

SESSION_FILTER = symbol("com.microsoft:session-filter")
LOCKED_UNTIL_UTC = symbol("com.microsoft:locked-until-utc")
SESSION_LOCK_LOST = "com.microsoft:session-lock-lost"
#: Sessions with state, over all entities of the broker (each keeps its entity and session id, ~0.5 KiB).
MAX_SESSION_STATES = 10_000
#: Bytes of session state over all entities of the broker.
MAX_SESSION_STATE_BYTES = 64 * 1024 * 1024
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
        self, settlement: Settlement, sessions: Sessions, connection: BrokerConnection, link: Link, queue: Queue,
        link_id: int, now: Callable[[], float], session_id: str, until: float,
    ) -> None:  # fmt: skip
        super().__init__(settlement, connection, link, queue, link_id, now)
        self.sessions = sessions
        self.session_id = session_id
        self.until = until

    def accepts(self, entry: Entry) -> bool:
        return session_of(entry) == self.session_id and super().accepts(entry)

    def lock_until(self, now: float) -> float | None:
        return None  # held by the session lock

    def shown_until(self, now: float) -> float | None:
        return self.until

    def finish(self, closed: bool, now: float) -> None:
        super().finish(closed, now)
        self.sessions.unlock(self)


class StateRefused(Exception):
    """A session state the broker will not keep; ``too_large``: the state alone is over the bound."""

    def __init__(self, message: str, too_large: bool) -> None:
        super().__init__(message)
        self.too_large = too_large


class Sessions:
    """Which receiver holds each session and until when, each session's state and when it was set."""

    def __init__(self, on_unlock: Callable[[], None] | None = None, max_state_size: int = 256 * 1024) -> None:
        self.max_state_size = max_state_size
        self._state_bytes = 0  # held by all states together
        #: Called when a session lets go of its receiver (receivers waiting for a session may get it).
        self.on_unlock = on_unlock
        self._owners: dict[tuple[str, str], SessionConsumer] = {}
        self._expiry = SortedList()  # (until, queue name, session)
        self._states: dict[tuple[str, str], tuple[bytes, float]] = {}

    def free_session(self, queue: Queue) -> str | None:
        """The session of the first available message that no receiver holds."""
        for entry in queue.entries():
            session = session_of(entry)
            if entry.state == AVAILABLE and session is not None and (queue.name, session) not in self._owners:
                return session
        return None

    def free_sessions(self, queue: Queue) -> list[str]:
        """Every session with an available message that no receiver holds, in the order of their first
        such message: one pass over the queue, however many receivers wait for a session."""
        free: dict[str, None] = {}
        owners = self._owners
        for entry in queue.entries():
            if entry.state == AVAILABLE:
                session = session_of(entry)
                if session is not None and (queue.name, session) not in owners:
                    free.setdefault(session, None)
        return list(free)

    def any_free(self, queue_names: set[str], sessions: set[str]) -> bool:
        """Whether any of ``sessions`` is held by no receiver on one of ``queue_names``."""
        return any((name, session) not in self._owners for name in queue_names for session in sessions)

    def holder(self, queue: Queue, session: str) -> SessionConsumer | None:
        return self._owners.get((queue.name, session))

    def lock(self, consumer: SessionConsumer) -> None:
        key = (consumer.queue.name, consumer.session_id)
        self._owners[key] = consumer
        self._expiry.add((consumer.until, *key))

    def renew(self, consumer: SessionConsumer, until: float) -> None:
        self._expiry.discard((consumer.until, consumer.queue.name, consumer.session_id))
        consumer.until = until
        self._expiry.add((until, consumer.queue.name, consumer.session_id))

    def unlock(self, consumer: SessionConsumer) -> None:
        key = (consumer.queue.name, consumer.session_id)
        if self._owners.get(key) is consumer:
            del self._owners[key]
            self._expiry.discard((consumer.until, *key))
            if self.on_unlock is not None:
                self.on_unlock()

    def next_expiry(self) -> float | None:
        return self._expiry[0][0] if self._expiry else None

    def expire(self, now: float) -> list[SessionConsumer]:
        """The receivers whose session lock ended at ``now`` (unlocked; their links are for the caller to end)."""
        expired = []
        while self._expiry and self._expiry[0][0] <= now:
            _until, queue, session = self._expiry.pop(0)
            consumer = self._owners.pop((queue, session), None)
            if consumer is not None:
                expired.append(consumer)
        return expired

    def state(self, queue: Queue, session: str) -> bytes | None:
        kept = self._states.get((queue.name, session))
        return kept[0] if kept is not None else None

    def set_state(self, queue: Queue, session: str, state: bytes | None, now: float) -> None:
        """Keep ``state`` for the session (None: forget it), or raise :class:`StateRefused`."""
        key = (queue.name, session)
        old = self._states.get(key)
        held = self._state_bytes - (len(old[0]) if old is not None else 0)
        if state is None:
            self._states.pop(key, None)
            self._state_bytes = held
            return
        if len(state) > self.max_state_size:
            raise StateRefused(
                f"a session state of {len(state)} bytes is over the {self.max_state_size} a session may hold "
                "(a state holds one message's worth: ServiceBusOptions.max_session_state_size)",
                too_large=True,
            )
        if old is None and len(self._states) >= MAX_SESSION_STATES:
            raise StateRefused(
                f"{MAX_SESSION_STATES} sessions already have state: set an empty state on sessions that are done",
                too_large=False,
            )
        if held + len(state) > MAX_SESSION_STATE_BYTES:
            raise StateRefused(
                f"session states hold {held} bytes and this one would take them past {MAX_SESSION_STATE_BYTES}: "
                "set an empty state on sessions that are done",
                too_large=False,
            )
        self._states[key] = (state, now)
        self._state_bytes = held + len(state)

    @property
    def state_bytes(self) -> int:
        """Bytes of session state the broker holds, all sessions together."""
        return self._state_bytes

    def listed(self, queue: Queue, updated_after: float | None) -> Iterator[str]:
        """``get-message-sessions``: sessions with state set after ``updated_after``, or (None)
        every session that has messages or state, in order of first appearance."""
        if updated_after is not None:
            yield from sorted(s for (q, s), (_, at) in self._states.items() if q == queue.name and at > updated_after)
            return
        seen: dict[str, None] = {}
        for entry in queue.entries():
            session = session_of(entry)
            if session is not None:
                seen.setdefault(session, None)
        for q, session in self._states:
            if q == queue.name:
                seen.setdefault(session, None)
        yield from seen

    def clear(self) -> None:
        self._owners.clear()
        self._expiry.clear()
        self._states.clear()
        self._state_bytes = 0
