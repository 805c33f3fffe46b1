"""The browsers of a queue: consumers that see every message without acquiring it.

AMQP 1.0 Part 3 §3.5.3: a link whose source has ``distribution-mode`` ``copy`` on a node whose
default is ``move`` browses it: each browser is sent every message the queue holds, once, in
arrival order, and the messages stay for the queue's other consumers.  While a browser is attached
the queue's entries are kept sorted by arrival number, and each browser holds only the last number
it saw, so a fetch seeks past it in O(log n) and then costs O(1) per message sent, however deep the
queue; with no browser attached nothing is kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from sortedcontainers import SortedKeyList

from .stored import Entry

__all__ = ["Browser", "Browsers"]


class Browser(Protocol):
    """A browsing consumer, as the queue's :class:`~.queue.Consumer` is one."""

    def credit(self) -> int: ...

    def accepts(self, entry: Entry) -> bool: ...

    def deliver(self, entry: Entry) -> None: ...


def _seq(entry: Entry) -> int:
    return entry.seq


class Browsers:
    """The browsers of one queue and its entries by arrival number (made for the first browser)."""

    __slots__ = ("_arrivals", "_seen")

    def __init__(self, held: Iterable[Entry]) -> None:
        self._arrivals = SortedKeyList(held, key=_seq)
        self._seen: dict[Browser, int] = {}  # browser -> the last arrival number it saw

    def add(self, browser: Browser) -> None:
        self._seen[browser] = 0

    def remove(self, browser: Browser) -> bool:
        """``browser`` left; True when it was the last one (the queue then drops this record)."""
        self._seen.pop(browser, None)
        return not self._seen

    def arrived(self, entry: Entry) -> None:
        self._arrivals.add(entry)

    def left(self, entry: Entry) -> None:
        self._arrivals.discard(entry)

    def send(self, newest: int) -> None:
        """Send each browser what it has not seen yet, up to arrival number ``newest``."""
        for browser in list(self._seen):
            self._browse(browser, newest)

    def _browse(self, browser: Browser, newest: int) -> None:
        seen = self._seen
        last = seen[browser]
        if newest <= last or browser.credit() <= 0:
            return
        # Sending to a browser never changes the queue, so the index can be walked while delivering.
        for entry in self._arrivals.irange_key(min_key=last, inclusive=(False, True)):
            if browser.credit() <= 0:
                break
            seen[browser] = entry.seq
            if browser.accepts(entry):
                browser.deliver(entry)
