"""Finding 6: ``/management`` checked a user's rights once, at attach, and then acted on any resource.

Before the fix a user with rights on ``/management`` and ``bob.*`` only purged, bound and deleted
another user's queue ``secret`` and declared ``evil-not-bob``.  Now every request is authorised
against the queue or exchange it names, RabbitMQ's configure / write / read mapped to this broker's
manage / send / receive: configure to declare or delete, read on a queue to purge it, write on the
destination and read on the source exchange to bind or unbind, and for a queue that dead-letters,
write on its dead-letter exchange.  A refused request gets no answer: its session ends with
``amqp:unauthorized-access`` and RabbitMQ's text, as RabbitMQ 4 ends it (``check_resource_access``
in ``rabbit_amqp_session``; its ``amqp_auth_SUITE`` expects ``session_ended``), while the
connection and its other sessions go on.  Raw frames show the ``end`` itself.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hostile_peer import Attacker, good_client_round_trip  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp.errors import UNAUTHORIZED_ACCESS
from minibroker.amqp.message import Message, decode_message
from minibroker.amqp.messaging import Properties
from minibroker.amqp.performatives import SND_SETTLED, Error, Transfer
from minibroker.protocol.peer import Frames
from minibroker.rabbitmq import RabbitMQOptions, exchange_address, queue_address

pytestmark = pytest.mark.interop

USERS = {"bob": "bob-pw", "alice": "alice-pw"}
PERMISSIONS = {"bob": {"/management": "all", "bob.*": "all"}, "alice": {"*": "all"}}
#: The management link pair's handles on each session: requests out, answers in.
REQUESTS, ANSWERS = 0, 1


class RawManagement:
    """HTTP over AMQP in raw frames as ``user``: a management link pair on session 0, more on demand.

    A request is sent pre-settled, as RabbitMQ's clients send them (RabbitMQ takes no other);
    what comes back is ``(status, body)`` or, when the broker ended the session instead, the
    ``end``'s error.
    """

    def __init__(self, broker: minibroker.ThreadedBroker, user: str) -> None:
        self.attacker = Attacker(broker, container_id=user)
        self.attacker.start(login=(user, USERS[user]))
        self.channels = itertools.count(1)
        self._pair(0)

    def _pair(self, channel: int) -> int:
        """Attach the pair on ``channel`` (beginning that session unless it is 0) and grant answers credit."""
        attacker, peer = self.attacker, self.attacker.peer
        if channel:
            attacker.send(peer.begin(channel))
            attacker.read_until(lambda _: peer.session(channel).remote_begin is not None)
        attacker.send(
            peer.attach_sender(f"requests-{channel}", "/management", REQUESTS, channel=channel, snd_settle_mode=SND_SETTLED)
            + peer.attach_receiver(f"answers-{channel}", "/management", ANSWERS, channel=channel, snd_settle_mode=SND_SETTLED)
            + peer.flow(ANSWERS, 100, channel=channel)
        )
        attacker.read_until(
            lambda _: peer.link(REQUESTS, channel).credit > 0 and peer.link(ANSWERS, channel).remote_attach is not None
        )
        return channel

    def __call__(self, method: str, path: str, body: Any = None, *, channel: int = 0) -> tuple[str, Any] | Error:
        attacker, peer = self.attacker, self.attacker.peer
        session = peer.session(channel)
        start = len(attacker.frames)

        def answers(frames: Frames) -> list[bytes]:
            return [
                f.payload
                for f in frames[start:]
                if f.channel == session.remote_channel and isinstance(f.performative, Transfer)
            ]

        request = Message(
            properties=Properties(message_id=str(uuid.uuid4()), to=path, subject=method, reply_to="$me"), body=body
        )
        attacker.send(peer.transfer(REQUESTS, None, None, request.encode(), settled=True, channel=channel))
        frames = attacker.read_until(lambda frames: session.remote_end is not None or bool(answers(frames)))
        if session.remote_end is not None:
            attacker.send(peer.end(channel))  # the session is ended: answer the broker's end (§2.5.7)
            assert session.remote_end.error is not None, f"{method} {path}: the session ended without an error"
            return session.remote_end.error
        answer = decode_message(answers(frames)[0])
        assert answer.properties is not None and answer.properties.correlation_id == request.properties.message_id
        return str(answer.properties.subject), answer.body

    def on_new_session(self, method: str, path: str, body: Any = None) -> tuple[str, Any] | Error:
        """The request on a session of its own, so that ending it leaves the others."""
        return self(method, path, body, channel=self._pair(next(self.channels)))

    def close(self) -> None:
        self.attacker.close()


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
    bob = RawManagement(broker, "bob")
    try:
        assert bob("PUT", exchange_address("bob.x"), {"type": "direct"}) == ("204", None)
        assert bob("PUT", queue_address("bob.q"), {})[0] == "200"
        refused = {
            "purge": bob.on_new_session("DELETE", queue_address("secret") + "/messages"),
            "bind to secret": bob.on_new_session("POST", "/bindings", _binding("bob.x", "secret")),
            "bind from alice.x": bob.on_new_session("POST", "/bindings", _binding("alice.x", "bob.q")),
            "unbind": bob.on_new_session("DELETE", "/bindings/src=alice.x;dstq=secret;key=k;args="),
            "delete queue": bob.on_new_session("DELETE", queue_address("secret")),
            "declare queue": bob.on_new_session("PUT", queue_address("evil-not-bob"), {}),
            "declare exchange": bob.on_new_session("PUT", exchange_address("evil-not-bob"), {"type": "fanout"}),
            "delete exchange": bob.on_new_session("DELETE", exchange_address("alice.x")),
            "dead-letter to alice.x": bob.on_new_session(
                "PUT", queue_address("bob.dl"), {"arguments": {"x-dead-letter-exchange": "alice.x"}}
            ),
        }
        good_client_round_trip(broker, user="alice", password=USERS["alice"], allowed_mechs="PLAIN")
        # Session 0, begun before the refusals, and the connection go on.
        own = [
            bob("POST", "/bindings", _binding("bob.x", "bob.q")),
            bob("DELETE", queue_address("bob.q") + "/messages"),
            bob("DELETE", "/bindings/src=bob.x;dstq=bob.q;key=k;args="),
            bob("GET", queue_address("secret")),  # RabbitMQ asks no right to read a queue's info
            bob("DELETE", queue_address("bob.q")),
            bob("DELETE", exchange_address("bob.x")),
        ]
        assert bob.attacker.peer.remote_close is None
    finally:
        bob.close()
    alice = RawManagement(broker, "alice")
    try:
        served = [alice("DELETE", "/bindings/src=alice.x;dstq=secret;key=k;args="), alice("GET", queue_address("secret"))]
    finally:
        alice.close()
    assert [answer[0] for answer in own] == ["204", "200", "204", "200", "200", "204"]
    assert [answer[0] for answer in served] == ["204", "200"]
    assert all(isinstance(error, Error) for error in refused.values()), refused
    assert {name: error.condition for name, error in refused.items()} == dict.fromkeys(refused, UNAUTHORIZED_ACCESS)
    descriptions = {name: error.description for name, error in refused.items()}  # RabbitMQ's, word for word
    assert descriptions["purge"] == "read access to queue 'secret' in vhost '/' refused for user 'bob'"
    assert descriptions["bind to secret"] == "write access to queue 'secret' in vhost '/' refused for user 'bob'"
    assert descriptions["bind from alice.x"] == "read access to exchange 'alice.x' in vhost '/' refused for user 'bob'"
    assert descriptions["declare queue"] == "configure access to queue 'evil-not-bob' in vhost '/' refused for user 'bob'"
    assert descriptions["dead-letter to alice.x"] == (
        "write access to exchange 'alice.x' in vhost '/' refused for user 'bob'"
    )
    assert [m.body for m in broker.queue("secret").messages] == ["alice's"]  # not purged, not deleted
    assert "evil-not-bob" not in broker.queues() and "bob.dl" not in broker.queues()
    assert "evil-not-bob" not in broker.exchanges() and "alice.x" in broker.exchanges()
    assert broker.exchange("alice.x").bindings == ()
    assert "bob.q" not in broker.queues() and "bob.x" not in broker.exchanges()
