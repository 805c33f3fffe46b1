"""Telling the server's timer of message expiries costs no walk over every node per message (issue #47).

Each time the timer is told (``Broker.timers_changed``) it asks ``next_deadline``, which walks
every node; a message with a ttl arriving in an empty queue announces its expiry (Part 3 §3.2.1
ttl).  Counted here: how often the timer is told, never time.
"""

from __future__ import annotations

from minibroker.api import build_message
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker

T0 = 1_700_000_000.0
MESSAGES = 200


class Timer:
    """The server's timer task: told, it reads the next deadline once the broker's work is done."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.told = 0
        self.pending = False
        self.deadline = broker.next_deadline()  # its first look, when the server starts
        broker.timer_watchers.append(self.tell)

    def tell(self) -> None:
        self.told += 1
        self.pending = True

    def run(self) -> None:
        if self.pending:
            self.pending = False
            self.deadline = self.broker.next_deadline()


def test_later_expiries_do_not_wake_the_timer() -> None:
    broker = Broker(BrokerConfig(), ManualClock(T0))
    broker.declare("queue", "q", None)
    timer = Timer(broker)
    for n in range(MESSAGES):
        broker.publish("q", build_message(n, ttl=60).encode())
        timer.run()
        broker.router.nodes["q"].purge()  # taken: the next message is again the first to expire
    assert timer.told == 1  # the first expiry; every later one comes after the deadline it waits for


def test_an_earlier_expiry_still_wakes_the_timer_and_expiry_happens() -> None:
    broker = Broker(BrokerConfig(), ManualClock(T0))
    broker.declare("queue", "q", None)
    timer = Timer(broker)
    broker.publish("q", build_message("late", ttl=60).encode())
    timer.run()
    broker.publish("q", build_message("early", ttl=1).encode())
    timer.run()
    assert (timer.told, timer.deadline) == (2, T0 + 1.0)
    broker.clock.advance(2.0)  # type: ignore[attr-defined]
    broker.run_timers()
    assert broker.router.nodes["q"].snapshot(T0 + 2.0).depth == 1  # "early" expired, "late" stays
