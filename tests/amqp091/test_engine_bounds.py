"""The bounds the 0-9-1 engine and front end keep (docs/limits-and-security.md), in memory.

Each test meets one bound from a client's side: the heartbeat offered from ``idle_timeout``, the
unacknowledged deliveries a channel holds, what a connection keeps after a framing error, and
how long our ``connection.close`` waits for its ``close-ok``.
"""

from __future__ import annotations

import gc
import struct
import weakref

import pytest
from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.amqp091 import methods as m
from minibroker.amqp091.connection import CLOSING_TIMEOUT
from minibroker.amqp091.frames import PROTOCOL_HEADER, content_frames, method_frame
from minibroker.amqp091.properties import BasicProperties
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.front091 import consumers


def _tune(broker: Broker) -> m.ConnectionTune:
    client = Client(broker)
    client.send(PROTOCOL_HEADER)
    client.method(0, m.ConnectionStartOk(response=b"\x00guest\x00guest"))
    tune = client.methods()[-1]
    assert isinstance(tune, m.ConnectionTune)
    return tune


@pytest.mark.parametrize(("idle_timeout", "heartbeat"), [(60.0, 60), (2.5, 3), (None, 0)])
def test_the_heartbeat_offered_is_the_idle_timeout(idle_timeout: float | None, heartbeat: int) -> None:
    broker = Broker(BrokerConfig(idle_timeout=idle_timeout), clock=ManualClock())
    assert _tune(broker).heartbeat == heartbeat


def test_a_channel_holds_at_most_max_unacked_deliveries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumers, "MAX_UNACKED", 3)
    broker = Broker(BrokerConfig(), clock=ManualClock())
    client = Client(broker)
    client.open()
    client.method(1, m.QueueDeclare(queue="q"))
    for n in range(6):
        client.publish(1, "", "q", b"m%d" % n)
    client.read()
    client.method(1, m.BasicConsume(queue="q"))  # no basic.qos: no prefetch window of its own
    delivered = [item for item in client.read() if isinstance(item[1], m.BasicDeliver)]
    assert [item[3] for item in delivered] == [b"m0", b"m1", b"m2"]
    client.method(1, m.BasicGet(queue="q"))
    [(_channel, close)] = client.read()
    assert isinstance(close, m.ChannelClose) and (close.reply_code, close.class_id, close.method_id) == (406, 60, 70)
    assert "3 unacknowledged deliveries" in close.reply_text


def test_acks_open_the_bound_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumers, "MAX_UNACKED", 2)
    broker = Broker(BrokerConfig(), clock=ManualClock())
    client = Client(broker)
    client.open()
    client.method(1, m.QueueDeclare(queue="q"))
    for n in range(4):
        client.publish(1, "", "q", b"m%d" % n)
    client.method(1, m.BasicConsume(queue="q"))
    assert len([item for item in client.read() if isinstance(item[1], m.BasicDeliver)]) == 2
    client.method(1, m.BasicAck(delivery_tag=2, multiple=True))
    assert [item[3] for item in client.read() if isinstance(item[1], m.BasicDeliver)] == [b"m2", b"m3"]


def test_after_a_framing_error_input_is_dropped_not_buffered() -> None:
    broker = Broker(BrokerConfig(), clock=ManualClock())
    client = Client(broker)
    client.open()
    client.send(b"\x00\x00\x01\x00\x00\x00\x00\xce" + b"x" * 100_000)  # frame type 0: 501 FRAME_ERROR
    for _ in range(20):
        client.send(b"y" * 100_000)  # a peer that keeps writing and never answers the close
    assert client.server.engine._reader.buffered == 0
    [close] = client.methods()
    assert isinstance(close, m.ConnectionClose) and close.reply_code == 501


def test_a_close_unanswered_for_closing_timeout_ends_the_connection() -> None:
    clock = ManualClock()
    broker = Broker(BrokerConfig(idle_timeout=None), clock=clock)
    client = Client(broker)
    client.open()
    client.send(method_frame(1, m.ChannelOpen()))  # a second open of channel 1: 504, a connection error
    assert isinstance(client.methods()[-1], m.ConnectionClose)
    client.server.tick(clock.now())
    clock.advance(CLOSING_TIMEOUT - 1)
    client.server.tick(clock.now())
    assert not client.server.finished
    clock.advance(1)
    client.server.tick(clock.now())
    assert client.server.finished


def test_the_alarm_pauses_a_client_without_the_capability_without_telling_it() -> None:
    broker = Broker(BrokerConfig(), clock=ManualClock())
    client = Client(broker)
    client.open()  # its start-ok announces no capabilities
    client.method(1, m.QueueDeclare(queue="q"))
    client.read()
    broker.block_publishers("low on memory")
    client.publish(1, "", "q", b"first")
    client.publish(1, "", "q", b"held")
    assert client.read() == [] and client.server.read_paused
    assert broker.queues["q"].depth == 1
    broker.unblock_publishers()
    assert client.read() == [] and not client.server.read_paused  # no unblocked: it was never told
    assert broker.queues["q"].depth == 2


def test_a_broker_that_had_0_9_1_clients_is_freed() -> None:
    broker = Broker(BrokerConfig(), clock=ManualClock())
    client = Client(broker)
    client.open()
    client.method(1, m.QueueDeclare(queue="q"))
    client.publish(1, "", "q", b"x" * 100_000)
    client.server.connection_lost()
    gone = weakref.ref(broker)
    del broker, client
    gc.collect()
    assert gone() is None


def test_a_blocked_publisher_is_read_again_when_the_broker_closes_it() -> None:
    broker = Broker(BrokerConfig(), clock=ManualClock())
    client = Client(broker)
    client.open()
    client.method(1, m.QueueDeclare(queue="q"))
    broker.block_publishers("low on memory")
    client.publish(1, "", "q", b"first")
    assert client.server.read_paused
    client.server.close_forced()  # as reset() closes it: 320, then its close-ok is awaited
    assert not client.server.read_paused
    client.method(0, m.ConnectionCloseOk())
    assert client.server.finished


def test_publishes_interleaved_on_channels_hold_one_message_size_together() -> None:
    broker = Broker(BrokerConfig(max_message_size=10_000), clock=ManualClock())
    client = Client(broker)
    client.open()
    for channel in (1, 2, 3):
        if channel > 1:
            client.method(channel, m.ChannelOpen())
        header = content_frames(channel, BasicProperties(), b"x" * 9_000, 131072)[: -(7 + 9_000 + 1)]
        first_part = struct.pack(">BHI", 3, channel, 4_000) + b"x" * 4_000 + b"\xce"  # 4,000 of its 9,000 bytes
        client.send(method_frame(channel, m.BasicPublish(routing_key="q")) + header + first_part)
    closes = [item for item in client.read() if isinstance(item[1], m.ChannelClose)]
    assert [(channel, close.reply_code) for channel, close in closes] == [(3, 406)]
    assert "hold 12000 bytes together" in closes[0][1].reply_text
    assert sum(c.received for c in client.server.engine._content.values()) == 8_000
