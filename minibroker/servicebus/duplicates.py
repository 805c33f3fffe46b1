"""Duplicate detection: an entity that requires it drops a message whose message-id it saw recently.

As Service Bus does ("Duplicate detection", Azure Service Bus documentation):
the entity keeps the message-ids of the last
``duplicate_detection_history_time_window`` seconds; a message whose id is
among them is accepted (the sender is told all is well) and not enqueued.
A message without a message-id is never a duplicate.

An id is remembered only once its message is stored or scheduled
(:meth:`DuplicateDetection.remember` after the publish): a message the entity
refused (full, say) leaves no trace, so the sender's retry is stored, not
taken for a duplicate of what was never kept.

What the store may hold is bounded per entity, in ids (:data:`MAX_REMEMBERED`)
and in bytes (:data:`MAX_REMEMBERED_BYTES`); past either the oldest ids are
forgotten first.  Only entities configured with
``requires_duplicate_detection`` have a store, so their number is the
configuration's.  Ids are at most :data:`MAX_ID_LENGTH` characters (the layer
refuses longer ones before they reach the store).
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from typing import Any

__all__ = ["DuplicateDetection", "MAX_ID_LENGTH", "MAX_REMEMBERED", "MAX_REMEMBERED_BYTES", "id_too_long"]

#: Service Bus refuses a MessageId (and a SessionId) over 128 characters ("Service Bus quotas";
#: the SDKs check it before sending: azure-servicebus ``MESSAGE_PROPERTY_MAX_LENGTH``).
MAX_ID_LENGTH = 128
#: Ids kept per entity, whatever the window.  Past it the oldest are forgotten first.
MAX_REMEMBERED = 100_000
#: Bytes the ids of one entity may hold (as counted by :func:`_cost`).  At 128 ASCII characters an
#: id costs about 300 bytes, so :data:`MAX_REMEMBERED` ids fit; wide (non-Latin-1) ids meet this first.
MAX_REMEMBERED_BYTES = 32 * 1024 * 1024
#: What one remembered id costs beside its string: the ordered dict's entry and the float (measured
#: with tracemalloc: 292 bytes an entry for 128-character ids, 177 of them the string).
_ENTRY_OVERHEAD = 120


def id_too_long(value: Any) -> bool:
    """Whether a message-id or session id is over :data:`MAX_ID_LENGTH` (characters, or bytes if binary)."""
    return isinstance(value, (str, bytes)) and len(value) > MAX_ID_LENGTH


def _cost(message_id: str) -> int:
    return sys.getsizeof(message_id) + _ENTRY_OVERHEAD


class _Seen:
    """One entity's ids, oldest first, and the bytes they hold."""

    __slots__ = ("ids", "bytes")

    def __init__(self) -> None:
        self.ids: OrderedDict[str, float] = OrderedDict()
        self.bytes = 0

    def forget_oldest(self) -> None:
        oldest, _at = self.ids.popitem(last=False)
        self.bytes -= _cost(oldest)


class DuplicateDetection:
    """The message-ids each entity saw within its window, oldest first."""

    def __init__(self, max_ids: int = MAX_REMEMBERED, max_bytes: int = MAX_REMEMBERED_BYTES) -> None:
        self.max_ids = max_ids
        self.max_bytes = max_bytes
        self._seen: dict[str, _Seen] = {}

    def is_duplicate(self, entity: str, message_id: str, now: float, window: float) -> bool:
        """Whether ``entity`` kept a message with ``message_id`` in the last ``window`` seconds (nothing is
        remembered: see :meth:`remember`)."""
        seen = self._seen.get(entity)
        if seen is None:
            return False
        ids = seen.ids
        while ids:
            oldest, at = next(iter(ids.items()))
            if at + window > now:
                break
            seen.forget_oldest()
        return message_id in ids

    def remember(self, entity: str, message_id: str, now: float) -> None:
        """``entity`` stored (or scheduled) a message with ``message_id`` at ``now``."""
        seen = self._seen.get(entity)
        if seen is None:
            seen = self._seen[entity] = _Seen()
        ids = seen.ids
        if message_id in ids:
            return  # kept by an earlier message of the same batch
        ids[message_id] = now
        seen.bytes += _cost(message_id)
        while len(ids) > self.max_ids or seen.bytes > self.max_bytes:
            seen.forget_oldest()

    def bytes_held(self, entity: str) -> int:
        """What ``entity``'s ids hold (strings and their entries), in bytes."""
        seen = self._seen.get(entity)
        return seen.bytes if seen is not None else 0

    def count(self, entity: str) -> int:
        seen = self._seen.get(entity)
        return len(seen.ids) if seen is not None else 0

    def clear(self) -> None:
        self._seen.clear()
