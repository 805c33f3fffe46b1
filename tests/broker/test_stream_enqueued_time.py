"""A stream reader that desires ``x-opt-enqueued-time`` gets each message's append time beside its offset.

The capability is asked for in the reader's attach (Part 2 §2.7.3 desired-capabilities) and offered
back; a reader that does not ask gets the deliveries it always got.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from minibroker import ManualClock, ThreadedBroker
from minibroker.amqp import codec
from minibroker.amqp.message import Message, decode_message
from minibroker.amqp.messaging import Header, MessageAnnotations
from minibroker.amqp.types import symbol, timestamp
from minibroker.broker.stored import StoredMessage
from minibroker.broker.streamlog import ENQUEUED_TIME, OFFSET_ANNOTATION, delivery_payload, timed_payload
from minibroker.client import Client

T0 = 1_700_000_000.25


@pytest.fixture
def broker() -> Iterator[ThreadedBroker]:
    with ThreadedBroker(clock=ManualClock(T0)) as running:
        running.declare_stream("events")
        running.publish("events", "a")
        running.clock.advance(5)
        running.publish("events", message=Message(body="b", message_annotations={symbol("k"): "v"}))
        yield running


def test_a_reader_that_asks_gets_each_append_time_and_others_do_not(broker: ThreadedBroker) -> None:
    with Client(broker.url) as client:
        timed = client.receiver("events", offset="first", desired_capabilities=["x-opt-enqueued-time"])
        assert timed._link.remote_attach is not None
        assert timed._link.remote_attach.offered_capabilities == [ENQUEUED_TIME]
        got = [d.message for d in timed.fetch(2, timeout=5)]
        assert [m.body for m in got] == ["a", "b"]
        assert got[0].message_annotations == {OFFSET_ANNOTATION: 0, ENQUEUED_TIME: round(T0 * 1000)}
        assert got[1].message_annotations == {
            symbol("k"): "v", OFFSET_ANNOTATION: 1, ENQUEUED_TIME: round((T0 + 5) * 1000),
        }  # fmt: skip
        plain = client.receiver("events", offset="first")
        assert plain._link.remote_attach is not None and not plain._link.remote_attach.offered_capabilities
        assert [d.message.message_annotations for d in plain.fetch(2, timeout=5)] == [
            {OFFSET_ANNOTATION: 0}, {symbol("k"): "v", OFFSET_ANNOTATION: 1},
        ]  # fmt: skip


def test_the_hand_encoded_annotations_are_what_the_codec_makes() -> None:
    bare = Message(body="x" * 300).encode()
    headed = Message(body="y", header=Header(durable=True)).encode()
    for payload in (bare, headed):
        message = StoredMessage(payload, T0)
        got = timed_payload(message, 2**40 + 3, T0)
        header_end = message.unannotated_split()[0]  # type: ignore[index]
        expected = (
            payload[:header_end]
            + codec.encode(MessageAnnotations({OFFSET_ANNOTATION: 2**40 + 3, ENQUEUED_TIME: timestamp(round(T0 * 1000))}))
            + payload[header_end:]
        )
        assert got == expected
        assert decode_message(got).message_annotations == {OFFSET_ANNOTATION: 2**40 + 3, ENQUEUED_TIME: round(T0 * 1000)}
        assert len(delivery_payload(message, 7)) < len(got)  # the untimed delivery is unchanged: the offset alone
