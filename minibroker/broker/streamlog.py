"""The append-only log behind a stream node: offsets, seeking and retention.

Theory of operation
-------------------
A stream keeps every message appended to it, in order, until retention drops
it from the old end; nobody removes a message by consuming it (RabbitMQ
semantics, streams).  Each message gets the next *offset* when it is
appended: 0 for the first, then 1, 2, ... with no gaps, and an offset is
never reused, even after the message it named has been dropped.  A reader
holds nothing but the offset it reads next, so a reader that falls behind
costs no memory beyond that one number.

Storage is two parallel arrays, indexed by ``offset - base``:

* ``_messages``: the :class:`~minibroker.broker.stored.StoredMessage` itself
  (no per-stream wrapper object, so a stored message costs one list slot
  beyond the message: less than a queue's :class:`~.stored.Entry`);
* ``_times``: when it was appended, as C doubles (8 bytes each), never
  decreasing: an append that sees the clock behind the previous one records
  the previous time again, so the array stays sorted and a seek by time is a
  binary search even if the wall clock steps back.

Dropping the oldest message clears its slot (the bytes are freed at once) and
moves ``_head`` on; the cleared prefix is cut off when it is at least half of
the arrays, so each append and each drop cost O(1) amortised.  Reading or
seeking to an offset is O(1) arithmetic; seeking to a time is a binary search,
O(log n).

Retention (``max_bytes``, ``max_age`` on the broker's clock) works message by
message rather than by segment, so everything under ``max_bytes`` stays
readable (RabbitMQ drops whole segments and keeps at least half of the limit;
we keep all of it).  ``max_bytes`` never drops the newest message: a message
larger than the limit stays until the next one arrives, so a reader waiting at
the tail always gets what was just appended.
"""

from __future__ import annotations

import bisect
import re
import struct
from array import array
from collections.abc import Iterator
from typing import Any, Literal

from ..amqp.messaging import MessageAnnotations
from ..amqp.types import symbol, timestamp
from ..records import record
from .config import StreamOptions
from .enqueued import ENQUEUED_TIME
from .stored import OriginMessage, StoredMessage

__all__ = [
    "ENQUEUED_TIME", "OFFSET_ANNOTATION", "OFFSET_LEAD", "Instant", "OffsetSpec", "StreamLog", "delivery_payload",
    "interval_seconds", "timed_payload",
]  # fmt: skip

#: The message annotation every delivery from a stream carries: the message's offset (a long).
OFFSET_ANNOTATION = symbol("x-stream-offset")

#: message-annotations (descriptor 0x72, Part 3 §3.2.3) holding one entry, x-stream-offset -> long,
#: up to the long's eight bytes: encoded by hand since every delivery needs it (map8 of 27 bytes
#: and 2 items, sym8 key, long constructor 0x81).
OFFSET_LEAD = b"\x00\x53\x72\xc1\x1b\x02\xa3\x0f" + OFFSET_ANNOTATION.encode() + b"\x81"
_LONG = struct.Struct(">q")

# ENQUEUED_TIME (enqueued.py) is the message annotation a reader gets beside ``x-stream-offset``
# when its attach desires it (as a desired capability of that name, Part 2 §2.7.3): here, when the
# message was appended.  Readers that do not ask get nothing more, and their deliveries cost nothing more.

#: message-annotations of two entries, x-stream-offset -> long then x-opt-enqueued-time ->
#: timestamp (map8 of 57 bytes and 4 items), up to the offset's eight bytes; then :data:`_TIME_KEY`
#: and the time's eight.
_TIMED_LEAD = b"\x00\x53\x72\xc1\x39\x04\xa3\x0f" + OFFSET_ANNOTATION.encode() + b"\x81"
_TIME_KEY = b"\xa3\x13" + ENQUEUED_TIME.encode() + b"\x83"


def delivery_payload(message: StoredMessage, offset: int) -> bytes:
    """The bytes to send for ``message`` at ``offset``: its own sections plus ``x-stream-offset``.

    The header and the bare message (and footer) are copied as received;
    delivery-annotations are dropped (they are for the next hop only, Part 3
    §3.2.2); the message-annotations gain ``x-stream-offset``.
    """
    payload = message.payload
    split = message.unannotated_split()
    if split is not None:  # no annotations of its own: the common case, no encoding needed
        header_end, bare_start = split
        return b"".join((payload[:header_end], OFFSET_LEAD, _LONG.pack(offset), payload[bare_start:]))
    sections = message.sections
    header_end = sections.header[1]
    bare_start = sections.bare[0]
    merged: dict[Any, Any] = dict(message.message_annotations or {})
    merged[OFFSET_ANNOTATION] = offset
    out = bytearray(payload[:header_end])
    MessageAnnotations(merged).encode_into(out)
    out += payload[bare_start:]
    return bytes(out)


def timed_payload(message: StoredMessage, offset: int, appended_at: float) -> bytes:
    """:func:`delivery_payload` with ``x-opt-enqueued-time`` (:data:`ENQUEUED_TIME`) beside the
    offset: ``appended_at`` (seconds, the broker's clock) in milliseconds."""
    payload = message.payload
    millis = round(appended_at * 1000)
    split = message.unannotated_split()
    if split is not None:  # no annotations of its own: the two entries encoded by hand
        header_end, bare_start = split
        return b"".join((
            payload[:header_end], _TIMED_LEAD, _LONG.pack(offset), _TIME_KEY, _LONG.pack(millis), payload[bare_start:],
        ))  # fmt: skip
    sections = message.sections
    merged: dict[Any, Any] = dict(message.message_annotations or {})
    merged[OFFSET_ANNOTATION] = offset
    merged[ENQUEUED_TIME] = timestamp(millis)
    out = bytearray(payload[: sections.header[1]])
    MessageAnnotations(merged).encode_into(out)
    out += payload[sections.bare[0] :]
    return bytes(out)


#: The slots cleared at the front are cut off once there are this many and they are half the arrays
#: (below it, the cut would run too often to pay for itself).
_COMPACT_MIN = 1024

#: RabbitMQ's interval units (``rabbit_amqqueue:check_max_age``): years, months, days, hours, minutes, seconds.
_UNITS = {"Y": 365 * 86400, "M": 30 * 86400, "D": 86400, "h": 3600, "m": 60, "s": 1}
_INTERVAL = re.compile(r"([0-9]{1,12})([YMDhms])")


@record(frozen=True, slots=True)
class Instant:
    """A point in time, seconds since the epoch: start at the first message appended at or after it."""

    seconds: float


#: Where a reader starts: ``"first"`` retained message, ``"last"`` appended, ``"next"`` to come,
#: an offset, or the first message appended at or after an :class:`Instant`.
OffsetSpec = Literal["first", "last", "next"] | int | Instant


def interval_seconds(text: str) -> float | None:
    """Seconds in a RabbitMQ interval such as ``"7D"`` or ``"12h"``; None if ``text`` is not one."""
    match = _INTERVAL.fullmatch(text)
    if match is None:
        return None
    return int(match.group(1)) * _UNITS[match.group(2)]


class StreamLog:
    """An append-only log of messages addressed by offset (see the module docstring)."""

    def __init__(self, options: StreamOptions | None = None) -> None:
        self.options = options if options is not None else StreamOptions()
        self._messages: list[StoredMessage | None] = []
        self._times = array("d")
        self._head = 0  # index of the first retained message
        self._base = 0  # offset of index 0
        #: Encoded bytes of the retained messages.
        self.bytes = 0
        #: Messages dropped by retention so far.
        self.dropped = 0

    # ------------------------------------------------------------ positions

    @property
    def first_offset(self) -> int:
        """The offset of the oldest retained message (``next_offset`` when none is retained)."""
        return self._base + self._head

    @property
    def next_offset(self) -> int:
        """The offset the next appended message gets."""
        return self._base + len(self._messages)

    @property
    def count(self) -> int:
        """Messages retained."""
        return len(self._messages) - self._head

    def __len__(self) -> int:
        return self.count

    def start(self, spec: OffsetSpec) -> int:
        """The offset a reader attaching with ``spec`` reads first (RabbitMQ semantics, streams).

        An offset before the first retained message starts at the first; one
        past the end waits for the next message to be appended; ``"last"`` on
        an empty stream is ``"next"``.
        """
        if spec == "first":
            return self.first_offset
        if spec == "next":
            return self.next_offset
        if spec == "last":
            return self.next_offset - 1 if self.count else self.next_offset
        if isinstance(spec, Instant):
            return self.seek_time(spec.seconds)
        if isinstance(spec, int) and not isinstance(spec, bool):
            return min(max(spec, self.first_offset), self.next_offset)
        raise ValueError(
            f"an offset spec is 'first', 'last', 'next', an offset (int) or an Instant, got {spec!r}"
        )

    def seek_time(self, seconds: float) -> int:
        """The offset of the first retained message appended at or after ``seconds`` (binary search)."""
        index = bisect.bisect_left(self._times, seconds, self._head)
        return self._base + index

    def get(self, offset: int) -> StoredMessage | None:
        """The message at ``offset``, or None if it was dropped or is not appended yet."""
        index = offset - self._base
        if index < self._head or index >= len(self._messages):
            return None
        return self._messages[index]

    def delivery_payloads(self, offset: int, end: int, max_bytes: int, timed: bool = False) -> list[bytes]:
        """:func:`delivery_payload` of the messages from ``offset`` up to ``end`` (both retained or
        next), stopping after the message that brings their total to ``max_bytes``: a stream
        read's run.  ``timed``: :func:`timed_payload` instead (a reader that asked for the time)."""
        base = self._base
        if offset < self.first_offset or end > self.next_offset:
            raise ValueError(f"offsets {offset}..{end} are not all retained ({self.first_offset}..{self.next_offset})")
        if timed:
            return self._timed_payloads(offset, end, max_bytes)
        out: list[bytes] = []
        append = out.append
        total = 0
        for message in self._messages[offset - base : end - base]:
            assert message is not None  # retained
            payload = delivery_payload(message, offset)
            append(payload)
            offset += 1
            total += len(payload)
            if total >= max_bytes:
                break
        return out

    def _timed_payloads(self, offset: int, end: int, max_bytes: int) -> list[bytes]:
        """:meth:`delivery_payloads` with each message's append time (:func:`timed_payload`)."""
        base, times = self._base, self._times
        out: list[bytes] = []
        total = 0
        for index in range(offset - base, end - base):
            message = self._messages[index]
            assert message is not None  # retained (delivery_payloads checks the range first)
            payload = timed_payload(message, index + base, times[index])
            out.append(payload)
            total += len(payload)
            if total >= max_bytes:
                break
        return out

    def bare_payloads(self, offset: int, end: int, max_bytes: int) -> list[bytes]:
        """The stored bytes of the messages from ``offset`` up to ``end`` (as :meth:`delivery_payloads`
        takes them) while each is a bare message with nothing before it (no header or annotations):
        the delivery of such a message is :data:`OFFSET_LEAD`, its offset, then these bytes
        (what :func:`delivery_payload` makes of it), so a stream read's run sends them with the
        lead packed into each frame's header (``Connection.send_settled_run``) and makes no
        string per message here.  Empty when the message at ``offset`` has a header or annotations.
        """
        base = self._base
        out: list[bytes] = []
        append = out.append
        total = 0
        for message in self._messages[offset - base : end - base]:
            assert message is not None  # retained (delivery_payloads checks the range first)
            if message.bare_start:
                break
            payload = message.payload
            append(payload)
            total += len(payload)
            if total >= max_bytes:
                break
        return out

    def appended_at(self, offset: int) -> float | None:
        """When the message at ``offset`` was appended, or None if it is not retained."""
        index = offset - self._base
        if index < self._head or index >= len(self._messages):
            return None
        return self._times[index]

    def read(self, offset: int, limit: int) -> Iterator[tuple[int, StoredMessage]]:
        """Up to ``limit`` retained messages from ``offset`` on (from the first retained, if it was dropped)."""
        start = max(offset, self.first_offset) - self._base
        stop = min(len(self._messages), start + max(limit, 0))
        messages = self._messages
        base = self._base
        for index in range(start, stop):
            message = messages[index]
            assert message is not None  # slots before _head are the only cleared ones
            yield base + index, message

    # --------------------------------------------------------------- writing

    def append(self, message: StoredMessage, now: float) -> int:
        """Append ``message``; return its offset.  Retention then drops what it must."""
        times = self._times
        offset = self.next_offset
        self._messages.append(message)
        times.append(max(now, times[-1]) if len(times) else now)
        # StoredMessage.size, inlined (see Queue._entry).
        self.bytes += message.size if type(message) is OriginMessage else len(message.payload)
        self.trim(now)
        return offset

    def trim(self, now: float) -> int:
        """Drop the oldest messages beyond ``max_bytes`` or older than ``max_age``; return how many."""
        max_bytes, max_age = self.options.max_bytes, self.options.max_age
        if max_bytes is None and max_age is None:
            return 0
        messages, times = self._messages, self._times
        end = len(messages)
        head = self._head
        start = head
        cutoff = now - max_age if max_age is not None else None
        while head < end:
            if cutoff is not None and times[head] <= cutoff:
                pass  # older than max_age
            elif max_bytes is not None and self.bytes > max_bytes and head < end - 1:
                pass  # beyond max_bytes, and not the newest message
            else:
                break
            message = messages[head]
            assert message is not None
            self.bytes -= message.size if type(message) is OriginMessage else len(message.payload)
            messages[head] = None  # its bytes go now, not at the next compaction
            head += 1
        self._head = head
        dropped = head - start
        self.dropped += dropped
        if head >= _COMPACT_MIN and head * 2 >= end:
            del messages[:head]
            del times[:head]
            self._base += head
            self._head = 0
        return dropped

    def next_expiry(self) -> float | None:
        """When ``max_age`` next drops a message (the oldest's append time plus ``max_age``), or None."""
        max_age = self.options.max_age
        if max_age is None or not self.count:
            return None
        return self._times[self._head] + max_age

    def clear(self) -> int:
        """Drop every message (a purge); offsets go on from where they were.  Return how many."""
        dropped = self.count
        self._base = self.next_offset
        self._messages = []
        self._times = array("d")
        self._head = 0
        self.bytes = 0
        self.dropped += dropped
        return dropped

    def __repr__(self) -> str:
        return f"<StreamLog offsets {self.first_offset}..{self.next_offset - 1} ({self.count} messages)>"
