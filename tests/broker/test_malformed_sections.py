"""A message whose properties, application-properties or message-annotations do not decode.

The broker takes a message after finding where its sections begin and end (``split_sections``,
``StoredMessage``'s usual layout: each section's value is skipped by its size, not decoded), and
decodes properties, application-properties and message-annotations only when something reads
them: a selector (Part 3 §3.5.8 filters), the expiry (§3.2.4 absolute-expiry-time), dead-lettering
and ``modified`` annotations (§3.4.5).  A section whose size is right but whose values are not
AMQP then fails to decode there, in whatever connection or timer happened to read it, long after
its producer was told ``accepted``.  The project's rule is that a bad message rejects that
message, never another client's connection or the broker; these tests hold the broker to it
whatever the fix (refusing such a message at publish, or reading it defensively).
"""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.amqp.messaging import Accepted, Rejected
from minibroker.amqp.performatives import Close, Disposition, Transfer
from minibroker.amqp.types import Described, symbol
from minibroker.api import build_message
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.broker.queue import Queue
from minibroker.testing import Frames, Peer, Pump, connect

T0 = 1_700_000_000.0
SELECTOR = symbol("apache.org:selector-filter:string")
BODY = b"\x00\x53\x77\xa1\x02hi"  # amqp-value "hi"
#: application-properties (00 53 74) as a map8 whose size and count are right and whose four
#: bytes of keys and values are no AMQP constructor at all.
BAD_APPLICATION_PROPERTIES = b"\x00\x53\x74\xc1\x05\x02" + b"\xff" * 4
#: message-annotations (00 53 72), the same way.
BAD_MESSAGE_ANNOTATIONS = b"\x00\x53\x72\xc1\x05\x02" + b"\xff" * 4
#: properties (00 53 73) as a list8 of nine fields (absolute-expiry-time is the ninth) that are not AMQP.
BAD_PROPERTIES = b"\x00\x53\x73\xc0\x0b\x09" + b"\xff" * 10


def make_broker() -> tuple[Broker, ManualClock]:
    clock = ManualClock(T0)
    return Broker(BrokerConfig(), clock=clock), clock


def open_client(broker: Broker, container_id: str) -> tuple[Peer, Pump]:
    peer = Peer(container_id)
    pump = connect(broker, peer)
    assert pump.send(peer.start()).names() == ["ProtocolHeader", "Open", "Begin"]
    return peer, pump


def producer(broker: Broker, address: str, container_id: str) -> tuple[Peer, Pump]:
    peer, pump = open_client(broker, container_id)
    pump.send(peer.attach_sender("s", address, 0))
    return peer, pump


def selective_consumer(broker: Broker, address: str) -> tuple[Peer, Pump]:
    """A receiver with credit whose selector reads application-properties."""
    peer, pump = open_client(broker, "selective")
    selector = {symbol("red-only"): Described(SELECTOR, "color = 'red'")}
    pump.send(peer.attach_receiver("r", address, 0, filter=selector) + peer.flow(0, credit=10))
    return peer, pump


def outcome(frames: Frames) -> Any:
    """The state of the one disposition answering a transfer; fails on a close instead."""
    closes = frames.of(Close)
    assert not closes, f"the connection was closed: {closes[0].error}"
    return frames.one(Disposition).state


def assert_not_closed(frames: Frames) -> None:
    closes = frames.of(Close)
    assert not closes, f"the connection was closed: {closes[0].error}"


def held_bytes(queue: Queue) -> int:
    return sum(len(entry.message.payload) for entry in queue.entries())


def test_such_a_message_waiting_in_a_queue_does_not_close_the_connections_of_other_publishers() -> None:
    """Part 3 §3.5.8: a selective consumer reads application-properties; one bad message must
    not make every later publish to its queue (or any flow on it) end in amqp:internal-error."""
    broker, _clock = make_broker()
    broker.declare_queue("q")
    selective_consumer(broker, "q")
    broker.publish("q", build_message("blue", application_properties={"color": "blue"}).encode())  # waits
    peer, pump = producer(broker, "q", "attacker")
    pump.send(peer.transfer(0, None, None, BAD_APPLICATION_PROPERTIES + BODY))
    innocent, innocent_pump = producer(broker, "q", "innocent")
    payload = build_message("red", application_properties={"color": "red"}).encode()
    assert isinstance(outcome(innocent_pump.send(innocent.transfer(0, None, None, payload))), Accepted)
    assert not innocent_pump.finished
    assert broker.errors == []


def test_an_expiry_anywhere_does_not_raise_through_the_timers_while_a_queue_holds_such_a_message() -> None:
    """A timer dispatches every node after an expiry (broker paper 2.2.5).  In the server an
    exception there ends the timer task and with it the whole broker (trio's nursery), so a
    bad message one client left in a queue must not reach it."""
    broker, clock = make_broker()
    broker.declare_queue("q")
    broker.declare_queue("other")
    selective_consumer(broker, "q")
    broker.publish("q", build_message("blue", application_properties={"color": "blue"}).encode())
    peer, pump = producer(broker, "q", "attacker")
    pump.send(peer.transfer(0, None, None, BAD_APPLICATION_PROPERTIES + BODY))
    broker.publish("other", build_message("short-lived", ttl=1).encode())
    clock.advance(5)  # "other"'s message expires: the timers run and dispatch every node
    assert broker.queues["other"].depth == 0
    assert broker.errors == []


def test_handing_such_a_message_to_a_selective_consumer_keeps_the_queue_accounts() -> None:
    """Queue.put's direct hand-off asks the consumer's selector before the message is placed:
    the message is counted and its bytes held, so if that question fails it must not vanish
    with its bytes still counted against ``max_bytes``."""
    broker, _clock = make_broker()
    queue = broker.declare_queue("q")
    selective_consumer(broker, "q")
    peer, pump = producer(broker, "q", "attacker")
    frames = pump.send(peer.transfer(0, None, None, BAD_APPLICATION_PROPERTIES + BODY))
    assert queue.bytes == held_bytes(queue)
    assert_not_closed(frames)
    assert broker.errors == []


def test_properties_that_do_not_decode_reject_that_message_and_keep_the_connection() -> None:
    """§3.2.4: the expiry reads absolute-expiry-time, the ninth properties field, when the message
    is enqueued; fields that are not AMQP make a bad message (amqp:decode-error), not a broker error."""
    broker, _clock = make_broker()
    broker.declare_queue("q")
    peer, pump = producer(broker, "q", "attacker")
    state = outcome(pump.send(peer.transfer(0, None, None, BAD_PROPERTIES + BODY)))
    assert isinstance(state, Rejected) and state.error is not None
    assert state.error.condition == "amqp:decode-error"
    assert not pump.finished
    assert broker.errors == []


def test_rejecting_a_message_whose_message_annotations_do_not_decode_loses_nothing() -> None:
    """§3.4.3 rejected: the message goes to the dead-letter queue with the reason merged into its
    message-annotations.  Either the broker refused the message when it came, or the consumer's
    rejection dead-letters it; the consumer's connection stays open either way."""
    broker, _clock = make_broker()
    broker.declare_queue("q")
    peer, pump = producer(broker, "q", "producer")
    published = outcome(pump.send(peer.transfer(0, None, None, BAD_MESSAGE_ANNOTATIONS + BODY)))
    if isinstance(published, Rejected):  # refused as it came: nothing stored
        assert published.error is not None and published.error.condition == "amqp:decode-error"
        assert broker.queues["q"].depth == 0
        return
    assert isinstance(published, Accepted)
    consumer, consumer_pump = open_client(broker, "consumer")
    frames = consumer_pump.send(consumer.attach_receiver("r", "q", 0) + consumer.flow(0, credit=1))
    (transfer,) = frames.of(Transfer)
    frames = consumer_pump.send(consumer.disposition(transfer.delivery_id, state=Rejected()))
    assert_not_closed(frames)
    assert broker.queues["q/$DeadLetterQueue"].depth == 1  # dead-lettered, not lost
    assert broker.errors == []


@pytest.mark.parametrize(
    "properties",
    [
        b"\x00\x53\x73\xc0\x04\x01\xa1\x02\xc3\x28",  # a message-id string that is not UTF-8
        b"\x00\x53\x73\xc0\x06\x04\x40\x40\x40\xa0\x01s",  # a subject of binary, not a string
        b"\x00\x53\x73\xc0\x05\x02\xa1\x02id",  # a count of two, one field
    ],
)
def test_properties_of_the_usual_shape_that_do_not_decode_are_rejected_too(properties: bytes) -> None:
    """The arrival check takes the usual properties (short strings in the fields that take them)
    without decoding them: one that only looks usual is still that message's amqp:decode-error."""
    broker, _clock = make_broker()
    broker.declare_queue("q")
    peer, pump = producer(broker, "q", "sender")
    state = outcome(pump.send(peer.transfer(0, None, None, properties + BODY)))
    assert isinstance(state, Rejected) and state.error is not None
    assert state.error.condition == "amqp:decode-error"
    assert broker.queues["q"].depth == 0 and broker.errors == []


def test_usual_properties_taken_without_decoding_read_as_sent() -> None:
    broker, _clock = make_broker()
    broker.declare_queue("q")
    peer, pump = producer(broker, "q", "sender")
    payload = build_message("hi", message_id="m-1", subject="s", content_type="text/plain").encode()
    assert isinstance(outcome(pump.send(peer.transfer(0, None, None, payload))), Accepted)
    (entry,) = broker.queues["q"].entries()
    properties = entry.message.properties
    assert properties is not None
    assert (properties.message_id, properties.subject, properties.content_type) == ("m-1", "s", "text/plain")
