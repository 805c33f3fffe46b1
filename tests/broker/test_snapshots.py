"""Queue snapshots that cost nothing until read, and seeding many messages in one call.

A snapshot's counters are taken at once; its messages are copied when first
read, or just before the queue changes if a snapshot still holds them, so
what a test reads is always the queue as it was when the snapshot was taken.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from minibroker import BrokerConfig, ManualClock, Message, NodeError, ThreadedBroker
from minibroker.amqp.message import decode_message, encode_bodies
from minibroker.amqp.messaging import Modified, Released
from minibroker.amqp.performatives import Transfer
from minibroker.amqp.types import symbol
from minibroker.api import build_message
from minibroker.broker.engine import Broker
from minibroker.broker.statistics import QueuedMessages
from minibroker.testing import Frames, Peer, Pump, connect

T0 = 1_700_000_000.0


def make_broker(**config: Any) -> Broker:
    return Broker(BrokerConfig(**config), ManualClock(T0))


def consumer(broker: Broker, address: str, credit: int) -> tuple[Peer, Pump, Frames]:
    """A client receiving from ``address`` on link handle 0; the frames its credit brought."""
    peer = Peer("client")
    pump = connect(broker, peer)
    pump.send(peer.start())
    frames = pump.send(peer.attach_receiver("r", address, 0) + peer.flow(0, credit=credit))
    return peer, pump, frames


@pytest.fixture
def broker() -> Iterator[ThreadedBroker]:
    with ThreadedBroker() as running:
        yield running


# ------------------------------------------------------------- lazy snapshots


def test_counters_are_read_at_once_and_messages_on_demand() -> None:
    broker = make_broker()
    broker.publish_many("q", encode_bodies(Message(), range(5)))
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.depth, snapshot.available, snapshot.acquired) == (5, 5, 0)
    assert "not read yet" in repr(snapshot.messages)
    assert len(snapshot.messages) == 5
    assert snapshot.messages[0].body == 0 and snapshot.messages[-1].body == 4
    assert [m.body for m in snapshot.messages[1:3]] == [1, 2]
    assert snapshot.bodies == [0, 1, 2, 3, 4]
    with pytest.raises(IndexError, match="holds 5"):
        snapshot.messages[5]


def test_a_snapshot_keeps_the_contents_it_was_taken_with_when_the_queue_changes() -> None:
    broker = make_broker()
    broker.publish_many("q", encode_bodies(Message(), ["a", "b"]))
    before = broker.queue_snapshot("q")
    peer, pump, frames = consumer(broker, "q", credit=1)  # "a" is acquired
    during = broker.queue_snapshot("q")
    (transfer,) = frames.of(Transfer)
    # the consumer gives it back as failed: delivery-count goes up, it is available again
    pump.send(peer.disposition(transfer.delivery_id, state=Modified(delivery_failed=True)))
    broker.publish("q", build_message("c"))
    after = broker.queue_snapshot("q")
    assert before.bodies == ["a", "b"] and [m.acquired for m in before.messages] == [False, False]
    assert during.bodies == ["b", "a"]  # available first, then acquired
    assert [(m.acquired, m.delivery_count) for m in during.messages] == [(False, 0), (True, 0)]
    assert after.bodies == ["a", "b", "c"]
    assert after.messages[0].delivery_count == 1 and after.messages[0].header.delivery_count == 1
    assert before.depth == 2 and during.acquired == 1 and after.depth == 3


def test_a_released_message_after_the_snapshot_still_shows_acquired() -> None:
    broker = make_broker()
    broker.publish("q", build_message("only"))
    peer, pump, frames = consumer(broker, "q", credit=1)
    snapshot = broker.queue_snapshot("q")
    (transfer,) = frames.of(Transfer)
    pump.send(peer.disposition(transfer.delivery_id, state=Released()))
    assert [m.acquired for m in snapshot.messages] == [True]
    assert [m.acquired for m in broker.queue_snapshot("q").messages] == [False]


def test_snapshots_taken_without_a_change_between_share_one_copy() -> None:
    broker = make_broker()
    broker.publish_many("q", encode_bodies(Message(), range(3)))
    first, second = broker.queue_snapshot("q"), broker.queue_snapshot("q")
    assert first.messages._capture is second.messages._capture
    broker.publish("q", build_message(3))
    third = broker.queue_snapshot("q")
    assert third.messages._capture is not first.messages._capture
    assert first.bodies == second.bodies == [0, 1, 2] and third.bodies == [0, 1, 2, 3]


def test_a_snapshot_dropped_unread_is_never_copied() -> None:
    broker = make_broker()
    broker.publish_many("q", encode_bodies(Message(), range(3)))
    kept = broker.queue_snapshot("q").messages._capture
    dropped = broker.queue_snapshot("q")
    capture = dropped.messages._capture
    assert capture is kept
    del kept, capture, dropped
    gc.collect()
    kept_one = broker.queue_snapshot("q")
    del kept_one
    gc.collect()
    broker.publish("q", build_message(3))  # the queue changes: nothing is left to copy
    held = broker.queue_snapshot("q")
    assert not held.messages._capture.filled
    broker.publish("q", build_message(4))  # now one is held: it is copied before the change
    assert held.messages._capture.filled and held.bodies == [0, 1, 2, 3]


def test_the_ttl_shown_is_what_was_left_when_the_snapshot_was_taken() -> None:
    clock = ManualClock(T0)
    broker = Broker(BrokerConfig(), clock)
    broker.publish("q", build_message("t", ttl=10))
    early = broker.queue_snapshot("q")
    clock.advance(4)
    late = broker.queue_snapshot("q")
    assert early.messages._capture is late.messages._capture  # nothing changed in the queue
    assert early.messages[0].header.ttl == 10_000 and late.messages[0].header.ttl == 6_000


def test_messages_compare_like_a_sequence_and_cannot_be_changed() -> None:
    broker = make_broker()
    broker.publish_many("q", encode_bodies(Message(), ["x"]))
    messages = broker.queue_snapshot("q").messages
    assert isinstance(messages, QueuedMessages)
    assert messages == tuple(messages) and messages == list(messages)
    assert messages != ()
    with pytest.raises(TypeError):
        messages[0] = messages[0]  # type: ignore[index]
    with pytest.raises(TypeError):
        hash(messages)
    assert "QueuedMessages([" in repr(messages)


def test_messages_of_a_stopped_broker_can_still_be_read() -> None:
    with ThreadedBroker() as broker:
        broker.publish_many("q", ["a", "b"])
        snapshot = broker.queue("q")
    assert snapshot.bodies == ["a", "b"]


# ------------------------------------------------------------- publish_many


def test_publish_many_seeds_in_order_with_shared_fields(broker: ThreadedBroker) -> None:
    count = broker.publish_many("orders", range(1000), priority=7, subject="seed",
                                application_properties={"batch": 1})  # fmt: skip
    assert count == 1000
    snapshot = broker.queue("orders")
    assert snapshot.depth == 1000 and snapshot.statistics.enqueued == 1000
    first, last = snapshot.messages[0], snapshot.messages[-1]
    assert (first.body, last.body) == (0, 999)
    assert first.priority == 7 and first.properties.subject == "seed"
    assert last.application_properties == {"batch": 1}


def test_publish_many_bodies_of_each_kind(broker: ThreadedBroker) -> None:
    broker.publish_many("data", [b"\x01", b"\x02"], body_kind="data")
    broker.publish_many("seq", [[1, 2], [3]], body_kind="sequence")
    data = broker.queue("data").messages
    assert [m.body for m in data] == [b"\x01", b"\x02"] and data[0].message.body_kind == "data"
    assert broker.queue("seq").bodies == [[1, 2], [3]]


def test_publish_many_prepared_messages(broker: ThreadedBroker) -> None:
    encoded = Message(body="raw").encode()
    broker.publish_many("q", messages=[Message(body="m", properties=None), encoded])
    assert broker.queue("q").bodies == ["m", "raw"]


def test_publish_many_reaches_consumers_and_fans_out_on_topics() -> None:
    broker = make_broker()
    _peer, pump, _ = consumer(broker, "q", credit=10)
    broker.publish_many("q", encode_bodies(Message(), ["a", "b", "c"]))
    delivered = [decode_message(f.payload).body for f in pump.read() if isinstance(f.performative, Transfer)]
    assert delivered == ["a", "b", "c"]
    assert broker.queue_snapshot("q").acquired == 3
    sub_peer = Peer("sub")
    sub_pump = connect(broker, sub_peer)
    sub_pump.send(sub_peer.start())
    sub_pump.send(sub_peer.attach_receiver("s1", "news", 0, capabilities=[symbol("topic")]))
    sub_pump.send(sub_peer.attach_receiver("s2", "news", 1, capabilities=[symbol("topic")]))
    assert broker.publish_many("news", encode_bodies(Message(), [1, 2])) == 2
    depths = [s.depth for s in broker.topic_snapshot("news").subscriptions]
    assert depths == [2, 2]


def test_publish_many_misuse_says_what_to_do(broker: ThreadedBroker) -> None:
    with pytest.raises(TypeError, match="wrap a single body in a list"):
        broker.publish_many("q", "abc")
    with pytest.raises(TypeError, match="not both"):
        broker.publish_many("q", [1], messages=[Message(body=1)])
    with pytest.raises(TypeError, match="unknown message field"):
        broker.publish_many("q", [1], colour="red")
    assert broker.publish_many("q", []) == 0


def test_publish_many_to_a_missing_node_without_auto_create() -> None:
    with ThreadedBroker(auto_create=False) as broker:
        with pytest.raises(NodeError, match="declare it first"):
            broker.publish_many("nowhere", [1, 2])
