"""A 0-9-1 publish converted to AMQP 1.0 holds its body once: the ``Arrived`` origin's body
becomes a view of the 1.0 form's bytes (``front091/conversion.py``, ``Arrived.amqp10``), and a
0-9-1 consumer still gets the body it published."""

from __future__ import annotations

import pytest
from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.amqp091 import methods as m
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.broker.stored import OriginMessage
from minibroker.front091.conversion import SHARED_BODY_MIN, Arrived


def _publish_and_convert(client: Client, broker: Broker, body: bytes) -> tuple[OriginMessage, Arrived]:
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", body, content_type="application/octet-stream", headers={"k": "v"})
    client.read()
    stored = next(broker.queues["q"].entries()).message
    assert type(stored) is OriginMessage and isinstance(stored.origin, Arrived)
    assert stored.decode().body == body  # the 1.0 form built, as a 1.0 reader or broker.queue() builds it
    return stored, stored.origin


@pytest.mark.parametrize("size", [SHARED_BODY_MIN, 70_000])
def test_a_converted_publish_holds_its_body_once_and_0_9_1_readers_still_get_it(
    client: Client, broker: Broker, size: int
) -> None:
    body = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    stored, origin = _publish_and_convert(client, broker, body)
    shared = origin.body
    assert isinstance(shared, memoryview) and shared.obj is stored.payload and shared == body
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    ((_, get_ok, properties, got),) = client.read()
    assert isinstance(get_ok, m.BasicGetOk) and got == body
    assert (properties.content_type, properties.headers) == ("application/octet-stream", {"k": "v"})


def test_a_small_body_is_kept_as_bytes_where_a_view_would_cost_more(client: Client, broker: Broker) -> None:
    body = b"s" * (SHARED_BODY_MIN - 1)
    _stored, origin = _publish_and_convert(client, broker, body)
    assert type(origin.body) is bytes and origin.body == body


def test_the_dead_letter_of_a_converted_publish_carries_the_same_body(client: Client, broker: Broker) -> None:
    client.method(1, m.ExchangeDeclare(exchange="dlx", type="fanout"))
    client.method(1, m.QueueDeclare(queue="src", arguments={"x-dead-letter-exchange": "dlx"}))
    client.method(1, m.QueueDeclare(queue="dead"))
    client.method(1, m.QueueBind(queue="dead", exchange="dlx"))
    body = b"d" * (SHARED_BODY_MIN * 2)
    client.publish(1, "", "src", body)
    client.read()
    assert next(broker.queues["src"].entries()).message.decode().body == body
    client.method(1, m.BasicGet(queue="src"))
    ((_, get_ok, _, _),) = client.read()
    client.method(1, m.BasicReject(delivery_tag=get_ok.delivery_tag, requeue=False))
    client.read()
    dead = next(broker.queues["dead"].entries()).message
    assert dead.decode().body == body  # the dead letter's own 1.0 form, from the shared view
    client.method(1, m.BasicGet(queue="dead", no_ack=True))
    ((_, _, properties, got),) = client.read()
    assert got == body and properties.headers["x-death"][0]["queue"] == "src"


def test_the_frame_log_shows_a_converted_body_as_bytes() -> None:
    """The view is the broker's own affair: a frame log records the delivered body as bytes."""
    broker = Broker(BrokerConfig(frame_log=100), clock=ManualClock())
    client = Client(broker)
    client.open()
    body = b"f" * SHARED_BODY_MIN
    _publish_and_convert(client, broker, body)
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    client.read()
    get_ok = next(record for record in broker.frames() if record.name == "basic.get-ok")
    assert get_ok.body is not None and get_ok.body.startswith("b'fff")
