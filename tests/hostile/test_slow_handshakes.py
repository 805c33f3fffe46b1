"""Finding 6: sockets that trickle the protocol header, one byte now and then, never finishing.

Before the fix a connection took a ``max_connections`` slot from the moment it was accepted and
any byte reset its idle timer, so slow handshakes held every slot and a valid PLAIN login was
refused.  Now a connection counts against ``max_connections`` only from its ``open``; the
handshakes in progress are bounded apart (``max_handshakes``, the oldest goes first) and each is
closed ``handshake_timeout`` seconds after it was accepted (10 by default; short here).
"""

from __future__ import annotations

import socket

import pytest
from hostile_peer import GOOD_CLIENT_WAIT, good_client_round_trip  # tests/hostile is on sys.path

import minibroker

pytestmark = pytest.mark.interop


def _dawdlers(broker: minibroker.ThreadedBroker, count: int) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        sock = socket.create_connection((broker.host, broker.port), timeout=GOOD_CLIENT_WAIT)
        sock.sendall(b"AM")  # a third of a SASL header, and no more
        sockets.append(sock)
    return sockets


def _closed_by_broker(sock: socket.socket) -> bool:
    try:
        while sock.recv(4096):
            pass  # e.g. a SASL header and close frames before the end
    except (ConnectionResetError, TimeoutError):
        return False
    return True


def test_dawdling_handshakes_take_no_slot_of_a_valid_login() -> None:
    options = {"max_connections": 4, "max_handshakes": 8, "handshake_timeout": None}
    with minibroker.ThreadedBroker(allow_anonymous=False, users={"app": "secret"}, **options) as broker:
        dawdlers = _dawdlers(broker, 40)  # ten times max_connections, five times max_handshakes
        good_client_round_trip(broker, user="app", password="secret", allowed_mechs="PLAIN")
        # The oldest dawdlers were closed to make room; at most max_handshakes remain.
        closed = [sock for sock in dawdlers[:30] if _closed_by_broker(sock)]
        assert len(closed) == 30
        for sock in dawdlers:
            sock.close()
        assert broker.errors() == []


def test_an_unfinished_handshake_is_closed_at_the_handshake_timeout() -> None:
    with minibroker.ThreadedBroker(handshake_timeout=0.2, idle_timeout=None) as broker:
        [dawdler] = _dawdlers(broker, 1)
        assert _closed_by_broker(dawdler)  # not by the idle time-out: there is none
        dawdler.close()
        good_client_round_trip(broker)  # a handshake done at once is not affected
        broker.wait_for(lambda b: b.statistics().connections == 0, timeout=GOOD_CLIENT_WAIT)


def test_the_default_is_ten_seconds() -> None:
    assert minibroker.BrokerConfig().handshake_timeout == 10.0
