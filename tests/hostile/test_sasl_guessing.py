"""SASL PLAIN guessing (not yet tried in the first round; broker/logins.py, server.py).

Before the fix nothing limited guesses: a guesser could open connection after connection, each
with one password, as fast as the loopback takes them.  Now, once an address has failed
``max_login_failures`` times within a minute, its new connections are read one per
``login_delay`` seconds, and one whose turn is more than 10 s away is closed unanswered.  Below
the bound nothing changes: a test that logs in wrongly on purpose and then rightly waits for
nothing.  Counted, not timed: the connections the guard slowed or cut off, and the turns it gave.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
from hostile_peer import GOOD_CLIENT_WAIT, good_client_round_trip  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp.sasl_frames import SaslOutcome
from minibroker.testing import Peer
from minibroker.testing.peer import FrameReader

pytestmark = pytest.mark.interop

USERS = {"alice": "right"}


def _login(broker: minibroker.ThreadedBroker, password: str) -> int | None:
    """One connection, one SASL PLAIN login as alice; the sasl-outcome code, or None if closed unanswered."""
    peer = Peer("guesser")
    with socket.create_connection((broker.host, broker.port), timeout=GOOD_CLIENT_WAIT) as sock:
        sock.sendall(peer.sasl_plain("alice", password))
        reader = FrameReader()
        while True:
            data = sock.recv(65536)
            if not data:
                return None
            for frame in reader.feed(data):
                if isinstance(frame.performative, SaslOutcome):
                    return int(frame.performative.code)


def _guard(broker: minibroker.ThreadedBroker) -> Any:
    return broker._broker.logins


def test_a_few_wrong_logins_then_a_right_one_wait_for_nothing() -> None:
    with minibroker.ThreadedBroker(users=USERS) as broker:
        assert [_login(broker, f"wrong-{n}") for n in range(5)] == [1] * 5  # auth (Part 5 §5.3.3.6)
        assert _login(broker, "right") == 0
        assert (_guard(broker).slowed, _guard(broker).cut_off) == (0, 0)


def test_a_guesser_is_slowed_to_one_login_per_delay_then_cut_off() -> None:
    with minibroker.ThreadedBroker(users=USERS, max_login_failures=20, login_delay=0.5) as broker:
        guard = _guard(broker)
        assert [_login(broker, f"guess-{n}") for n in range(20)] == [1] * 20
        assert guard.slowed == 0  # the first 20 are answered as fast as they come
        assert _login(broker, "guess-20") == 1
        assert guard.slowed == 1  # from the 21st on, every PLAIN login waits its turn
        # 25 guesses at once: turns 0.5 s apart, so those more than 10 s away are closed unanswered.
        socks = [socket.create_connection((broker.host, broker.port), timeout=GOOD_CLIENT_WAIT) for _ in range(25)]
        for n, sock in enumerate(socks):
            sock.sendall(Peer("guesser").sasl_plain("alice", f"parallel-{n}"))
        broker.wait_for(lambda b: guard.slowed + guard.cut_off == 26, timeout=GOOD_CLIENT_WAIT)
        assert guard.cut_off >= 1 and guard.slowed >= 15  # about 20 turns fit in 10 s, the rest are cut
        # An anonymous client from the same address is not held: it has no password to guess.
        good_client_round_trip(broker)
        for sock in socks:
            sock.close()
        # reset() forgets the failures: the next test's logins wait for nothing.
        broker.reset()
        assert _login(broker, "right") == 0
        assert (guard.slowed, guard.cut_off) == (0, 0)


def test_a_right_password_from_a_penalised_address_gets_in_at_its_turn() -> None:
    with minibroker.ThreadedBroker(users=USERS, max_login_failures=3, login_delay=0.2) as broker:
        assert [_login(broker, f"guess-{n}") for n in range(3)] == [1] * 3
        good_client_round_trip(broker, user="alice", password="right", allowed_mechs="PLAIN")
        assert _guard(broker).slowed == 1  # it waited one turn, then got in
