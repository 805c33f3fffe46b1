"""RabbitMQ extensions of AMQP 0-9-1 on the front end, in memory: direct reply-to, streams,
queue and consumer arguments, header conversion.  Texts and codes are RabbitMQ 3.10's."""

from __future__ import annotations

import pytest
from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.amqp091 import methods as m
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker


@pytest.fixture
def broker() -> Broker:
    return Broker(BrokerConfig(), clock=ManualClock())


@pytest.fixture
def client(broker: Broker) -> Client:
    opened = Client(broker)
    opened.open()
    return opened


@pytest.fixture
def server(broker: Broker) -> Client:
    opened = Client(broker)
    opened.open()
    return opened


# ------------------------------------------------------------------ direct reply-to


def test_direct_reply_to_routes_a_reply_to_the_requesting_channel(client: Client, server: Client) -> None:
    client.method(1, m.QueueDeclare(queue="rpc"))
    client.method(1, m.BasicConsume(queue="amq.rabbitmq.reply-to", no_ack=True))
    _declared, consumed = client.methods()
    client.publish(1, "", "rpc", b"request", reply_to="amq.rabbitmq.reply-to", correlation_id="c1")
    server.method(1, m.BasicGet(queue="rpc", no_ack=True))
    [(_, _get_ok, request, body)] = server.read()
    assert body == b"request"
    assert request.reply_to.startswith("amq.rabbitmq.reply-to.") and len(request.reply_to) > 30
    server.publish(1, "", request.reply_to, b"response", correlation_id="c1")
    [(channel, deliver, properties, reply)] = client.read()
    assert (channel, deliver.consumer_tag, deliver.delivery_tag, deliver.exchange, deliver.routing_key) == (
        1, consumed.consumer_tag, 1, "", request.reply_to,
    )  # fmt: skip
    assert (reply, properties.correlation_id) == (b"response", "c1")


def test_direct_reply_to_refusals_are_rabbitmqs(client: Client) -> None:
    client.method(1, m.BasicConsume(queue="amq.rabbitmq.reply-to", no_ack=False))
    [close] = client.methods()
    assert (close.reply_code, close.reply_text) == (406, "PRECONDITION_FAILED - reply consumer cannot acknowledge")
    client.method(1, m.ChannelCloseOk())
    client.method(2, m.ChannelOpen())
    client.method(2, m.BasicConsume(queue="amq.rabbitmq.reply-to", no_ack=True))
    client.method(2, m.BasicConsume(queue="amq.rabbitmq.reply-to", no_ack=True))
    _open, _ok, close = client.methods()
    assert (close.reply_code, close.reply_text) == (406, "PRECONDITION_FAILED - reply consumer already set")
    client.method(2, m.ChannelCloseOk())
    client.method(3, m.ChannelOpen())
    client.publish(3, "", "anywhere", b"x", reply_to="amq.rabbitmq.reply-to")
    _open, close = client.methods()
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        406, "PRECONDITION_FAILED - fast reply consumer does not exist", 60, 40,
    )  # fmt: skip


def test_a_reply_after_the_consumer_is_cancelled_is_unroutable(client: Client, server: Client) -> None:
    client.method(1, m.BasicConsume(queue="amq.rabbitmq.reply-to", no_ack=True, consumer_tag="replies"))
    client.method(1, m.QueueDeclare(queue="rpc"))
    client.publish(1, "", "rpc", b"request", reply_to="amq.rabbitmq.reply-to")
    client.method(1, m.BasicCancel(consumer_tag="replies"))
    client.read()
    server.method(1, m.BasicGet(queue="rpc", no_ack=True))
    [(_, _get_ok, request, _body)] = server.read()
    for key in (request.reply_to, "amq.rabbitmq.reply-to.unknown", "amq.rabbitmq.reply-to"):
        server.publish(1, "", key, b"late", mandatory=True)
    returns = server.read()
    assert [(r[1].reply_code, r[1].routing_key) for r in returns] == [
        (312, request.reply_to), (312, "amq.rabbitmq.reply-to.unknown"), (312, "amq.rabbitmq.reply-to"),
    ]  # fmt: skip
    assert client.read() == []
