"""Protocol headers and frames (OASIS AMQP 1.0 Part 2 §2.2-§2.3, Part 5 §5.2-§5.3).

A frame is a 4-byte SIZE, a 1-byte DOFF (data offset in 4-byte words, at least
2), a 1-byte TYPE (0x00 AMQP, 0x01 SASL) and a 2-byte channel, then the
extended header, the performative and, for ``transfer``, the payload.
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = [
    "AMQP_HEADER", "SASL_HEADER", "TLS_HEADER", "FRAME_AMQP", "FRAME_SASL",
    "MIN_MAX_FRAME_SIZE", "EMPTY_FRAME", "frame", "FRAME_HEADER", "FrameHeaderError", "frame_header",
]  # fmt: skip

#: Protocol headers (§2.2): "AMQP", protocol id, major, minor, revision.
AMQP_HEADER: Final = b"AMQP\x00\x01\x00\x00"
SASL_HEADER: Final = b"AMQP\x03\x01\x00\x00"
TLS_HEADER: Final = b"AMQP\x02\x01\x00\x00"

FRAME_AMQP: Final = 0x00
FRAME_SASL: Final = 0x01

#: §2.7.1: max-frame-size may not be below 512 (MIN-MAX-FRAME-SIZE).
MIN_MAX_FRAME_SIZE: Final = 512

FRAME_HEADER: Final = struct.Struct(">IBBH")

#: An empty frame (no body) keeps an idle connection alive (§2.4.5).
EMPTY_FRAME: Final = FRAME_HEADER.pack(8, 2, FRAME_AMQP, 0)


class FrameHeaderError(ValueError):
    """A frame header that no frame can have (§2.3.1); the engine closes with amqp:framing-error."""


def frame_header(buf: bytes | bytearray, pos: int, max_frame_size: int | None = None) -> tuple[int, int, int, int]:
    """SIZE, DOFF, TYPE and channel of the frame header at ``buf[pos:pos + 8]``, checked (§2.3.1).

    The one reader of frame headers: the engine, the test peer and the
    benchmark all use it.  The frame may not be complete yet: compare SIZE
    with what is buffered.  Raises :class:`FrameHeaderError` for a SIZE below
    the header, above ``max_frame_size``, or a DOFF outside the frame.
    """
    size, doff, frame_type, channel = FRAME_HEADER.unpack_from(buf, pos)
    if size < 8:
        raise FrameHeaderError(f"frame size {size} is below the 8-byte frame header")
    if max_frame_size is not None and size > max_frame_size:
        raise FrameHeaderError(f"frame of {size} bytes exceeds the negotiated max-frame-size {max_frame_size}")
    if doff < 2 or doff * 4 > size:
        raise FrameHeaderError(f"frame data offset {doff} is invalid for a {size}-byte frame")
    return size, doff, frame_type, channel


def frame(channel: int, body: bytes | bytearray, frame_type: int = FRAME_AMQP) -> bytes:
    """A whole frame around ``body`` (performative plus payload), DOFF 2."""
    return FRAME_HEADER.pack(8 + len(body), 2, frame_type, channel) + body
