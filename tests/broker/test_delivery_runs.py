"""A queue's messages to its one consumer in runs (``Queue._dispatch_runs``, ``Connection.send_run``).

A consumer alone in the turns takes what its credit allows in runs: acquired in
one loop, written as one string of transfer frames.  What the client reads is
what it read one message at a time: the same frames, the same order, the same
ids and tags; what a run could not send (the session window, Part 2 §2.5.6)
goes back to the queue untouched, and a message of several frames goes alone.
"""

from __future__ import annotations

from typing import Any

import pytest

from minibroker import BrokerConfig, ManualClock
from minibroker.amqp.message import Message, decode_message, encode_bodies
from minibroker.amqp.messaging import Header, Released
from minibroker.amqp.performatives import SND_SETTLED, Transfer
from minibroker.broker.engine import Broker
from minibroker.protocol import deliveries as deliveries_module
from minibroker.testing import Frames, Peer, Pump, connect

T0 = 1_700_000_000.0


def make_broker() -> Broker:
    return Broker(BrokerConfig(), ManualClock(T0))


def receiver(broker: Broker, peer: Peer, **attach: Any) -> Pump:
    """A client on ``peer`` receiving from "q" on link handle 0 with no credit yet."""
    pump = connect(broker, peer)
    pump.send(peer.header() + peer.open() + peer.begin())
    pump.send(peer.attach_receiver("r", "q", 0, **attach))
    return pump


def transfers(*reads: Frames) -> list[tuple[Transfer, Message]]:
    """The deliveries the reads brought, in order: each one's first transfer and its message."""
    out: list[tuple[Transfer, Message]] = []
    first: Transfer | None = None
    payload = b""
    for frame in [frame for read in reads for frame in read]:
        if isinstance(frame.performative, Transfer):
            first = first or frame.performative
            payload += frame.payload
            if not frame.performative.more:
                out.append((first, decode_message(payload)))
                first, payload = None, b""
    return out


def bodies(*reads: Frames) -> list[Any]:
    return [message.body for _transfer, message in transfers(*reads)]


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each run ``send_run`` wrote (None-returning calls not counted)."""
    sizes: list[int] = []
    send_run = deliveries_module.send_run

    def counted(conn: Any, link: Any, tag: int, payloads: list[bytes], settled: bool) -> Any:
        sent = send_run(conn, link, tag, payloads, settled)
        if sent is not None:
            sizes.append(len(payloads))
        return sent

    monkeypatch.setattr(type(make_broker().connect(lambda: None, "x").protocol), "send_run", counted)
    return sizes


def test_a_backlog_goes_in_runs_with_the_frames_one_message_at_a_time_would_have(runs: list[int]) -> None:
    broker = make_broker()
    broker.declare_queue("q")
    broker.publish_many("q", encode_bodies(Message(), [f"m{i}" for i in range(700)]))
    peer = Peer()
    pump = receiver(broker, peer)
    # The first 256 delivery-ids are written shorter, one by one (a run that starts among them too).
    reads = pump.send(peer.flow(0, credit=256)), pump.send(peer.flow(0, credit=444))
    sent = [transfer for transfer, _message in transfers(*reads)]
    assert bodies(*reads) == [f"m{i}" for i in range(700)]
    assert [t.delivery_id for t in sent] == list(range(700))
    assert [t.delivery_tag for t in sent] == [(i + 1).to_bytes(4, "big") for i in range(700)]
    assert not any(t.settled for t in sent)
    assert runs == [444]
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.depth, snapshot.acquired, snapshot.statistics.delivered) == (700, 700, 700)
    # One disposition settles the whole range: every message leaves.
    pump.send(peer.disposition(0, 699))
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.depth, snapshot.statistics.acknowledged) == (0, 700)
    assert broker.router.resolve("q").bytes == 0  # type: ignore[union-attr]


def test_a_run_is_bounded_by_the_session_window(runs: list[int]) -> None:
    broker = make_broker()
    broker.declare_queue("q")
    broker.publish_many("q", encode_bodies(Message(), [f"m{i}" for i in range(600)]))
    peer = Peer()
    pump = receiver(broker, peer)
    reads = (
        pump.send(peer.flow(0, credit=256, next_incoming_id=0, incoming_window=400)),
        pump.send(peer.flow(0, credit=344, next_incoming_id=256, incoming_window=144)),
    )
    assert bodies(*reads) == [f"m{i}" for i in range(400)]
    assert runs == [144]
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.available, snapshot.acquired, snapshot.statistics.delivered) == (200, 400, 400)
    frames = pump.send(peer.flow(0, credit=200, next_incoming_id=400, incoming_window=1000))
    assert bodies(frames) == [f"m{i}" for i in range(400, 600)]


def test_what_a_run_could_not_send_goes_back_untouched_and_follows_in_order(runs: list[int]) -> None:
    broker = make_broker()
    broker.declare_queue("q")
    first_acquirer = Message(header=Header(first_acquirer=True))
    names = [f"m{i}" for i in range(256)] + ["x" * 2000] + [f"s{i}" for i in range(20)]
    broker.publish_many("q", encode_bodies(first_acquirer, names))
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.header() + peer.open(max_frame_size=512) + peer.begin())
    pump.send(peer.attach_receiver("r", "q", 0))
    first = pump.send(peer.flow(0, credit=256))
    # A run of 10 (the window): the large message takes 5 frames of it, 5 small ones the rest.
    frames = pump.send(peer.flow(0, credit=100, next_incoming_id=256, incoming_window=10))
    assert bodies(first, frames) == names[:262]
    assert runs == []  # the run with the large message went one by one
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.available, snapshot.acquired, snapshot.statistics.delivered) == (15, 262, 262)
    # The window opens: the 4 put back go next, in order, as never acquired (first-acquirer kept).
    frames = pump.send(peer.flow(0, credit=100, next_incoming_id=266, incoming_window=1000))
    assert bodies(frames) == names[262:]
    headers = [message.header for _transfer, message in transfers(frames)]
    assert all(header is not None and header.first_acquirer for header in headers)
    assert broker.queue_snapshot("q").statistics.delivered == len(names)


def test_a_message_of_several_frames_in_a_backlog_goes_alone_and_the_run_goes_on(runs: list[int]) -> None:
    broker = make_broker()
    broker.declare_queue("q")
    names = [f"m{i}" for i in range(300)] + ["x" * 2000] + [f"n{i}" for i in range(100)]
    broker.publish_many("q", encode_bodies(Message(), names))
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.header() + peer.open(max_frame_size=512) + peer.begin())
    pump.send(peer.attach_receiver("r", "q", 0))
    reads = pump.send(peer.flow(0, credit=256)), pump.send(peer.flow(0, credit=744))
    assert bodies(*reads) == names
    assert runs == []  # the run with the large message went one by one


def test_a_pre_settled_consumer_takes_runs_and_the_queue_is_empty_after(runs: list[int]) -> None:
    broker = make_broker()
    broker.declare_queue("q")
    broker.publish_many("q", encode_bodies(Message(), [f"m{i}" for i in range(500)]))
    peer = Peer()
    pump = receiver(broker, peer, snd_settle_mode=SND_SETTLED)
    reads = pump.send(peer.flow(0, credit=256)), pump.send(peer.flow(0, credit=244))
    assert bodies(*reads) == [f"m{i}" for i in range(500)]
    assert all(t.settled for t, _message in transfers(*reads))
    assert runs == [244]
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.depth, snapshot.statistics.acknowledged) == (0, 500)


def test_a_run_takes_higher_priorities_first_and_released_messages_in_their_place(runs: list[int]) -> None:
    broker = make_broker()
    broker.declare_queue("q")
    broker.publish_many("q", encode_bodies(Message(), [f"m{i}" for i in range(256)]))
    peer = Peer()
    pump = receiver(broker, peer)
    pump.send(peer.flow(0, credit=256))
    pump.send(peer.disposition(0, 255))
    low = Message(header=Header(priority=1))
    high = Message(header=Header(priority=9))
    broker.publish_many("q", encode_bodies(low, ["low0", "low1", "low2"]))
    broker.publish_many("q", encode_bodies(high, ["high0", "high1"]))
    frames = pump.send(peer.flow(0, credit=5))
    assert bodies(frames) == ["high0", "high1", "low0", "low1", "low2"]
    assert runs == [5]
    # Two given back (released: Part 3 §3.4.4) return to their places among the rest.
    pump.send(peer.disposition(258, 259, state=Released()))
    broker.publish_many("q", encode_bodies(low, ["low3"]))
    frames = pump.send(peer.flow(0, credit=5))
    assert bodies(frames) == ["low0", "low1", "low3"]
    assert runs == [5, 3]
