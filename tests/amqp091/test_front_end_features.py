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


# ------------------------------------------------------------------------ streams


def _stream(client: Client, broker: Broker, count: int) -> None:
    """A stream ``s`` holding ``count`` messages m0, m1, ... one clock second apart."""
    client.method(1, m.QueueDeclare(queue="s", durable=True, arguments={"x-queue-type": "stream"}))
    for i in range(count):
        client.publish(1, "", "s", b"m%d" % i)
        assert isinstance(broker.clock, ManualClock)
        broker.clock.advance(1)
    client.read()


def _offsets(read: list[tuple[object, ...]]) -> list[int]:
    return [item[2].headers["x-stream-offset"] for item in read if isinstance(item[1], m.BasicDeliver)]


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        (None, []),
        ("first", [0, 1, 2, 3, 4]),
        ("last", [4]),
        ("next", []),
        (2, [2, 3, 4]),
        (99, []),
        (-1, [0, 1, 2, 3, 4]),
        ("3s", [2, 3, 4]),  # an interval before now: appended 3 s ago (at t+2) and later
    ],
)
def test_a_stream_is_read_from_its_x_stream_offset(client: Client, broker: Broker, offset: object,
                                                     expected: list[int]) -> None:  # fmt: skip
    _stream(client, broker, 5)
    client.method(1, m.BasicQos(prefetch_count=10))
    arguments = {} if offset is None else {"x-stream-offset": offset}
    client.method(1, m.BasicConsume(queue="s", arguments=arguments))
    read = client.read()
    assert [type(item[1]) for item in read][:2] == [m.BasicQosOk, m.BasicConsumeOk]
    assert _offsets(read) == expected


def test_a_stream_timestamp_offset_and_new_messages_after_next(client: Client, broker: Broker) -> None:
    import datetime

    _stream(client, broker, 3)
    client.method(1, m.BasicQos(prefetch_count=10))
    start = datetime.datetime.fromtimestamp(broker.now() - 2, datetime.UTC)  # when m1 was appended
    client.method(1, m.BasicConsume(queue="s", consumer_tag="t", arguments={"x-stream-offset": start}))
    client.method(1, m.BasicConsume(queue="s", consumer_tag="n", arguments={"x-stream-offset": "next"}))
    read = client.read()
    assert [(item[1].consumer_tag, item[3]) for item in read if isinstance(item[1], m.BasicDeliver)] == [
        ("t", b"m1"), ("t", b"m2"),
    ]  # fmt: skip
    client.publish(1, "", "s", b"m3")
    assert sorted((item[1].consumer_tag, item[3]) for item in client.read()) == [("n", b"m3"), ("t", b"m3")]


def test_a_stream_consumer_is_credited_by_acks_which_remove_nothing(client: Client, broker: Broker) -> None:
    _stream(client, broker, 5)
    client.method(1, m.BasicQos(prefetch_count=2))
    client.method(1, m.BasicConsume(queue="s", arguments={"x-stream-offset": "first"}))
    read = client.read()
    assert _offsets(read) == [0, 1]
    delivers = [item for item in read if isinstance(item[1], m.BasicDeliver)]
    assert delivers[0][2].headers["x-stream-offset"].__class__.__name__ == "long"  # written as 'l', as RabbitMQ does
    assert delivers[0][1].redelivered is False
    client.method(1, m.BasicAck(delivery_tag=2, multiple=True))
    assert _offsets(client.read()) == [2, 3]
    assert broker.router.streams["s"].depth == 5
    client.method(2, m.ChannelOpen())
    client.method(2, m.BasicQos(prefetch_count=5))
    client.method(2, m.BasicConsume(queue="s", arguments={"x-stream-offset": "first"}))
    assert _offsets(client.read()) == [0, 1, 2, 3, 4]  # another reader sees every message still


def test_stream_refusals_are_rabbitmqs(broker: Broker) -> None:
    cases = [
        ([], m.BasicConsume(queue="s"), 406, "PRECONDITION_FAILED - consumer prefetch count is not set for 'queue 's' in vhost '/''"),
        ([m.BasicQos(prefetch_count=1)], m.BasicConsume(queue="s", no_ack=True), 540,
         "NOT_IMPLEMENTED - automatic acknowledgement not supported by stream queues queue 's' in vhost '/'"),
        ([], m.BasicGet(queue="s"), 540, "NOT_IMPLEMENTED - basic.get not supported by stream queues queue 's' in vhost '/'"),
        ([], m.QueuePurge(queue="s"), 540, "NOT_IMPLEMENTED - queue.purge not supported by stream queues queue 's' in vhost '/'"),
        ([m.BasicQos(prefetch_count=1)], m.BasicConsume(queue="s", arguments={"x-stream-offset": "soon"}), 406,
         "PRECONDITION_FAILED - invalid x-stream-offset 'soon' for stream 's': expected first, last, next, an offset, "
         "a timestamp or an interval such as '10m'"),
        ([m.BasicQos(prefetch_count=1), m.BasicConsume(queue="s", arguments={"x-stream-offset": "first"})],
         m.BasicNack(delivery_tag=1), 540,
         "NOT_IMPLEMENTED - basic.nack and basic.reject not supported by stream queues queue 's' in vhost '/'"),
    ]  # fmt: skip
    for before, method, code, text in cases:
        client = Client(broker)
        client.open()
        _stream(client, broker, 1)
        for step in before:
            client.method(1, step)
        client.method(1, method)
        close = client.methods()[-1]
        assert isinstance(close, m.ChannelClose if code == 406 else m.ConnectionClose)
        assert (close.reply_code, close.reply_text) == (code, text)
