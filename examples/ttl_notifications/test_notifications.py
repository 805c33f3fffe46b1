"""TTL on the broker's manual clock: time moves only when the test says so, no sleeping."""

from __future__ import annotations

import pytest
from notifications import QUEUE, collect, notify

import minibroker

pytestmark = pytest.mark.amqp_broker(queues=[(QUEUE, {"dead_letter_on_expiry": True})], clock="manual")
DLQ = f"{QUEUE}/$DeadLetterQueue"


def test_a_notification_collected_in_time_is_delivered(amqp_broker: minibroker.ThreadedBroker) -> None:
    notify(amqp_broker.url, "ann", "your order shipped", valid_for=60)
    amqp_broker.clock.advance(59)
    assert collect(amqp_broker.url) == [{"user": "ann", "text": "your order shipped"}]
    assert DLQ not in amqp_broker.queues()  # nothing expired, so nothing was dead-lettered


def test_a_stale_notification_is_dead_lettered_not_delivered(amqp_broker: minibroker.ThreadedBroker) -> None:
    notify(amqp_broker.url, "ann", "flash sale ends in 10 minutes", valid_for=600)
    notify(amqp_broker.url, "bob", "your order shipped", valid_for=3600)

    amqp_broker.clock.advance(601)

    amqp_broker.assert_queue(QUEUE, bodies=[{"user": "bob", "text": "your order shipped"}])
    dead = amqp_broker.assert_queue(DLQ, bodies=[{"user": "ann", "text": "flash sale ends in 10 minutes"}])
    assert dead.messages[0].annotations["x-opt-deadletter-reason"] == "TTLExpiredException"
    assert collect(amqp_broker.url) == [{"user": "bob", "text": "your order shipped"}]


def test_each_test_starts_at_the_same_time(amqp_broker: minibroker.ThreadedBroker) -> None:
    assert amqp_broker.clock.now() == minibroker.ManualClock().now()
