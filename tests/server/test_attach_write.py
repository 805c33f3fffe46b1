"""A receiving peer's attach answer leaves in a socket write of its own, before the link's first transfer.

RabbitMQ 4 answers a consumer's attach before its queue sends anything; a client
that reads the answer and the first messages together may run its message
handler before its ``consumer()`` call has returned (rabbitmq-amqp-python-client
0.6.0's blocking consumer does).  Each write the server hands to a socket is
recorded (the ``writes`` fixture, conftest.py), so the order is checked write by
write, not by timing.
"""

from __future__ import annotations

import socket

import minibroker
from minibroker.rabbitmq import RabbitMQOptions
from minibroker.testing import FrameReader, Peer, parse_frames


def test_the_attach_answer_is_written_before_the_first_transfer(writes: list[bytes]) -> None:
    with minibroker.ThreadedBroker(rabbitmq=RabbitMQOptions()) as broker:  # the order is RabbitMQ's
        for i in range(3):
            broker.publish("jobs", f"job {i}")
        peer = Peer()
        # Attach and credit in one write, as Proton's clients send them: the messages are ready.
        request = peer.start() + peer.attach_receiver("consumer", "jobs", 0) + peer.flow(0, 10)
        reader = FrameReader()
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(request)
            names: list[str] = []
            while names.count("Transfer") < 3:
                chunk = sock.recv(65536)
                assert chunk, f"the broker closed the connection after {names}"
                names += reader.feed(chunk).names()
    chunks = [parse_frames(chunk).names() for chunk in writes if chunk]
    (with_attach,) = [names for names in chunks if "Attach" in names]
    assert "Transfer" not in with_attach, f"the attach answer shared its write with transfers: {chunks}"
    assert sum(names.count("Transfer") for names in chunks) == 3
