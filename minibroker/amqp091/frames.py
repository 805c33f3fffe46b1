"""AMQP 0-9-1 framing (0-9-1 specification §2.3.5 and §4.2.3): bytes in, frames out, bytes out.

Every frame is a 7-byte header (type octet, channel short, payload size long), the payload and a
frame-end octet ``0xCE``.  Four types exist: method (1), content header (2), content body (3) and
heartbeat (8).  A connection starts with the 8-byte protocol header ``AMQP 0 0 9 1`` (§4.2.2).

:class:`FrameReader` is sans-I/O: ``feed(data)`` returns the complete frames it now holds.  Its
work and memory are bounded by ``frame_max``: a frame header that announces more than the
negotiated maximum is refused before its payload is read (§4.2.3: "a peer MUST NOT send frames
larger than the agreed-upon size"; the receiver closes with FRAME_ERROR), so a partial frame
never holds more than ``frame_max`` bytes.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from . import PROTOCOL_HEADER
from .errors import FrameError
from .methods import Method, encode_method
from .properties import BasicProperties, encode_content_header

__all__ = [
    "FRAME_BODY",
    "FRAME_END",
    "FRAME_HEADER",
    "FRAME_HEARTBEAT",
    "FRAME_METHOD",
    "FRAME_MIN_SIZE",
    "HEARTBEAT",
    "PROTOCOL_HEADER",
    "Frame",
    "FrameReader",
    "content_frames",
    "method_frame",
]


FRAME_METHOD: Final = 1
FRAME_HEADER: Final = 2
FRAME_BODY: Final = 3
FRAME_HEARTBEAT: Final = 8
FRAME_END: Final = 0xCE
#: The smallest frame_max a peer may negotiate, and the largest frame accepted before tuning
#: (§4.2.3 "frame-min-size").
FRAME_MIN_SIZE: Final = 4096
#: The 7-byte header plus the frame-end octet: what ``frame_max`` spends beyond the payload.
FRAME_OVERHEAD: Final = 8

_HEADER = struct.Struct(">BHI")
HEARTBEAT: Final = _HEADER.pack(FRAME_HEARTBEAT, 0, 0) + bytes([FRAME_END])
_TYPES = frozenset({FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT})


class Frame(NamedTuple):
    """One frame: its type, channel and payload (the payload's bytes, frame-end removed)."""

    type: int
    channel: int
    payload: bytes


class FrameReader:
    """Reassembles frames from a byte stream; ``frame_max`` bounds every frame (header and end included)."""

    __slots__ = ("_buffer", "frame_max")

    def __init__(self, frame_max: int) -> None:
        if frame_max < FRAME_MIN_SIZE:
            raise ValueError(f"frame_max must be at least {FRAME_MIN_SIZE} (§4.2.3), got {frame_max}")
        self.frame_max = frame_max
        self._buffer = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not complete yet (never more than ``frame_max``)."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame]:
        """Take ``data``; return every frame now complete, in order.  A bad frame raises FrameError."""
        buffer = self._buffer
        buffer += data
        frames: list[Frame] = []
        pos = 0
        end = len(buffer)
        while end - pos >= 7:
            kind, channel, size = _HEADER.unpack_from(buffer, pos)
            if kind not in _TYPES:
                raise FrameError(f"unknown frame type {kind} (expected 1 method, 2 header, 3 body or 8 heartbeat)")
            if size + FRAME_OVERHEAD > self.frame_max:
                raise FrameError(
                    f"a frame of {size + FRAME_OVERHEAD} bytes is larger than the negotiated frame_max {self.frame_max}"
                )
            stop = pos + 7 + size
            if stop >= end:
                break
            if buffer[stop] != FRAME_END:
                raise FrameError(f"frame end octet is 0x{buffer[stop]:02x}, expected 0xce (§4.2.3)")
            frames.append(Frame(kind, channel, bytes(buffer[pos + 7 : stop])))
            pos = stop + 1
        if pos:
            del buffer[:pos]
        return frames


def method_frame(channel: int, method: Method) -> bytes:
    """A method frame carrying ``method`` on ``channel``."""
    payload = encode_method(method)
    return _HEADER.pack(FRAME_METHOD, channel, len(payload)) + payload + b"\xce"


def content_frames(channel: int, properties: BasicProperties, body: bytes | memoryview, frame_max: int) -> bytes:
    """The content header frame and the body frames of one message (§2.3.5.2).

    The body is split so that no frame exceeds ``frame_max``; an empty body has no body frame
    (§4.2.6.2: "the content header frame ... followed by zero or more content body frames").
    """
    header = encode_content_header(len(body), properties)
    out = bytearray(_HEADER.pack(FRAME_HEADER, channel, len(header)))
    out += header
    out.append(FRAME_END)
    chunk = frame_max - FRAME_OVERHEAD
    view = memoryview(body)
    for start in range(0, len(body), chunk):
        part = view[start : start + chunk]
        out += _HEADER.pack(FRAME_BODY, channel, len(part))
        out += part
        out.append(FRAME_END)
    return bytes(out)
