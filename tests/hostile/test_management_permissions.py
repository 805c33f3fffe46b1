"""Finding 6: ``/management`` checked a user's rights once, at attach, and then acted on any resource.

Before the fix a user with rights on ``/management`` and ``bob.*`` only purged, bound and deleted
another user's queue ``secret`` and declared ``evil-not-bob``.  Now every request is authorised
against the queue or exchange it names, RabbitMQ's configure / write / read mapped to this broker's
manage / send / receive: configure to declare or delete, read on a queue to purge it, write on the
destination and read on the source exchange to bind or unbind, and for a queue that dead-letters,
write on its dead-letter exchange.  A refused request is answered 403 with RabbitMQ's text.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hostile_peer import GOOD_CLIENT_WAIT, good_client_round_trip  # tests/hostile is on sys.path
from proton import Message
from proton.utils import BlockingConnection

import minibroker
from minibroker.rabbitmq import RabbitMQOptions, exchange_address, queue_address

pytestmark = pytest.mark.interop

USERS = {"bob": "bob-pw", "alice": "alice-pw"}
PERMISSIONS = {"bob": {"/management": "all", "bob.*": "all"}, "alice": {"*": "all"}}


class Management:
    """HTTP over AMQP on one proton connection as ``user``: the status code and body of each request."""

    def __init__(self, broker: minibroker.ThreadedBroker, user: str) -> None:
        self.connection = BlockingConnection(
            broker.url, timeout=GOOD_CLIENT_WAIT, user=user, password=USERS[user], allowed_mechs="PLAIN"
        )
        self.sender = self.connection.create_sender("/management")
        self.receiver = self.connection.create_receiver("/management")

    def __call__(self, method: str, path: str, body: Any = None) -> tuple[str, Any]:
        self.sender.send(Message(id=str(uuid.uuid4()), subject=method, address=path, body=body, reply_to="$me"))
        answer = self.receiver.receive(timeout=GOOD_CLIENT_WAIT)
        return answer.subject, answer.body

    def close(self) -> None:
        self.connection.close()


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(
        rabbitmq=RabbitMQOptions(), users=USERS, permissions=PERMISSIONS, allow_anonymous=False
    ) as running:
        running.declare_queue("secret")
        running.publish("secret", "alice's")
        running.declare_exchange("alice.x", "fanout")
        yield running


def _binding(source: str, queue: str) -> dict[str, Any]:
    return {"source": source, "destination_queue": queue, "binding_key": "k", "arguments": {}}


def test_bob_manages_bob_star_only(broker: minibroker.ThreadedBroker) -> None:
    bob = Management(broker, "bob")
    try:
        assert bob("PUT", exchange_address("bob.x"), {"type": "direct"})[0] == "204"
        assert bob("PUT", queue_address("bob.q"), {})[0] == "200"
        refused = {
            "purge": bob("DELETE", queue_address("secret") + "/messages"),
            "bind to secret": bob("POST", "/bindings", _binding("bob.x", "secret")),
            "bind from alice.x": bob("POST", "/bindings", _binding("alice.x", "bob.q")),
            "unbind": bob("DELETE", "/bindings/src=alice.x;dstq=secret;key=k;args="),
            "delete queue": bob("DELETE", queue_address("secret")),
            "declare queue": bob("PUT", queue_address("evil-not-bob"), {}),
            "declare exchange": bob("PUT", exchange_address("evil-not-bob"), {"type": "fanout"}),
            "delete exchange": bob("DELETE", exchange_address("alice.x")),
            "dead-letter to alice.x": bob(
                "PUT", queue_address("bob.dl"), {"arguments": {"x-dead-letter-exchange": "alice.x"}}
            ),
        }
        good_client_round_trip(broker, user="alice", password=USERS["alice"], allowed_mechs="PLAIN")
        own = [
            bob("POST", "/bindings", _binding("bob.x", "bob.q")),
            bob("DELETE", queue_address("bob.q") + "/messages"),
            bob("DELETE", "/bindings/src=bob.x;dstq=bob.q;key=k;args="),
            bob("GET", queue_address("secret")),  # RabbitMQ asks no right to read a queue's info
            bob("DELETE", queue_address("bob.q")),
            bob("DELETE", exchange_address("bob.x")),
        ]
    finally:
        bob.close()
    assert [status for status, _ in own] == ["204", "200", "204", "200", "200", "204"]
    assert {name: status for name, (status, _) in refused.items()} == dict.fromkeys(refused, "403")
    assert refused["purge"][1].startswith("read access to queue 'secret' in vhost '/' refused for user 'bob'")
    assert refused["bind to secret"][1].startswith("write access to queue 'secret'")
    assert refused["bind from alice.x"][1].startswith("read access to exchange 'alice.x'")
    assert refused["declare queue"][1].startswith("configure access to queue 'evil-not-bob'")
    assert refused["dead-letter to alice.x"][1].startswith("write access to exchange 'alice.x'")
    assert [m.body for m in broker.queue("secret").messages] == ["alice's"]  # not purged, not deleted
    assert "evil-not-bob" not in broker.queues() and "bob.dl" not in broker.queues()
    assert "evil-not-bob" not in broker.exchanges() and "alice.x" in broker.exchanges()
    assert broker.exchange("alice.x").bindings == ()
    assert "bob.q" not in broker.queues() and "bob.x" not in broker.exchanges()
