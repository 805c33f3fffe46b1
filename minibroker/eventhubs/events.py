"""What an event carries out of a partition: the annotations Event Hubs adds, and position filters.

Every delivery from a partition carries, in its message-annotations
(Azure Event Hubs AMQP documentation, "event properties"):

* ``x-opt-sequence-number`` (long): the event's number in its partition, from 0;
* ``x-opt-offset`` (string): where the event is in the partition's log.  Here
  it is the stream offset, so it equals the sequence number (the service
  uses a byte position; clients treat it as an opaque string);
* ``x-opt-enqueued-time`` (timestamp): when the partition appended it, on the
  broker's clock;
* ``x-opt-partition-key`` (string), when the producer gave one: it stays as sent.

A receiver that asked for ``com.microsoft:enable-receiver-runtime-metric``
(``track_last_enqueued_event_properties``) also gets delivery-annotations
describing the partition's last event: ``last_enqueued_sequence_number``,
``last_enqueued_offset``, ``last_enqueued_time_utc`` and
``runtime_info_retrieval_time_utc``.

A receiver says where to start with an ``apache.org:selector-filter:string``
filter in Azure's position syntax (:func:`parse_position`).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ..amqp.messaging import DeliveryAnnotations, MessageAnnotations
from ..amqp.types import symbol, timestamp
from ..broker.stored import StoredMessage

__all__ = [
    "ENQUEUED_TIME", "OFFSET", "PARTITION_KEY", "SEQUENCE_NUMBER", "Position", "PositionError",
    "event_payload", "millis", "parse_position",
]  # fmt: skip

SEQUENCE_NUMBER = symbol("x-opt-sequence-number")
OFFSET = symbol("x-opt-offset")
ENQUEUED_TIME = symbol("x-opt-enqueued-time")
PARTITION_KEY = symbol("x-opt-partition-key")
LAST_SEQUENCE_NUMBER = symbol("last_enqueued_sequence_number")
LAST_OFFSET = symbol("last_enqueued_offset")
LAST_ENQUEUED_TIME = symbol("last_enqueued_time_utc")
RETRIEVAL_TIME = symbol("runtime_info_retrieval_time_utc")


def millis(seconds: float) -> timestamp:
    """A clock time in seconds as an AMQP timestamp (milliseconds since the Unix epoch)."""
    value: timestamp = timestamp(int(seconds * 1000))
    return value


class LastEnqueued(NamedTuple):
    """The partition's newest event, for receivers that track it (and ``$management``)."""

    sequence_number: int
    enqueued_at: float


def event_payload(message: StoredMessage, offset: int, enqueued_at: float, last: LastEnqueued | None, now: float) -> bytes:
    """The bytes of one delivery: header and bare message as received, Event Hubs' annotations added.

    The message's own delivery-annotations are dropped (they were for the hop
    into the broker, Part 3 §3.2.2); ``last`` adds the runtime-metric ones.
    """
    payload = message.payload
    sections = message.sections
    annotations_start, bare_start = sections.message_annotations
    merged: dict[Any, Any] = dict(message.message_annotations or {}) if annotations_start != bare_start else {}
    merged[SEQUENCE_NUMBER] = offset
    merged[OFFSET] = str(offset)
    merged[ENQUEUED_TIME] = millis(enqueued_at)
    out = bytearray(payload[: sections.header[1]])
    if last is not None:
        DeliveryAnnotations(
            {
                LAST_SEQUENCE_NUMBER: last.sequence_number,
                LAST_OFFSET: str(last.sequence_number),
                LAST_ENQUEUED_TIME: millis(last.enqueued_at),
                RETRIEVAL_TIME: millis(now),
            }
        ).encode_into(out)
    MessageAnnotations(merged).encode_into(out)
    out += payload[bare_start:]
    return bytes(out)


class PositionError(ValueError):
    """A position filter this layer does not understand (the link is refused with its text)."""


class Position(NamedTuple):
    """Where a receiver starts: by ``offset``/``sequence`` number or ``time`` (seconds), inclusive or not.

    ``value`` is None for ``@latest`` (only events enqueued after the attach).
    """

    kind: str  # "offset", "sequence" or "time"
    value: float | None
    inclusive: bool


_POSITION = re.compile(
    r"\s*amqp\.annotation\.x-opt-(offset|sequence-number|enqueued-time)\s*(>=|>)\s*'([^']*)'\s*"
)
_KINDS = {"offset": "offset", "sequence-number": "sequence", "enqueued-time": "time"}


def parse_position(text: str) -> Position:
    """Parse an Event Hubs position filter, e.g. ``amqp.annotation.x-opt-offset > '-1'``.

    Offsets are numbers, ``-1`` (the start of the partition) or ``@latest``;
    sequence numbers are numbers; enqueued times are milliseconds since the
    epoch.  ``>`` starts after the event at the position, ``>=`` at it.
    """
    match = _POSITION.fullmatch(text)
    if match is None:
        raise PositionError(
            f"expected an Event Hubs position such as \"amqp.annotation.x-opt-offset > '-1'\" "
            f"(x-opt-offset, x-opt-sequence-number or x-opt-enqueued-time, > or >=, a quoted value), got {text!r}"
        )
    field, operator, raw = match.groups()
    kind = _KINDS[field]
    inclusive = operator == ">="
    if kind == "offset" and raw == "@latest":
        return Position(kind, None, inclusive)
    try:
        value = int(raw)
    except ValueError:
        raise PositionError(f"the x-opt-{field} in a position filter is a whole number, got {raw!r}") from None
    return Position(kind, value / 1000 if kind == "time" else value, inclusive)
