"""The sans-I/O 0-9-1 server engine, driven in memory with no socket, thread or sleep.

Reply codes and texts were checked against RabbitMQ 3.10 (Debian's package, run locally): where
a test names a text, it is the one RabbitMQ sent for the same bytes.
"""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.amqp091 import methods as m
from minibroker.amqp091._state import ChannelState, ConnectionState
from minibroker.amqp091.connection import Connection, ConnectionConfig
from minibroker.amqp091.errors import AMQP091Error
from minibroker.amqp091.events import (
    Answer,
    ChannelClosed,
    ChannelOpened,
    ConnectionClosed,
    ConnectionOpened,
    MethodReceived,
    Published,
)
from minibroker.amqp091.frames import HEARTBEAT, PROTOCOL_HEADER, FrameReader, content_frames, method_frame
from minibroker.amqp091.methods import decode_method
from minibroker.amqp091.properties import BasicProperties, decode_content_header, encode_content_header
from minibroker.amqp091.values import encode_table


class Gate:
    def __init__(self) -> None:
        self.users = {"guest": "guest"}
        self.vhosts = {"/"}

    def login(self, user: str, password: str) -> bool:
        return self.users.get(user) == password

    def open_vhost(self, user: str, vhost: str) -> str | None:
        return None if vhost in self.vhosts else f"vhost {vhost} not found"


class Client:
    """The client half, written with the codec: what it sends and what it reads back."""

    def __init__(self, **config: Any) -> None:
        self.server = Connection(ConnectionConfig(**config), Gate())
        self.reader = FrameReader(1 << 20)
        self.events: list[Any] = []

    def send(self, data: bytes) -> list[Any]:
        events = self.server.receive_data(data)
        self.events += events
        return events

    def method(self, channel: int, method: m.Method) -> list[Any]:
        return self.send(method_frame(channel, method))

    def read(self) -> list[Any]:
        """What the server wrote, decoded: (channel, method), (channel, header) or (channel, body)."""
        out: list[Any] = []
        for frame in self.reader.feed(self.server.data_to_send()):
            if frame.type == 1:
                out.append((frame.channel, decode_method(frame.payload)))
            elif frame.type == 2:
                out.append((frame.channel, decode_content_header(frame.payload)))
            else:
                out.append((frame.channel, frame.type, frame.payload))
        return out

    def handshake(self, user: str = "guest", password: str = "guest", vhost: str = "/", heartbeat: int = 0) -> None:
        self.send(PROTOCOL_HEADER)
        self.method(0, m.ConnectionStartOk(response=b"\x00" + user.encode() + b"\x00" + password.encode()))
        self.method(0, m.ConnectionTuneOk(channel_max=0, frame_max=0, heartbeat=heartbeat))
        self.method(0, m.ConnectionOpen(virtual_host=vhost))

    def open(self, channel: int = 1) -> None:
        self.handshake()
        self.method(channel, m.ChannelOpen())
        self.read()
        self.events.clear()


def close_of(frames: list[Any]) -> tuple[int, int, str, int, int]:
    ((channel, method),) = [f for f in frames if isinstance(f[1], m.ConnectionClose | m.ChannelClose)]
    return channel, method.reply_code, method.reply_text, method.class_id, method.method_id


def test_handshake_offers_and_negotiates() -> None:
    client = Client(server_properties={"product": "minibroker"})
    client.send(PROTOCOL_HEADER)
    ((_, start),) = client.read()
    assert isinstance(start, m.ConnectionStart)
    assert (start.version_major, start.version_minor, start.mechanisms) == (0, 9, b"PLAIN AMQPLAIN")
    assert start.server_properties == {"product": "minibroker"}
    client.method(0, m.ConnectionStartOk(client_properties={"product": "t"}, response=b"\x00guest\x00guest"))
    ((_, tune),) = client.read()
    assert (tune.channel_max, tune.frame_max, tune.heartbeat) == (2047, 131072, 60)
    client.method(0, m.ConnectionTuneOk(channel_max=10, frame_max=8192, heartbeat=5))
    assert client.method(0, m.ConnectionOpen(virtual_host="/")) == [ConnectionOpened("guest", "/", {"product": "t"})]
    assert [type(f[1]) for f in client.read()] == [m.ConnectionOpenOk]
    assert (client.server.channel_max, client.server.frame_max, client.server.heartbeat) == (10, 8192, 5)


def test_amqplain_logs_in() -> None:
    client = Client()
    client.send(PROTOCOL_HEADER)
    response = encode_table({"LOGIN": "guest", "PASSWORD": "guest"})[4:]  # a table without its size
    client.method(0, m.ConnectionStartOk(mechanism="AMQPLAIN", response=response))
    assert client.server.state is ConnectionState.AWAIT_TUNE_OK and client.server.user == "guest"


@pytest.mark.parametrize("mechanism", ["PLAIN", "AMQPLAIN"])
def test_a_refused_login_is_rabbitmqs_403_then_close(mechanism: str) -> None:
    client = Client()
    client.send(PROTOCOL_HEADER)
    response = b"\x00guest\x00bad" if mechanism == "PLAIN" else encode_table({"LOGIN": "guest", "PASSWORD": "x"})[4:]
    events = client.method(0, m.ConnectionStartOk(mechanism=mechanism, response=response))
    assert close_of(client.read()) == (
        0, 403,
        f"ACCESS_REFUSED - Login was refused using authentication mechanism {mechanism}."
        " For details see the broker logfile.",
        0, 0,
    )  # fmt: skip
    assert [type(e) for e in events] == [ConnectionClosed]
    client.method(0, m.ConnectionCloseOk())
    assert client.server.finished


def test_an_unknown_vhost_is_530() -> None:
    client = Client()
    client.handshake(vhost="nope")
    assert close_of(client.read()) == (0, 530, "NOT_ALLOWED - vhost nope not found", 10, 40)
    assert not any(isinstance(e, ConnectionOpened) for e in client.events)


def test_tune_ok_past_the_offer_is_refused() -> None:
    client = Client()
    client.send(PROTOCOL_HEADER)
    client.method(0, m.ConnectionStartOk(response=b"\x00guest\x00guest"))
    client.method(0, m.ConnectionTuneOk(frame_max=1 << 20))
    assert close_of(client.read())[1:3] == (530, "NOT_ALLOWED - frame_max=1048576 > 131072 max size")


def test_a_wrong_protocol_header_gets_ours_and_a_close() -> None:
    client = Client()
    assert client.send(b"AMQP\x00\x01\x00\x00") == [ConnectionClosed(None, by_peer=False)]
    assert client.server.data_to_send() == PROTOCOL_HEADER
    assert client.server.finished


def test_the_header_may_arrive_a_byte_at_a_time() -> None:
    client = Client()
    for byte in PROTOCOL_HEADER:
        client.send(bytes([byte]))
    assert isinstance(client.read()[0][1], m.ConnectionStart)


def test_channels_open_and_close_both_ways() -> None:
    client = Client()
    client.open(1)
    assert client.method(2, m.ChannelOpen()) == [ChannelOpened(2)]
    assert client.method(2, m.ChannelClose(reply_code=200)) == [ChannelClosed(2, None, by_peer=True)]
    assert [type(f[1]) for f in client.read()] == [m.ChannelOpenOk, m.ChannelCloseOk]
    assert 2 not in client.server.channels


def test_a_close_read_after_reported_methods_is_answered_by_the_owner_in_order() -> None:
    # The owner answers the declare; close-ok must follow it (RabbitMQ answers a channel's methods
    # in order), so it comes as an Answer event; on another channel it is written at once.
    client = Client()
    client.open(1)
    client.method(2, m.ChannelOpen())
    client.read()
    close = m.ChannelClose(reply_code=200)
    events = client.send(
        method_frame(1, m.QueueDeclare(queue="q")) + method_frame(1, close) + method_frame(2, close)
    )
    assert events == [
        MethodReceived(1, m.QueueDeclare(queue="q")), Answer(1, m.ChannelCloseOk()), ChannelClosed(1, None, by_peer=True),
        ChannelClosed(2, None, by_peer=True),
    ]  # fmt: skip
    assert client.read() == [(2, m.ChannelCloseOk())]


@pytest.mark.parametrize(
    ("channel", "method", "expected"),
    [
        (1, m.ChannelOpen(), (0, 504, "CHANNEL_ERROR - second 'channel.open' seen", 20, 10)),
        (3, m.QueueDeclare(queue="x"), (0, 504, "CHANNEL_ERROR - expected 'channel.open'", 50, 10)),
        (1, m.QueueDeclareOk(), (0, 503, "COMMAND_INVALID - unimplemented method", 50, 11)),
        (1, m.ChannelCloseOk(), (0, 503, "COMMAND_INVALID - unimplemented method", 20, 41)),
        (0, m.ConnectionStartOk(), (0, 504, "CHANNEL_ERROR - unexpected method in connection state running", 10, 11)),
        (0, m.ChannelOpen(), (0, 504, "CHANNEL_ERROR - unexpected method in connection state running", 20, 10)),
    ],
)
def test_connection_errors_are_rabbitmqs(channel: int, method: m.Method, expected: tuple[Any, ...]) -> None:
    client = Client()
    client.open(1)
    events = client.method(channel, method)
    assert close_of(client.read()) == expected
    assert events == [ChannelClosed(1, events[0].error, by_peer=False), ConnectionClosed(events[0].error, False)]


def test_broker_methods_are_reported_and_access_request_answered() -> None:
    client = Client()
    client.open(1)
    declare = m.QueueDeclare(queue="q", durable=True, arguments={"x-max-priority": 5})
    assert client.method(1, declare) == [MethodReceived(1, declare)]
    assert client.method(1, m.AccessRequest()) == []
    assert client.read() == [(1, m.AccessRequestOk(ticket=1))]


def test_a_publish_is_reassembled_from_its_frames() -> None:
    client = Client()
    client.open(1)
    publish = m.BasicPublish(exchange="", routing_key="q", mandatory=True)
    props = BasicProperties(content_type="text/plain", headers={"k": 1})
    body = bytes(range(256)) * 100
    wire = method_frame(1, publish) + content_frames(1, props, body, 4096)
    events = [e for i in range(0, len(wire), 1000) for e in client.send(wire[i : i + 1000])]
    header_size = len(encode_content_header(len(body), props))
    assert events == [Published(1, publish, props, body, header_size)]
    # An empty body has no body frame: the header completes it.
    assert client.send(method_frame(1, publish) + content_frames(1, props, b"", 4096)) == [
        Published(1, publish, props, b"", header_size)
    ]


def test_content_frames_out_of_place_are_505() -> None:
    client = Client()
    client.open(1)
    client.send(content_frames(1, BasicProperties(), b"abc", 4096))
    assert close_of(client.read()) == (0, 505, "UNEXPECTED_FRAME - expected method frame, got non method frame instead", 0, 0)
    client = Client()
    client.open(1)
    client.method(1, m.BasicPublish(routing_key="x"))
    client.method(1, m.QueueDeclare(queue="y"))
    assert close_of(client.read()) == (
        0, 505, "UNEXPECTED_FRAME - expected content header for class 60, got non content header frame instead", 60, 40
    )  # fmt: skip


def test_a_message_over_the_maximum_closes_the_channel_from_its_header() -> None:
    client = Client(max_message_size=1000)
    client.open(1)
    wire = method_frame(1, m.BasicPublish(routing_key="q")) + content_frames(1, BasicProperties(), b"x" * 1001, 4096)
    events = client.send(wire)
    assert close_of(client.read()) == (
        1, 406, "PRECONDITION_FAILED - message size 1001 is larger than configured max size 1000", 60, 40
    )  # fmt: skip
    assert [type(e) for e in events] == [ChannelClosed]
    # The body frames that followed were discarded with the closing channel; the connection lives.
    assert client.server.channels == {1: ChannelState.CLOSING}
    client.method(1, m.ChannelCloseOk())
    assert client.method(1, m.ChannelOpen()) == [ChannelOpened(1)]


def test_a_closing_channel_discards_all_but_close() -> None:
    client = Client()
    client.open(1)
    error = AMQP091Error(404, "no queue 'x' in vhost '/'", 50, 10)
    client.server.close_channel(1, error)
    assert client.server.take_events() == [ChannelClosed(1, error, by_peer=False)]
    assert close_of(client.read()) == (1, 404, "NOT_FOUND - no queue 'x' in vhost '/'", 50, 10)
    assert client.method(1, m.QueueDeclare(queue="y")) == []
    client.method(1, m.ChannelCloseOk())
    client.method(1, m.QueueDeclare(queue="z"))
    assert close_of(client.read())[1:3] == (504, "CHANNEL_ERROR - expected 'channel.open'")


def test_the_peer_closing_the_connection() -> None:
    client = Client()
    client.open(1)
    assert client.method(0, m.ConnectionClose(reply_code=200)) == [
        ChannelClosed(1, None, by_peer=True),
        ConnectionClosed(None, by_peer=True),
    ]
    assert client.read()[-1] == (0, m.ConnectionCloseOk())
    assert client.server.finished


def test_closing_from_the_broker_waits_for_close_ok() -> None:
    client = Client()
    client.open(1)
    client.server.close()
    assert [type(e) for e in client.server.take_events()] == [ChannelClosed, ConnectionClosed]
    assert close_of(client.read())[1:3] == (320, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'")
    assert client.method(1, m.QueueDeclare()) == [] and not client.server.finished
    client.method(0, m.ConnectionCloseOk())
    assert client.server.finished


def test_heartbeats_are_sent_and_a_silent_client_is_dropped() -> None:
    client = Client()
    client.handshake(heartbeat=10)
    client.read()
    assert client.server.tick(100.0) == 110.0
    assert client.server.tick(110.0) == 120.0
    assert client.server.data_to_send() == HEARTBEAT
    client.send(HEARTBEAT)
    assert client.server.tick(115.0) == 120.0  # the read moved the silence deadline to 135
    assert client.server.tick(130.0) == 135.0 and client.server.data_to_send() == HEARTBEAT
    assert client.server.tick(135.0) is None
    assert client.server.finished
    (closed,) = client.server.take_events()
    assert isinstance(closed, ConnectionClosed) and "missed heartbeats from client, timeout: 10s" in closed.error.text


def test_a_heartbeat_on_a_channel_is_505() -> None:
    client = Client()
    client.open(1)
    client.send(b"\x08\x00\x01\x00\x00\x00\x00\xce")
    assert close_of(client.read())[1] == 505


def test_an_unfinished_handshake_times_out() -> None:
    client = Client(handshake_timeout=10.0)
    client.send(PROTOCOL_HEADER)
    assert client.server.tick(50.0) == 60.0
    assert client.server.tick(60.0) is None and client.server.finished


def test_a_malformed_frame_closes_with_501() -> None:
    client = Client()
    client.open(1)
    client.send(b"\x01\x00\x01\x00\x00\x00\x02\x00\x3c\xff")
    assert close_of(client.read())[1:3] == (501, "FRAME_ERROR - frame end octet is 0xff, expected 0xce (§4.2.3)")


def test_connection_lost_reports_every_channel() -> None:
    client = Client()
    client.open(1)
    client.method(5, m.ChannelOpen())
    assert client.server.connection_lost() == [
        ChannelClosed(1, None, by_peer=True),
        ChannelClosed(5, None, by_peer=True),
        ConnectionClosed(None, by_peer=True),
    ]
