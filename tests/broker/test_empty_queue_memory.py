"""What an empty queue holds (issue #47: under 2 KiB each, so 100,000 declared queues stay small).

Measured as Python allocations (``tracemalloc``), not time: declaring queues that never see a
message allocates no priority-level FIFOs, heaps or expiry index (they are made for the first
message that needs them).
"""

from __future__ import annotations

import gc
import tracemalloc

from fake_consumer import FakeConsumer

from minibroker.api import build_message
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig, QueueOptions
from minibroker.broker.engine import Broker
from minibroker.broker.queue import Queue
from minibroker.broker.statistics import NodeCounters
from minibroker.broker.stored import StoredMessage

T0 = 1_700_000_000.0

QUEUES = 2_000
#: The issue's bound for an empty queue, in bytes (docs/performance.md, "Scale").
LIMIT = 2 * 1024


def test_an_empty_queue_allocates_under_2_kib() -> None:
    broker = Broker(BrokerConfig(), ManualClock(T0))
    broker.declare("queue", "warm-up", None)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(QUEUES):
            broker.declare("queue", f"q.{i}", None)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown / QUEUES < LIMIT, f"an empty queue allocates {grown / QUEUES:,.0f} B"


def test_levels_made_for_later_messages_keep_priority_order() -> None:
    """The lowest level first, then the highest, then one between: delivered highest first (§3.2.1)."""
    queue = Queue("q", QueueOptions(), NodeCounters())
    for priority in (0, 9, 4, 0):
        queue.put(StoredMessage(build_message(priority, priority=priority).encode(), T0), T0)
    consumer = FakeConsumer(credit=4)
    queue.add_consumer(consumer)
    queue.dispatch(T0)
    assert [entry.message.decode().body for entry in consumer.delivered] == [9, 4, 0, 0]
