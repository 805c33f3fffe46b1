"""Finding 10: a connection's buffers are freed when it ends, not at the next garbage collection.

A connection's objects refer to each other (engine, links, the server's writer), so they go only
when the cycle collector runs; before the fix its buffers went with them: a delivery half
received, output not yet written.  Now teardown drops the buffers themselves.  The test runs with
the collector off and counts the bytes still allocated after the peers left.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Iterator

import pytest
from hostile_peer import Attacker, good_client_round_trip, held_output, small_receive_buffer_socket

import minibroker
from minibroker.amqp.performatives import SND_SETTLED, Attach, Flow

pytestmark = pytest.mark.interop

MIB = 1024 * 1024


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()
        gc.enable()


def _buffered_input(broker: minibroker.ThreadedBroker) -> int:
    def count() -> int:
        return sum(
            sum(map(len, link.incoming.frames or []))
            if isinstance(link.incoming.frames, list)
            else len(link.incoming.frames or b"")
            for c in broker._broker.connections
            for s in c.engine.sessions.values()
            for link in s.links_by_handle.values()
            if link.incoming is not None
        )

    return broker._read(count)


def test_a_half_received_delivery_and_unwritten_output_are_freed_when_the_peers_leave(
    no_collector: None,
) -> None:
    with minibroker.ThreadedBroker() as broker:
        good_client_round_trip(broker)  # warm up what every connection allocates once
        broker.wait_for(lambda b: b.statistics().connections == 0)
        baseline = tracemalloc.get_traced_memory()[0]

        producer = Attacker(broker, "half-sender")
        producer.start()
        producer.send(producer.peer.attach_sender("half", "q", 0))
        producer.read_until(lambda frames: frames.of(Flow))
        producer.send(producer.peer.transfer(0, None, None, b"h" * (16 * MIB), more=True))
        broker.wait_for(lambda b: _buffered_input(b) >= 16 * MIB, timeout=30)

        consumer = Attacker(broker, "non-reader", sock=small_receive_buffer_socket(broker))
        consumer.start()
        consumer.send(
            consumer.peer.attach_receiver("sink", "flood", 0, snd_settle_mode=SND_SETTLED)
            + consumer.peer.flow(0, credit=1000)
        )
        consumer.read_until(lambda frames: frames.of(Attach))
        body = b"\x00\x53\x75\xb0" + (16 * 1024).to_bytes(4, "big") + b"f" * (16 * 1024)
        broker.publish_many("flood", [body] * 1000)
        # Output is held for it (how much depends on what the kernel's socket buffers took).
        broker.wait_for(lambda b: held_output(b) > 0, timeout=30)

        producer.close()
        consumer.close()
        broker.wait_for(lambda b: b.statistics().connections == 0, timeout=30)
        broker.purge()
        # The engine forgets a connection as its peer goes; the transport drops the output it could
        # not write when its writer task ends, which a loaded machine may run a little later.
        deadline = time.monotonic() + 30
        while (held := tracemalloc.get_traced_memory()[0] - baseline) >= 2 * MIB and time.monotonic() < deadline:
            time.sleep(0.05)
        assert held < 2 * MIB, f"{held / MIB:.1f} MiB still allocated after both peers left"
