"""One message whose application-properties do not decode, left in a queue a selector reads.

The broker takes a message after skipping each section by its size; a selective consumer's
selector decodes application-properties later (Part 3 §3.5.8).  When a message expires anywhere,
the server's timer task expires and dispatches every node (broker paper 2.2.5): the decode error
then raises in that task, which nothing guards, and trio ends the server with it.  One client's
bytes must not take the broker down for everyone (tests/broker/test_malformed_sections.py holds
the engine-level cases).
"""

from __future__ import annotations

import time

import pytest
from hostile_peer import GOOD_CLIENT_WAIT, Attacker, good_client_round_trip  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp.performatives import Close, Disposition, Flow
from minibroker.amqp.types import Described, symbol

pytestmark = pytest.mark.interop

SELECTOR = symbol("apache.org:selector-filter:string")
#: application-properties as a map8 of the right size and count holding no AMQP constructor.
BAD_APPLICATION_PROPERTIES = b"\x00\x53\x74\xc1\x05\x02" + b"\xff" * 4
BODY = b"\x00\x53\x77\xa1\x02hi"


def test_a_bad_message_in_a_selective_queue_does_not_stop_the_broker_when_something_expires() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("q")
        consumer = Attacker(broker, "selective")
        consumer.start()
        selector = {symbol("red-only"): Described(SELECTOR, "color = 'red'")}
        consumer.send(
            consumer.peer.attach_receiver("r", "q", 0, filter=selector) + consumer.peer.flow(0, credit=5)
        )
        broker.publish(
            "q", "blue", application_properties={"color": "blue"}
        )  # the selector leaves it waiting
        attacker = Attacker(broker)
        attacker.start()
        attacker.send(attacker.peer.attach_sender("s", "q", 0))
        attacker.read_until(lambda frames: frames.of(Flow))
        attacker.send(attacker.peer.transfer(0, None, None, BAD_APPLICATION_PROPERTIES + BODY))
        attacker.read_until(
            lambda frames: frames.of(Disposition) or frames.of(Close)
        )  # taken, refused or worse
        broker.publish("other", "short-lived", ttl=0.2)  # seconds: the timer fires once it expires
        # Polled, not wait_for: a broker whose thread died changes nothing that would wake wait_for.
        deadline = time.monotonic() + GOOD_CLIENT_WAIT
        while broker.running and broker.queue("other").depth and time.monotonic() < deadline:
            time.sleep(0.01)
        assert broker.running, "the broker stopped when the message in 'other' expired"
        good_client_round_trip(broker)
        attacker.close()
        consumer.close()
