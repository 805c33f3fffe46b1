"""``x-opt-enqueued-time`` on deliveries, for the receivers whose attach asks for it.

A receiving link whose attach lists ``x-opt-enqueued-time`` among its desired capabilities
(Part 2 §2.7.3) gets every message with a message annotation of that name (Part 3 §3.2.3): when
the broker took the message, as an AMQP timestamp (milliseconds since the Unix epoch, Part 1
§1.6.17), as Azure Service Bus stamps each message it delivers.  The attach answer offers the
capability back, so the receiver knows its deliveries carry it.  A stream reader gets the time the
stream appended the message (streamlog.py); a queue's consumer, browsing or not, gets the time the
message arrived at the broker (``StoredMessage.arrived_at``, the broker's clock: a message routed
to several queues, or dead-lettered, keeps its first arrival).  A receiver that does not ask gets
the bytes it always got, and its deliveries do no more work (links.py chooses once per link).

The message's own message-annotations are kept: the time is merged into them, replacing an
``x-opt-enqueued-time`` the message may already carry (a message forwarded from Service Bus: the
broker's own arrival is what the receiver asked for).  Service Bus's layer stamps its deliveries
its own way (servicebus/sections.py) and builds its consumers without this.
"""

from __future__ import annotations

import struct
from typing import Any

from ..amqp import codec
from ..amqp.message import split_sections
from ..amqp.messaging import MessageAnnotations
from ..amqp.types import symbol, timestamp
from .stored import StoredMessage

__all__ = ["ENQUEUED_TIME", "asks_enqueued_time", "with_enqueued_time"]

#: The capability a receiver desires, and the message annotation it then gets on every delivery.
ENQUEUED_TIME = symbol("x-opt-enqueued-time")

#: message-annotations (descriptor 0x72) of the one entry x-opt-enqueued-time -> timestamp, but
#: the timestamp's eight bytes: map8 of 31 bytes and 2 items, sym8 key, timestamp constructor 0x83.
_LEAD = b"\x00\x53\x72\xc1\x1f\x02\xa3\x13" + ENQUEUED_TIME.encode() + b"\x83"
_LONG = struct.Struct(">q")


def asks_enqueued_time(desired: Any) -> bool:
    """Whether an attach's ``desired-capabilities`` (a symbol, or a list of them: the field is
    ``multiple``, Part 1 §1.4) name ``x-opt-enqueued-time``."""
    return desired == ENQUEUED_TIME or (isinstance(desired, list) and ENQUEUED_TIME in desired)


def with_enqueued_time(payload: bytes, message: StoredMessage) -> bytes:
    """``payload``, the delivery a queue's consumer would send of ``message``, with
    ``x-opt-enqueued-time`` = ``message``'s arrival merged into its message-annotations.

    Everything else is kept byte for byte: the header, the bare message and the footer, and
    the other message-annotations (re-encoded with the time among them).
    """
    if payload is message.payload:
        # Sent as stored (the usual delivery): the message knows where its sections are.
        ma_start, ma_end = message.sections.message_annotations
    else:
        # A header or annotations the queue changed (a redelivery, a ttl, a modified outcome).
        ma_start, ma_end = split_sections(payload).message_annotations
    time = round(message.arrived_at * 1000)  # rounded as a stream's (truncating 1.25 * 1000 may give 1249)
    if ma_start == ma_end:  # no annotations: the one entry, encoded by hand
        return b"".join((payload[:ma_start], _LEAD, _LONG.pack(time), payload[ma_start:]))
    merged: dict[Any, Any] = dict(codec.decode(payload[ma_start:ma_end]).value or {})
    merged[ENQUEUED_TIME] = timestamp(time)
    out = bytearray(payload[:ma_start])
    MessageAnnotations(merged).encode_into(out)
    out += payload[ma_end:]
    return bytes(out)
