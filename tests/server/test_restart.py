"""``restart()``: sockets dropped, same port, durable messages kept, non-durable ones lost."""

from __future__ import annotations

import pytest
import trio
from proton import ConnectionException, Message
from proton.utils import BlockingConnection, LinkDetached

import minibroker


def test_restart_drops_connections_keeps_the_port_and_only_durable_messages() -> None:
    with minibroker.ThreadedBroker() as broker:
        port = broker.port
        broker.declare_queue("jobs", max_delivery_count=5)
        broker.publish("jobs", "durable", durable=True)
        broker.publish("jobs", "transient")
        conn = BlockingConnection(broker.url, timeout=5)
        receiver = conn.create_receiver("jobs", credit=1)
        held = receiver.receive(timeout=5)  # acquired, never settled
        assert held.body == "durable"
        broker.wait_for(lambda b: b.queue("jobs").acquired == 1)

        broker.restart()

        assert broker.port == port
        assert broker.statistics().connections == 0
        # The unsettled durable message came back (one failed delivery counted); the other is lost.
        snapshot = broker.queue("jobs")
        assert snapshot.bodies == ["durable"]
        assert snapshot.messages[0].delivery_count == 1
        # The old client sees its transport gone; a new one on the same URL works.
        with pytest.raises((ConnectionException, LinkDetached)):
            conn.create_sender("jobs").send(Message(body="after"))
        again = BlockingConnection(broker.url, timeout=5)
        again.create_sender("jobs").send(Message(body="after", durable=False))
        again.close()
        assert broker.queue("jobs").bodies == ["durable", "after"]


def test_restart_keeps_nodes_and_durable_subscriptions_and_counts_a_new_connection() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_topic("news")
        broker.declare_queue("empty")
        broker.publish("empty", "x")
        before = broker.statistics()
        broker.restart()
        assert broker.queues() == ["empty"] and broker.topics() == ["news"]
        assert broker.queue("empty").depth == 0
        assert broker.statistics().nodes["empty"] == before.nodes["empty"]


def test_restart_needs_a_running_broker() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        minibroker.ThreadedBroker().restart()


def test_reset_forgets_counters_errors_and_the_frame_log() -> None:
    with minibroker.ThreadedBroker(frame_log=10) as broker:
        conn = BlockingConnection(broker.url, timeout=5)
        conn.create_sender("q").send(Message(body=1))
        conn.close()
        broker.wait_for(lambda b: b.statistics().connections == 0)
        assert broker.frames() and broker.statistics().connections_total == 1
        broker.reset()
        assert broker.frames() == []
        assert broker.statistics().connections_total == 0
        assert broker.statistics().nodes == {}
        assert broker.errors() == []


def test_manual_clock_rewinds_to_its_start() -> None:
    clock = minibroker.ManualClock(start=100.0)
    clock.advance(5)
    clock.rewind()
    assert clock.now() == 100.0


async def test_trio_broker_restarts_on_the_same_port() -> None:
    async with minibroker.open_broker() as broker:
        port = broker.port
        broker.publish("q", "kept", durable=True)
        broker.publish("q", "lost")
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await broker.wait_for(lambda b: b.statistics().connections == 1)
        await broker.restart()
        assert broker.port == port
        assert await stream.receive_some(100) == b""  # the transport just ended
        assert broker.statistics().connections == 0
        assert broker.queue("q").bodies == ["kept"]
        again = await trio.open_tcp_stream("127.0.0.1", port)
        await broker.wait_for(lambda b: b.statistics().connections == 1)
        await again.aclose()
        await stream.aclose()


test_trio_broker_restarts_on_the_same_port = pytest.mark.trio(test_trio_broker_restarts_on_the_same_port)
