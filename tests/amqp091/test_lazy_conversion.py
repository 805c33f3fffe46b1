"""A 0-9-1 publish is converted to AMQP 1.0 only when something reads that form, and only once.

RabbitMQ 4's message containers keep a message in the protocol it arrived in and convert it at
the crossing (``mc:convert/2``).  Here a 0-9-1 publish is an ``OriginMessage`` whose AMQP 1.0
form is built on first read and kept: a 0-9-1 publisher and 0-9-1 consumers never convert; an
AMQP 1.0 reader, the inspection API or a selector converts it once however many queues share it
and however often it is delivered.  The conversions are counted by wrapping the converter.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.amqp.message import Message, decode_message
from minibroker.amqp.messaging import Released
from minibroker.amqp.performatives import Transfer
from minibroker.amqp.types import Described, symbol
from minibroker.amqp091 import methods as m
from minibroker.amqp091.properties import BasicProperties, encode_content_header
from minibroker.broker.engine import Broker
from minibroker.broker.filters import SELECTOR_CODE
from minibroker.broker.stored import OriginMessage
from minibroker.front091 import conversion
from minibroker.testing import Peer, Pump, connect


def _reader(broker: Broker) -> tuple[Peer, Pump]:
    """An AMQP 1.0 client with its session begun."""
    peer = Peer("reader")
    pump = connect(broker, peer)
    pump.send(peer.start())
    return peer, pump


def _delivered(frames: Any) -> list[tuple[int, Message]]:
    """(delivery-id, message) of each transfer among ``frames``."""
    return [(f.performative.delivery_id, decode_message(f.payload)) for f in frames if isinstance(f.performative, Transfer)]


PROPERTIES = [
    {},
    {"delivery_mode": 1, "priority": 0, "headers": {}},
    {"content_type": "application/json", "delivery_mode": 2, "headers": {"k": "v", "x-n": 1}, "expiration": "60000"},
    {"correlation_id": "c", "reply_to": "r", "message_id": "id", "type": "t", "app_id": "a", "priority": 9,
     "timestamp": datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC)},
]  # fmt: skip


@pytest.mark.parametrize("properties", PROPERTIES, ids=range(len(PROPERTIES)))
def test_a_0_9_1_publish_read_by_0_9_1_consumers_is_never_converted(
    client: Client, broker: Broker, conversions: list[str], properties: dict[str, Any]
) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.method(1, m.QueueDeclare(queue="other"))
    client.method(1, m.QueueBind(queue="q", exchange="amq.fanout"))
    client.method(1, m.QueueBind(queue="other", exchange="amq.fanout"))
    client.publish(1, "amq.fanout", "k", b"body", **properties)
    client.publish(1, "", "q", b"second", **properties)
    client.read()
    stored = next(broker.queues["q"].entries()).message
    assert type(stored) is OriginMessage and not stored.converted
    # A consumer that requeues, then gets it again; a basic.get on the other queue.
    client.method(1, m.BasicConsume(queue="q", consumer_tag="c"))
    first, second = client.read()[1:]
    client.method(1, m.BasicNack(delivery_tag=first[1].delivery_tag, requeue=True))
    client.method(1, m.BasicGet(queue="other", no_ack=True))
    again, got = client.read()
    assert (first[-1], second[-1], again[-1], got[-1]) == (b"body", b"second", b"body", b"body")
    assert again[1].redelivered and again[2] == first[2] == BasicProperties(**properties)
    assert conversions == [] and not stored.converted


def test_a_0_9_1_publish_read_over_amqp_1_0_is_converted_once_whatever_the_deliveries(
    client: Client, broker: Broker, conversions: list[str]
) -> None:
    for name in ("q1", "q2"):
        client.method(1, m.QueueDeclare(queue=name))
        client.method(1, m.QueueBind(queue=name, exchange="amq.fanout"))
    client.publish(1, "amq.fanout", "fanned", b"body", content_type="text/plain", headers={"k": "v"})
    assert conversions == []
    peer, pump = _reader(broker)
    [(first, message)] = _delivered(pump.send(peer.attach_receiver("r1", "q1", 0) + peer.flow(0, credit=10)))
    # Released: the same message delivered again on the link, then read from the other queue.
    [(_again, again)] = _delivered(pump.send(peer.disposition(first, state=Released())))
    [(_other, other)] = _delivered(pump.send(peer.attach_receiver("r2", "q2", 1) + peer.flow(1, credit=10)))
    for each in (message, again, other):
        assert each.body == b"body" and each.application_properties == {"k": "v"}
        assert each.properties is not None and each.properties.content_type == "text/plain"
    assert conversions == ["fanned"]


def test_the_inspection_api_converts_once_and_0_9_1_readers_still_get_the_publish_as_it_came(
    client: Client, broker: Broker, conversions: list[str]
) -> None:
    fields: dict[str, Any] = {"content_type": "text/plain", "headers": {"x-first": 1, "second": 2}, "cluster_id": "c"}
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"body", **fields)
    for _ in range(2):
        (message,) = broker.queue_snapshot("q").messages
        assert message.body == b"body" and message.application_properties == {"second": 2}
    assert conversions == ["q"]
    client.read()
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    [(_channel, _get_ok, properties, body)] = client.read()
    assert (properties, body) == (BasicProperties(**fields), b"body")  # header order and cluster-id kept: the origin, not 1.0
    assert conversions == ["q"]


@pytest.mark.parametrize("properties", PROPERTIES, ids=range(len(PROPERTIES)))
def test_the_header_the_queues_read_is_the_one_the_1_0_form_carries(properties: dict[str, Any]) -> None:
    sent = BasicProperties(**properties)
    ttl = int(sent.expiration) if sent.expiration is not None else None
    assert conversion.header_of(sent, ttl) == decode_message(conversion.to_amqp10("", "q", sent, b"b", ttl)).header


def test_a_0_9_1_publish_counts_its_content_header_and_body_whether_converted_or_not(client: Client, broker: Broker) -> None:
    sent = BasicProperties(content_type="text/plain", headers={"k": "v"})
    client.method(1, m.QueueDeclare(queue="q", arguments={"x-max-length-bytes": 2 * (len(encode_content_header(4, sent)) + 4)}))
    client.method(1, m.ConfirmSelect())
    for body in (b"one!", b"two!", b"3rd!"):
        client.publish(1, "", "q", body, content_type="text/plain", headers={"k": "v"})
    queue = broker.queues["q"]
    assert [entry.message.decode().body for entry in queue.entries()] == [b"two!", b"3rd!"]  # drop-head made room
    held = queue.bytes
    assert held == 2 * (len(encode_content_header(4, sent)) + 4)  # unchanged by the conversions just made
    client.read()
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    assert queue.bytes == 0


def test_a_selector_reads_the_1_0_form_each_0_9_1_publish_converted_once(
    client: Client, broker: Broker, conversions: list[str]
) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    for color in ("blue", "red", "red"):
        client.publish(1, "", "q", color.encode(), headers={"color": color})
    peer, pump = _reader(broker)
    selector = {symbol("red-only"): Described(SELECTOR_CODE, "color = 'red'")}
    delivered = _delivered(pump.send(peer.attach_receiver("r", "q", 0, filter=selector) + peer.flow(0, credit=10)))
    assert [message.body for _id, message in delivered] == [b"red", b"red"]
    assert len(conversions) == 3  # each read once by the selector, the red ones then sent as converted
    client.read()
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    [(_channel, _get_ok, properties, body)] = client.read()
    assert (properties, body, len(conversions)) == (BasicProperties(headers={"color": "blue"}), b"blue", 3)
