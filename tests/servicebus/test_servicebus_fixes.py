"""What the official ``azure-servicebus`` samples tripped on (sync SDK), each as the service behaves."""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage

import minibroker

pytestmark = pytest.mark.interop


def test_an_annotated_message_with_delivery_annotations_is_sent_and_received(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient
) -> None:
    # The SDK encodes delivery-annotations after the body (the real service takes that).
    message = AmqpAnnotatedMessage(
        value_body={"order": 7},
        header={"priority": 5},
        annotations={"x-custom": "ma"},
        delivery_annotations={"x-da": "hop"},
        properties={"subject": "s", "message_id": "m-7"},
        application_properties={"kind": "value"},
    )
    with client.get_queue_sender("orders") as sender:
        sender.send_messages(message)
        sender.send_messages(AmqpAnnotatedMessage(data_body=[b"one", b"two"], delivery_annotations={"x-da": 1}))
    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        first, second = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        raw = first.raw_amqp_message
        assert raw.body == {b"order": 7}
        assert raw.header is not None and raw.header.priority == 5
        assert raw.annotations is not None and raw.annotations[b"x-custom"] == b"ma"
        assert first.message_id == "m-7" and first.subject == "s"
        assert first.application_properties == {b"kind": b"value"}
        assert list(second.raw_amqp_message.body) == [b"one", b"two"]
        receiver.complete_message(first)
        receiver.complete_message(second)
    assert broker.queue("orders").depth == 0
