"""The content header of class ``basic`` (0-9-1 specification §4.2.6.1, §1.8 "basic" properties).

A message's method frame (``basic.publish``, ``basic.deliver`` ...) is followed by a content
header frame: class id, a weight of 0, the body size as 64 bits, then the property flags and the
properties present.  Flags are 16-bit words, most significant bit first, one bit per property in
declaration order; the lowest bit of a word says another word follows (§4.2.6.1).  ``basic``'s
fourteen properties fit one word; a longer chain is read (and its extra flags refused, as no
property is declared there) rather than misread.
"""

from __future__ import annotations

import datetime
import struct
from typing import Any, Final

from ..records import record
from .errors import FrameError
from .values import read_shortstr, read_table, write_shortstr, write_table

__all__ = [
    "BASIC_CLASS_ID",
    "NO_PROPERTIES",
    "BasicProperties",
    "ContentHeader",
    "decode_content_header",
    "encode_content_header",
]

BASIC_CLASS_ID = 60

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_HEAD = struct.Struct(">HHQ")
_H = struct.Struct(">H")
_B = struct.Struct(">B")
_Q = struct.Struct(">Q")


@record(frozen=True, slots=True, kw_only=True)
class BasicProperties:
    """The ``basic`` class's message properties; ``None`` means absent (its flag bit clear).

    ``timestamp`` is whole seconds on the wire (§4.2.5.4); it is decoded as an aware UTC datetime.
    ``cluster_id`` is deprecated ("reserved" in 0-9-1) and kept only so that bytes round-trip.
    """

    content_type: str | None = None
    content_encoding: str | None = None
    headers: dict[str, Any] | None = None
    delivery_mode: int | None = None
    priority: int | None = None
    correlation_id: str | None = None
    reply_to: str | None = None
    expiration: str | None = None
    message_id: str | None = None
    timestamp: datetime.datetime | None = None
    type: str | None = None
    user_id: str | None = None
    app_id: str | None = None
    cluster_id: str | None = None

    @property
    def persistent(self) -> bool:
        """delivery-mode 2 (§1.8.2 "delivery-mode": 1 non-persistent, 2 persistent)."""
        return self.delivery_mode == 2


#: (name, wire type) in flag order: the first is the word's most significant bit.
_PROPERTIES: tuple[tuple[str, str], ...] = (
    ("content_type", "shortstr"),
    ("content_encoding", "shortstr"),
    ("headers", "table"),
    ("delivery_mode", "octet"),
    ("priority", "octet"),
    ("correlation_id", "shortstr"),
    ("reply_to", "shortstr"),
    ("expiration", "shortstr"),
    ("message_id", "shortstr"),
    ("timestamp", "timestamp"),
    ("type", "shortstr"),
    ("user_id", "shortstr"),
    ("app_id", "shortstr"),
    ("cluster_id", "shortstr"),
)


#: No property set: the shared value a message without properties is delivered with (see
#: :func:`encode_content_header`, which encodes it without looking at each property).
NO_PROPERTIES: Final = BasicProperties()
_NO_FLAGS: Final = b"\x00\x00"


@record(frozen=True, slots=True)
class ContentHeader:
    """A decoded content header: the class it belongs to, the body's size and the properties."""

    class_id: int
    body_size: int
    properties: BasicProperties


def encode_content_header(body_size: int, properties: BasicProperties, class_id: int = BASIC_CLASS_ID) -> bytes:
    """A content header frame's payload for a body of ``body_size`` bytes."""
    if properties is NO_PROPERTIES:  # property flags 0 and no property list (§4.2.6.1)
        return _HEAD.pack(class_id, 0, body_size) + _NO_FLAGS
    out = bytearray(_HEAD.pack(class_id, 0, body_size))
    flags_at = len(out)
    out += b"\x00\x00"
    flags = 0
    for index, (name, wire) in enumerate(_PROPERTIES):
        value = getattr(properties, name)
        if value is None:
            continue
        flags |= 1 << (15 - index)
        if wire == "shortstr":
            write_shortstr(value, out)
        elif wire == "table":
            write_table(value, out)
        elif wire == "octet":
            out += _B.pack(value)
        else:
            moment = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
            out += _Q.pack(int(moment.timestamp()))
    _H.pack_into(out, flags_at, flags)
    return bytes(out)


def decode_content_header(payload: bytes | memoryview) -> ContentHeader:
    """Read a content header frame's payload; what does not decode raises :class:`FrameError`."""
    data = memoryview(payload)
    try:
        class_id, _weight, body_size = _HEAD.unpack_from(data, 0)
        pos = _HEAD.size
        (flags,) = _H.unpack_from(data, pos)
        pos += 2
        more = flags & 1
        while more:
            # A continuation word: basic declares no property beyond the first word.
            (extra,) = _H.unpack_from(data, pos)
            pos += 2
            if extra & ~1:
                raise FrameError("a content header sets property flags beyond basic's fourteen properties")
            more = extra & 1
        values: dict[str, Any] = {}
        for index, (name, wire) in enumerate(_PROPERTIES):
            if not flags & (1 << (15 - index)):
                continue
            if wire == "shortstr":
                values[name], pos = read_shortstr(data, pos)
            elif wire == "table":
                values[name], pos = read_table(data, pos)
            elif wire == "octet":
                values[name] = data[pos]
                pos += 1
            else:
                (seconds,) = _Q.unpack_from(data, pos)
                pos += 8
                try:
                    values[name] = _EPOCH + datetime.timedelta(seconds=seconds)
                except OverflowError:
                    raise FrameError(f"timestamp {seconds} s is past what a calendar date can hold") from None
    except (IndexError, struct.error):
        raise FrameError("a content header runs past the end of its frame") from None
    if flags & 0b10:
        # Bit 1 is below cluster-id and declares nothing (bit 0 is the continuation flag).
        raise FrameError("a content header sets a property flag that basic does not declare")
    return ContentHeader(class_id, body_size, BasicProperties(**values))
