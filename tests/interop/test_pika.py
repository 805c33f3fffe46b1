"""pika (AMQP 0-9-1) against minibroker over real sockets, on the same port as AMQP 1.0.

Each test runs pika's BlockingConnection against a ``ThreadedBroker``; the replies, codes and
texts asserted are RabbitMQ 3.10's (checked against it when written).  The cross-protocol tests
publish with one protocol and consume with the other: one queue, one message, the same properties.
"""

from __future__ import annotations

import datetime
from typing import Any

import pika
import pika_helpers
import pytest
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker, ProbableAccessDeniedError
from pika_helpers import TIMEOUT, pika_url
from proton import Message
from proton.utils import BlockingConnection as ProtonConnection

import minibroker

pytestmark = pytest.mark.interop

# The shared fixtures (pika_helpers.py), under the names the tests ask for.
broker = pika_helpers.broker
connection = pika_helpers.connection


@pytest.fixture
def channel(connection: pika.BlockingConnection) -> BlockingChannel:
    return connection.channel()


def _consume(connection: pika.BlockingConnection, channel: BlockingChannel, queue: str, count: int,
             auto_ack: bool = False) -> list[tuple[Any, Any, bytes]]:  # fmt: skip
    """Start a consumer and wait for ``count`` deliveries: (method, properties, body) each."""
    got: list[tuple[Any, Any, bytes]] = []
    channel.basic_consume(queue, lambda _ch, method, props, body: got.append((method, props, body)), auto_ack=auto_ack)
    deadline = 0.0
    while len(got) < count and deadline < TIMEOUT:
        connection.process_data_events(time_limit=0.1)
        deadline += 0.1
    return got


def test_declare_publish_get_and_ack(broker: minibroker.ThreadedBroker, channel: BlockingChannel) -> None:
    declared = channel.queue_declare("orders")
    assert (declared.method.queue, declared.method.message_count) == ("orders", 0)
    channel.basic_publish("", "orders", b"one")
    method, _props, body = channel.basic_get("orders")
    assert (body, method.delivery_tag, method.redelivered, method.routing_key) == (b"one", 1, False, "orders")
    assert channel.basic_get("orders") == (None, None, None)  # get-empty
    channel.basic_ack(method.delivery_tag)
    broker.wait_for(lambda b: b.queue("orders").depth == 0, timeout=TIMEOUT)


def test_server_named_and_passive_declare(channel: BlockingChannel, connection: pika.BlockingConnection) -> None:
    name = channel.queue_declare("", exclusive=True).method.queue
    assert name.startswith("amq.gen-")
    assert channel.queue_declare(name, passive=True).method.queue == name
    with pytest.raises(ChannelClosedByBroker) as refused:
        channel.queue_declare("missing", passive=True)
    assert (refused.value.reply_code, refused.value.reply_text) == (404, "NOT_FOUND - no queue 'missing' in vhost '/'")
    again = connection.channel()  # the connection outlives the channel error
    assert again.queue_declare(name, passive=True).method.queue == name


def test_inequivalent_redeclare_is_406(channel: BlockingChannel) -> None:
    channel.queue_declare("q", durable=False)
    with pytest.raises(ChannelClosedByBroker) as refused:
        channel.queue_declare("q", durable=True)
    assert refused.value.reply_code == 406
    assert refused.value.reply_text == (
        "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q' in vhost '/': received 'true' but current is 'false'"
    )


def test_exchanges_route_to_bound_queues(channel: BlockingChannel) -> None:
    channel.exchange_declare("events", "topic")
    channel.queue_declare("eu")
    channel.queue_declare("all")
    channel.queue_bind("eu", "events", "order.eu.*")
    channel.queue_bind("all", "events", "order.#")
    channel.queue_declare("fan")
    channel.queue_bind("fan", "amq.fanout")
    channel.basic_publish("events", "order.eu.created", b"a")
    channel.basic_publish("events", "order.us.created", b"b")
    channel.basic_publish("amq.fanout", "ignored", b"c")
    assert channel.queue_declare("eu", passive=True).method.message_count == 1
    assert channel.queue_declare("all", passive=True).method.message_count == 2
    method, _props, body = channel.basic_get("fan", auto_ack=True)
    assert (body, method.exchange, method.routing_key) == (b"c", "amq.fanout", "ignored")
    channel.queue_unbind("all", "events", "order.#")
    channel.basic_publish("events", "order.eu.x", b"d")
    assert channel.queue_declare("all", passive=True).method.message_count == 2


def test_publish_to_a_missing_exchange_closes_the_channel(channel: BlockingChannel, connection: pika.BlockingConnection) -> None:
    channel.basic_publish("nowhere", "k", b"x")
    with pytest.raises(ChannelClosedByBroker) as refused:
        channel.queue_declare("after")
    assert (refused.value.reply_code, refused.value.reply_text) == (404, "NOT_FOUND - no exchange 'nowhere' in vhost '/'")
    assert connection.channel().queue_declare("after").method.queue == "after"


def test_consume_and_ack(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection,
                         channel: BlockingChannel) -> None:  # fmt: skip
    channel.queue_declare("work")
    for body in (b"1", b"2", b"3"):
        channel.basic_publish("", "work", body)
    got = _consume(connection, channel, "work", 3)
    assert [body for _m, _p, body in got] == [b"1", b"2", b"3"]
    assert [m.delivery_tag for m, _p, _b in got] == [1, 2, 3]
    channel.basic_ack(2, multiple=True)
    broker.wait_for(lambda b: b.queue("work").depth == 1, timeout=TIMEOUT)
    channel.basic_ack(3)
    broker.wait_for(lambda b: b.queue("work").depth == 0, timeout=TIMEOUT)


def test_nack_requeue_redelivers_in_place(connection: pika.BlockingConnection, channel: BlockingChannel) -> None:
    channel.queue_declare("retry")
    channel.basic_publish("", "retry", b"first")
    channel.basic_publish("", "retry", b"second")
    first = channel.basic_get("retry")
    channel.basic_nack(first[0].delivery_tag, requeue=True)
    again = channel.basic_get("retry")
    assert (again[2], again[0].redelivered) == (b"first", True)  # back at its place, marked redelivered
    channel.basic_reject(again[0].delivery_tag, requeue=False)  # dropped: no dead-letter exchange
    rest = channel.basic_get("retry", auto_ack=True)
    assert (rest[2], rest[0].redelivered) == (b"second", False)
    assert channel.basic_get("retry") == (None, None, None)


def test_qos_prefetch_limits_unacked_per_consumer(connection: pika.BlockingConnection, channel: BlockingChannel) -> None:
    channel.queue_declare("slow")
    for index in range(5):
        channel.basic_publish("", "slow", str(index).encode())
    channel.basic_qos(prefetch_count=2)
    got = _consume(connection, channel, "slow", 2)
    connection.process_data_events(time_limit=0.5)
    assert [body for _m, _p, body in got] == [b"0", b"1"]  # the window holds two
    channel.basic_ack(got[0][0].delivery_tag)
    connection.process_data_events(time_limit=0.5)
    assert [body for _m, _p, body in got] == [b"0", b"1", b"2"]


def test_mandatory_unroutable_is_returned(connection: pika.BlockingConnection, channel: BlockingChannel) -> None:
    returned: list[tuple[Any, bytes]] = []
    channel.add_on_return_callback(lambda _ch, method, _props, body: returned.append((method, body)))
    channel.basic_publish("amq.direct", "nobody", b"lost", mandatory=True)
    connection.process_data_events(time_limit=0.5)
    [(method, body)] = returned
    assert (method.reply_code, method.reply_text, method.exchange, method.routing_key, body) == (
        312, "NO_ROUTE", "amq.direct", "nobody", b"lost",
    )  # fmt: skip


def test_publisher_confirms(channel: BlockingChannel) -> None:
    channel.confirm_delivery()
    channel.queue_declare("confirmed")
    channel.basic_publish("", "confirmed", b"x")  # raises unless acked
    with pytest.raises(pika.exceptions.UnroutableError):
        channel.basic_publish("", "no-such-queue", b"y", mandatory=True)
    assert channel.queue_declare("confirmed", passive=True).method.message_count == 1


def test_closing_a_channel_requeues_unacked_as_redelivered(connection: pika.BlockingConnection) -> None:
    channel = connection.channel()
    channel.queue_declare("held")
    channel.basic_publish("", "held", b"m")
    assert channel.basic_get("held")[2] == b"m"
    channel.close()
    other = connection.channel()
    method, _props, body = other.basic_get("held", auto_ack=True)
    assert (body, method.redelivered) == (b"m", True)


def test_cancel_stops_deliveries(connection: pika.BlockingConnection, channel: BlockingChannel) -> None:
    channel.queue_declare("c")
    got: list[bytes] = []
    tag = channel.basic_consume("c", lambda _ch, _m, _p, body: got.append(body), auto_ack=True)
    channel.basic_cancel(tag)
    channel.basic_publish("", "c", b"later")
    connection.process_data_events(time_limit=0.3)
    assert got == []
    assert channel.queue_declare("c", passive=True).method.message_count == 1


def test_deleting_a_queue_cancels_its_consumers(connection: pika.BlockingConnection, channel: BlockingChannel) -> None:
    cancelled: list[str] = []
    channel.queue_declare("doomed")
    channel.basic_consume("doomed", lambda *_args: None, consumer_tag="ctag")
    channel.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    connection.channel().queue_delete("doomed")
    connection.process_data_events(time_limit=0.3)
    assert cancelled == ["ctag"]


def test_a_queue_deleted_through_the_api_cancels_its_0_9_1_consumers(
    broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection, channel: BlockingChannel
) -> None:
    cancelled: list[str] = []
    channel.queue_declare("gone")
    channel.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    channel.basic_consume("gone", lambda *_args: None, consumer_tag="reader")
    broker.delete("gone")
    connection.process_data_events(time_limit=0.3)
    assert cancelled == ["reader"]
    with pytest.raises(ChannelClosedByBroker) as refused:
        channel.queue_declare("gone", passive=True)
    assert refused.value.reply_code == 404


def test_transactions_publish_on_commit_only(channel: BlockingChannel) -> None:
    channel.queue_declare("txq")
    channel.tx_select()
    channel.basic_publish("", "txq", b"rolled back")
    channel.tx_rollback()
    channel.basic_publish("", "txq", b"committed")
    assert channel.queue_declare("txq", passive=True).method.message_count == 0
    channel.tx_commit()
    assert channel.queue_declare("txq", passive=True).method.message_count == 1


def test_wrong_password_and_unknown_vhost_are_refused(broker: minibroker.ThreadedBroker) -> None:
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika.BlockingConnection(pika.URLParameters(pika_url(broker, password="wrong")))
    with pytest.raises(ProbableAccessDeniedError) as refused:
        pika.BlockingConnection(pika.URLParameters(pika_url(broker, vhost="other")))
    assert "530" in str(refused.value) and "vhost other not found" in str(refused.value)


def test_the_broker_url_works_as_it_is(broker: minibroker.ThreadedBroker) -> None:
    opened = pika.BlockingConnection(pika.URLParameters(broker.url))  # guest/guest and "/" are pika's defaults
    try:
        assert opened.channel().queue_declare("plain").method.queue == "plain"
    finally:
        opened.close()


def test_configured_users_log_in(broker: minibroker.ThreadedBroker) -> None:
    with minibroker.ThreadedBroker(users={"app": "secret"}) as configured:
        opened = pika.BlockingConnection(pika.URLParameters(pika_url(configured, "app", "secret")))
        assert opened.channel().queue_declare("x").method.queue == "x"
        opened.close()


def test_immediate_is_refused_as_rabbitmq_3_does(connection: pika.BlockingConnection) -> None:
    channel = connection.channel()
    channel.queue_declare("i")
    frame = pika.spec.Basic.Publish(exchange="", routing_key="i", immediate=True)
    channel._impl._send_method(frame, (pika.BasicProperties(), b"x"))  # pika has no public immediate flag
    with pytest.raises(ConnectionClosedByBroker) as refused:
        connection.process_data_events(time_limit=1)
        channel.queue_declare("i")
    assert (refused.value.reply_code, refused.value.reply_text) == (540, "NOT_IMPLEMENTED - immediate=true")


# ------------------------------------------------------------------ across protocols


def test_a_pika_publish_is_read_by_proton_with_its_properties(
    broker: minibroker.ThreadedBroker, channel: BlockingChannel
) -> None:
    channel.queue_declare("crossing")
    stamp = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    properties = pika.BasicProperties(
        content_type="application/json", message_id="m-1", correlation_id="c-1", reply_to="replies",
        headers={"tenant": "acme", "attempt": 3}, delivery_mode=2, priority=7, expiration="60000",
        timestamp=int(stamp.timestamp()),
    )  # fmt: skip
    channel.basic_publish("", "crossing", b'{"n": 1}', properties)
    proton = ProtonConnection(broker.url, timeout=TIMEOUT)
    try:
        receiver = proton.create_receiver("crossing")
        message = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
    finally:
        proton.close()
    assert message.body in (b'{"n": 1}', memoryview(b'{"n": 1}'))
    assert (message.content_type, message.id, message.correlation_id, message.reply_to) == (
        "application/json", "m-1", "c-1", "replies",
    )  # fmt: skip
    assert message.properties == {"tenant": "acme", "attempt": 3}
    assert (message.durable, message.priority) == (True, 7)
    assert 0 < message.ttl <= 60
    assert message.creation_time == stamp.timestamp()


def test_a_proton_send_is_read_by_pika_with_its_properties(
    broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection, channel: BlockingChannel
) -> None:
    channel.queue_declare("back")
    proton = ProtonConnection(broker.url, timeout=TIMEOUT)
    try:
        proton.create_sender("back").send(
            Message(body="hello from 1.0", id="p-1", correlation_id="c-9", content_type="text/plain",
                    properties={"kind": "greeting", "n": 2}, durable=True, priority=6)
        )  # fmt: skip
    finally:
        proton.close()
    [(method, props, body)] = _consume(connection, channel, "back", 1, auto_ack=True)
    assert body == b"hello from 1.0"
    assert (method.exchange, method.routing_key, method.redelivered) == ("", "back", False)
    assert (props.message_id, props.correlation_id, props.content_type) == ("p-1", "c-9", "text/plain")
    assert props.headers == {"kind": "greeting", "n": 2}
    assert (props.delivery_mode, props.priority) == (2, 6)


def test_direct_reply_to_rpc(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection,
                             channel: BlockingChannel) -> None:  # fmt: skip
    """An RPC over ``amq.rabbitmq.reply-to``: the server's reply reaches the client's no-ack consumer."""
    replies: list[tuple[Any, Any, bytes]] = []
    channel.basic_consume("amq.rabbitmq.reply-to", lambda _c, method, props, body: replies.append((method, props, body)),
                          auto_ack=True)  # fmt: skip
    channel.queue_declare("rpc")
    channel.basic_publish("", "rpc", b"2+2", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to", correlation_id="1"))
    server = pika.BlockingConnection(pika.URLParameters(pika_url(broker)))
    try:
        serving = server.channel()
        [(method, props, body)] = _consume(server, serving, "rpc", 1, auto_ack=True)
        assert props.reply_to.startswith("amq.rabbitmq.reply-to.")
        serving.basic_publish("", props.reply_to, b"4", pika.BasicProperties(correlation_id=props.correlation_id))
        for _ in range(TIMEOUT * 10):
            if replies:
                break
            connection.process_data_events(time_limit=0.1)
    finally:
        server.close()
    [(method, props, body)] = replies
    assert (body, props.correlation_id, method.exchange, method.routing_key.startswith("amq.rabbitmq.reply-to.")) == (
        b"4", "1", "", True,
    )  # fmt: skip


def test_a_stream_read_from_an_offset_with_acks(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection,
                                                channel: BlockingChannel) -> None:  # fmt: skip
    """A stream consumed with ``x-stream-offset`` and a prefetch, as RabbitMQ's streams are read
    over 0-9-1: each delivery carries its offset; acks remove nothing."""
    channel.queue_declare("events", durable=True, arguments={"x-queue-type": "stream"})
    for i in range(4):
        channel.basic_publish("", "events", b"e%d" % i)
    channel.basic_qos(prefetch_count=2)
    got: list[tuple[int, bytes]] = []

    def on_message(ch: Any, method: Any, props: Any, body: bytes) -> None:
        got.append((props.headers["x-stream-offset"], body))
        ch.basic_ack(method.delivery_tag)

    channel.basic_consume("events", on_message, arguments={"x-stream-offset": 1})
    for _ in range(TIMEOUT * 10):
        if len(got) >= 3:
            break
        connection.process_data_events(time_limit=0.1)
    assert got == [(1, b"e1"), (2, b"e2"), (3, b"e3")]
    assert broker.stream("events").count == 4


def test_a_stream_read_with_a_filter(connection: pika.BlockingConnection, channel: BlockingChannel) -> None:
    """RabbitMQ 3.13's stream filtering over 0-9-1: ``x-stream-filter-value`` on publish,
    ``x-stream-filter`` (and ``x-stream-match-unfiltered``) on consume; minibroker filters exactly."""
    channel.queue_declare("filtered", durable=True, arguments={"x-queue-type": "stream"})
    for value, body in (("red", b"r1"), ("blue", b"b1"), (None, b"none"), ("red", b"r2")):
        headers = {"x-stream-filter-value": value} if value else None
        channel.basic_publish("", "filtered", body, pika.BasicProperties(headers=headers))
    channel.basic_qos(prefetch_count=10)
    got: dict[str, list[bytes]] = {"red": [], "red+": []}
    for tag, arguments in (
        ("red", {"x-stream-filter": "red"}),
        ("red+", {"x-stream-filter": ["red"], "x-stream-match-unfiltered": True}),
    ):
        channel.basic_consume(
            "filtered", lambda _c, m, _p, body: got[m.consumer_tag].append(body), consumer_tag=tag,
            arguments={"x-stream-offset": "first", **arguments},
        )  # fmt: skip
    for _ in range(TIMEOUT * 10):
        if len(got["red"]) >= 2 and len(got["red+"]) >= 3:
            break
        connection.process_data_events(time_limit=0.1)
    connection.process_data_events(time_limit=0.1)
    assert got == {"red": [b"r1", b"r2"], "red+": [b"r1", b"none", b"r2"]}


def test_queue_and_exchange_arguments(broker: minibroker.ThreadedBroker, channel: BlockingChannel) -> None:
    """``x-delivery-limit`` on a quorum queue dead-letters after the limit's requeues;
    ``alternate-exchange`` catches what routes nowhere."""
    channel.exchange_declare("dlx", "fanout")
    channel.queue_declare("dead")
    channel.queue_bind("dead", "dlx")
    channel.queue_declare("work", durable=True, arguments={
        "x-queue-type": "quorum", "x-delivery-limit": 1, "x-dead-letter-exchange": "dlx",
    })  # fmt: skip
    channel.basic_publish("", "work", b"poison")
    counts = []
    while (got := channel.basic_get("work"))[0] is not None:
        method, props, _body = got
        counts.append(props.headers["x-delivery-count"])
        channel.basic_nack(method.delivery_tag, requeue=True)
    assert counts == [0, 1]
    assert broker.queue("dead").bodies == [b"poison"]
    channel.exchange_declare("ae", "fanout")
    channel.queue_declare("unrouted")
    channel.queue_bind("unrouted", "ae")
    channel.exchange_declare("main", "direct", arguments={"alternate-exchange": "ae"})
    channel.basic_publish("main", "nobody", b"caught")
    method, _props, body = channel.basic_get("unrouted", auto_ack=True)
    assert (method.exchange, method.routing_key, body) == ("main", "nobody", b"caught")


def test_nested_headers_survive_a_pika_round_trip(channel: BlockingChannel) -> None:
    """Tables, arrays and decimals in headers come back to a 0-9-1 consumer as they were sent."""
    import decimal

    headers = {"table": {"a": 1, "b": ["x", 2]}, "array": [1, {"k": "v"}], "price": decimal.Decimal("1.50"),
               "x-meta": {"n": 3}, "plain": "text"}  # fmt: skip
    channel.queue_declare("nested")
    channel.basic_publish("", "nested", b"x", pika.BasicProperties(headers=headers))
    _method, props, _body = channel.basic_get("nested", auto_ack=True)
    assert props.headers == headers
