"""Per-user permissions (send / receive / manage) with proton, and no password anywhere shown."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from proton import Delivery, Message
from proton.utils import BlockingConnection, LinkDetached, SendException

import minibroker
from minibroker import server
from minibroker.amqp.sasl_frames import SaslInit
from minibroker.broker.permissions import Permissions
from minibroker.protocol.sasl import redacted

pytestmark = pytest.mark.interop

USERS = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
PERMISSIONS = {
    "alice": {"orders*": "send receive", "audit": "receive"},
    "bob": {"orders": "receive"},
    "carol": {"scratch.*": "all"},
    "anonymous": {"public": "send receive"},
}


@pytest.fixture(scope="module")
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(users=USERS, permissions=PERMISSIONS, frame_log=200) as running:
        for name in ("orders", "orders.eu", "audit", "public", "secret"):
            running.declare_queue(name)
        yield running


def _connect(broker: minibroker.ThreadedBroker, user: str | None) -> BlockingConnection:
    if user is None:
        return BlockingConnection(broker.url, timeout=10, allowed_mechs="ANONYMOUS")
    return BlockingConnection(broker.url, timeout=10, user=user, password=USERS[user], allowed_mechs="PLAIN")


MATRIX = [
    # user, role, address, allowed
    ("alice", "send", "orders", True),
    ("alice", "receive", "orders", True),
    ("alice", "send", "orders.eu", True),
    ("alice", "receive", "audit", True),
    ("alice", "send", "audit", False),
    ("alice", "send", "secret", False),
    ("alice", "send", "orders-new", False),  # unknown: creating it needs manage
    ("bob", "receive", "orders", True),
    ("bob", "send", "orders", False),
    ("bob", "receive", "queue://orders", True),
    ("bob", "receive", "orders.eu", False),
    ("carol", "send", "scratch.one", True),  # manage: may create it
    ("carol", "receive", "scratch.one", True),
    ("carol", "send", "orders", False),
    (None, "send", "public", True),
    (None, "receive", "public", True),
    (None, "receive", "orders", False),
]


@pytest.mark.parametrize(("user", "role", "address", "allowed"), MATRIX)
def test_permission_matrix(
    broker: minibroker.ThreadedBroker, user: str | None, role: str, address: str, allowed: bool
) -> None:
    conn = _connect(broker, user)
    try:
        if allowed:
            if role == "send":
                conn.create_sender(address).send(Message(body=f"{user}->{address}"))
            else:
                conn.create_receiver(address)
        else:
            with pytest.raises(LinkDetached) as refused:
                if role == "send":
                    conn.create_sender(address)
                else:
                    conn.create_receiver(address)
            assert refused.value.condition == "amqp:unauthorized-access"
            assert repr(user or "anonymous") in str(refused.value)
    finally:
        conn.close()
    if not allowed and address not in ("orders", "orders.eu", "audit", "public", "secret"):
        assert address not in broker.queues()  # a refused link creates nothing
    assert broker.errors() == []


def test_anonymous_relay_rejects_messages_to_addresses_the_user_may_not_send_to(
    broker: minibroker.ThreadedBroker,
) -> None:
    conn = _connect(broker, "alice")
    relay = conn.create_sender(None)
    relay.send(Message(address="orders.eu", body="allowed"))
    with pytest.raises(SendException) as rejected:
        relay.send(Message(address="secret", body="not allowed"))
    assert rejected.value.state == Delivery.REJECTED
    relay.send(Message(address="orders", body="still usable"))  # the link stays attached
    conn.close()
    assert "not allowed" not in broker.queue("secret").bodies


def test_no_permissions_means_everyone_may_do_everything() -> None:
    with minibroker.ThreadedBroker(users=USERS) as open_broker:
        conn = BlockingConnection(open_broker.url, timeout=10, user="bob", password="bob-pw", allowed_mechs="PLAIN")
        conn.create_sender("anything").send(Message(body=1))
        conn.close()
        assert open_broker.queue("anything").depth == 1


def test_no_password_in_the_frame_log_or_the_config(broker: minibroker.ThreadedBroker) -> None:
    conn = _connect(broker, "alice")
    conn.close()
    shown = "\n".join(str(record) + repr(record.performative) for record in broker.frames())
    assert "SaslInit" in shown  # the SASL frame is logged ...
    assert "alice" in shown  # ... with the user's name ...
    for password in USERS.values():
        assert password not in shown  # ... and never a password
    assert "alice-pw" not in repr(minibroker.BrokerConfig(users=USERS))


def test_redacted_keeps_the_user_and_hides_the_password() -> None:
    init = SaslInit(mechanism="PLAIN", initial_response=b"\x00alice\x00alice-pw")
    shown = redacted(init)
    assert isinstance(shown, SaslInit)
    assert shown.initial_response == b"\x00alice\x00<redacted>"
    anonymous = SaslInit(mechanism="ANONYMOUS", initial_response=b"trace@example")
    assert redacted(anonymous) is anonymous


def test_unknown_right_is_refused_with_what_to_use_instead() -> None:
    with pytest.raises(ValueError, match="unknown right 'write'; use send, receive, manage or all"):
        Permissions({"alice": {"*": "write"}}, {}, {})


def test_binding_beyond_loopback_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    assert server._is_loopback("127.0.0.1") and server._is_loopback("::1") and server._is_loopback("localhost")
    assert not server._is_loopback("0.0.0.0") and not server._is_loopback("192.168.1.10")
    monkeypatch.setattr(server, "_is_loopback", lambda host: False)  # bind loopback, act as if it were not
    with pytest.warns(minibroker.ExposedBrokerWarning, match="reachable from other machines without TLS"):
        with minibroker.ThreadedBroker():
            pass


def test_loopback_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", minibroker.ExposedBrokerWarning)
        with minibroker.ThreadedBroker():
            pass
