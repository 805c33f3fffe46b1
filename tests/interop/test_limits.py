"""Limits, each with its spec error, exercised by python-qpid-proton (and the in-memory peer where exact)."""

from __future__ import annotations

import pytest
from proton import ConnectionException, Delivery, Message
from proton.utils import BlockingConnection, LinkDetached, SendException

import minibroker
from minibroker.amqp.performatives import Begin, Close, Flow, Open
from minibroker.broker.config import BrokerConfig, QueueOptions
from minibroker.broker.engine import Broker
from minibroker.testing import Peer, connect

pytestmark = pytest.mark.interop

RESOURCE_LIMIT = "amqp:resource-limit-exceeded"


def test_defaults_are_stated() -> None:
    config = BrokerConfig()
    assert (config.max_connections, config.max_sessions, config.max_links) == (1024, 256, 1024)
    assert config.max_message_size == 128 * 1024 * 1024
    options = QueueOptions()
    assert (options.max_depth, options.max_bytes, options.overflow) == (None, None, "reject-publish")


def test_max_connections_refuses_the_one_too_many_and_serves_again_after_a_close() -> None:
    with minibroker.ThreadedBroker(max_connections=2) as broker:
        first = BlockingConnection(broker.url, timeout=10)
        second = BlockingConnection(broker.url, timeout=10)
        with pytest.raises(ConnectionException, match=RESOURCE_LIMIT):
            BlockingConnection(broker.url, timeout=10).create_sender("q")
        first.close()
        broker.wait_for(lambda b: b.statistics().connections == 1)
        third = BlockingConnection(broker.url, timeout=10)
        third.create_sender("q").send(Message(body="served"))
        third.close()
        second.close()
        assert broker.queue("q").bodies == ["served"]
        assert broker.errors() == []


def test_max_links_per_connection_refuses_a_link_with_resource_limit_exceeded() -> None:
    with minibroker.ThreadedBroker(max_links=2) as broker:
        conn = BlockingConnection(broker.url, timeout=10)
        first = conn.create_sender("a")
        conn.create_receiver("b")
        with pytest.raises(LinkDetached) as refused:
            conn.create_sender("c")
        assert refused.value.condition == RESOURCE_LIMIT
        first.close()
        conn.create_sender("d").send(Message(body="room again"))  # the refused link holds nothing
        conn.close()
        assert broker.queue("d").depth == 1


def test_max_sessions_is_offered_as_channel_max_and_a_begin_beyond_it_closes() -> None:
    broker = Broker(BrokerConfig(max_sessions=2))
    peer = Peer()
    pump = connect(broker, peer)
    frames = pump.send(peer.header() + peer.open() + peer.begin(0) + peer.begin(1))
    assert frames.one(Open).channel_max == 1
    assert len(frames.of(Begin)) == 2
    frames = pump.send(peer.begin(2))
    assert str(frames.one(Close).error.condition) == "amqp:connection:framing-error"
    assert broker.errors == []


def test_max_message_size_is_advertised_by_default() -> None:
    with minibroker.ThreadedBroker() as broker:
        conn = BlockingConnection(broker.url, timeout=10)
        sender = conn.create_sender("sized")
        assert sender.link.remote_max_message_size == 128 * 1024 * 1024
        conn.close()


def test_reject_publish_rejects_with_resource_limit_exceeded() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("bounded", max_depth=3)
        conn = BlockingConnection(broker.url, timeout=10)
        sender = conn.create_sender("bounded")
        for n in range(3):
            sender.send(Message(body=n))
        with pytest.raises(SendException) as rejected:
            sender.send(Message(body="one too many"))
        assert rejected.value.state == Delivery.REJECTED
        conn.close()
        assert broker.queue("bounded").bodies == [0, 1, 2]


def test_reject_publish_by_bytes() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("small", max_bytes=200)
        conn = BlockingConnection(broker.url, timeout=10)
        sender = conn.create_sender("small")
        sender.send(Message(body="x" * 100))
        with pytest.raises(SendException):
            sender.send(Message(body="y" * 100))
        conn.close()
        assert broker.queue("small").depth == 1


def test_drop_head_drops_the_oldest_and_dead_letters_it() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("latest", max_depth=3, overflow="drop-head")
        conn = BlockingConnection(broker.url, timeout=10)
        sender = conn.create_sender("latest")
        for n in range(5):
            sender.send(Message(body=n))
        conn.close()
        assert broker.queue("latest").bodies == [2, 3, 4]
        dead = broker.queue("latest/$DeadLetterQueue").messages
        assert [m.body for m in dead] == [0, 1]
        assert dead[0].annotations["x-opt-deadletter-reason"] == "MaxLengthExceeded"
        assert broker.queue("latest").statistics.dropped == 2


def test_drop_head_without_dead_lettering() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("gauge", max_depth=1, overflow="drop-head", dead_letter_address="")
        conn = BlockingConnection(broker.url, timeout=10)
        sender = conn.create_sender("gauge")
        for n in range(3):
            sender.send(Message(body=n))
        conn.close()
        assert broker.queue("gauge").bodies == [2]
        assert "gauge/$DeadLetterQueue" not in broker.queues()


def test_withhold_credit_holds_producers_until_a_consumer_makes_room() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("paced", max_depth=5, overflow="withhold-credit")
        producer = BlockingConnection(broker.url, timeout=10)
        sender = producer.create_sender("paced")
        for n in range(5):
            sender.send(Message(body=n))
        waiting = sender.link.send(Message(body=5))  # no credit: proton holds it
        with pytest.raises(Exception, match="timed out"):
            producer.wait(lambda: waiting.remote_state == Delivery.ACCEPTED, timeout=0.3)
        assert sender.link.credit <= 0  # proton counts the held message against its credit
        assert broker.queue("paced").depth == 5

        consumer = BlockingConnection(broker.url, timeout=10)
        receiver = consumer.create_receiver("paced", credit=1)
        assert receiver.receive(timeout=10).body == 0
        receiver.accept()
        consumer.close()  # sends the accept (each blocking connection runs its own event loop)
        producer.wait(lambda: waiting.remote_state == Delivery.ACCEPTED, timeout=10)
        assert broker.queue("paced").bodies == [1, 2, 3, 4, 5]
        producer.close()


def test_withhold_credit_never_grants_more_than_the_room_over_all_producers() -> None:
    broker = Broker()
    broker.declare_queue("paced", QueueOptions(max_depth=10, overflow="withhold-credit"))
    credits = []
    for n in range(4):
        peer = Peer(container_id=f"p{n}")
        pump = connect(broker, peer)
        frames = pump.send(peer.start() + peer.attach_sender(f"s{n}", "paced", 0))
        credits.append(sum(f.link_credit for f in frames.of(Flow) if f.handle == 0))
    assert sum(credits) == 10  # exactly the room, however many producers
    assert credits[0] == 10 and credits[1:] == [0, 0, 0]
