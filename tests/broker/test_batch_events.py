"""Messages read together enter the broker in one call, and a disposition range's outcome is
applied in one (policy.EventPolicy.publish_many, consumers.Consumers.queue_outcomes).

These count the calls, not the time: the work per message that used to be an event, a policy
dispatch and a role call each (``MessageReceived``, ``DeliveryUpdated``) is now one per batch,
with the same effect on the queue and the same dispositions back (Part 2 §2.7.6, Part 3 §3.4).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from minibroker.amqp.message import Message
from minibroker.amqp.messaging import Accepted, Released
from minibroker.amqp.performatives import Disposition, Transfer
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.consumers import Consumers
from minibroker.broker.engine import Broker
from minibroker.broker.policy import EventPolicy
from minibroker.testing import Peer, Pump, connect

T0 = 1_700_000_000.0
COUNT = 50


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often the per-message and the per-batch entry points are called (and with how many)."""
    counted: Counter[str] = Counter()

    def counting(cls: type, name: str) -> None:
        original = getattr(cls, name)

        def wrapper(self: Any, *args: Any) -> Any:
            counted[name] += 1
            for arg in args:
                if isinstance(arg, list):
                    counted[f"{name} items"] += len(arg)
            return original(self, *args)

        monkeypatch.setattr(cls, name, wrapper)

    counting(EventPolicy, "publish")
    counting(EventPolicy, "publish_many")
    counting(Consumers, "queue_outcome")
    counting(Consumers, "queue_outcomes")
    return counted


def _filled(broker: Broker) -> tuple[Peer, Pump]:
    """A producer sends COUNT messages to queue ``q`` in one chunk; its peer and pump."""
    peer = Peer("producer")
    pump = connect(broker, peer)
    pump.send(peer.start() + peer.attach_sender("s", "q", 0))
    body = Message(body=b"x" * 16).encode()
    answer = pump.send(b"".join(peer.transfer(0, i, i.to_bytes(4), body) for i in range(COUNT)))
    [disposition] = answer.of(Disposition)
    assert (disposition.first, disposition.last, disposition.settled) == (0, COUNT - 1, True)
    assert isinstance(disposition.state, Accepted)
    return peer, pump


def _consumed(broker: Broker) -> tuple[Peer, Pump]:
    """A consumer on ``q`` with credit for COUNT reads them all, unsettled; its peer and pump."""
    peer = Peer("consumer")
    pump = connect(broker, peer)
    pump.send(peer.start() + peer.attach_receiver("r", "q", 0))
    got = pump.send(peer.flow(0, credit=COUNT))
    assert len(got.of(Transfer)) == COUNT
    return peer, pump


def test_messages_read_together_are_published_in_one_call(calls: Counter[str]) -> None:
    broker = Broker(BrokerConfig(), ManualClock(T0))
    queue = broker.declare_queue("q")
    _filled(broker)
    assert queue.depth == COUNT
    assert (calls["publish_many"], calls["publish_many items"], calls["publish"]) == (1, COUNT, 0)


def test_a_disposition_range_is_applied_in_one_call(calls: Counter[str]) -> None:
    broker = Broker(BrokerConfig(), ManualClock(T0))
    queue = broker.declare_queue("q")
    _filled(broker)
    peer, pump = _consumed(broker)
    pump.send(peer.disposition(0, COUNT - 1, state=Accepted()))
    assert queue.depth == 0 and queue.counters.acknowledged == COUNT
    assert (calls["queue_outcomes"], calls["queue_outcomes items"], calls["queue_outcome"]) == (1, COUNT, 0)


def test_a_range_of_another_outcome_is_applied_per_delivery(calls: Counter[str]) -> None:
    broker = Broker(BrokerConfig(), ManualClock(T0))
    queue = broker.declare_queue("q")
    _filled(broker)
    peer, pump = _consumed(broker)
    pump.send(peer.flow(0, credit=0) + peer.disposition(0, COUNT - 1, state=Released()))
    assert queue.depth == COUNT and queue.available_count == COUNT and queue.counters.released == COUNT
    assert (calls["queue_outcomes"], calls["queue_outcome"]) == (1, COUNT)


def _outcomes(dispositions: list[Disposition]) -> list[tuple[int, int, str]]:
    """Each disposition as (first, last, outcome name), in the order they came."""
    return [
        (d.first, d.last if d.last is not None else d.first, type(d.state).__name__) for d in dispositions
    ]


def test_a_batch_is_answered_in_order_around_a_rejected_message() -> None:
    # The accepted messages of a batch are settled as ranges (policy.publish_many); one the
    # broker rejects splits them, and the others are kept.  (Dispositions of different
    # outcomes may come in any order, Part 2 §2.7.6: they are compared by delivery-id.)
    broker = Broker(BrokerConfig(), ManualClock(T0))
    queue = broker.declare_queue("q")
    peer = Peer("producer")
    pump = connect(broker, peer)
    pump.send(peer.start() + peer.attach_sender("s", "q", 0))
    good = Message(body=b"x" * 16).encode()
    bad = b"\x00\x53\x73\xc0\x04\x02\xa1\x09"  # properties whose message-id runs past the message
    payloads = [good, good, bad, good, good]
    answer = pump.send(b"".join(peer.transfer(0, i, i.to_bytes(4), p) for i, p in enumerate(payloads)))
    dispositions = answer.of(Disposition)
    assert sorted(_outcomes(dispositions)) == [(0, 1, "Accepted"), (2, 2, "Rejected"), (3, 4, "Accepted")]
    assert all(d.settled for d in dispositions)
    assert queue.depth == 4


def test_a_batch_with_a_gap_in_its_delivery_ids_is_answered_per_run() -> None:
    # Accepted deliveries share a range only when their delivery-ids are consecutive.
    broker = Broker(BrokerConfig(), ManualClock(T0))
    queue = broker.declare_queue("q")
    peer = Peer("producer")
    pump = connect(broker, peer)
    pump.send(peer.start() + peer.attach_sender("s", "q", 0))
    body = Message(body=b"x").encode()
    answer = pump.send(b"".join(peer.transfer(0, i, i.to_bytes(4), body) for i in (0, 1, 5, 6)))
    assert sorted(_outcomes(answer.of(Disposition))) == [(0, 1, "Accepted"), (5, 6, "Accepted")]
    assert queue.depth == 4


def test_a_producer_that_settles_second_still_holds_its_deliveries() -> None:
    # rcv-settle-mode second (Part 2 §2.6.12): the broker's outcome leaves the delivery unsettled
    # until the peer settles it, so such a link keeps its deliveries (Link.settles_at_once is off).
    broker = Broker(BrokerConfig(), ManualClock(T0))
    broker.declare_queue("q")
    peer = Peer("producer")
    pump = connect(broker, peer)
    pump.send(peer.start() + peer.attach_sender("s", "q", 0, rcv_settle_mode=1))
    body = Message(body=b"x").encode()
    answer = pump.send(b"".join(peer.transfer(0, i, i.to_bytes(4), body) for i in range(3)))
    [disposition] = answer.of(Disposition)
    assert (disposition.first, disposition.last, disposition.settled) == (0, 2, False)
    [connection] = broker.connections
    [session] = connection.protocol.sessions.values()
    assert sorted(session.incoming_unsettled) == [0, 1, 2]


def test_a_producer_settled_at_once_keeps_no_delivery_while_its_batch_is_published() -> None:
    # Link.settles_at_once: a message the broker settles while it handles the batch is never put
    # in the session's unsettled table (nothing to add and remove per message).
    broker = Broker(BrokerConfig(), ManualClock(T0))
    broker.declare_queue("q")
    peer = Peer("producer")
    pump = connect(broker, peer)
    pump.send(peer.start() + peer.attach_sender("s", "q", 0))
    [connection] = broker.connections
    [session] = connection.protocol.sessions.values()
    held: list[int] = []
    broker.router.publisher.observers.append(lambda _node, _message: held.append(len(session.incoming_unsettled)))
    body = Message(body=b"x").encode()
    answer = pump.send(b"".join(peer.transfer(0, i, i.to_bytes(4), body) for i in range(COUNT)))
    assert len(held) == COUNT and set(held) == {0}
    [disposition] = answer.of(Disposition)
    assert (disposition.first, disposition.last, disposition.settled) == (0, COUNT - 1, True)
