"""What every AMQP 0-9-1 fuzz input is judged by (the Hypothesis suite and the atheris harness).

An input is a list of byte chunks fed, in order, to one 0-9-1 connection of an in-memory broker
(the front end the server hands an ``AMQP 0 0 9 1`` header to, no socket).  Whatever the bytes:

* the broker never raises: ``broker.errors`` stays empty (a handler bug lands there and closes
  the connection with 541 INTERNAL_ERROR);
* it writes only well-formed frames, every method among them decodes, and every
  ``connection.close`` / ``channel.close`` carries a reply code of the specification (§1.2);
* what it holds for the connection stays bounded while it reads: the frame reader never more
  than ``frame_max``, a publish being reassembled never more than its declared size;
* once the connection is gone: it is not registered, no message is left acquired, the seeded
  queue holds its messages, and a fresh 0-9-1 client gets them in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from minibroker.amqp.message import Message
from minibroker.amqp091 import methods as m
from minibroker.amqp091.errors import REPLY_NAMES
from minibroker.amqp091.frames import PROTOCOL_HEADER, FrameReader, content_frames, method_frame
from minibroker.amqp091.methods import decode_method
from minibroker.amqp091.properties import BasicProperties, decode_content_header
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.front091 import PROTOCOL_HEADER as FRONT_END_HEADER
from minibroker.front091.connection import Connection091

#: Seeded before every input, on a queue the fuzz conversations never name.
KEPT = (b"kept-0", b"kept-1", b"kept-2")
QUEUE = "fuzz-q"
USER, PASSWORD = "fuzzer", "s3cret-fuzz"


def fresh_broker() -> Broker:
    broker = Broker(BrokerConfig(users={USER: PASSWORD}), ManualClock())
    for body in KEPT:
        broker.publish("kept", Message(body=body, body_kind="data"))
    return broker


def open_client(broker: Broker) -> Connection091:
    served = broker.accept(broker.connect(lambda: None, "fuzz"), FRONT_END_HEADER)
    assert isinstance(served, Connection091)
    return served


def handshake(user: str = USER, password: str = PASSWORD, channels: int = 1) -> list[bytes]:
    """Header, start-ok, tune-ok, open, and ``channels`` channels opened: one chunk each."""
    chunks = [
        PROTOCOL_HEADER,
        method_frame(0, m.ConnectionStartOk(response=b"\x00" + user.encode() + b"\x00" + password.encode())),
        method_frame(0, m.ConnectionTuneOk(channel_max=0, frame_max=0, heartbeat=0)),
        method_frame(0, m.ConnectionOpen(virtual_host="/")),
    ]
    chunks += [method_frame(n, m.ChannelOpen()) for n in range(1, channels + 1)]
    return chunks + [method_frame(1, m.QueueDeclare(queue=QUEUE))] if channels else chunks


def publish(channel: int, body: bytes, exchange: str = "", key: str = QUEUE, **properties: Any) -> bytes:
    return method_frame(channel, m.BasicPublish(exchange=exchange, routing_key=key)) + content_frames(
        channel, BasicProperties(**properties), body, 4096
    )


def moves(channel: int) -> list[bytes]:
    """Valid frames (or publishes) a client may send on an open ``channel``: the fuzzer's alphabet."""
    frame = method_frame
    return [
        frame(channel, m.QueueDeclare(queue=QUEUE)),
        frame(channel, m.QueueDeclare(queue="", exclusive=True, arguments={"x-max-length": 2})),
        frame(channel, m.QueueDeclare(queue="dl", arguments={"x-dead-letter-exchange": "amq.fanout"})),
        frame(channel, m.QueueBind(queue=QUEUE, exchange="amq.topic", routing_key="#")),
        frame(channel, m.QueueUnbind(queue=QUEUE, exchange="amq.topic", routing_key="#")),
        frame(channel, m.ExchangeDeclare(exchange="fx", type="headers", arguments={"alternate-exchange": "amq.direct"})),
        frame(channel, m.ExchangeBind(destination="fx", source="amq.fanout")),
        frame(channel, m.ExchangeDelete(exchange="fx")),
        publish(channel, b"body-%d" % channel),
        publish(channel, b"x" * 9000, headers={"a": [1, {"b": None}]}, expiration="5", priority=3),
        publish(channel, b"", exchange="amq.topic", key=f"k.{channel}", user_id=USER),
        frame(channel, m.BasicQos(prefetch_count=1)),
        # Cancel first: a consumer tag in use again is a connection error (530), as in RabbitMQ.
        frame(channel, m.BasicCancel(consumer_tag=f"c{channel}"))
        + frame(channel, m.BasicConsume(queue=QUEUE, consumer_tag=f"c{channel}")),
        frame(channel, m.BasicConsume(queue=QUEUE, no_ack=True)),
        frame(channel, m.BasicCancel(consumer_tag=f"c{channel}")),
        frame(channel, m.BasicGet(queue=QUEUE)),
        # Idioms that leave deliveries unacknowledged, for the settling moves to find.
        publish(channel, b"got") + frame(channel, m.BasicGet(queue=QUEUE)),
        publish(channel, b"consumed") + frame(channel, m.BasicConsume(queue=QUEUE)),
        frame(channel, m.BasicAck(delivery_tag=1)),
        frame(channel, m.BasicAck(delivery_tag=0, multiple=True)),
        frame(channel, m.BasicNack(delivery_tag=2, multiple=True, requeue=False)),
        frame(channel, m.BasicReject(delivery_tag=1, requeue=True)),
        frame(channel, m.BasicRecover(requeue=True)),
        frame(channel, m.ConfirmSelect()),
        frame(channel, m.TxSelect()),
        frame(channel, m.TxCommit()),
        frame(channel, m.TxRollback()),
        frame(channel, m.ChannelFlow(active=False)),
        frame(channel, m.ChannelFlow(active=True)),
        frame(channel, m.QueuePurge(queue=QUEUE)),
        frame(channel, m.QueueDelete(queue=QUEUE)),
        frame(channel, m.ChannelClose(reply_code=200, reply_text="bye")) + frame(channel, m.ChannelOpen()),
    ]


def run_input(broker: Broker, chunks: Iterable[bytes], *, tick_every: float = 0.0) -> list[tuple[int, Any]]:
    """Feed the chunks to a new 0-9-1 connection (ticking the clock by ``tick_every`` between
    them), then drop it; return (channel, method) for every method frame the broker wrote."""
    client = open_client(broker)
    engine = client.engine
    reader = FrameReader(1 << 20)
    written: list[tuple[int, Any]] = []
    clock = broker.clock
    for chunk in chunks:
        client.receive_data(chunk)
        assert engine._reader.buffered <= engine.frame_max, "the frame reader holds more than frame_max"
        for content in engine._content.values():
            assert content.received <= content.size, "a publish holds more body than its header declared"
        if tick_every:
            assert isinstance(clock, ManualClock)
            clock.advance(tick_every)
            client.tick(clock.now())
        replies = _methods(reader, client.data_to_send())
        written += replies
        if client.finished:
            break
        for channel, method in replies:
            if isinstance(method, m.ChannelClose):
                # As a client does after a channel error: close-ok (§2.2.5.2), and the channel again.
                client.receive_data(method_frame(channel, m.ChannelCloseOk()) + method_frame(channel, m.ChannelOpen()))
    client.connection_lost()
    written += _methods(reader, client.data_to_send())
    return written


def _methods(reader: FrameReader, data: bytes) -> list[tuple[int, Any]]:
    found = []
    for frame in reader.feed(data):  # a malformed frame from the broker raises here
        if frame.type == 1:
            found.append((frame.channel, decode_method(frame.payload)))
        elif frame.type == 2:
            decode_content_header(frame.payload)
    return found


def check(broker: Broker, written: list[tuple[int, Any]]) -> None:
    """The invariants above; raises AssertionError naming what broke."""
    assert not broker.errors, f"the broker raised: {broker.errors!r}"
    for _channel, method in written:
        if isinstance(method, m.ConnectionClose | m.ChannelClose):
            assert method.reply_code in REPLY_NAMES, f"a close with reply code {method.reply_code} outside §1.2"
    assert not broker.other_connections, "the dropped connection is still registered"
    for queue in broker.queues.values():
        assert queue.depth == queue.available_count, f"queue {queue.name!r} kept messages acquired"
    assert broker.queues["kept"].depth == len(KEPT)
    assert_serves(broker)


def assert_serves(broker: Broker) -> None:
    """A fresh 0-9-1 client gets the seeded messages in order, and gives them back."""
    chunks = [b"".join(handshake())]
    chunks += [method_frame(1, m.BasicGet(queue="kept")) for _ in KEPT]
    client = open_client(broker)
    reader = FrameReader(1 << 20)
    for chunk in chunks:
        client.receive_data(chunk)
    bodies = []
    for frame in reader.feed(client.data_to_send()):
        if frame.type == 3:
            bodies.append(bytes(frame.payload))
    client.connection_lost()
    assert bodies == list(KEPT), f"a fresh client got {bodies!r}, expected {list(KEPT)!r}"
    assert not broker.errors, f"the broker raised while serving a fresh client: {broker.errors!r}"
    assert broker.queues["kept"].available_count == len(KEPT)
