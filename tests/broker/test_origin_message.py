"""An OriginMessage builds its AMQP 1.0 form on the first read of any part of it, once, whole.

Whatever a reader touches first (the payload, the sections, the properties, the annotations, the
decoded message, an entry's delivery bytes), it sees what a plain :class:`StoredMessage` of the
same bytes shows, and the origin converts once however many readers follow.  What the queues read
(header, priority, expiry, size) never converts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from minibroker.amqp.message import Message
from minibroker.amqp.messaging import Header, Properties
from minibroker.amqp.types import symbol
from minibroker.broker.stored import Entry, OriginMessage, StoredMessage

HEADER = Header(durable=True, priority=7, ttl=5000)
ENCODED = Message(
    body=b"body", body_kind="data", header=HEADER, properties=Properties(message_id="m", content_type=symbol("t")),
    message_annotations={symbol("x-exchange"): "", symbol("x-routing-key"): "q"}, application_properties={"k": "v"},
).encode()  # fmt: skip


class _Origin:
    """An origin that counts its conversions."""

    size = 42

    def __init__(self) -> None:
        self.conversions = 0

    def amqp10(self) -> bytes:
        self.conversions += 1
        return ENCODED


READERS: dict[str, Callable[[StoredMessage], Any]] = {
    "payload": lambda message: message.payload,
    "sections": lambda message: message.sections,
    "bare": lambda message: message.bare,
    "bare_start": lambda message: message.bare_start,
    "properties": lambda message: message.properties,
    "application_properties": lambda message: message.application_properties,
    "message_annotations": lambda message: message.message_annotations,
    "unannotated_split": lambda message: message.unannotated_split(),
    "has_delivery_annotations": lambda message: message.has_delivery_annotations,
    "decode": lambda message: message.decode(),
    "payload_for_delivery": lambda message: Entry(1, message, 0, None).payload_for_delivery(0.0),
    "merged_annotations": lambda message: Entry(1, message, 0, None).merged_annotations(),
}


@pytest.mark.parametrize("first", READERS)
def test_the_first_read_of_any_part_builds_the_whole_1_0_form_once(first: str) -> None:
    origin = _Origin()
    message = OriginMessage(origin, HEADER, 10.0)
    plain = StoredMessage(ENCODED, 10.0)
    assert READERS[first](message) == READERS[first](plain)
    assert message.converted and origin.conversions == 1
    for read in READERS.values():
        assert read(message) == read(plain)
    assert origin.conversions == 1


def test_what_the_queues_read_needs_no_conversion() -> None:
    origin = _Origin()
    message = OriginMessage(origin, HEADER, 10.0)
    assert (message.priority, message.size, message.expiry(None, None)) == (7, 42, 15.0)
    assert Entry(1, message, 0, message.expiry(None, 60.0)).delivery_count == 0
    assert not message.converted and origin.conversions == 0
    assert message.payload == ENCODED and message.size == 42  # its size stays the one it arrived with
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        message.nothing  # noqa: B018 - any other name is still an error
