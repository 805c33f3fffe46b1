"""Stands in for the broker's stream node (``minibroker.broker.stream``) until it is on this branch.

It offers only the part of the stream interface the Event Hubs layer uses
(``put``, ``add_reader``/``remove_reader``, ``dispatch``, ``expire``, and the
log's offsets and append times), with the same names, so that partitions
switch to real streams by changing one import.  It goes when they do.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Protocol

from ..broker.stored import StoredMessage

__all__ = ["Reader", "Stream"]


class Reader(Protocol):
    position: int

    def credit(self) -> int: ...

    def deliver_offset(self, offset: int, message: StoredMessage) -> bool: ...


class _Log:
    def __init__(self) -> None:
        self.messages: list[StoredMessage] = []
        self.times: list[float] = []
        self.base = 0
        self.bytes = 0

    @property
    def first_offset(self) -> int:
        return self.base

    @property
    def next_offset(self) -> int:
        return self.base + len(self.messages)

    @property
    def count(self) -> int:
        return len(self.messages)

    def get(self, offset: int) -> StoredMessage | None:
        index = offset - self.base
        return self.messages[index] if 0 <= index < len(self.messages) else None

    def appended_at(self, offset: int) -> float | None:
        index = offset - self.base
        return self.times[index] if 0 <= index < len(self.times) else None

    def seek_time(self, seconds: float) -> int:
        return self.base + bisect.bisect_left(self.times, seconds)


class Stream:
    def __init__(self, name: str, max_age: float | None, on_expiry: Callable[[float], None] | None = None) -> None:
        self.name = name
        self.max_age = max_age
        self.log = _Log()
        self.readers: list[Reader] = []
        self.on_expiry = on_expiry

    def put(self, message: StoredMessage, now: float) -> int:
        log = self.log
        offset = log.next_offset
        first = not log.messages
        log.messages.append(message)
        log.times.append(max(now, log.times[-1]) if log.times else now)
        log.bytes += len(message.payload)
        if first and self.max_age is not None and self.on_expiry is not None:
            self.on_expiry(now + self.max_age)
        return offset

    def add_reader(self, reader: Reader, spec: int) -> int:
        reader.position = min(max(spec, self.log.first_offset), self.log.next_offset)
        self.readers.append(reader)
        return reader.position

    def remove_reader(self, reader: Reader) -> None:
        if reader in self.readers:
            self.readers.remove(reader)

    def dispatch(self, now: float) -> None:
        self.expire(now)
        for reader in list(self.readers):
            position = max(reader.position, self.log.first_offset)
            while reader.credit() > 0 and position < self.log.next_offset:
                message = self.log.get(position)
                assert message is not None
                reader.position = position + 1
                reader.deliver_offset(position, message)
                position += 1
            reader.position = position

    def next_expiry(self) -> float | None:
        if self.max_age is None or not self.log.times:
            return None
        return self.log.times[0] + self.max_age

    def expire(self, now: float) -> int:
        log = self.log
        if self.max_age is None:
            return 0
        cut = bisect.bisect_right(log.times, now - self.max_age)
        for message in log.messages[:cut]:
            log.bytes -= len(message.payload)
        del log.messages[:cut], log.times[:cut]
        log.base += cut
        return cut
