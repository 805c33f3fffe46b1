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
