"""Protocol header and SASL negotiation (OASIS AMQP 1.0 Part 2 §2.2, §2.4.1; Part 5 §5.1-§5.3)."""

from __future__ import annotations

import pytest

from minibroker.amqp import errors as conditions
from minibroker.amqp.performatives import Open
from minibroker.amqp.sasl_frames import SASL_AUTH, SASL_OK, SaslMechanisms, SaslOutcome
from minibroker.protocol import Connection, ConnectionConfig, events
from minibroker.protocol.framing import AMQP_HEADER, SASL_HEADER
from minibroker.testing import Peer, ProtocolHeader, connect

USERS = {"alice": "secret"}


@pytest.mark.parametrize("trickle", [False, True])
def test_bare_amqp_header_is_answered_with_header_then_open(trickle: bool) -> None:
    conn = Connection()
    peer = Peer(container_id="client-1")
    pump = connect(conn, peer, trickle=trickle)

    frames = pump.send(peer.header())
    assert frames.performatives() == [AMQP_HEADER]
    assert isinstance(frames[0].performative, ProtocolHeader) and not frames[0].performative.is_sasl

    frames = pump.send(peer.open(hostname="example.org"))
    opened = frames.one(Open)
    assert frames[0].channel == 0
    assert opened.container_id == "minibroker"
    assert opened.max_frame_size == conn.config.max_frame_size
    assert opened.idle_time_out == 60_000
    assert pump.events == [events.ConnectionOpened("client-1", "example.org", None)]
    assert not pump.finished


@pytest.mark.parametrize(
    ("users", "anonymous", "offered"),
    [
        ({}, True, ["ANONYMOUS"]),
        (USERS, True, ["PLAIN", "ANONYMOUS"]),
        (USERS, False, ["PLAIN"]),
    ],
)
def test_sasl_header_is_answered_with_mechanisms(
    users: dict[str, str], anonymous: bool, offered: list[str]
) -> None:
    conn = Connection(ConnectionConfig(users=users, allow_anonymous=anonymous))
    frames = connect(conn).send(Peer.sasl_header())
    assert frames.names() == ["ProtocolHeader", "SaslMechanisms"]
    assert frames[0].performative == SASL_HEADER and frames[0].performative.is_sasl
    assert frames.one(SaslMechanisms).sasl_server_mechanisms == offered


@pytest.mark.parametrize("trickle", [False, True])
def test_sasl_anonymous_then_amqp_header_opens(trickle: bool) -> None:
    conn = Connection()
    peer = Peer()
    pump = connect(conn, peer, trickle=trickle)
    frames = pump.send(peer.sasl_anonymous())
    assert frames.names() == ["ProtocolHeader", "SaslMechanisms", "SaslOutcome"]
    assert frames.one(SaslOutcome).code == SASL_OK
    assert not pump.finished

    frames = pump.send(peer.header() + peer.open())
    assert frames.names() == ["ProtocolHeader", "Open"]
    assert frames[0].performative == AMQP_HEADER
    assert [type(e) for e in pump.events] == [events.ConnectionOpened]


def test_sasl_plain_good_password_authenticates_the_user() -> None:
    conn = Connection(ConnectionConfig(users=USERS))
    peer = Peer()
    pump = connect(conn, peer)
    frames = pump.send(peer.sasl_plain("alice", "secret") + peer.header() + peer.open())
    assert frames.names() == ["ProtocolHeader", "SaslMechanisms", "SaslOutcome", "ProtocolHeader", "Open"]
    assert frames.one(SaslOutcome).code == SASL_OK
    assert conn.user == "alice"
    assert pump.events == [events.ConnectionOpened(peer.container_id, None, "alice")]


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "secret"), ("alice", "")])
def test_sasl_plain_bad_credentials_fail_with_auth_and_finish(user: str, password: str) -> None:
    conn = Connection(ConnectionConfig(users=USERS))
    peer = Peer()
    pump = connect(conn, peer)
    frames = pump.send(peer.sasl_plain(user, password) + peer.header() + peer.open())
    # Nothing after the outcome is read: the transport is to be closed.
    assert frames.names() == ["ProtocolHeader", "SaslMechanisms", "SaslOutcome"]
    assert frames.one(SaslOutcome).code == SASL_AUTH
    assert pump.finished
    assert conn.user is None
    [closed] = pump.events
    assert isinstance(closed, events.ConnectionClosed) and not closed.by_peer
    assert closed.error is not None and closed.error.condition == conditions.UNAUTHORIZED_ACCESS


def test_plain_without_configured_users_fails() -> None:
    conn = Connection()
    frames = connect(conn).send(Peer().sasl_plain("alice", "secret"))
    assert frames.one(SaslOutcome).code == SASL_AUTH
    assert conn.finished


def test_anonymous_disallowed_rejects_sasl_anonymous() -> None:
    conn = Connection(ConnectionConfig(users=USERS, allow_anonymous=False))
    frames = connect(conn).send(Peer().sasl_anonymous())
    assert frames.one(SaslOutcome).code == SASL_AUTH
    assert conn.finished


@pytest.mark.parametrize("trickle", [False, True])
def test_anonymous_disallowed_bare_amqp_header_gets_sasl_header_and_finish(trickle: bool) -> None:
    conn = Connection(ConnectionConfig(users=USERS, allow_anonymous=False))
    pump = connect(conn, trickle=trickle)
    frames = pump.send(Peer.header() + Peer().open())
    assert frames.performatives() == [SASL_HEADER]
    assert pump.finished
    [closed] = pump.events
    assert isinstance(closed, events.ConnectionClosed)
    assert closed.error is not None and closed.error.condition == conditions.UNAUTHORIZED_ACCESS
    # Whatever follows is ignored.
    assert conn.receive_data(Peer().open()) == []
    assert conn.data_to_send() == b""


def test_sasl_header_twice_is_refused() -> None:
    conn = Connection()
    peer = Peer()
    frames = connect(conn, peer).send(peer.sasl_anonymous() + peer.sasl_header())
    assert frames.names() == ["ProtocolHeader", "SaslMechanisms", "SaslOutcome", "ProtocolHeader"]
    assert frames[-1].performative == AMQP_HEADER
    assert conn.finished


def test_amqp_frame_during_sasl_is_a_framing_error() -> None:
    conn = Connection()
    pump = connect(conn)
    pump.send(Peer.sasl_header() + Peer().open())
    assert conn.finished
    [closed] = pump.events
    assert isinstance(closed, events.ConnectionClosed)
    assert closed.error is not None and closed.error.condition == conditions.FRAMING_ERROR
