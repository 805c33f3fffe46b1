"""Duplicate detection for a queue or a stream: a message whose message-id it took recently is accepted and dropped.

As Azure Service Bus does for an entity with ``requiresDuplicateDetection`` ("Duplicate detection",
Service Bus documentation): a queue with ``QueueOptions.duplicate_window`` (a stream with
``StreamOptions.duplicate_window``: not appended) keeps the message-ids
(Part 3 §3.2.4 ``message-id``) of what it took in the last that many seconds, on the broker's
clock; a message a client sends whose id is among them is accepted (the sender is told all is
well, Part 3 §3.4.2) and not enqueued.  A message without a message-id is never a repeat.  An id is
remembered only once its message was put on the queue, so a message refused (a full queue) is
not taken for a repeat of what was never kept.  With deterministic message-ids (the Spark sink's,
an idempotent producer's) a resend after a lost connection or a replayed batch lands once.

Bounded whatever the sender does: at most :data:`MAX_REMEMBERED` ids per queue (the oldest are
forgotten first), each at most :data:`MAX_ID_CHARS` characters (a longer id is compared as its
SHA-256, so a sender cannot make the broker hold more than that per id).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

__all__ = ["MAX_ID_CHARS", "MAX_REMEMBERED", "RecentIds", "message_key"]

#: Ids kept per queue, whatever the window (at about 150 bytes an id: 15 MB a queue at most).
MAX_REMEMBERED = 100_000
#: Longest id kept as it is; a longer one is kept as its SHA-256 (64 hex digits).
MAX_ID_CHARS = 128


def message_key(message_id: Any) -> str | None:
    """What a message-id is remembered as: its type and value (``1`` and ``"1"`` differ, as AMQP
    types do), a long one hashed; None for no id."""
    if message_id is None:
        return None
    key = f"{type(message_id).__name__}:{message_id.hex() if isinstance(message_id, bytes) else message_id}"
    return key if len(key) <= MAX_ID_CHARS else hashlib.sha256(key.encode()).hexdigest()


class RecentIds:
    """The ids one queue took within the last ``window`` seconds, oldest first."""

    __slots__ = ("_seen", "window")

    def __init__(self, window: float) -> None:
        self.window = window
        self._seen: OrderedDict[str, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def repeats(self, key: str, now: float) -> bool:
        """Whether ``key`` was taken in the last ``window`` seconds (forgetting older ones first)."""
        seen = self._seen
        while seen:
            oldest, at = next(iter(seen.items()))
            if at + self.window > now:
                break
            del seen[oldest]
        return key in seen

    def remember(self, key: str, now: float) -> None:
        self._seen[key] = now
        self._seen.move_to_end(key)
        if len(self._seen) > MAX_REMEMBERED:
            self._seen.popitem(last=False)
