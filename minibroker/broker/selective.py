"""Where each selective consumer of a queue has looked: a queue's index for consumers that turn messages down.

A consumer with a selector (AMQP 1.0 Part 3 §3.5.1 filters; JMS message selectors) may refuse the
message at the head of the queue and take a later one.  Without a record of what it refused it
would test every refused message again on each dispatch, quadratic over a deep queue.  So when a
consumer first refuses one, the queue builds this index of its available entries in delivery order
(``(-priority level, arrival)``), and each such consumer keeps a cursor: the key of the last entry
it refused.  It resumes after its cursor; an entry that lands at or before a cursor (a release back
to its original place, a higher priority) drops that cursor, so nothing new is skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from sortedcontainers import SortedKeyList

from .stored import Entry

__all__ = ["Selective", "SelectiveIndex"]


class Selective(Protocol):
    """A consumer that may turn an entry down."""

    def accepts(self, entry: Entry) -> bool: ...


def _key(entry: Entry) -> tuple[int, int]:
    return (-entry.level, entry.seq)


class SelectiveIndex:
    """The available entries of one queue in delivery order, and each selective consumer's cursor."""

    __slots__ = ("_cursors", "_entries")

    def __init__(self, available: Iterable[Entry]) -> None:
        self._entries = SortedKeyList(available, key=_key)
        self._cursors: dict[Selective, tuple[int, int]] = {}

    def available(self, entry: Entry) -> None:
        """``entry`` became available: cursors at or past its place look again."""
        key = _key(entry)
        self._entries.add(entry)
        cursors = self._cursors
        for consumer, cursor in list(cursors.items()):
            if key <= cursor:  # it lands where that consumer has already looked
                del cursors[consumer]

    def taken(self, entry: Entry) -> None:
        self._entries.discard(entry)

    def forget(self, consumer: Selective) -> bool:
        """``consumer`` left; True when no consumer has a cursor (the queue then drops the index)."""
        self._cursors.pop(consumer, None)
        return not self._cursors

    def reset(self) -> None:
        """Every entry left at once (a purge): no cursor means anything any more."""
        self._cursors.clear()

    def next_for(self, consumer: Selective) -> Entry | None:
        """The first available entry ``consumer`` accepts, past what it turned down before."""
        cursor = self._cursors.get(consumer)
        entries = self._entries
        candidates: Iterator[Entry] = (
            entries.irange_key(min_key=cursor, inclusive=(False, True)) if cursor is not None else iter(entries)
        )
        for entry in candidates:
            if consumer.accepts(entry):
                return entry
            self._cursors[consumer] = _key(entry)
        return None
