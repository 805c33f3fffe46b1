"""A hostile peer over a real socket, and the good client that must stay served beside it.

Every test in ``tests/hostile/`` runs one attack from the issue "one peer cannot freeze the broker
or grow its memory without bound" and asserts two things that can fail: the broker does bounded
work (counted, never timed: fragments, ids visited, bytes held) and a fresh python-qpid-proton
client still connects, sends and receives while the attack is in progress.  The good client's
wait is generous (:data:`GOOD_CLIENT_WAIT`) so a loaded machine cannot fail it; how fast it is
served under each attack is measured by ``bench/hostile.py``, not asserted here.
"""

from __future__ import annotations

import socket
import time
import uuid
from typing import Any

from proton import Message
from proton.utils import BlockingConnection

import minibroker
from minibroker.testing import Frames, Peer
from minibroker.testing.peer import FrameReader

#: Seconds the good client may take for each step: a bound that only a frozen broker exceeds.
GOOD_CLIENT_WAIT = 30.0


class Attacker:
    """Raw AMQP bytes from :class:`~minibroker.testing.Peer` written to a real socket."""

    def __init__(
        self, broker: minibroker.ThreadedBroker, container_id: str = "attacker", sock: socket.socket | None = None
    ) -> None:
        self.peer = Peer(container_id)
        self.sock = sock or socket.create_connection((broker.host, broker.port), timeout=GOOD_CLIENT_WAIT)
        self.reader = FrameReader()
        self.frames = Frames()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def start(self, login: tuple[str, str] | None = None, **open_fields: Any) -> Frames:
        """(SASL PLAIN with ``login``,) header, open and begin; returns the broker's answer up to its begin."""
        peer = self.peer
        sasl = peer.sasl_plain(*login) if login is not None else b""
        self.send(sasl + peer.header() + peer.open(**open_fields) + peer.begin(0))
        return self.read_until(lambda f: any(x.name == "Begin" for x in f))

    def read_until(self, done: Any, timeout: float = GOOD_CLIENT_WAIT) -> Frames:
        """Read frames until ``done(all frames read so far)`` holds; the socket closing ends it too."""
        deadline = time.monotonic() + timeout
        while not done(self.frames):
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                raise AssertionError(f"no matching frame within {timeout} s; got {self.frames.names()}") from None
            if not data:
                break
            frames = self.reader.feed(data)
            self.peer.observe(frames)
            self.frames.extend(frames)
        return self.frames

    def close(self) -> None:
        self.sock.close()


def good_client_round_trip(broker: minibroker.ThreadedBroker, *, address: str | None = None, **kwargs: Any) -> None:
    """A fresh proton client connects, sends one message and receives it back (Part 2 §2.4-§2.7)."""
    address = address or f"good-{uuid.uuid4().hex[:8]}"
    body = f"served {uuid.uuid4().hex}"
    connection = BlockingConnection(broker.url, timeout=GOOD_CLIENT_WAIT, **kwargs)
    try:
        connection.create_sender(address).send(Message(body=body))
        receiver = connection.create_receiver(address)
        message = receiver.receive(timeout=GOOD_CLIENT_WAIT)
        receiver.accept()
        assert message.body == body
    finally:
        connection.close()


def held_output(broker: minibroker.ThreadedBroker) -> int:
    """The most output bytes the broker holds for any one connection (engine plus transport)."""

    def largest() -> int:
        return max(
            (c.engine.output_size + (c.transport_backlog or 0) for c in broker._broker.connections), default=0
        )

    return broker._read(largest)


def small_receive_buffer_socket(broker: minibroker.ThreadedBroker) -> socket.socket:
    """A socket that takes little into the kernel: what it does not read stays with the broker."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(GOOD_CLIENT_WAIT)
    sock.connect((broker.host, broker.port))
    return sock
