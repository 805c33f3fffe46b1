"""Finding 3: a consumer with ``snd-settle-mode=settled`` and a million credits that never reads.

Before the fix every message routed to it from elsewhere was appended to its output with no
check (4 GiB of RSS in half a minute, although the queue had ``max_bytes``).  Now routed output
counts against the receiving connection's output bound (``OUTPUT_BOUND``): the broker stops
dispatching to it while it is over, and the messages stay in the queue, under the queue's limits.
"""

from __future__ import annotations

import pytest
from hostile_peer import (  # tests/hostile is on sys.path
    Attacker,
    good_client_round_trip,
    held_output,
    small_receive_buffer_socket,
)

import minibroker
from minibroker.amqp.performatives import SND_SETTLED, Attach
from minibroker.broker.client_connection import OUTPUT_BOUND

pytestmark = pytest.mark.interop

MESSAGE = 64 * 1024
COUNT = 1000  # 64 MiB offered: sixteen times the output bound


def test_a_consumer_that_never_reads_holds_no_more_than_the_output_bound() -> None:
    with minibroker.ThreadedBroker() as broker:
        attacker = Attacker(broker, sock=small_receive_buffer_socket(broker))
        attacker.start()
        attacker.send(
            attacker.peer.attach_receiver("sink", "flooded", 0, snd_settle_mode=SND_SETTLED)
            + attacker.peer.flow(0, credit=1_000_000)
        )
        attacker.read_until(lambda frames: frames.of(Attach))
        broker.publish_many("flooded", [b"\x00\x53\x75\xb0" + len(b"x" * MESSAGE).to_bytes(4, "big") + b"x" * MESSAGE] * COUNT)
        assert held_output(broker) <= OUTPUT_BOUND + 2 * MESSAGE
        good_client_round_trip(broker)
        assert held_output(broker) <= OUTPUT_BOUND + 2 * MESSAGE
        # What the attacker did not take stays queued: at most the bound plus the kernel's buffers left.
        assert broker.queue("flooded").depth >= COUNT - (OUTPUT_BOUND + 8 * 1024 * 1024) // MESSAGE
        attacker.close()
        broker.wait_for(lambda b: b.statistics().connections == 0, timeout=30)
        assert broker.errors() == []


def test_a_consumer_that_reads_late_gets_everything_in_order() -> None:
    with minibroker.ThreadedBroker() as broker:
        attacker = Attacker(broker, sock=small_receive_buffer_socket(broker))
        attacker.start()
        attacker.send(
            attacker.peer.attach_receiver("sink", "late", 0, snd_settle_mode=SND_SETTLED)
            + attacker.peer.flow(0, credit=1_000_000)
        )
        attacker.read_until(lambda frames: frames.of(Attach))
        count = 600  # of 16 KiB, one frame each: twice the output bound
        bodies = [i.to_bytes(4, "big") + b"y" * (16 * 1024) for i in range(count)]
        broker.publish_many("late", [b"\x00\x53\x75\xb0" + len(b).to_bytes(4, "big") + b for b in bodies])
        assert broker.queue("late").depth > 0  # not everything fitted in the output bound
        attacker.read_until(lambda frames: len([f for f in frames if f.name == "Transfer"]) >= count, timeout=60)
        payloads = [f.payload for f in attacker.frames if f.name == "Transfer"]
        data = b"\x00\x53\x75\xb0"  # the data section (Part 3 §3.2.6) after what the broker adds
        assert [p[p.index(data) + 8 : p.index(data) + 12] for p in payloads] == [b[:4] for b in bodies]
        assert broker.queue("late").depth == 0
        attacker.close()
