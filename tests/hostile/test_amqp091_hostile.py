"""Hostile AMQP 0-9-1 peers over real sockets: each is refused or bounded, and pika is served meanwhile.

Each test runs one attack on the 0-9-1 codec or engine from a raw socket and asserts what the
broker answers (the reply code RabbitMQ would use), that what it holds for the attacker stays
bounded (counted, never timed), and that a fresh pika client declares, publishes and gets a
message while the attacker is still connected (:func:`pika_round_trip`, bounded by
``GOOD_CLIENT_WAIT`` like the other hostile tests).
"""

from __future__ import annotations

import socket
import struct
import threading
import uuid

import pika
import pytest
from hostile_peer import GOOD_CLIENT_WAIT, small_receive_buffer_socket  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp091 import methods as m
from minibroker.amqp091.frames import PROTOCOL_HEADER, FrameReader, content_frames, method_frame
from minibroker.amqp091.methods import decode_method
from minibroker.amqp091.properties import BasicProperties
from minibroker.amqp091.values import MAX_NESTING
from minibroker.broker.client_connection import OUTPUT_BOUND
from minibroker.front091.connection import Connection091
from minibroker.server import READ_SIZE

pytestmark = pytest.mark.interop

HANDSHAKE = (
    PROTOCOL_HEADER
    + method_frame(0, m.ConnectionStartOk(response=b"\x00guest\x00guest"))
    + method_frame(0, m.ConnectionTuneOk(channel_max=0, frame_max=0, heartbeat=0))
    + method_frame(0, m.ConnectionOpen(virtual_host="/"))
    + method_frame(1, m.ChannelOpen())
)


def pika_round_trip(broker: minibroker.ThreadedBroker, *, publish: bool = True) -> None:
    """A fresh pika client declares a queue, publishes with a confirm and gets the message back
    (``publish=False``: the message is put there through the API, for a broker whose alarm is up)."""
    parameters = pika.URLParameters(
        f"amqp://guest:guest@127.0.0.1:{broker.port}/%2F?socket_timeout={GOOD_CLIENT_WAIT}"
        f"&blocked_connection_timeout={GOOD_CLIENT_WAIT}&stack_timeout={GOOD_CLIENT_WAIT}"
    )
    connection = pika.BlockingConnection(parameters)
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        queue = f"good-{uuid.uuid4().hex[:8]}"
        channel.queue_declare(queue, auto_delete=True)
        if publish:
            channel.basic_publish("", queue, b"served")
        else:
            broker.publish(queue, b"served")
        _method, _properties, body = channel.basic_get(queue, auto_ack=True)
        assert body == b"served"
    finally:
        connection.close()


def _replies(sock: socket.socket, until: type[m.Method]) -> list[m.Method]:
    """Methods the broker wrote to ``sock`` up to the first ``until`` (or the socket's end)."""
    reader = FrameReader(1 << 20)
    found: list[m.Method] = []
    while not any(isinstance(method, until) for method in found):
        data = sock.recv(65536)
        if not data:
            break
        found += [decode_method(f.payload) for f in reader.feed(data) if f.type == 1]
    return found


def _attacker(broker: minibroker.ThreadedBroker) -> socket.socket:
    sock = socket.create_connection((broker.host, broker.port), timeout=GOOD_CLIENT_WAIT)
    sock.sendall(HANDSHAKE)
    _replies(sock, m.ChannelOpenOk)
    return sock


def _held(broker: minibroker.ThreadedBroker) -> list[tuple[int, int]]:
    """(bytes in the frame reader, bytes of output) of each 0-9-1 connection."""

    def held() -> list[tuple[int, int]]:
        return [
            (c.engine._reader.buffered, c.engine.output_size + (c.transport_backlog or 0))
            for c in broker._broker.other_connections
            if isinstance(c, Connection091)
        ]

    return broker._read(held)


def _close_of(methods: list[m.Method]) -> m.ConnectionClose:
    [close] = [method for method in methods if isinstance(method, m.ConnectionClose)]
    return close


def test_a_frame_header_announcing_2_gib_is_refused_from_its_header() -> None:
    with minibroker.ThreadedBroker() as broker:
        sock = _attacker(broker)
        sock.sendall(struct.pack(">BHI", 1, 1, 2**31) + b"\x00" * 60_000)  # a 2 GiB method frame begins
        close = _close_of(_replies(sock, m.ConnectionClose))
        assert close.reply_code == 501 and "larger than the negotiated frame_max 131072" in close.reply_text
        sock.sendall(b"\x00" * 200_000)  # more of it, and no close-ok: dropped, not held
        pika_round_trip(broker)
        assert all(buffered == 0 for buffered, _output in _held(broker))
        sock.close()
        assert broker.errors() == []


def test_field_tables_nested_10000_deep_close_with_frame_error() -> None:
    with minibroker.ThreadedBroker() as broker:
        sock = _attacker(broker)
        table = b""
        for _ in range(10_000):  # {"a": {"a": ...}}: 7 bytes a level, 70 KB in one frame
            table = b"\x01aF" + struct.pack(">I", len(table)) + table
        payload = struct.pack(">HHH", 50, 10, 0) + b"\x01q" + b"\x00" + struct.pack(">I", len(table)) + table
        sock.sendall(struct.pack(">BHI", 1, 1, len(payload)) + payload + b"\xce")
        close = _close_of(_replies(sock, m.ConnectionClose))
        assert (close.reply_code, close.reply_text) == (
            501, f"FRAME_ERROR - field tables and arrays nest deeper than {MAX_NESTING} levels",
        )  # fmt: skip
        pika_round_trip(broker)
        sock.close()
        assert "q" not in broker.queues()
        assert broker.errors() == []


def test_a_body_larger_than_its_header_declared_closes_with_frame_error() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("target")
        sock = _attacker(broker)
        header = content_frames(1, BasicProperties(), b"x" * 10, 131072)[: -(7 + 10 + 1)]  # the header frame alone
        body = struct.pack(">BHI", 3, 1, 100_000) + b"y" * 100_000 + b"\xce"
        sock.sendall(method_frame(1, m.BasicPublish(routing_key="target")) + header + body)
        close = _close_of(_replies(sock, m.ConnectionClose))
        assert close.reply_code == 501 and "larger than the 10 its header declared" in close.reply_text
        pika_round_trip(broker)
        assert broker.queue("target").depth == 0  # nothing of it was stored
        sock.close()
        assert broker.errors() == []


def test_a_flood_of_channel_open_stops_at_channel_max() -> None:
    with minibroker.ThreadedBroker() as broker:
        sock = _attacker(broker)
        sock.sendall(b"".join(method_frame(n, m.ChannelOpen()) for n in range(2, 2049)))  # 2047 open, then 2048
        methods = _replies(sock, m.ConnectionClose)
        assert sum(isinstance(method, m.ChannelOpenOk) for method in methods) == 2046
        close = _close_of(methods)
        assert (close.reply_code, close.reply_text) == (
            530, "NOT_ALLOWED - number of channels opened (2047) has reached the negotiated channel_max (2047)",
        )  # fmt: skip
        pika_round_trip(broker)
        sock.close()
        assert broker.errors() == []


def test_a_publish_storm_that_never_reads_its_confirms_holds_no_more_than_the_output_bound() -> None:
    # 20,000 publishes sent without reading a confirm into a queue that refuses all but 10
    # (reject-publish): each refused publish owes a nack (one ack a publish would owe 420 kB),
    # yet the broker holds no more than the output bound for the connection, a good client is
    # served meanwhile, and the confirms, read at last, answer every publish (the acks of one
    # read as one basic.ack multiple=true).
    with minibroker.ThreadedBroker() as broker:
        sock = small_receive_buffer_socket(broker)
        sock.sendall(HANDSHAKE)
        sock.sendall(
            method_frame(1, m.QueueDeclare(queue="storm", arguments={"x-max-length": 10, "x-overflow": "reject-publish"}))
            + method_frame(1, m.ConfirmSelect())
        )
        publish = method_frame(1, m.BasicPublish(routing_key="storm")) + content_frames(1, BasicProperties(), b"s", 4096)
        total = 20_000

        def storm() -> None:
            for _ in range(total // 1000):
                sock.sendall(publish * 1000)

        writer = threading.Thread(target=storm)
        writer.start()
        writer.join(GOOD_CLIENT_WAIT * 2)
        assert not writer.is_alive()
        pika_round_trip(broker)
        reader = FrameReader(1 << 20)
        confirms: list[m.BasicAck | m.BasicNack] = []
        held = 0  # the most output held for the connection, sampled as its confirms are read
        while not confirms or confirms[-1].delivery_tag < total:
            held = max([held, *(output for _buffered, output in _held(broker))])
            data = sock.recv(65536)
            assert data, f"the connection ended after {len(confirms)} confirms"
            confirms += [
                c for f in reader.feed(data) if f.type == 1 and isinstance(c := decode_method(f.payload), (m.BasicAck, m.BasicNack))
            ]  # fmt: skip
        assert held <= OUTPUT_BOUND + 64 * 1024
        acks = [c for c in confirms if isinstance(c, m.BasicAck)]
        assert confirms[-1].delivery_tag == total and len(confirms) < total and any(a.multiple for a in acks)
        assert sum(isinstance(c, m.BasicNack) for c in confirms) == total - 10
        sock.close()
        broker.wait_for(lambda b: b.statistics().connections == 0, timeout=GOOD_CLIENT_WAIT)
        assert broker.errors() == []


def test_a_publisher_blocked_by_the_alarm_is_not_read() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("storm")
        broker.block_publishers("low on memory")
        sock = socket.create_connection((broker.host, broker.port), timeout=GOOD_CLIENT_WAIT)
        sock.sendall(HANDSHAKE)
        _replies(sock, m.ChannelOpenOk)
        publish = method_frame(1, m.BasicPublish(routing_key="storm")) + content_frames(1, BasicProperties(), b"s", 4096)
        sent = 0
        sock.settimeout(5.0)
        try:
            while sent < 1_000_000:  # about 40 MB, if the broker read it all
                sock.sendall(publish * 1000)
                sent += 1000
        except OSError:
            pass  # the kernel's buffers filled: the broker stopped reading
        assert sent < 1_000_000
        assert broker.queue("storm").depth == 1  # the publish that found the alarm, and no more

        def held() -> int:
            return max(
                sum(len(f.payload) + 8 for f in c.engine._held) + c.engine._reader.buffered
                for c in broker._broker.other_connections
                if isinstance(c, Connection091)
            )

        assert broker._read(held) <= READ_SIZE + 131072
        pika_round_trip(broker, publish=False)  # under the alarm a publish would wait for it too
        broker.unblock_publishers()
        broker.wait_for(lambda b: b.queue("storm").depth > 1, timeout=GOOD_CLIENT_WAIT)
        sock.close()
        assert broker.errors() == []
