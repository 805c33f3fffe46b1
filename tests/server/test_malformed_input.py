"""Malformed input over a real socket closes only that connection, with the right condition."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from proton import Message
from proton.utils import BlockingConnection

import minibroker
from minibroker.amqp import Close, Open, codec
from minibroker.protocol.framing import AMQP_HEADER, FRAME_HEADER, frame


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker() as running:
        running.publish("kept", "still here")
        yield running


def _open_frame() -> bytes:
    body = bytearray()
    Open(container_id="raw").encode_into(body)
    return frame(0, body)


def _exchange(port: int, data: bytes) -> bytes:
    """Send raw bytes, read until the broker closes the socket."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        received = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk


def _close_condition(data: bytes) -> str | None:
    """The error condition of the close frame in the broker's reply, if any."""
    pos = 8  # after the protocol header
    while pos + 8 <= len(data):
        size, doff, _type, _channel = FRAME_HEADER.unpack_from(data, pos)
        body = data[pos + doff * 4 : pos + size]
        if body:
            performative = codec.decode_at(body, 0)[0]
            if isinstance(performative, Close):
                return str(performative.error.condition) if performative.error else None
        pos += size
    return None


def _still_serving(broker: minibroker.ThreadedBroker) -> None:
    conn = BlockingConnection(broker.url, timeout=10)
    receiver = conn.create_receiver("kept")
    assert receiver.receive(timeout=10).body == "still here"
    receiver.release()
    conn.close()
    broker.wait_for(lambda b: b.queue("kept").available == 1)


def test_wrong_protocol_header_is_answered_with_ours_then_closed(broker: minibroker.ThreadedBroker) -> None:
    reply = _exchange(broker.port, b"HTTP/1.1 GET /\r\n\r\n")
    assert reply == AMQP_HEADER
    _still_serving(broker)


@pytest.mark.parametrize(
    ("bad_frame", "condition"),
    [
        (struct.pack(">IBBH", 4, 2, 0, 0), "amqp:connection:framing-error"),  # size below 8
        (struct.pack(">IBBH", 10_000_000, 2, 0, 0), "amqp:connection:framing-error"),  # over max-frame-size
        (struct.pack(">IBBH", 12, 1, 0, 0) + b"\x00" * 4, "amqp:connection:framing-error"),  # doff below 2
        (frame(0, b"\x00\x53\x10\xc0\x05\x01\xa1\xff"), "amqp:decode-error"),  # truncated open
        (frame(0, b"\x99garbage"), "amqp:decode-error"),  # not an AMQP encoding
        (frame(0, codec.encode("just a string")), "amqp:decode-error"),  # not a performative
    ],
)
def test_malformed_frame_closes_with_condition(
    broker: minibroker.ThreadedBroker, bad_frame: bytes, condition: str
) -> None:
    reply = _exchange(broker.port, AMQP_HEADER + _open_frame() + bad_frame)
    assert reply.startswith(AMQP_HEADER)
    assert _close_condition(reply) == condition
    _still_serving(broker)


def test_other_connections_keep_working_while_one_misbehaves(broker: minibroker.ThreadedBroker) -> None:
    healthy = BlockingConnection(broker.url, timeout=10)
    sender = healthy.create_sender("work")
    sender.send(Message(body="before"))
    reply = _exchange(broker.port, AMQP_HEADER + _open_frame() + frame(0, b"\x99garbage"))
    assert _close_condition(reply) == "amqp:decode-error"
    sender.send(Message(body="after"))
    healthy.close()
    assert broker.queue("work").bodies == ["before", "after"]
    _still_serving(broker)
