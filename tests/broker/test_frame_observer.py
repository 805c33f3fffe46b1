"""``Broker(trace=...)`` sees every frame in and out, in order, with its connection."""

from __future__ import annotations

from typing import Any

from minibroker.amqp import Begin, Open
from minibroker.broker.engine import Broker, BrokerConnection
from minibroker.testing import Frame, Peer, ProtocolHeader, connect


def test_trace_observes_every_frame_both_ways() -> None:
    seen: list[tuple[BrokerConnection, str, int, Any]] = []
    broker = Broker(trace=lambda conn, direction, channel, perf: seen.append((conn, direction, channel, perf)))
    peer = Peer()
    pump = connect(broker, peer)
    replies = pump.send(peer.start())

    kinds = [(direction, type(perf)) for _conn, direction, _channel, perf in seen]
    assert kinds == [("in", Open), ("out", Open), ("in", Begin), ("out", Begin)]
    assert len({conn for conn, *_ in seen}) == 1
    # What the observer saw going out is what the peer received.
    assert [type(frame.performative) for frame in replies if isinstance(frame, Frame) and not isinstance(frame.performative, ProtocolHeader)] == [Open, Begin]
