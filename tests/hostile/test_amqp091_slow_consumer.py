"""An AMQP 0-9-1 ``no-ack`` consumer that never reads: what the broker holds for it stays bounded.

A no-ack consumer has no prefetch window (0-9-1 §1.8.3.3), so only the connection's output bound
(``OUTPUT_BOUND``, as for AMQP 1.0) stops the broker from copying a whole queue into its output:
past it the consumer gets no credit and the messages stay queued, and a good client on the same
port is still served.
"""

from __future__ import annotations

import pytest
from hostile_peer import good_client_round_trip, small_receive_buffer_socket  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp091 import methods as m
from minibroker.amqp091.frames import PROTOCOL_HEADER, method_frame
from minibroker.broker.client_connection import OUTPUT_BOUND

pytestmark = pytest.mark.interop

MESSAGE = 64 * 1024
COUNT = 1000  # 64 MiB offered: sixteen times the output bound


def _held_091(broker: minibroker.ThreadedBroker) -> int:
    def largest() -> int:
        return max(
            (c.engine.output_size + (c.transport_backlog or 0) for c in broker._broker.other_connections),
            default=0,
        )

    return broker._read(largest)


def test_a_0_9_1_consumer_that_never_reads_holds_no_more_than_the_output_bound() -> None:
    with minibroker.ThreadedBroker() as broker:
        sock = small_receive_buffer_socket(broker)
        sock.sendall(
            PROTOCOL_HEADER
            + method_frame(0, m.ConnectionStartOk(response=b"\x00guest\x00guest"))
            + method_frame(0, m.ConnectionTuneOk(channel_max=0, frame_max=0, heartbeat=0))
            + method_frame(0, m.ConnectionOpen(virtual_host="/"))
            + method_frame(1, m.ChannelOpen())
            + method_frame(1, m.QueueDeclare(queue="flooded"))
            + method_frame(1, m.BasicConsume(queue="flooded", no_ack=True))
        )
        broker.wait_for(lambda b: b.queue("flooded").consumers == 1, timeout=30)
        body = b"x" * MESSAGE
        broker.publish_many("flooded", [b"\x00\x53\x75\xb0" + len(body).to_bytes(4, "big") + body] * COUNT)
        assert _held_091(broker) <= OUTPUT_BOUND + 2 * MESSAGE
        good_client_round_trip(broker)
        # What it did not take stays queued: at most the bound plus the kernel's buffers left.
        assert broker.queue("flooded").depth >= COUNT - (OUTPUT_BOUND + 8 * 1024 * 1024) // MESSAGE
        sock.close()
        broker.wait_for(lambda b: b.statistics().connections == 0, timeout=30)
        assert broker.errors() == []
