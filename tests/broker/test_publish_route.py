"""A producer link's cached route to its node (policy.EventPolicy._publish, Router.generation).

A sending link remembers the node its address led to for its previous message and uses it while
the router's generation says no node was added or removed since.  These tests hold it to what
routing each message by its address gives (broker paper 2.1): a node deleted while the link lives
is not written to any more, one created again under the same name (of the same kind or another)
is, and purging a queue changes nothing of the route.
"""

from __future__ import annotations

from typing import Any

from minibroker.amqp.message import Message
from minibroker.amqp.messaging import Accepted, Rejected
from minibroker.amqp.performatives import Disposition
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.testing import Peer, Pump, connect

T0 = 1_700_000_000.0


def sender(broker: Broker, address: str) -> tuple[Peer, Pump]:
    peer = Peer("producer")
    pump = connect(broker, peer)
    pump.send(peer.start() + peer.attach_sender("s", address, 0))
    return peer, pump


def send(peer: Peer, pump: Pump, body: Any) -> Any:
    """Send one message on the link; the state of the disposition answering it."""
    return pump.send(peer.transfer(0, None, None, Message(body=body).encode())).one(Disposition).state


def test_a_queue_deleted_and_declared_again_gets_the_next_message_not_the_old_queue() -> None:
    broker = Broker(BrokerConfig(), ManualClock(T0))
    old = broker.declare_queue("q")
    peer, pump = sender(broker, "q")
    assert isinstance(send(peer, pump, "first"), Accepted)
    broker.delete_node("q")
    new = broker.declare_queue("q")
    assert isinstance(send(peer, pump, "second"), Accepted)
    assert (old.depth, new.depth) == (1, 1)


def test_a_queue_replaced_by_a_topic_of_the_same_name_gets_the_next_message_as_a_topic() -> None:
    broker = Broker(BrokerConfig(), ManualClock(T0))
    old = broker.declare_queue("orders")
    peer, pump = sender(broker, "orders")
    assert isinstance(send(peer, pump, 1), Accepted)
    broker.delete_node("orders")
    topic = broker.declare_topic("orders")
    assert isinstance(send(peer, pump, 2), Accepted)
    assert old.depth == 1
    assert topic.counters.enqueued == 1  # published to the topic (no subscriber: dropped, and counted)


def test_without_auto_create_a_deleted_node_rejects_what_its_producers_still_send() -> None:
    broker = Broker(BrokerConfig(auto_create=False), ManualClock(T0))
    old = broker.declare_queue("q")
    peer, pump = sender(broker, "q")
    assert isinstance(send(peer, pump, "first"), Accepted)
    broker.delete_node("q")
    state = send(peer, pump, "second")
    assert isinstance(state, Rejected) and state.error is not None
    assert state.error.condition == "amqp:not-found"
    assert old.depth == 1  # the deleted queue took nothing more


def test_purging_a_queue_keeps_its_producers_route() -> None:
    broker = Broker(BrokerConfig(), ManualClock(T0))
    queue = broker.declare_queue("q")
    peer, pump = sender(broker, "q")
    assert isinstance(send(peer, pump, 1), Accepted)
    assert broker.purge("q") == 1
    assert isinstance(send(peer, pump, 2), Accepted)
    assert broker.queues["q"] is queue and queue.depth == 1
