"""Peek-lock: a message held for one receiver until settled, or until its lock expires.

A lock token is a UUID; on a receiving link it is the delivery tag (the
SDKs read it as ``UUID(bytes_le=tag)``).  Locks expire on the broker's clock:
the message becomes available again with its delivery count raised, and a
settlement that comes later is refused with ``com.microsoft:message-lock-lost``.
"""

from __future__ import annotations

import uuid
from typing import Final, Protocol

from sortedcontainers import SortedList

from ..broker.queue import Queue
from ..broker.stored import ACQUIRED, Entry
from ..protocol.endpoints import Delivery
from ..records import record

__all__ = ["Lock", "LockTable", "Holder", "DEFERRED"]


class Holder(Protocol):
    """Who holds a lock: a receiver's link, or :data:`DEFERRED`."""

    def forget(self, delivery: Delivery) -> None:
        """The message of ``delivery`` was settled another way (by ``$management``, or its lock ended)."""


class _Deferred:
    """The holder of deferred messages: no link, nothing to forget."""

    def forget(self, delivery: Delivery) -> None:
        pass

    def __repr__(self) -> str:
        return "DEFERRED"


#: The owner of a deferred message: held aside until received by its sequence number.
DEFERRED: Final = _Deferred()


@record(slots=True, eq=False)
class Lock:
    """One lock: the entry it holds, who holds it (a consumer, or ``DEFERRED``), and until when.

    ``until`` is None for a message held by its session's lock (it expires with the session).
    """

    token: uuid.UUID
    queue: Queue
    entry: Entry
    owner: Holder
    delivery: Delivery | None
    until: float | None
    version: int  # entry.token when locked: it changes whenever the entry becomes available again

    @property
    def held(self) -> bool:
        entry = self.entry
        return entry.state == ACQUIRED and entry.token == self.version and entry.owner is self.owner


class LockTable:
    """Locks by token, and by expiry time for the timer."""

    def __init__(self) -> None:
        self._locks: dict[uuid.UUID, Lock] = {}
        self._expiry = SortedList()  # (until, token)

    def add(self, queue: Queue, entry: Entry, owner: Holder, delivery: Delivery | None, until: float | None,
            token: uuid.UUID | None = None) -> Lock:  # fmt: skip
        lock = Lock(token or uuid.uuid4(), queue, entry, owner, delivery, until, entry.token)
        self._locks[lock.token] = lock
        if until is not None:
            self._expiry.add((until, lock.token))
        return lock

    def get(self, token: uuid.UUID) -> Lock | None:
        """The lock with this token while it still holds its message."""
        lock = self._locks.get(token)
        if lock is not None and not lock.held:
            self.remove(lock)
            return None
        return lock

    def remove(self, lock: Lock) -> None:
        if self._locks.pop(lock.token, None) is not None and lock.until is not None:
            self._expiry.discard((lock.until, lock.token))

    def renew(self, lock: Lock, until: float) -> None:
        if lock.until is not None:
            self._expiry.discard((lock.until, lock.token))
        lock.until = until
        self._expiry.add((until, lock.token))

    def next_expiry(self) -> float | None:
        return self._expiry[0][0] if self._expiry else None

    def expire(self, now: float) -> list[Lock]:
        """Remove and return the locks due at ``now`` that still hold their message."""
        due = []
        while self._expiry and self._expiry[0][0] <= now:
            _until, token = self._expiry.pop(0)
            lock = self._locks.pop(token)
            if lock.held:
                due.append(lock)
        return due

    def clear(self) -> None:
        self._locks.clear()
        self._expiry.clear()
