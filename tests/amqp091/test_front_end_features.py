"""RabbitMQ extensions of AMQP 0-9-1 on the front end, in memory: direct reply-to, streams,
queue and consumer arguments, header conversion.  Texts and codes are RabbitMQ 3.10's."""

from __future__ import annotations

import decimal

import pytest
from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.amqp.message import Message
from minibroker.amqp.messaging import Header
from minibroker.amqp.types import symbol
from minibroker.amqp091 import methods as m
from minibroker.amqp091.frames import method_frame
from minibroker.broker.clock import ManualClock
from minibroker.broker.engine import Broker


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


# ------------------------------------------------------------------ queue arguments


def test_x_expires_deletes_an_unused_queue_on_the_brokers_clock(client: Client, broker: Broker) -> None:
    assert isinstance(broker.clock, ManualClock)
    client.method(1, m.QueueDeclare(queue="idle", arguments={"x-expires": 1000}))
    client.method(1, m.QueueDeclare(queue="kept"))
    broker.clock.advance(0.6)
    client.method(1, m.QueueDeclare(queue="idle", arguments={"x-expires": 1000}))  # a redeclare renews the lease
    broker.clock.advance(0.6)
    broker.run_timers()
    assert "idle" in broker.queues
    client.method(1, m.BasicConsume(queue="idle", consumer_tag="c"))
    assert broker.next_deadline() is None  # in use: no deadline while it has a consumer
    broker.clock.advance(5)
    broker.run_timers()
    assert "idle" in broker.queues
    client.method(1, m.BasicCancel(consumer_tag="c"))
    broker.clock.advance(0.9)
    broker.run_timers()
    assert "idle" in broker.queues
    broker.clock.advance(0.2)
    broker.run_timers()
    assert "idle" not in broker.queues and "kept" in broker.queues


def test_single_active_consumer_gets_everything_until_it_goes(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="sac", arguments={"x-single-active-consumer": True}))
    client.method(1, m.BasicConsume(queue="sac", consumer_tag="first", no_ack=True))
    client.method(1, m.BasicConsume(queue="sac", consumer_tag="second", no_ack=True))
    for i in range(3):
        client.publish(1, "", "sac", b"%d" % i)
    tags = [item[1].consumer_tag for item in client.read() if isinstance(item[1], m.BasicDeliver)]
    assert tags == ["first", "first", "first"]
    client.method(1, m.BasicCancel(consumer_tag="first"))
    client.publish(1, "", "sac", b"3")
    tags = [item[1].consumer_tag for item in client.read() if isinstance(item[1], m.BasicDeliver)]
    assert tags == ["second"]


def test_quorum_delivery_limit_counts_requeues_then_dead_letters(client: Client, broker: Broker) -> None:
    client.method(1, m.ExchangeDeclare(exchange="dlx", type="fanout"))
    client.method(1, m.QueueDeclare(queue="dead"))
    client.method(1, m.QueueBind(queue="dead", exchange="dlx"))
    arguments = {"x-queue-type": "quorum", "x-delivery-limit": 2, "x-dead-letter-exchange": "dlx"}
    client.method(1, m.QueueDeclare(queue="work", durable=True, arguments=arguments))
    client.publish(1, "", "work", b"poison")
    client.read()
    counts = []
    for _ in range(4):
        client.method(1, m.BasicGet(queue="work"))
        read = client.read()
        if isinstance(read[0][1], m.BasicGetEmpty):
            break
        counts.append((read[0][1].redelivered, read[0][2].headers["x-delivery-count"]))
        client.method(1, m.BasicNack(delivery_tag=read[0][1].delivery_tag, requeue=True))
    assert counts == [(False, 0), (True, 1), (True, 2)]  # RabbitMQ 3.10's, checked against it
    assert broker.queues["dead"].available_count == 1 and broker.queues["work"].depth == 0


def test_a_classic_queue_does_not_count_requeues(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="classic", arguments={"x-delivery-limit": 1}))
    client.publish(1, "", "classic", b"again")
    client.read()
    for _ in range(3):
        client.method(1, m.BasicGet(queue="classic"))
        [(_, get_ok, properties, _body)] = client.read()
        assert properties.headers is None
        client.method(1, m.BasicNack(delivery_tag=get_ok.delivery_tag, requeue=True))
    assert broker.queues["classic"].available_count == 1


def test_alternate_exchange_takes_what_routes_nowhere(client: Client, broker: Broker) -> None:
    client.method(1, m.ExchangeDeclare(exchange="ae", type="fanout"))
    client.method(1, m.QueueDeclare(queue="unrouted"))
    client.method(1, m.QueueBind(queue="unrouted", exchange="ae"))
    client.method(1, m.ExchangeDeclare(exchange="main", type="direct", arguments={"alternate-exchange": "ae"}))
    client.method(1, m.ExchangeDeclare(exchange="loose", type="direct", arguments={"alternate-exchange": "missing"}))
    client.read()
    client.publish(1, "main", "nokey", b"caught", mandatory=True)
    client.publish(1, "loose", "nokey", b"lost", mandatory=True)
    [(_, returned, _properties, body)] = client.read()
    assert (returned.reply_code, returned.exchange, body) == (312, "loose", b"lost")
    client.method(1, m.BasicGet(queue="unrouted", no_ack=True))
    [(_, get_ok, _properties, body)] = client.read()
    assert (get_ok.exchange, get_ok.routing_key, body) == ("main", "nokey", b"caught")  # as RabbitMQ: the original


def test_consumer_priority_serves_the_higher_while_it_has_room(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="p"))
    client.method(1, m.BasicQos(prefetch_count=2))
    client.method(1, m.BasicConsume(queue="p", consumer_tag="low"))
    client.method(1, m.BasicConsume(queue="p", consumer_tag="high", arguments={"x-priority": 10}))
    client.read()
    for i in range(3):
        client.publish(1, "", "p", b"%d" % i)
    tags = [item[1].consumer_tag for item in client.read() if isinstance(item[1], m.BasicDeliver)]
    assert tags == ["high", "high", "low"]  # the third only when "high" has no room
    client.method(1, m.BasicAck(delivery_tag=0, multiple=True))
    client.read()
    for i in range(2):
        client.publish(1, "", "p", b"%d" % i)
    tags = [item[1].consumer_tag for item in client.read() if isinstance(item[1], m.BasicDeliver)]
    assert tags == ["high", "high"]


def test_a_closed_channel_returns_quorum_messages_without_counting(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q", durable=True, arguments={"x-queue-type": "quorum", "x-delivery-limit": 1}))
    client.publish(1, "", "q", b"kept")
    for channel in (2, 3, 4):
        client.method(channel, m.ChannelOpen())
        client.method(channel, m.BasicGet(queue="q"))
        client.method(channel, m.ChannelClose(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    gets = [item for item in client.read() if isinstance(item[1], m.BasicGetOk)]
    assert [get[2].headers["x-delivery-count"] for get in gets] == [0, 0, 0]
    assert broker.queues["q"].available_count == 1


# ------------------------------------------------------------------ header conversion

_NESTED = {
    "plain": "text",
    "table": {"a": 1, "b": {"c": [1, "two"]}},
    "array": [1, "x", {"k": True}],
    "price": decimal.Decimal("1.50"),
    "x-tags": ["a", "b"],
    "x-meta": {"n": 3},
    "x-cost": decimal.Decimal("2.5"),
}


def test_nested_tables_arrays_and_decimals_survive_a_0_9_1_round_trip(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"body", headers=_NESTED)
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    [(_, get_ok, properties, body)] = [item for item in client.read() if isinstance(item[1], m.BasicGetOk)]
    assert properties.headers == _NESTED


def test_headers_cross_to_amqp_1_0_as_rabbitmq_4_converts_them(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"body", headers=_NESTED)
    [entry] = broker.queues["q"].entries()
    message = entry.message.decode()
    # Simple values under plain keys: application-properties; x- keys: message-annotations with
    # tables as maps and arrays as lists; tables and arrays under plain keys and decimals: not
    # converted for AMQP 1.0 (RabbitMQ 4's "Inter-Protocol Property Conversions").
    assert message.application_properties == {"plain": "text"}
    annotations = message.message_annotations
    assert annotations[symbol("x-tags")] == ["a", "b"]
    assert annotations[symbol("x-meta")] == {"n": 3}
    assert symbol("x-cost") not in annotations and "table" not in str(message.application_properties)


def test_amqp_1_0_annotations_and_an_explicit_priority_reach_a_0_9_1_consumer(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.read()
    # A header with priority 4 written out (as a client that sends every field does), and one without.
    explicit = Message(body=b"one", body_kind="data", header=Header(durable=True, priority=5),
                       message_annotations={symbol("x-trace"): {symbol("hop"): 1}, symbol("other"): 1},
                       application_properties={"n": 7}).encode()  # fmt: skip
    explicit = explicit.replace(b"\x00\x53\x70\xc0\x04\x02\x41\x50\x05", b"\x00\x53\x70\xc0\x04\x02\x41\x50\x04")
    implicit = Message(body=b"two", body_kind="data", header=Header(durable=True)).encode()
    broker.publish("q", explicit)
    broker.publish("q", implicit)
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    (_, _ok, first, _body), (_, _ok2, second, _body2) = client.read()
    assert first.priority == 4 and second.priority is None
    assert first.headers == {"n": 7, "x-trace": {"hop": 1}}
    assert type(first.headers["n"]).__name__ == "long"  # an AMQP 1.0 long is a 0-9-1 long (RabbitMQ 4)


def test_a_forged_0_9_1_headers_annotation_is_left_out(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.read()
    forged = Message(body=b"x", body_kind="data",
                     message_annotations={symbol("x-amqp-0-9-1-headers"): b"\xff\xff\xff\xff"}).encode()  # fmt: skip
    broker.publish("q", forged)
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    [(_, get_ok, properties, body)] = client.read()
    assert body == b"x" and properties.headers is None


@pytest.mark.parametrize(
    ("first", "again", "text"),
    [
        (None, "ae", "received the value 'ae' of type 'longstr' but current is none"),
        ("ae", None, "received none but current is the value 'ae' of type 'longstr'"),
        ("ae", "other", "received 'other' but current is 'ae'"),
    ],
)
def test_a_redeclare_with_another_alternate_exchange_is_406(client: Client, first: str | None, again: str | None,
                                                             text: str) -> None:  # fmt: skip
    def arguments(ae: str | None) -> dict[str, str]:
        return {} if ae is None else {"alternate-exchange": ae}

    client.method(1, m.ExchangeDeclare(exchange="main", type="direct", arguments=arguments(first)))
    client.method(1, m.ExchangeDeclare(exchange="main", type="direct", arguments=arguments(first)))
    client.method(1, m.ExchangeDeclare(exchange="main", type="direct", arguments=arguments(again)))
    _ok, _same, close = client.methods()
    assert (close.reply_code, close.reply_text) == (
        406, f"PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange 'main' in vhost '/': {text}",
    )  # fmt: skip


def test_deleting_a_stream_cancels_its_readers_and_closing_frees_them(client: Client, broker: Broker) -> None:
    _stream(client, broker, 2)
    client.method(1, m.BasicQos(prefetch_count=1))
    client.method(1, m.BasicConsume(queue="s", consumer_tag="r", arguments={"x-stream-offset": "first"}))
    client.method(2, m.ChannelOpen())
    client.method(2, m.BasicQos(prefetch_count=1))
    client.method(2, m.BasicConsume(queue="s", consumer_tag="gone", arguments={"x-stream-offset": "first"}))
    client.method(2, m.ChannelClose(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    client.read()
    assert len(broker.router.streams["s"].readers) == 1
    client.method(1, m.QueueDelete(queue="s"))
    methods = client.methods()
    assert any(isinstance(method, m.BasicCancel) and method.consumer_tag == "r" for method in methods)
    assert "s" not in broker.router.streams


def test_delete_ok_comes_before_the_cancels_of_the_queues_consumers(client: Client) -> None:
    # RabbitMQ 3.10 answers queue.delete, then tells the consumers (on the deleting channel and
    # the connection's others) with basic.cancel; py-amqp raises ConsumerCancelled for a cancel
    # that arrives while it waits for delete-ok (kombu's test_ack_from_another_thread).
    client.method(1, m.QueueDeclare(queue="doomed"))
    client.method(1, m.BasicConsume(queue="doomed", consumer_tag="own"))
    client.method(2, m.ChannelOpen())
    client.method(2, m.BasicConsume(queue="doomed", consumer_tag="other"))
    client.read()
    client.method(1, m.QueueDelete(queue="doomed"))
    assert [(channel, type(method).__name__) for channel, method in client.read()] == [
        (1, "QueueDeleteOk"), (1, "BasicCancel"), (2, "BasicCancel"),
    ]  # fmt: skip


def test_replies_to_methods_read_together_keep_their_order(client: Client) -> None:
    # py-amqp sends channel.close right after a basic.cancel it stopped waiting for (the broker's
    # own basic.cancel came first); RabbitMQ answers cancel-ok then close-ok, and py-amqp fails
    # (KeyError) on a cancel-ok for a channel it already dropped. Likewise connection.close-ok
    # comes after the replies to every method before it.
    client.method(1, m.QueueDeclare(queue="q"))
    client.method(1, m.BasicConsume(queue="q", consumer_tag="c"))
    client.method(2, m.ChannelOpen())
    client.read()
    client.send(
        method_frame(1, m.BasicCancel(consumer_tag="c"))
        + method_frame(1, m.ChannelClose(reply_code=200, reply_text="bye", class_id=0, method_id=0))
        + method_frame(2, m.QueueDeclare(queue="q", passive=True))
        + method_frame(0, m.ConnectionClose(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    )
    assert [(channel, type(method).__name__) for channel, method in client.read()] == [
        (1, "BasicCancelOk"), (1, "ChannelCloseOk"), (2, "QueueDeclareOk"), (0, "ConnectionCloseOk"),
    ]  # fmt: skip
