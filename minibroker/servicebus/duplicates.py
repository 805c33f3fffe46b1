"""Duplicate detection: an entity that requires it drops a message whose message-id it saw recently.

As Service Bus does: the entity keeps the message-ids of the last
``duplicate_detection_history_time_window`` seconds; a message whose id is
among them is accepted (the sender is told all is well) and not enqueued.
A message without a message-id is never a duplicate.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["DuplicateDetection", "MAX_REMEMBERED"]

#: Ids kept per entity, whatever the window: bounds the memory a fast sender can make the broker hold
#: (at about 100 bytes an id, 10 MB an entity).  Past it the oldest are forgotten first.
MAX_REMEMBERED = 100_000


class DuplicateDetection:
    """The message-ids each entity saw within its window, oldest first."""

    def __init__(self) -> None:
        self._seen: dict[str, OrderedDict[str, float]] = {}

    def is_duplicate(self, entity: str, message_id: str, now: float, window: float) -> bool:
        """Whether ``entity`` saw ``message_id`` in the last ``window`` seconds; remember it if not."""
        seen = self._seen.setdefault(entity, OrderedDict())
        while seen:
            oldest, at = next(iter(seen.items()))
            if at + window > now:
                break
            del seen[oldest]
        if message_id in seen:
            return True
        seen[message_id] = now
        if len(seen) > MAX_REMEMBERED:
            seen.popitem(last=False)
        return False

    def clear(self) -> None:
        self._seen.clear()
