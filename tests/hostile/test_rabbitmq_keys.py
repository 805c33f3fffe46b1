"""Finding 2: topic matching cost binding words x routing words, and neither key had a length limit.

Before the fix a 10 KB binding key (declared through ``/management``) and one publish with a 20 KB
routing key froze every client for seconds, and the publish was answered ``released``, so it could
be repeated at will.  Now both keys are at most 255 bytes of UTF-8 (an AMQP 0-9-1 ``shortstr``, as
RabbitMQ keeps them): the binding is refused with 400, the message is rejected with
``amqp:invalid-field``, an attach naming such a key in its address is refused with the same
condition, and a fresh proton client is served meanwhile.  Keys within the limit but crafted so
that one message reaches every node of the topic trie (many ``#`` paths kept alive) cost at most
``max_topic_visits`` nodes: past it the message is rejected with ``amqp:resource-limit-exceeded``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hostile_peer import GOOD_CLIENT_WAIT, Attacker, good_client_round_trip  # tests/hostile is on sys.path
from proton import Message as ProtonMessage
from proton.utils import BlockingConnection

import minibroker
from minibroker.amqp.message import Message
from minibroker.amqp.messaging import Properties, Rejected
from minibroker.amqp.performatives import Attach, Detach, Disposition
from minibroker.rabbitmq import RabbitMQOptions, exchange_address

pytestmark = pytest.mark.interop

LONG_BINDING_KEY = "a." * 5_000  # 10 KB: 5,000 words
LONG_ROUTING_KEY = "a." * 10_000  # 20 KB: 10,000 words


def request(broker: minibroker.ThreadedBroker, method: str, path: str, body: Any = None) -> tuple[str, Any]:
    """One HTTP-over-AMQP request to /management over a real socket: the status and the body."""
    connection = BlockingConnection(broker.url, timeout=GOOD_CLIENT_WAIT)
    try:
        sender = connection.create_sender("/management")
        receiver = connection.create_receiver("/management")
        sender.send(ProtonMessage(id=str(uuid.uuid4()), subject=method, address=path, body=body, reply_to="$me"))
        answer = receiver.receive(timeout=GOOD_CLIENT_WAIT)
        return answer.subject, answer.body
    finally:
        connection.close()


def _settled(dispositions: list[Disposition]) -> int:
    return sum((d.last if d.last is not None else d.first) - d.first + 1 for d in dispositions)


@pytest.fixture
def broker() -> Any:
    with minibroker.ThreadedBroker(rabbitmq=RabbitMQOptions()) as running:
        running.declare_exchange("logs", "topic")
        running.declare_queue("all")
        running.bind("logs", queue="all", key="#")
        yield running


def test_a_binding_key_over_255_bytes_is_refused_with_400(broker: minibroker.ThreadedBroker) -> None:
    binding = {"source": "logs", "destination_queue": "all", "binding_key": LONG_BINDING_KEY, "arguments": {}}
    status, text = request(broker, "POST", "/bindings", binding)
    assert status == "400" and "at most 255 bytes" in text
    exactly = {**binding, "binding_key": "é" * 127 + "a"}  # 255 bytes of UTF-8 in 128 characters: allowed
    assert request(broker, "POST", "/bindings", exactly)[0] == "204"
    over = {**binding, "binding_key": "é" * 128}  # 128 characters, 256 bytes: refused
    assert request(broker, "POST", "/bindings", over)[0] == "400"
    assert sorted(len(b.key.encode()) for b in broker.exchange("logs").bindings) == [1, 255]
    good_client_round_trip(broker)


def test_a_routing_key_over_255_bytes_is_rejected_with_invalid_field(broker: minibroker.ThreadedBroker) -> None:
    attacker = Attacker(broker)
    attacker.start()
    peer = attacker.peer
    attacker.send(peer.attach_sender("by-subject", exchange_address("logs"), 0))
    attacker.read_until(lambda frames: frames.of(Attach))
    for delivery_id in range(20):  # a released answer invited retries; a rejection is final
        message = Message(body="x", properties=Properties(subject=LONG_ROUTING_KEY)).encode()
        attacker.send(peer.transfer(0, delivery_id, str(delivery_id).encode(), message))
    frames = attacker.read_until(lambda frames: _settled(frames.of(Disposition)) >= 20)  # ranges: first..last
    good_client_round_trip(broker)
    outcomes = [d.state for d in frames.of(Disposition)]
    assert all(isinstance(o, Rejected) and o.error is not None for o in outcomes)
    assert {o.error.condition for o in outcomes if isinstance(o, Rejected) and o.error} == {"amqp:invalid-field"}
    assert broker.queue("all").depth == 0  # nothing routed
    # The same key in a link's address is refused at attach; the connection stays.
    attacker.send(peer.attach_sender("by-address", exchange_address("logs", LONG_ROUTING_KEY), 1))
    detach = attacker.read_until(lambda frames: frames.of(Detach)).one(Detach)
    assert detach.error is not None and detach.error.condition == "amqp:invalid-field"
    attacker.close()


def crafted_key(i: int) -> str:
    """A binding key of 14 '#'-separated choices (distinct per ``i``) and a long '#' tail, ending in ``z``."""
    choices = ".".join("#.a" if (i >> bit) & 1 else "#.b" for bit in range(14))
    return (choices + ".#.a" * 60)[:250] + ".z"


def test_bindings_crafted_to_reach_every_trie_node_cost_a_bounded_walk(broker: minibroker.ThreadedBroker) -> None:
    for i in range(2_000):  # each path reachable by the key below, none matching it (no 'z')
        broker.bind("logs", queue="all", key=crafted_key(i))
    attacker = Attacker(broker)
    attacker.start()
    peer = attacker.peer
    attacker.send(peer.attach_sender("crafted", exchange_address("logs", ".".join(["a", "b"] * 64)[:255]), 0))
    attacker.read_until(lambda frames: frames.of(Attach))
    for delivery_id in range(50):
        attacker.send(peer.transfer(0, delivery_id, str(delivery_id).encode(), Message(body="x").encode()))
    frames = attacker.read_until(lambda frames: _settled(frames.of(Disposition)) >= 50)
    good_client_round_trip(broker)
    outcomes = [d.state for d in frames.of(Disposition)]
    assert {o.error.condition for o in outcomes if isinstance(o, Rejected) and o.error} == {
        "amqp:resource-limit-exceeded"
    }
    assert all(isinstance(o, Rejected) for o in outcomes)
    assert "RabbitMQOptions.max_topic_visits" in str(outcomes[0].error.description)  # type: ignore[union-attr]
    assert broker.queue("all").depth == 0
    attacker.close()
