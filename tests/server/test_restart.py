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


# ------------------------------------------------------------ closing a client after a restart
#
# python-qpid-proton's BlockingConnection.close() sends close and waits for the peer's close frame
# (the connection leaving REMOTE_ACTIVE) up to the connection's timeout; a transport that ends
# meanwhile is ignored because the connection is already closing.  After a crash-like restart no
# close frame comes, so close() waits its whole timeout and raises proton.Timeout, unless the
# client noticed the lost transport before (any blocking call raises ConnectionException first).


def test_after_a_graceful_restart_proton_closes_at_once() -> None:
    with minibroker.ThreadedBroker(frame_log=50) as broker:
        broker.publish("jobs", "durable", durable=True)
        broker.publish("jobs", "transient")
        conn = BlockingConnection(broker.url, timeout=30)
        conn.create_sender("jobs")
        broker.restart(graceful=True)
        conn.close()  # before: proton.Timeout after 30 s (no close frame came)
        [close] = [r for r in broker.frames() if r.direction == "out" and r.name == "close"]
        assert str(close.performative.error.condition) == "amqp:connection:forced"
        assert broker.statistics().connections == 0
        assert broker.queue("jobs").bodies == ["durable"]  # the restart's rules are the same
        again = BlockingConnection(broker.url, timeout=5)
        again.create_sender("jobs").send(Message(body="after"))
        again.close()


def test_trio_broker_restarts_gracefully_too() -> None:
    async def main() -> None:
        async with minibroker.open_broker() as broker:
            port = broker.port

            def close_after_restart() -> None:
                conn = BlockingConnection(broker.url, timeout=30)
                conn.create_sender("jobs")
                trio.from_thread.run(lambda: broker.restart(graceful=True))
                conn.close()  # raises proton.Timeout without the close frame

            await trio.to_thread.run_sync(close_after_restart)
            assert broker.port == port and broker.statistics().connections == 0

    trio.run(main)


def test_after_a_crash_like_restart_proton_close_waits_for_a_close_frame() -> None:
    """Pins proton's behaviour (documented with restart()): if proton changes it, this says so."""
    from proton import Timeout

    with minibroker.ThreadedBroker() as broker:
        conn = BlockingConnection(broker.url, timeout=0.5)
        conn.create_sender("jobs")
        broker.restart()
        with pytest.raises(Timeout, match="Closing connection"):
            conn.close()
        # A client that touched the connection first knows it is gone, and closes at once.
        noticed = BlockingConnection(broker.url, timeout=30)
        sender = noticed.create_sender("jobs")
        broker.restart()
        with pytest.raises(ConnectionException):
            sender.send(Message(body="x"))
        noticed.close()
