"""A 0-9-1 publish read by a 0-9-1 consumer: its properties and body come back as they arrived.

The broker keeps the publish beside its AMQP 1.0 form (``OriginMessage``, as RabbitMQ 4's message
containers keep a message in its arrival protocol), so the content header a consumer gets is the
one the publisher sent, byte for byte, with only what the broker itself changes: ``redelivered``,
``x-death`` on a dead letter, ``x-delivery-count`` on a quorum queue, ``x-stream-offset`` on a stream.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest
from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.amqp.types import byte, float32, int32, short, ubyte, uint, ushort
from minibroker.amqp091 import methods as m
from minibroker.amqp091.frames import FrameReader
from minibroker.amqp091.properties import BasicProperties, decode_content_header, encode_content_header
from minibroker.amqp091.values import LongStr, long
from minibroker.broker.engine import Broker
from minibroker.broker.stored import OriginMessage, StoredMessage
from minibroker.front091.conversion import Arrived, from_amqp10, to_amqp10

_MOMENT = datetime.datetime(2024, 5, 17, 12, 30, 45, tzinfo=datetime.UTC)

#: Every field-table type (RabbitMQ's set, ``minibroker.amqp091.values``), nested too.
EVERY_FIELD_TYPE: dict[str, Any] = {
    "t": True, "b": byte(-5), "B": ubyte(200), "s": short(-300), "u": ushort(60000), "I": int32(-70000),
    "i": uint(4_000_000_000), "l": long(2**40), "f": float32(1.5), "d": 2.25, "D": decimal.Decimal("3.14"),
    "S": "text é", "S-binary": LongStr(b"\xff\xfe"), "x": b"\x00\x01", "T": _MOMENT, "V": None,
    "A": [1, "two", None, [short(3)], {"k": decimal.Decimal("0.5")}],
    "F": {"nested": {"deeper": [_MOMENT, b"raw"], "x-inner": int32(7)}},
    "x-table": {"a": 1, "x-b": [True, 2.5]}, "x-decimal": decimal.Decimal("-1.01"), "x-plain": "v",
}  # fmt: skip

#: Every basic property set, ``cluster_id`` included (reserved, but a client may send it).
EVERY_PROPERTY = BasicProperties(
    content_type="application/json", content_encoding="gzip", headers=EVERY_FIELD_TYPE, delivery_mode=2,
    priority=9, correlation_id="corr", reply_to="replies", expiration="60000", message_id="id-1",
    timestamp=_MOMENT, type="order.created", user_id="guest", app_id="shop", cluster_id="c1",
)  # fmt: skip

#: What clients send most: aio-pika's defaults, pika's persistent text, kombu's task message.
USUAL = [
    BasicProperties(headers={}, delivery_mode=1, priority=0),
    BasicProperties(content_type="text/plain", delivery_mode=2),
    BasicProperties(
        content_type="application/json", content_encoding="utf-8", delivery_mode=2, priority=0,
        correlation_id="task-1", reply_to="celery-reply", message_id="task-1",
        headers={"lang": "py", "task": "tasks.add", "id": "task-1", "retries": 0, "eta": None, "argsrepr": "(2, 2)"},
    ),
    BasicProperties(headers={"n": long(5), "x-match-me": "yes"}, delivery_mode=2, timestamp=_MOMENT, type="t"),
]  # fmt: skip

#: Where the conversion to 1.0 and back changed what a 0-9-1 consumer got (RabbitMQ gives a 0-9-1
#: message back as it came): an expiration alone came back with delivery-mode 1 and priority 4,
#: delivery-mode 1 alone came back absent, priority 4 came back absent (AMQP 1.0's default), cluster-id was dropped, a long string that is not UTF-8 came back as a byte array, and ``x-``
#: headers moved behind the others.
LOST_BEFORE = [
    BasicProperties(expiration="1000"),
    BasicProperties(delivery_mode=1),
    BasicProperties(priority=4, delivery_mode=2),
    BasicProperties(cluster_id="c1"),
    BasicProperties(headers={"raw": LongStr(b"\xff")}),
    BasicProperties(headers={"x-first": 1, "second": 2}),
]


def _raw(client: Client) -> list[tuple[Any, bytes, bytes]]:
    """(method, content header payload, body) of each content the broker sent, the header as sent."""
    out: list[Any] = []
    for frame in FrameReader(1 << 20).feed(client.server.data_to_send()):
        if frame.type == 1:
            out.append([m.decode_method(frame.payload), b"", b""])
        elif frame.type == 2:
            out[-1][1] = bytes(frame.payload)
        elif frame.type == 3:
            out[-1][2] += bytes(frame.payload)
    return [tuple(item) for item in out if item[1]]


def _before(properties: BasicProperties, body: bytes) -> BasicProperties:
    """What the conversion to AMQP 1.0 and back (every 0-9-1 delivery before) gave a consumer."""
    ttl = int(properties.expiration) if properties.expiration is not None else None
    stored = StoredMessage(to_amqp10("", "q", properties, body, ttl), 0.0)
    return from_amqp10(stored.decode(), stored.message_annotations, "q", stored.payload).properties


def test_every_property_and_field_type_comes_back_byte_for_byte(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"body", **vars_of(EVERY_PROPERTY))
    client.publish(1, "", "q", b"body", **vars_of(EVERY_PROPERTY))
    client.read()
    sent = encode_content_header(4, EVERY_PROPERTY)
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    client.method(1, m.BasicConsume(queue="q", consumer_tag="c", no_ack=True))
    got, delivered = (item for item in _raw(client))
    assert (got[1], got[2]) == (sent, b"body")
    assert isinstance(delivered[0], m.BasicDeliver) and (delivered[1], delivered[2]) == (sent, b"body")
    # The 1.0 form is still what the broker reads (inspection, selectors, 1.0 readers).
    assert decode_content_header(sent).properties == EVERY_PROPERTY


def vars_of(properties: BasicProperties) -> dict[str, Any]:
    return {name: getattr(properties, name) for name in properties.__slots__ if getattr(properties, name) is not None}


@pytest.mark.parametrize("properties", USUAL, ids=["aio-pika", "pika", "kombu", "headers-timestamp-type"])
def test_the_usual_properties_are_what_the_conversion_gave(client: Client, properties: BasicProperties) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"payload", **vars_of(properties))
    client.read()
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    [(_get_ok, header, body)] = _raw(client)
    assert header == encode_content_header(7, properties) and body == b"payload"
    assert decode_content_header(header).properties == _before(properties, b"payload")


@pytest.mark.parametrize("properties", LOST_BEFORE, ids=["expiration", "transient", "priority-4", "cluster-id", "binary-longstr", "order"])
def test_what_the_conversion_changed_now_comes_back_as_sent(client: Client, properties: BasicProperties) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"payload", **vars_of(properties))
    client.read()
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    [(_get_ok, header, _body)] = _raw(client)
    assert header == encode_content_header(7, properties)
    assert encode_content_header(7, _before(properties, b"payload")) != header  # what it was


def test_a_requeued_delivery_is_redelivered_with_the_same_properties(client: Client) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"b", **vars_of(USUAL[2]))
    client.read()
    client.method(1, m.BasicConsume(queue="q", consumer_tag="c"))
    [(first, header, _body)] = _raw(client)
    client.method(1, m.BasicNack(delivery_tag=first.delivery_tag, requeue=True))
    [(again, header_again, _body)] = _raw(client)
    assert (first.redelivered, again.redelivered) == (False, True)
    assert header_again == header == encode_content_header(1, USUAL[2])


def test_a_dead_letter_carries_x_death_beside_the_headers_sent(client: Client) -> None:
    client.method(1, m.ExchangeDeclare(exchange="dlx", type="fanout"))
    client.method(1, m.QueueDeclare(queue="dead"))
    client.method(1, m.QueueBind(queue="dead", exchange="dlx"))
    client.method(1, m.QueueDeclare(queue="q", arguments={"x-dead-letter-exchange": "dlx"}))
    client.publish(1, "", "q", b"b", headers={"n": 1, "s": "v"}, delivery_mode=2)
    client.method(1, m.BasicGet(queue="q"))
    client.read()
    client.method(1, m.BasicReject(delivery_tag=1, requeue=False))
    client.method(1, m.BasicGet(queue="dead", no_ack=True))
    [(get_ok, header, _body)] = _raw(client)
    properties = decode_content_header(header).properties
    assert (get_ok.exchange, get_ok.routing_key) == ("dlx", "q")
    assert properties.headers is not None and (properties.headers["n"], properties.headers["s"]) == (1, "v")
    assert [(d["queue"], d["reason"]) for d in properties.headers["x-death"]] == [("q", "rejected")]
    assert properties.headers["x-first-death-queue"] == "q" and properties.delivery_mode == 2


def test_a_quorum_queue_adds_x_delivery_count_and_a_stream_x_stream_offset(client: Client) -> None:
    sent = {"headers": {"k": "v"}, "priority": 3, "cluster_id": "kept"}
    for name, kind in (("qq", "quorum"), ("s", "stream")):
        client.method(1, m.QueueDeclare(queue=name, durable=True, arguments={"x-queue-type": kind}))
        client.publish(1, "", name, b"b", **sent)
    client.method(1, m.BasicQos(prefetch_count=10))
    client.read()
    client.method(1, m.BasicGet(queue="qq", no_ack=True))
    client.method(1, m.BasicConsume(queue="s", consumer_tag="c", arguments={"x-stream-offset": "first"}))
    quorum, stream = (decode_content_header(header).properties for _method, header, _body in _raw(client))
    assert quorum == BasicProperties(headers={"k": "v", "x-delivery-count": 0}, priority=3, cluster_id="kept")
    assert stream == BasicProperties(headers={"k": "v", "x-stream-offset": 0}, priority=3, cluster_id="kept")


def test_the_broker_keeps_the_publish_as_it_came_and_makes_the_1_0_form_when_read(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"b", **vars_of(USUAL[0]))
    stored = next(broker.queues["q"].entries()).message
    assert isinstance(stored, OriginMessage) and not stored.converted
    origin = stored.origin
    assert isinstance(origin, Arrived) and origin.properties == USUAL[0] and origin.body == b"b"
    assert stored.header is not None and stored.header.priority == 0  # known without the 1.0 form
    assert stored.decode().header == stored.header and stored.converted


@pytest.mark.parametrize("size", [0, 1, 255, 256, 300_000])
def test_the_body_comes_back_whole_at_every_size(client: Client, size: int) -> None:
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", body, **vars_of(USUAL[0]))
    client.read()
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    [(_get_ok, header, got)] = _raw(client)
    assert got == body and decode_content_header(header).body_size == size


def test_large_properties_are_not_kept_but_converted_back(client: Client, broker: Broker) -> None:
    from minibroker.front091.channel import MAX_KEPT_PROPERTIES

    headers = {f"h{i}": "v" * 100 for i in range(MAX_KEPT_PROPERTIES // 100)}
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"b", headers=headers, delivery_mode=2)
    stored = next(broker.queues["q"].entries()).message
    assert type(stored) is StoredMessage  # nothing held beside the 1.0 form the byte limits count
    client.read()
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    [(_get_ok, header, body)] = _raw(client)
    assert decode_content_header(header).properties == BasicProperties(headers=headers, delivery_mode=2)
    assert body == b"b"
