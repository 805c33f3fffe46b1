"""The wire-protocol seam: the protocol header a client starts with picks the front end that serves it.

A toy front end registered for its own header answers over a real socket on the broker's port,
while AMQP 1.0 clients on the same port are served as before (minibroker/broker/frontends.py).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import pytest
from proton import Message
from proton.utils import BlockingConnection

import minibroker
from minibroker.broker.engine import Broker
from minibroker.broker.frontends import ServedConnection, register_front_end

ECHO_HEADER = b"ECHO\x00\x00\x00\x01"


class _Echo:
    """Answers every byte it reads with the same byte upper-cased; ``bye`` ends the connection."""

    def __init__(self, broker: Broker, notify: Callable[[], None], peer: str) -> None:
        self.broker = broker
        self.notify = notify
        self.peer = peer
        self.open = True
        self.throttled = False
        self.transport_backlog: int | None = None
        self.hold_logins = self.login_held = self.login_failed = self.backlogged = False
        self._out = bytearray()
        self._done = False

    @property
    def protocol(self) -> _Echo:
        return self

    @property
    def finished(self) -> bool:
        return self._done

    @property
    def handshaking(self) -> bool:
        return False

    @property
    def read_paused(self) -> bool:
        return False

    def alarm(self, reason: str | None) -> None:
        pass  # the broker's resource alarm means nothing to an echo

    def receive_data(self, data: bytes, max_frames: int | None = None) -> None:
        self._out += data.upper()
        if b"bye" in data:
            self._done = True

    def data_to_send(self) -> bytes:
        data, self._out = bytes(self._out), bytearray()
        return data

    def tick(self, now: float) -> float | None:
        return None

    def output_drained(self) -> None:
        pass

    def connection_lost(self) -> None:
        if self.open:
            self.broker.forget_connection(self)

    def release(self) -> None:
        self.connection_lost()

    def close_forced(self) -> None:
        self._done = True


def _echo(broker: Broker, notify: Callable[[], None], peer: str) -> ServedConnection:
    return _Echo(broker, notify, peer)


@pytest.fixture
def echo_registered() -> Iterator[None]:
    register_front_end(ECHO_HEADER, _echo)
    yield
    from minibroker.broker import frontends

    del frontends._FRONT_ENDS[ECHO_HEADER]


def _read_all(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def test_a_registered_header_is_served_by_its_front_end_beside_amqp_1_0(echo_registered: None) -> None:
    with minibroker.ThreadedBroker() as broker:
        with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
            sock.sendall(ECHO_HEADER + b"hello ")  # the header and the first data in one read
            sock.sendall(b"bye")
            assert _read_all(sock) == (ECHO_HEADER + b"hello bye").upper()
        # AMQP 1.0 on the same port is unaffected.
        connection = BlockingConnection(broker.url, timeout=10)
        try:
            connection.create_sender("q").send(Message(body="still 1.0"))
        finally:
            connection.close()
        assert broker.queue("q").bodies == ["still 1.0"]
        broker.wait_for(lambda b: b.statistics().connections == 0, timeout=10)
        assert broker.statistics().connections_total == 2
        assert broker.errors() == []


def test_a_header_must_be_eight_bytes() -> None:
    with pytest.raises(ValueError, match="8 bytes"):
        register_front_end(b"AMQP", _echo)
