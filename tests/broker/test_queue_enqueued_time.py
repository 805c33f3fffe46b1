"""A queue's consumer that desires ``x-opt-enqueued-time`` gets each message's arrival time.

The capability is asked for in the consumer's attach (Part 2 §2.7.3 desired-capabilities) and
offered back; the time is the broker clock's when the message arrived, in milliseconds (an AMQP
timestamp, as Service Bus's annotation of that name), merged into the message's own annotations.
A consumer that does not ask gets the bytes that were sent.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from minibroker import ManualClock, ThreadedBroker
from minibroker.amqp import codec
from minibroker.amqp.message import Message, decode_message
from minibroker.amqp.messaging import Header, MessageAnnotations, Modified, Released
from minibroker.amqp.types import symbol, timestamp
from minibroker.broker.enqueued import ENQUEUED_TIME, with_enqueued_time
from minibroker.broker.stored import StoredMessage
from minibroker.client import Client
from minibroker.rabbitmq import RabbitMQOptions
from minibroker.servicebus import ServiceBusOptions

T0 = 1_700_000_000.25
ASK = ["x-opt-enqueued-time"]
PLAIN = Message(body="a").encode()
ANNOTATED = Message(body="b", header=Header(durable=True), message_annotations={symbol("k"): "v"}).encode()


@pytest.fixture
def broker() -> Iterator[ThreadedBroker]:
    """A queue holding a message with no annotations (arrived at T0) and one with some (T0 + 5)."""
    with ThreadedBroker(clock=ManualClock(T0)) as running:
        running.declare_queue("orders")
        running.publish_many("orders", messages=[PLAIN])
        running.clock.advance(5)
        running.publish_many("orders", messages=[ANNOTATED])
        yield running


def test_a_consumer_that_asks_gets_each_arrival_time_beside_the_annotations_sent(broker: ThreadedBroker) -> None:
    with Client(broker.url) as client:
        receiver = client.receiver("orders", desired_capabilities=ASK)
        assert receiver._link.remote_attach is not None
        assert receiver._link.remote_attach.offered_capabilities == [ENQUEUED_TIME]
        got = receiver.fetch(2, timeout=5)
        assert [d.message.body for d in got] == ["a", "b"]
        assert got[0].message.message_annotations == {ENQUEUED_TIME: round(T0 * 1000)}
        assert got[1].message.message_annotations == {symbol("k"): "v", ENQUEUED_TIME: round((T0 + 5) * 1000)}
        assert isinstance(got[0].message.message_annotations[ENQUEUED_TIME], timestamp)
        assert got[1].message.header is not None and got[1].message.header.durable  # the header as sent
        receiver.settle(got)


def test_a_consumer_that_does_not_ask_gets_the_bytes_sent(broker: ThreadedBroker) -> None:
    with Client(broker.url) as client:
        receiver = client.receiver("orders")
        assert receiver._link.remote_attach is not None and not receiver._link.remote_attach.offered_capabilities
        got = receiver.fetch(2, timeout=5)
        assert [d.payload for d in got] == [PLAIN, ANNOTATED]
        receiver.settle(got)


def test_a_browser_that_asks_gets_the_times_and_the_queue_keeps_the_messages(broker: ThreadedBroker) -> None:
    with Client(broker.url) as client:
        browser = client.receiver("orders", browse=True, desired_capabilities=ASK)
        assert browser._link.remote_attach is not None
        assert browser._link.remote_attach.offered_capabilities == [ENQUEUED_TIME]
        times = [d.message.message_annotations[ENQUEUED_TIME] for d in browser.fetch(2, timeout=5)]
        assert times == [round(T0 * 1000), round((T0 + 5) * 1000)]
    assert broker.queue("orders").depth == 2


def test_a_redelivery_keeps_its_first_arrival_and_the_annotations_a_modified_outcome_added(
    broker: ThreadedBroker,
) -> None:
    with Client(broker.url) as client:
        first = client.receiver("orders", credit=2)
        got = first.fetch(2, timeout=5)
        broker.clock.advance(60)  # the message does not arrive again when it comes back
        first.settle([got[0]], Released())
        first.settle([got[1]], Modified(delivery_failed=True, message_annotations={symbol("x-note"): "retried"}))
        again = client.receiver("orders", desired_capabilities=ASK).fetch(2, timeout=5)
        assert [d.message.header.delivery_count if d.message.header else 0 for d in again] == [0, 1]
        assert again[0].message.message_annotations == {ENQUEUED_TIME: round(T0 * 1000)}
        assert again[1].message.message_annotations == {
            symbol("k"): "v", symbol("x-note"): "retried", ENQUEUED_TIME: round((T0 + 5) * 1000),
        }  # fmt: skip


def test_an_expiring_message_gets_its_remaining_ttl_and_the_time() -> None:
    with ThreadedBroker(clock=ManualClock(T0)) as broker:
        broker.declare_queue("orders")
        broker.publish_many("orders", messages=[Message(body="t", header=Header(ttl=10_000)).encode()])
        broker.clock.advance(4)
        with Client(broker.url) as client:
            (delivery,) = client.receiver("orders", desired_capabilities=ASK).fetch(1, timeout=5)
        assert delivery.message.header is not None and delivery.message.header.ttl == 6_000
        assert delivery.message.message_annotations == {ENQUEUED_TIME: round(T0 * 1000)}


def test_the_hand_encoded_annotation_is_what_the_codec_makes() -> None:
    for payload in (PLAIN, Message(body="y" * 300, header=Header(durable=True)).encode()):
        message = StoredMessage(payload, T0)
        header_end = message.sections.header[1]
        expected = (
            payload[:header_end]
            + codec.encode(MessageAnnotations({ENQUEUED_TIME: timestamp(round(T0 * 1000))}))
            + payload[header_end:]
        )
        assert with_enqueued_time(payload, message) == expected
        assert decode_message(expected).message_annotations == {ENQUEUED_TIME: round(T0 * 1000)}


def test_an_enqueued_time_the_message_carries_is_replaced_by_its_arrival_here() -> None:
    sent = Message(body="z", message_annotations={ENQUEUED_TIME: timestamp(5), symbol("k"): 1}).encode()
    got = decode_message(with_enqueued_time(sent, StoredMessage(sent, T0)))
    assert got.message_annotations == {ENQUEUED_TIME: round(T0 * 1000), symbol("k"): 1}


def test_a_service_bus_receiver_gets_the_layers_own_annotation_once() -> None:
    """Service Bus's consumers stamp every delivery themselves (servicebus/sections.py): asking
    changes nothing there, the time is not added a second time."""
    with ThreadedBroker(clock=ManualClock(T0), servicebus=ServiceBusOptions()) as broker:
        broker.declare_queue("orders")
        broker.publish_many("orders", messages=[PLAIN])
        with Client(broker.url) as client:
            client.sender("$cbs")  # an Azure SDK's connection (servicebus/claims.py)
            (delivery,) = client.receiver("orders", desired_capabilities=ASK).fetch(1, timeout=5)
    assert delivery.payload.count(b"x-opt-enqueued-time") == 1
    annotations = delivery.message.message_annotations
    assert annotations[ENQUEUED_TIME] == round(T0 * 1000) and symbol("x-opt-sequence-number") in annotations


def test_a_layers_consumer_that_asks_gets_its_layers_annotations_and_the_time() -> None:
    """The time is added after what the layer's consumer class adds (RabbitMQ's exchange and routing key)."""
    with ThreadedBroker(clock=ManualClock(T0), rabbitmq=RabbitMQOptions()) as broker:
        broker.declare_queue("orders")
        broker.publish_many("orders", messages=[PLAIN])
        with Client(broker.url) as client:
            receiver = client.receiver("/queues/orders", desired_capabilities=ASK)
            assert receiver._link.remote_attach is not None
            assert receiver._link.remote_attach.offered_capabilities == [ENQUEUED_TIME]
            (delivery,) = receiver.fetch(1, timeout=5)
    assert delivery.message.message_annotations == {
        symbol("x-exchange"): "", symbol("x-routing-key"): "orders", ENQUEUED_TIME: round(T0 * 1000),
    }  # fmt: skip
