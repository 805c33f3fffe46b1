"""A short read's first message is written to its consumer before the frames after it are handled.

A request/reply client sends its next message and, after it, the disposition of the reply it
got, in one write.  The server handles the first frame of such a read alone and writes what it
routed to other connections before it reads on (``server.LEAD_READ``), so the consumer's process
can start on the message while the broker settles the rest.  Each socket write is recorded (the
``writes`` fixture), so the order is checked write by write, not by timing.
"""

from __future__ import annotations

import socket

import minibroker
from minibroker import server
from minibroker.amqp.message import Message, decode_message
from minibroker.testing import FrameReader, Peer, parse_frames


def _read_until(sock: socket.socket, reader: FrameReader, name: str, count: int = 1) -> list[str]:
    names: list[str] = []
    while names.count(name) < count:
        chunk = sock.recv(65536)
        assert chunk, f"the broker closed the connection after {names}"
        names += reader.feed(chunk).names()
    return names


def _bodies(chunk: bytes) -> list[object]:
    return [decode_message(frame.payload).body for frame in parse_frames(chunk) if frame.name == "Transfer"]


def test_the_first_message_of_a_short_read_leaves_before_the_next_frame_is_handled(writes: list[bytes]) -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("work")
        consumer, producer = Peer("consumer"), Peer("producer")
        consumer_reader, producer_reader = FrameReader(), FrameReader()
        with (
            socket.create_connection(("127.0.0.1", broker.port), timeout=10) as consumer_sock,
            socket.create_connection(("127.0.0.1", broker.port), timeout=10) as producer_sock,
        ):
            consumer_sock.sendall(consumer.start() + consumer.attach_receiver("c", "work", 0) + consumer.flow(0, 10))
            _read_until(consumer_sock, consumer_reader, "Attach")
            producer_sock.sendall(producer.start() + producer.attach_sender("p", "work", 0))
            _read_until(producer_sock, producer_reader, "Flow")  # credit: both transfers are sent at once
            both = producer.transfer(0, None, None, Message(body="first").encode()) + producer.transfer(
                0, None, None, Message(body="second").encode()
            )
            assert len(both) <= server.LEAD_READ
            producer_sock.sendall(both)  # one write: the broker reads both frames together
            _read_until(consumer_sock, consumer_reader, "Transfer", 2)
    delivered = [bodies for bodies in map(_bodies, writes) if bodies]
    assert delivered[0] == ["first"], f"the first message waited for the frame after it: {delivered}"
    assert delivered[1] == ["second"]
