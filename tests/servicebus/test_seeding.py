"""Seeding a queue from the Python API so that Service Bus SDK consumers see what an SDK sender
would have sent: data sections (Part 3 §3.2.6) with a content type, not amqp-value sections."""

from __future__ import annotations

import json

import pytest
from azure.servicebus import ServiceBusClient
from azure.servicebus.amqp import AmqpMessageBodyType
from servicebus_helpers import CLIENT_OPTIONS

import minibroker
from minibroker.servicebus import connection_string


def test_data_section_bodies_read_as_an_sdk_sender_wrote_them() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.publish("orders", "order 1", body_kind="data")  # a str: its UTF-8 bytes
        broker.publish(
            "orders",
            json.dumps({"id": 2}).encode(),
            body_kind="data",
            content_type="application/json",
            application_properties={"region": "eu"},
        )
        assert broker.publish_many("orders", ["order 3", b"order 4"], body_kind="data") == 2
        with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as client:
            with client.get_queue_receiver("orders") as receiver:
                received = []
                while len(received) < 4:
                    batch = receiver.receive_messages(max_message_count=4, max_wait_time=5)
                    assert batch, "the SDK received nothing"
                    for message in batch:
                        receiver.complete_message(message)
                    received.extend(batch)
        assert [m.body_type for m in received] == [AmqpMessageBodyType.DATA] * 4
        assert [str(m) for m in received] == ["order 1", '{"id": 2}', "order 3", "order 4"]
        assert received[1].content_type == "application/json"
        assert json.loads(str(received[1])) == {"id": 2}
        assert broker.queue("orders").depth == 0


def test_a_body_a_data_section_cannot_hold_says_how_to_encode_it() -> None:
    with minibroker.ThreadedBroker() as broker:
        with pytest.raises(TypeError, match=r"body_kind='data' takes bytes .* json\.dumps\(body\)\.encode\(\)"):
            broker.publish("orders", {"id": 1}, body_kind="data")
        with pytest.raises(TypeError, match=r"body_kind='data' takes bytes"):
            broker.publish_many("orders", [{"id": 1}], body_kind="data")
        assert broker.queues() == []
