"""Idle time-out through ``tick(now)`` (OASIS AMQP 1.0 Part 2 §2.4.5): no clock, no sleeps.

We send an empty frame when we sent nothing for half the peer's idle-time-out,
and close with ``amqp:resource-limit-exceeded`` when the peer is silent for
longer than our own.
"""

from __future__ import annotations

import pytest

from minibroker.amqp import errors as conditions
from minibroker.amqp.message import Message
from minibroker.amqp.performatives import Close, Open, Transfer
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.protocol import Connection, ConnectionConfig, events
from minibroker.protocol.framing import EMPTY_FRAME
from minibroker.testing import Peer, Pump, connect

T0 = 1000.0


def opened(config: ConnectionConfig, **open_fields: object) -> tuple[Connection, Peer, Pump]:
    conn = Connection(config)
    peer = Peer()
    pump = connect(conn, peer)
    pump.send(peer.header() + peer.open(**open_fields))
    return conn, peer, pump


def test_empty_frame_is_sent_at_half_the_peers_idle_time_out() -> None:
    conn, peer, pump = opened(ConnectionConfig(idle_timeout=None), idle_time_out=10_000)
    assert conn.remote_idle_timeout == 10.0
    assert conn.tick(T0) == T0 + 5
    assert conn.tick(T0 + 4.999) == T0 + 5
    assert conn.data_to_send() == b""
    assert conn.tick(T0 + 5) == T0 + 10
    assert conn.data_to_send() == EMPTY_FRAME
    # The next keep-alive is due half a time-out after the last thing we sent.
    conn.tick(T0 + 6)
    assert conn.tick(T0 + 10.9) == T0 + 11
    conn.tick(T0 + 11)
    [keepalive] = pump.read()
    assert keepalive.performative is None and keepalive.channel == 0 and keepalive.name == "EmptyFrame"
    assert not conn.finished


def test_other_output_postpones_the_keepalive() -> None:
    conn, peer, pump = opened(ConnectionConfig(idle_timeout=None), idle_time_out=4_000)
    conn.tick(T0)
    pump.send(peer.begin())  # answered with a begin at T0 + 1.5
    assert conn.tick(T0 + 1.5) == T0 + 3.5
    assert conn.tick(T0 + 3) == T0 + 3.5
    assert pump.read().names() == []
    conn.tick(T0 + 3.5)
    assert pump.read().names() == ["EmptyFrame"]


def test_no_keepalive_without_a_peer_idle_time_out() -> None:
    conn, peer, pump = opened(ConnectionConfig(idle_timeout=None))
    assert conn.remote_idle_timeout is None
    assert conn.tick(T0) is None
    assert conn.tick(T0 + 10_000) is None
    assert pump.read().names() == []


def test_our_idle_time_out_is_advertised_and_enforced() -> None:
    conn, peer, pump = opened(ConnectionConfig(idle_timeout=2.0))
    assert pump.frames.one(Open).idle_time_out == 2_000
    assert conn.tick(T0) == T0 + 2
    assert conn.tick(T0 + 1.999) == T0 + 2
    assert not conn.finished
    assert conn.tick(T0 + 2) is None
    assert conn.finished
    frames = pump.read()
    close = frames.one(Close)
    assert close.error is not None and close.error.condition == conditions.RESOURCE_LIMIT_EXCEEDED
    [closed] = conn.take_events()
    assert isinstance(closed, events.ConnectionClosed) and not closed.by_peer
    assert closed.error == close.error
    assert conn.tick(T0 + 100) is None
    assert pump.read().names() == []


@pytest.mark.parametrize("keepalive", [Peer.empty_frame(), Peer.empty_frame() * 2], ids=["one", "two"])
def test_peer_keepalives_hold_the_connection_open(keepalive: bytes) -> None:
    conn, peer, pump = opened(ConnectionConfig(idle_timeout=2.0))
    conn.tick(T0)
    for step in range(1, 20):
        now = T0 + step * 1.5
        assert pump.send(keepalive).names() == []
        assert conn.tick(now) == now + 2
    assert not conn.finished
    assert conn.tick(T0 + 19 * 1.5 + 2) is None
    assert conn.finished


def test_both_time_outs_give_the_earliest_deadline() -> None:
    conn, peer, pump = opened(ConnectionConfig(idle_timeout=3.0), idle_time_out=10_000)
    assert conn.tick(T0) == T0 + 3
    pump.send(Peer.empty_frame())
    assert conn.tick(T0 + 2.5) == T0 + 5  # our time-out moved to T0 + 5.5, the keep-alive is due at T0 + 5
    conn.tick(T0 + 5)
    assert pump.read().names() == ["EmptyFrame"]
    assert conn.tick(T0 + 5) == T0 + 5.5


def test_time_out_after_header_before_open() -> None:
    conn = Connection(ConnectionConfig(idle_timeout=1.0))
    pump = connect(conn)
    pump.send(Peer.header())
    conn.tick(T0)
    conn.tick(T0 + 1)
    assert conn.finished
    frames = pump.read()
    assert frames.names() == ["Open", "Close"]  # an error before open: open first, then close (§2.4.1)
    assert frames.one(Close).error.condition == conditions.RESOURCE_LIMIT_EXCEEDED  # type: ignore[union-attr]


def test_broker_connection_tick_times_out_and_returns_held_messages() -> None:
    clock = ManualClock()
    broker = Broker(BrokerConfig(idle_timeout=5.0), clock=clock)
    broker.declare_queue("q")
    broker.publish("q", Message(body="held"))
    peer = Peer()
    pump = connect(broker, peer)
    frames = pump.send(
        peer.start(idle_time_out=20_000) + peer.attach_receiver("r", "q", 0) + peer.flow(0, credit=1)
    )
    assert len(frames.of(Transfer)) == 1
    target = pump.target
    assert target.tick(T0) == T0 + 5  # type: ignore[attr-defined]
    assert broker.queue_snapshot("q").acquired == 1
    assert target.tick(T0 + 5) is None  # type: ignore[attr-defined]
    close = pump.read().one(Close)
    assert close.error is not None and close.error.condition == conditions.RESOURCE_LIMIT_EXCEEDED
    assert pump.finished and broker.connections == set()
    snapshot = broker.queue_snapshot("q")
    assert snapshot.available == 1 and snapshot.consumers == 0
