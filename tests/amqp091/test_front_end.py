"""The 0-9-1 front end on a broker, in memory: bytes in, bytes out, no socket, thread or sleep.

Each client is a :class:`~minibroker.front091.connection.Connection091` built by the broker for
the 0-9-1 protocol header (the seam the server uses), written to with the codec.  Texts and
codes are RabbitMQ 3.10's.
"""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.amqp.message import Message
from minibroker.amqp.messaging import Header, Properties
from minibroker.amqp091 import methods as m
from minibroker.amqp091.frames import HEARTBEAT, PROTOCOL_HEADER, FrameReader, content_frames, method_frame
from minibroker.amqp091.methods import decode_method
from minibroker.amqp091.properties import BasicProperties, decode_content_header
from minibroker.broker.clock import ManualClock
from minibroker.broker.engine import Broker
from minibroker.config import BrokerConfig
from minibroker.front091 import PROTOCOL_HEADER as FRONT_END_HEADER
from minibroker.front091.connection import Connection091


class Client:
    """One 0-9-1 client of ``broker``, speaking through the broker's front-end seam."""

    def __init__(self, broker: Broker, notify: Any = lambda: None) -> None:
        served = broker.accept(broker.connect(notify, "memory"), FRONT_END_HEADER)
        assert isinstance(served, Connection091)
        self.server = served
        self.reader = FrameReader(1 << 20)

    def send(self, data: bytes) -> None:
        self.server.receive_data(data)

    def method(self, channel: int, method: m.Method) -> None:
        self.send(method_frame(channel, method))

    def publish(self, channel: int, exchange: str, key: str, body: bytes, **properties: Any) -> None:
        self.send(
            method_frame(channel, m.BasicPublish(exchange=exchange, routing_key=key, mandatory=properties.pop("mandatory", False)))
            + content_frames(channel, BasicProperties(**properties), body, 131072)
        )

    def read(self) -> list[Any]:
        """(channel, method) for each method; a content's header and body are folded into (channel, method, properties, body)."""
        out: list[Any] = []
        for frame in self.reader.feed(self.server.data_to_send()):
            if frame.type == 1:
                out.append([frame.channel, decode_method(frame.payload)])
            elif frame.type == 2:
                out[-1].append(decode_content_header(frame.payload).properties)
                out[-1].append(b"")
            elif frame.type == 3:
                out[-1][-1] += bytes(frame.payload)
        return [tuple(item) for item in out]

    def methods(self) -> list[m.Method]:
        return [item[1] for item in self.read()]

    def open(self, user: str = "guest", password: str = "guest", capabilities: dict[str, Any] | None = None) -> None:
        """Log in (announcing ``capabilities``: pika's consumer cancel notifications by default) and open channel 1."""
        if capabilities is None:
            capabilities = {"consumer_cancel_notify": True}
        self.send(PROTOCOL_HEADER)
        self.method(0, m.ConnectionStartOk(
            client_properties={"capabilities": capabilities},
            response=b"\x00" + user.encode() + b"\x00" + password.encode(),
        ))  # fmt: skip
        self.method(0, m.ConnectionTuneOk(channel_max=0, frame_max=0, heartbeat=0))
        self.method(0, m.ConnectionOpen(virtual_host="/"))
        self.method(1, m.ChannelOpen())
        self.read()


def test_declare_ok_counts_and_a_server_name(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    broker.publish("q", b"\x00\x53\x75\xa0\x01x")  # one message sent over 1.0 (a data section)
    client.method(1, m.QueueDeclare(queue="q", passive=True))
    client.method(1, m.QueueDeclare(queue="", exclusive=True))
    first, passive, named = client.methods()
    assert (first.queue, first.message_count) == ("q", 0)
    assert (passive.queue, passive.message_count) == ("q", 1)
    assert named.queue.startswith("amq.gen-") and named.queue in broker.queues


def test_passive_declare_of_a_missing_queue_closes_the_channel_404(client: Client) -> None:
    client.method(1, m.QueueDeclare(queue="missing", passive=True))
    [close] = client.methods()
    assert isinstance(close, m.ChannelClose)
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        404, "NOT_FOUND - no queue 'missing' in vhost '/'", 50, 10,
    )  # fmt: skip


def test_queue_arguments_map_onto_queue_options(client: Client, broker: Broker) -> None:
    arguments = {"x-message-ttl": 1500, "x-max-length": 3, "x-max-priority": 9, "x-dead-letter-exchange": "dlx"}
    client.method(1, m.QueueDeclare(queue="q", arguments=arguments))
    options = broker.queues["q"].options
    assert (options.default_ttl, options.max_depth, options.priorities, options.dead_letter_on_expiry) == (
        1.5, 3, 10, True,
    )  # fmt: skip
    client.method(1, m.QueueDeclare(queue="q", arguments={**arguments, "x-max-length": 4}))
    _ok, close = client.methods()
    assert close.reply_code == 406
    assert close.reply_text == (
        "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'q' in vhost '/': "
        "received '4' but current is '3'"
    )
    # Without the argument on one side, that side is "none" and the other is shown with its type.
    client.method(2, m.ChannelOpen())
    client.method(2, m.QueueDeclare(queue="q", arguments={k: v for k, v in arguments.items() if k != "x-max-length"}))
    _ok, close = client.methods()
    assert close.reply_text == (
        "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'q' in vhost '/': "
        "received none but current is the value '3' of type 'signedint'"
    )


def test_ttl_and_dead_lettering_through_an_exchange(client: Client, broker: Broker) -> None:
    assert isinstance(broker.clock, ManualClock)
    client.method(1, m.ExchangeDeclare(exchange="dlx", type="fanout"))
    client.method(1, m.QueueDeclare(queue="dead"))
    client.method(1, m.QueueBind(queue="dead", exchange="dlx"))
    client.method(1, m.QueueDeclare(queue="q", arguments={"x-message-ttl": 1000, "x-dead-letter-exchange": "dlx"}))
    client.publish(1, "", "q", b"expiring")
    broker.clock.advance(2)
    assert broker.queues["q"].depth == 0
    assert [entry.message.decode().body for entry in broker.queues["dead"].entries()] == [b"expiring"]


def test_max_length_drops_the_oldest(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q", arguments={"x-max-length": 2}))
    for body in (b"1", b"2", b"3"):
        client.publish(1, "", "q", body)
    assert [entry.message.decode().body for entry in broker.queues["q"].entries()] == [b"2", b"3"]


def test_deliveries_carry_per_channel_tags_and_requeue_keeps_the_place(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    for body in (b"a", b"b"):
        client.publish(1, "", "q", body)
    client.read()
    client.method(1, m.BasicConsume(queue="q", consumer_tag="c"))
    ok, first, second = client.read()
    assert ok[1] == m.BasicConsumeOk(consumer_tag="c")
    assert [(d[1].delivery_tag, d[1].redelivered, d[3]) for d in (first, second)] == [(1, False, b"a"), (2, False, b"b")]
    client.method(1, m.BasicNack(delivery_tag=2, multiple=True, requeue=True))
    again = client.read()
    assert [(d[1].delivery_tag, d[1].redelivered, d[3]) for d in again] == [(3, True, b"a"), (4, True, b"b")]
    client.method(1, m.BasicAck(delivery_tag=4, multiple=True))
    assert broker.queues["q"].depth == 0


def test_an_unknown_delivery_tag_is_406(client: Client) -> None:
    client.method(1, m.BasicAck(delivery_tag=7))
    [close] = client.methods()
    assert (close.reply_code, close.reply_text) == (406, "PRECONDITION_FAILED - unknown delivery tag 7")


def test_a_lost_connection_gives_back_what_it_held(broker: Broker, client: Client) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"held")
    client.method(1, m.BasicGet(queue="q"))
    assert broker.queues["q"].available_count == 0
    client.server.connection_lost()
    assert broker.queues["q"].available_count == 1
    assert next(broker.queues["q"].entries()).acquired_before  # redelivered=true next time
    assert broker.other_connections == set()


def test_exclusive_queues_are_locked_to_their_connection_and_go_with_it(broker: Broker, client: Client) -> None:
    client.method(1, m.QueueDeclare(queue="mine", exclusive=True))
    other = Client(broker)
    other.open()
    other.method(1, m.BasicConsume(queue="mine"))
    [close] = other.methods()
    assert close.reply_code == 405 and close.reply_text.startswith(
        "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'mine' in vhost '/'"
    )
    client.method(0, m.ConnectionClose())
    assert "mine" not in broker.queues


def test_auto_delete_queue_goes_with_its_last_consumer(broker: Broker, client: Client) -> None:
    client.method(1, m.QueueDeclare(queue="auto", auto_delete=True))
    client.method(1, m.BasicConsume(queue="auto", consumer_tag="c"))
    assert "auto" in broker.queues
    client.method(1, m.BasicCancel(consumer_tag="c"))
    assert "auto" not in broker.queues


def test_headers_and_exchange_to_exchange_routing(broker: Broker, client: Client) -> None:
    client.method(1, m.ExchangeDeclare(exchange="front", type="direct"))
    client.method(1, m.ExchangeBind(destination="amq.headers", source="front", routing_key="k"))
    client.method(1, m.QueueDeclare(queue="eu"))
    client.method(1, m.QueueBind(queue="eu", exchange="amq.headers", arguments={"x-match": "all", "region": "eu"}))
    client.publish(1, "front", "k", b"eu", headers={"region": "eu"})
    client.publish(1, "front", "k", b"us", headers={"region": "us"})
    assert [entry.message.decode().body for entry in broker.queues["eu"].entries()] == [b"eu"]


def test_confirms_ack_and_nack_a_full_queue(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q", arguments={"x-max-length": 1, "x-overflow": "reject-publish"}))
    client.method(1, m.ConfirmSelect())
    client.publish(1, "", "q", b"1")
    client.publish(1, "", "q", b"2")
    assert client.methods()[1:] == [m.ConfirmSelectOk(), m.BasicAck(delivery_tag=1), m.BasicNack(delivery_tag=2)]


def _publish_frames(key: str, body: bytes) -> bytes:
    return method_frame(1, m.BasicPublish(routing_key=key)) + content_frames(1, BasicProperties(), body, 131072)


def test_confirms_of_one_read_are_one_ack_multiple(client: Client, broker: Broker) -> None:
    # RabbitMQ coalesces confirms (rabbitmq.com/docs/confirms): three publishes read at once are
    # confirmed by one basic.ack multiple=true, not three acks.
    client.method(1, m.QueueDeclare(queue="q"))
    client.method(1, m.ConfirmSelect())
    client.read()
    client.send(b"".join(_publish_frames("q", bytes([i])) for i in range(3)))
    assert client.methods() == [m.BasicAck(delivery_tag=3, multiple=True)]
    client.publish(1, "", "q", b"4")  # alone in its read: a plain ack
    assert client.methods() == [m.BasicAck(delivery_tag=4)]
    assert broker.queues["q"].depth == 4


def test_held_confirms_come_before_a_reply_and_after_a_nack_one_each(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q", arguments={"x-max-length": 2, "x-overflow": "reject-publish"}))
    client.method(1, m.ConfirmSelect())
    client.read()
    # Two routed, a reply in between (the confirms before it go first), a third refused (nack).
    client.send(_publish_frames("q", b"1") + _publish_frames("q", b"2")
                + method_frame(1, m.QueueDeclare(queue="q", passive=True)) + _publish_frames("q", b"3"))  # fmt: skip
    ack, declare_ok, nack = client.methods()
    assert ack == m.BasicAck(delivery_tag=2, multiple=True)
    assert isinstance(declare_ok, m.QueueDeclareOk) and declare_ok.message_count == 2
    assert nack == m.BasicNack(delivery_tag=3)
    client.method(1, m.QueuePurge(queue="q"))
    client.read()
    # After a nack, a range of acks is sent one by one: multiple=true would cover the nacked tag.
    client.send(_publish_frames("q", b"4") + _publish_frames("q", b"5"))
    assert client.methods() == [m.BasicAck(delivery_tag=4), m.BasicAck(delivery_tag=5)]


def _publish_on(channel: int, key: str, body: bytes) -> bytes:
    return method_frame(channel, m.BasicPublish(routing_key=key)) + content_frames(channel, BasicProperties(), body, 131072)


def test_confirms_of_one_read_are_one_multiple_ack(client: Client, broker: Broker) -> None:
    # RabbitMQ coalesces the confirms ready together (amqplib's suite waits for a multiple ack);
    # an ack and a nack are not merged, and a later method's reply comes after the confirms.
    client.method(1, m.QueueDeclare(queue="q", arguments={"x-max-length": 3, "x-overflow": "reject-publish"}))
    client.method(1, m.ConfirmSelect())
    client.read()
    client.send(b"".join(_publish_on(1, "q", b"x") for _ in range(4)) + method_frame(1, m.QueueDeclare(queue="q", passive=True)))
    assert client.methods() == [
        m.BasicAck(delivery_tag=3, multiple=True), m.BasicNack(delivery_tag=4), m.QueueDeclareOk(queue="q", message_count=3),
    ]  # fmt: skip


def test_confirms_before_a_close_precede_the_close_ok(client: Client, broker: Broker) -> None:
    # The publishes read with a channel.close (and a connection.close) are confirmed before the
    # close-ok: after it amqplib drops any frame on the channel as on an unknown channel.
    client.method(1, m.QueueDeclare(queue="q"))
    client.method(1, m.ConfirmSelect())
    client.method(2, m.ChannelOpen())
    client.method(2, m.ConfirmSelect())
    client.read()
    client.send(_publish_on(1, "q", b"a") + _publish_on(1, "q", b"b") + method_frame(1, m.ChannelClose()))
    assert client.methods() == [m.BasicAck(delivery_tag=2, multiple=True), m.ChannelCloseOk()]
    client.send(_publish_on(2, "q", b"c") + method_frame(0, m.ConnectionClose()))
    assert client.methods() == [m.BasicAck(delivery_tag=1), m.ConnectionCloseOk()]
    assert broker.queues["q"].depth == 3


def test_transaction_holds_acks_until_commit(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"x")
    client.method(1, m.TxSelect())
    client.method(1, m.BasicGet(queue="q"))
    client.method(1, m.BasicAck(delivery_tag=1))
    assert broker.queues["q"].depth == 1
    client.method(1, m.TxRollback())
    client.method(1, m.BasicAck(delivery_tag=1))
    client.method(1, m.TxCommit())
    assert broker.queues["q"].depth == 0


def test_a_1_0_message_is_delivered_with_its_properties(client: Client, broker: Broker) -> None:
    message = Message(
        body="text", header=Header(durable=True, priority=7),
        properties=Properties(message_id="id-1", content_type="text/plain"), application_properties={"k": "v"},
    )  # fmt: skip
    client.method(1, m.QueueDeclare(queue="q"))
    broker.publish("q", message)
    client.method(1, m.BasicGet(queue="q", no_ack=True))
    _declare, (_channel, get_ok, properties, body) = client.read()
    assert (get_ok.routing_key, body) == ("q", b"text")
    assert properties == BasicProperties(
        content_type="text/plain", headers={"k": "v"}, delivery_mode=2, priority=7, message_id="id-1"
    )


def test_a_0_9_1_publish_is_stored_as_amqp_1_0(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"body", content_type="application/json", delivery_mode=2, headers={"n": 1},
                   message_id="m", expiration="5000", type="t")  # fmt: skip
    stored = next(broker.queues["q"].entries()).message.decode()
    assert stored.body_kind == "data" and stored.body == b"body"
    assert stored.header is not None and (stored.header.durable, stored.header.ttl) == (True, 5000)
    assert stored.properties is not None
    assert (stored.properties.content_type, stored.properties.message_id) == ("application/json", "m")
    assert stored.application_properties == {"n": 1}
    assert stored.message_annotations is not None and stored.message_annotations["x-basic-type"] == "t"
    assert stored.message_annotations["x-routing-key"] == "q"


def test_a_wrong_password_is_refused_403(broker: Broker) -> None:
    client = Client(broker)
    client.send(PROTOCOL_HEADER)
    client.method(0, m.ConnectionStartOk(response=b"\x00guest\x00nope"))
    _start, close = client.methods()
    assert close.reply_code == 403
    assert client.server.finished or close.reply_text.startswith("ACCESS_REFUSED")


def test_the_broker_reset_forgets_exchanges_and_closes_with_320(broker: Broker, client: Client) -> None:
    client.method(1, m.ExchangeDeclare(exchange="x", type="direct"))
    client.read()
    broker.reset()
    assert client.methods()[-1].reply_code == 320
    fresh = Client(broker)
    fresh.open()
    fresh.method(1, m.ExchangeDeclare(exchange="x", type="direct", passive=True))
    [close] = fresh.methods()
    assert (close.reply_code, close.reply_text) == (404, "NOT_FOUND - no exchange 'x' in vhost '/'")


def test_a_transaction_holds_a_bounded_number_of_bytes(client: Client, broker: Broker) -> None:
    from minibroker.front091.txn import MAX_TX_BYTES

    client.method(1, m.QueueDeclare(queue="q"))
    client.method(1, m.TxSelect())
    body = b"x" * 65536
    for _ in range(MAX_TX_BYTES // len(body) + 1):
        client.publish(1, "", "q", body)
    close = client.methods()[-1]
    assert (close.reply_code, close.class_id, close.method_id) == (406, 60, 40)
    assert "commit more often" in close.reply_text
    assert broker.queues["q"].depth == 0  # the channel's transaction went with it


def test_exchange_declarations_are_bounded(broker: Broker) -> None:
    from minibroker.rabbitmq.options import RabbitMQOptions

    bounded = Broker(BrokerConfig(rabbitmq=RabbitMQOptions(max_exchanges=2, max_queues=1)), clock=ManualClock())
    client = Client(bounded)
    client.open()
    for name in ("a", "b", "c"):
        client.method(1, m.ExchangeDeclare(exchange=name, type="direct"))
    client.method(2, m.ChannelOpen())
    for name in ("q1", "q2"):
        client.method(2, m.QueueDeclare(queue=name))
    replies = client.read()
    closes = [(channel, method.reply_code) for channel, method, *_ in replies if isinstance(method, m.ChannelClose)]
    assert closes == [(1, 403), (2, 403)]
    assert "q2" not in bounded.queues


def test_max_connections_counts_both_protocols() -> None:
    limited = Broker(BrokerConfig(max_connections=1), clock=ManualClock())
    first = Client(limited)
    first.open()
    second = Client(limited)
    second.send(PROTOCOL_HEADER)
    second.method(0, m.ConnectionStartOk(response=b"\x00guest\x00guest"))
    second.method(0, m.ConnectionTuneOk(channel_max=0, frame_max=0, heartbeat=0))
    second.method(0, m.ConnectionOpen(virtual_host="/"))
    close = second.methods()[-1]
    assert (close.reply_code, close.reply_text) == (
        530, "NOT_ALLOWED - access to vhost '/' refused for user 'guest': connection limit (1) is reached"
    )
    assert limited.opened_connections() == 1


def test_a_refused_login_is_reported_to_the_servers_login_guard(broker: Broker) -> None:
    refused = Client(broker)
    refused.send(PROTOCOL_HEADER)
    refused.method(0, m.ConnectionStartOk(response=b"\x00guest\x00wrong"))
    assert refused.server.protocol.login_failed
    accepted = Client(broker)
    accepted.open()
    assert not accepted.server.protocol.login_failed


def test_a_1_0_body_that_does_not_decode_is_rejected_not_delivered(client: Client, broker: Broker) -> None:
    client.method(1, m.QueueDeclare(queue="q"))
    client.method(1, m.BasicConsume(queue="q", consumer_tag="c", no_ack=True))
    client.read()
    broker.publish("q", b"\x00\x53\x75\xa1\x02ab")  # a data section holding a string (§3.2.6: binary)
    broker.publish("q", b"\x00\x53\x75\xa0\x02ok")
    assert [item[3] for item in client.read()] == [b"ok"]
    assert broker.queues["q"].depth == 0 and broker.errors == []


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        ({"durable": False, "auto_delete": True, "exclusive": True}, "auto-delete"),
        ({"durable": False, "exclusive": True}, "exclusive-owner"),
        ({"durable": False}, "non-durable"),
    ],
)
@pytest.mark.parametrize("kind", ["quorum", "stream"])
def test_quorum_queues_and_streams_must_be_durable_shared_and_kept(
    client: Client, broker: Broker, flags: dict[str, bool], refused: str, kind: str
) -> None:
    client.method(1, m.QueueDeclare(queue="replicated", arguments={"x-queue-type": kind}, **flags))
    [close] = client.methods()
    assert (close.reply_code, close.reply_text) == (
        406, f"PRECONDITION_FAILED - invalid property '{refused}' for queue 'replicated' in vhost '/'",
    )  # fmt: skip
    assert "replicated" not in broker.queues and "replicated" not in broker.streams


def test_a_tick_that_ends_nothing_wakes_no_writer(broker: Broker) -> None:
    """The server's writer ticks its connection each time it wakes and sends the output right
    after: a tick that only sends a heartbeat, or nothing, must not wake it again (it did, every
    time: an idle connection cost its broker a busy loop of ~12,000 turns a second)."""
    woken: list[None] = []
    client = Client(broker, notify=lambda: woken.append(None))
    client.send(PROTOCOL_HEADER)
    client.method(0, m.ConnectionStartOk(response=b"\x00guest\x00guest"))
    client.method(0, m.ConnectionTuneOk(channel_max=0, frame_max=0, heartbeat=10))
    client.method(0, m.ConnectionOpen(virtual_host="/"))
    client.method(1, m.ChannelOpen())
    client.method(1, m.QueueDeclare(queue="mine", exclusive=True))
    client.read()
    woken.clear()
    version = broker.version
    assert client.server.tick(100.0) == 110.0
    assert client.server.tick(105.0) == 110.0
    assert client.server.tick(110.0) == 120.0 and client.server.data_to_send() == HEARTBEAT
    assert (woken, broker.version) == ([], version)
    # A tick that ends the connection (silent for two heartbeats) still goes through the broker.
    assert client.server.tick(120.0) is None and client.server.finished
    assert "mine" not in broker.queues  # its exclusive queue went with it


def test_ack_multiple_up_to_a_tag_not_held_is_406(client: Client, broker: Broker) -> None:
    """RabbitMQ 3.10 refuses ``multiple`` up to a tag it does not hold, even with lower tags held
    (its collect_acks walks the unacknowledged to the tag): checked with pika against it."""
    client.method(1, m.QueueDeclare(queue="q"))
    for body in (b"a", b"b", b"c"):
        client.publish(1, "", "q", body)
    client.method(1, m.BasicGet(queue="q"))
    client.method(1, m.BasicGet(queue="q"))
    client.method(1, m.BasicAck(delivery_tag=1))
    client.read()
    client.method(1, m.BasicAck(delivery_tag=5, multiple=True))
    [close] = client.methods()
    assert (close.reply_code, close.reply_text) == (406, "PRECONDITION_FAILED - unknown delivery tag 5")
    client.method(1, m.ChannelCloseOk())
    assert broker.queues["q"].available_count == broker.queues["q"].depth == 2  # tag 2 went back, unsettled
