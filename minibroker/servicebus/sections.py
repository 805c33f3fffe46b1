"""Edits Service Bus makes to a message: broker annotations and dead-letter properties.

The bare message is kept byte for byte except where Service Bus itself
changes it (the dead-letter reason goes into application-properties);
annotations are re-encoded in front of it (Part 3 §3.2: a broker may change
the header and message-annotations).
"""

from __future__ import annotations

from typing import Any

from ..amqp import codec
from ..amqp.message import split_sections
from ..amqp.messaging import ApplicationProperties, Header, MessageAnnotations, Properties
from ..amqp.types import symbol, timestamp, ubyte, uint
from ..broker.stored import Entry, StoredMessage

__all__ = [
    "delivery_payload", "with_annotations", "with_application_properties", "with_bare", "with_properties", "millis",
]  # fmt: skip

_HEADER = b"\x00\x53\x70"
_PROPERTIES = b"\x00\x53\x73"
_APPLICATION_PROPERTIES = b"\x00\x53\x74"

SEQUENCE_NUMBER = symbol("x-opt-sequence-number")
ENQUEUED_TIME = symbol("x-opt-enqueued-time")
LOCKED_UNTIL = symbol("x-opt-locked-until")
SCHEDULED_ENQUEUE_TIME = symbol("x-opt-scheduled-enqueue-time")
DEAD_LETTER_SOURCE = symbol("x-opt-deadletter-source")


def millis(seconds: float) -> timestamp:
    """A clock time in seconds as an AMQP timestamp (milliseconds since the Unix epoch)."""
    value: timestamp = timestamp(int(seconds * 1000))
    return value


def delivery_payload(entry: Entry, now: float, locked_until: float | None) -> bytes:
    """The bytes of a delivery: the message with the annotations Service Bus adds to what it sends."""
    extra: dict[Any, Any] = {SEQUENCE_NUMBER: entry.seq, ENQUEUED_TIME: millis(entry.message.arrived_at)}
    if locked_until is not None:
        extra[LOCKED_UNTIL] = millis(locked_until)
    return with_annotations(entry.payload_for_delivery(now), extra)


def with_annotations(payload: bytes, extra: dict[Any, Any]) -> bytes:
    """``payload`` with ``extra`` merged into its message-annotations (delivery-annotations dropped).

    A header is added when there is none: Service Bus clients read the delivery count from it.
    """
    sections = split_sections(payload)
    ma_start, ma_end = sections.message_annotations
    merged: dict[Any, Any] = dict(codec.decode(payload[ma_start:ma_end]).value) if ma_end > ma_start else {}
    merged.update(extra)
    header_start, header_end = sections.header
    header = codec.decode(payload[header_start:header_end]) if header_end else Header()
    # Every field written out, delivery-count too (an omitted one reads as null in the SDK).
    fields = [
        bool(header.durable), ubyte(header.priority), None if header.ttl is None else uint(header.ttl),
        bool(header.first_acquirer), uint(header.delivery_count),
    ]  # fmt: skip
    out = bytearray(_HEADER)
    codec.encode_into(fields, out)
    MessageAnnotations(merged).encode_into(out)
    out += payload[sections.bare[0] :]
    return bytes(out)


def with_application_properties(message: StoredMessage, extra: dict[str, Any]) -> StoredMessage:
    """A copy of ``message`` whose application-properties also hold ``extra`` (same arrival time)."""
    payload = message.payload
    start, end = message.sections.bare
    pos = codec.skip_at(payload, start) if payload[start : start + 3] == _PROPERTIES else start
    after = codec.skip_at(payload, pos) if payload[pos : pos + 3] == _APPLICATION_PROPERTIES else pos
    merged = dict(message.application_properties or {})
    merged.update(extra)
    out = bytearray(payload[:pos])
    ApplicationProperties(merged).encode_into(out)
    out += payload[after:]
    return StoredMessage(bytes(out), message.arrived_at)


def with_properties(message: StoredMessage, properties: Properties) -> StoredMessage:
    """A copy of ``message`` with ``properties`` as its properties section (same arrival time)."""
    payload = message.payload
    start, _end = message.sections.bare
    after = codec.skip_at(payload, start) if payload[start : start + 3] == _PROPERTIES else start
    out = bytearray(payload[:start])
    properties.encode_into(out)
    out += payload[after:]
    return StoredMessage(bytes(out), message.arrived_at)


def with_bare(message: StoredMessage, properties: Properties, application: dict[str, Any]) -> StoredMessage:
    """A copy of ``message`` with new properties and application-properties (body and footer kept)."""
    payload = message.payload
    start, _end = message.sections.bare
    pos = codec.skip_at(payload, start) if payload[start : start + 3] == _PROPERTIES else start
    after = codec.skip_at(payload, pos) if payload[pos : pos + 3] == _APPLICATION_PROPERTIES else pos
    out = bytearray(payload[:start])
    properties.encode_into(out)
    if application:
        ApplicationProperties(application).encode_into(out)
    out += payload[after:]
    return StoredMessage(bytes(out), message.arrived_at)
