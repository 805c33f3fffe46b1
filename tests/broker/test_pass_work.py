"""A server pass is bounded by its work, not only by its frames (BrokerConnection.receive_data).

The server hands a reader's bytes over with ``max_frames`` (its ``FRAMES_PER_PASS``) and serves
other connections between passes.  A frame whose message fans out to many subscriptions makes
hundreds of deliveries: counted as one frame, a pass of such frames held everyone else for
``max_frames`` fan-outs.  Now each frame and each delivery count one against ``2 * max_frames``,
and the pass ends after the fan-out that spends it.  Counted, not timed: messages per pass.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.amqp.message import Message
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.testing import Peer, connect

T0 = 1_700_000_000.0
MAX_FRAMES = 64


def _subscribers(broker: Broker, address: str, links: int, credit: int) -> list[None]:
    """One connection with ``links`` receiving links on ``address``, each with ``credit``; the list
    its wake-up callback appends to (the server's writer is woken so)."""
    peer = Peer("subscriber")
    woken: list[None] = []
    pump = connect(broker.connect(lambda: woken.append(None), "subscriber"), peer)
    pump.send(peer.start() + b"".join(peer.attach_receiver(f"r{i}", address, i) for i in range(links)))
    pump.send(b"".join(peer.flow(i, credit=credit) for i in range(links)))
    return woken


def _passes(broker: Broker, address: str, messages: int, enqueued: Callable[[], int]) -> list[int]:
    """A producer's ``messages`` transfers to ``address`` in one read: the messages taken per pass."""
    peer = Peer("producer")
    connection = broker.connect(lambda: None, "producer")
    pump = connect(connection, peer)
    pump.send(peer.start() + peer.attach_sender("s", address, 0))
    body = Message(body=b"x").encode()
    burst = b"".join(peer.transfer(0, i, i.to_bytes(4), body) for i in range(messages))
    counts: list[int] = []
    before = enqueued()
    connection.receive_data(burst, MAX_FRAMES)  # a pass, as the server makes it
    while True:
        counts.append(enqueued() - before)
        before = enqueued()
        if not connection.protocol.backlogged:
            return counts
        connection.receive_data(b"", MAX_FRAMES)  # the next pass, after the others' turns


def test_a_fan_out_to_many_subscriptions_ends_the_pass() -> None:
    broker = Broker(BrokerConfig(), ManualClock(T0))
    topic = broker.declare_topic("t")
    _subscribers(broker, "t", 200, credit=20)
    # Each message makes 200 deliveries, more than the pass's 128 units: one message per pass
    # (counted as frames alone, all 20 were one pass).
    assert _passes(broker, "t", 20, lambda: topic.counters.enqueued) == [1] * 20


def test_a_message_with_one_delivery_still_reads_max_frames_per_pass() -> None:
    broker = Broker(BrokerConfig(), ManualClock(T0))
    queue = broker.declare_queue("q")
    woken = _subscribers(broker, "q", 1, credit=150)
    woken.clear()
    # A frame and its one delivery: max_frames of them per pass, as when only frames counted.
    assert _passes(broker, "q", 150, lambda: queue.counters.enqueued) == [64, 64, 22]
    assert queue.counters.delivered == 150
    # Read in steps, but the subscriber's writer is woken once per pass, as with one step.
    assert len(woken) == 3




def test_a_pass_on_a_connection_closed_while_frames_waited_ends() -> None:
    """A pass left frames for the next (``backlogged``), then the broker closed the connection (a
    fault's drop, a reset): the next pass reads nothing and says nothing is left.  A pass that
    kept stepping on the closed protocol's stale backlog never ended (a Spark range read whose
    connection a fault dropped hung the broker so)."""
    broker = Broker(BrokerConfig(), ManualClock(T0))
    queue = broker.declare_queue("q")
    peer = Peer("producer")
    connection = broker.connect(lambda: None, "producer")
    pump = connect(connection, peer)
    pump.send(peer.start() + peer.attach_sender("s", "q", 0))
    body = Message(body=b"x").encode()
    connection.receive_data(b"".join(peer.transfer(0, i, i.to_bytes(4), body) for i in range(200)), MAX_FRAMES)
    assert connection.protocol.backlogged  # frames wait for the next pass
    taken = queue.depth
    connection.close()
    connection.receive_data(b"", MAX_FRAMES)  # the server's next pass
    assert connection.finished
    assert not connection.protocol.backlogged  # nothing for the server to come back for
    assert queue.depth == taken  # what came after the close is not read (Part 1 §2.4.3)
