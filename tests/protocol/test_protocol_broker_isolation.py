"""A connection closed for a protocol error does not disturb the broker or other connections.

Driven through :class:`~minibroker.broker.engine.Broker` with in-memory peers:
no sockets, no threads.
"""

from __future__ import annotations

import pytest

from minibroker.amqp import codec
from minibroker.amqp import errors as conditions
from minibroker.amqp.message import Message, decode_message
from minibroker.amqp.messaging import Accepted, Modified
from minibroker.amqp.performatives import Attach, Close, Detach, Disposition, End, Flow, Transfer
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.protocol.framing import FRAME_HEADER
from minibroker.testing import Peer, Pump, connect

MALFORMED = {
    "garbage-body": Peer.raw_frame(0, b"\xff\xff\xff"),
    "not-a-performative": Peer.raw_frame(0, codec.encode("hello")),
    "tiny-frame": FRAME_HEADER.pack(4, 2, 0, 0),
    "bad-doff": FRAME_HEADER.pack(8, 1, 0, 0),
    "huge-frame": FRAME_HEADER.pack(2**31, 2, 0, 0),
    "unmapped-channel": Peer.raw_frame(9, codec.encode(End())),
}


def opened(broker: Broker, *, trickle: bool = False) -> tuple[Peer, Pump]:
    peer = Peer()
    pump = connect(broker, peer, trickle=trickle)
    assert pump.send(peer.start()).names() == ["ProtocolHeader", "Open", "Begin"]
    return peer, pump


def receive_one(broker: Broker, address: str) -> tuple[Peer, Pump, int, bytes]:
    """A new connection that receives one message: (peer, pump, delivery-id, payload)."""
    peer, pump = opened(broker)
    frames = pump.send(peer.attach_receiver("r", address, 0) + peer.flow(0, credit=10))
    transfer = frames.one(Transfer)
    assert transfer.delivery_id is not None
    payload = b"".join(f.payload for f in frames if isinstance(f.performative, Transfer))
    return peer, pump, transfer.delivery_id, payload


@pytest.mark.parametrize("malformed", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_frame_closes_one_connection_and_the_queue_survives(malformed: bytes) -> None:
    broker = Broker(BrokerConfig(), clock=ManualClock())
    broker.declare_queue("q")
    broker.publish("q", Message(body="kept"))

    peer_a, pump_a = opened(broker)
    frames = pump_a.send(malformed)
    close = frames.one(Close)
    assert close.error is not None
    assert close.error.condition in (conditions.DECODE_ERROR, conditions.FRAMING_ERROR)
    assert pump_a.finished
    pump_a.target.connection_lost()  # type: ignore[attr-defined]  # what the server does next
    assert len(broker.connections) == 0

    peer_b, pump_b, delivery_id, payload = receive_one(broker, "q")
    assert decode_message(payload).body == "kept"
    assert broker.queue_snapshot("q").depth == 1
    pump_b.send(peer_b.disposition(delivery_id))
    assert broker.queue_snapshot("q").depth == 0


def test_message_held_by_the_failed_connection_goes_back_to_the_queue() -> None:
    broker = Broker(BrokerConfig(), clock=ManualClock())
    broker.declare_queue("q")
    broker.publish("q", Message(body="in flight"))

    peer_a, pump_a, _, payload = receive_one(broker, "q")
    assert decode_message(payload).body == "in flight"
    assert broker.queue_snapshot("q").acquired == 1

    pump_a.send(Peer.raw_frame(0, b"\xff"))
    assert pump_a.finished
    snapshot = broker.queue_snapshot("q")
    assert snapshot.available == 1 and snapshot.acquired == 0
    assert snapshot.messages[0].delivery_count == 1  # back as modified(delivery-failed)

    peer_b, pump_b, delivery_id, payload = receive_one(broker, "q")
    assert decode_message(payload).body == "in flight"
    pump_b.send(peer_b.disposition(delivery_id))
    assert broker.queue_snapshot("q").depth == 0


def test_publishing_connection_and_consumer_connection_work_alongside_a_failed_one() -> None:
    broker = Broker(BrokerConfig(), clock=ManualClock())
    broker.declare_queue("q")
    bad_peer, bad = opened(broker)
    bad.send(bad_peer.attach_sender("s", "q", 0))

    producer, pump_p = opened(broker)
    frames = pump_p.send(producer.attach_sender("s", "q", 0))
    assert frames.names() == ["Attach", "Flow"]
    assert producer.link(0).credit == broker.config.link_credit

    bad.send(Peer.raw_frame(0, b"\x00\x53\x99\x45"))  # an unknown descriptor
    assert bad.finished

    frames = pump_p.send(producer.transfer(0, None, None, Message(body=1).encode()))
    disposition = frames.one(Disposition)
    assert disposition.settled and disposition.state == Accepted()
    assert broker.queue_snapshot("q").depth == 1
    assert pump_p.send(producer.close()).names() == ["Close"]


def test_broker_connection_byte_at_a_time_consumes_and_settles() -> None:
    broker = Broker(BrokerConfig(), clock=ManualClock())
    broker.declare_queue("q")
    for i in range(3):
        broker.publish("q", Message(body=i))
    peer, pump = opened(broker, trickle=True)
    frames = pump.send(peer.attach_receiver("r", "q", 0) + peer.flow(0, credit=2))
    assert frames.names() == ["Attach", "Transfer", "Transfer"]
    assert peer.link(0).delivery_count == 2 and peer.link(0).credit == 0
    bodies = [decode_message(f.payload).body for f in frames if f.name == "Transfer"]
    assert bodies == [0, 1]
    # Release the first (it goes back and comes again), accept the second.
    pump.send(peer.disposition(0, state=Modified(delivery_failed=False)) + peer.disposition(1))
    frames = pump.send(peer.flow(0, credit=5, drain=True))
    transfers = frames.of(Transfer)
    assert [decode_message(f.payload).body for f in frames if f.name == "Transfer"] == [0, 2]
    assert [t.delivery_id for t in transfers] == [2, 3]
    flow = frames.last(Flow)
    assert flow.drain and flow.link_credit == 0 and flow.delivery_count == 2 + 5
    assert broker.queue_snapshot("q").acquired == 2


def test_refused_attach_is_answered_with_null_source_then_detach() -> None:
    broker = Broker(BrokerConfig(auto_create=False), clock=ManualClock())
    peer, pump = opened(broker)
    frames = pump.send(peer.attach_receiver("r", "missing", 0))
    assert frames.names() == ["Attach", "Detach"]
    assert frames.one(Attach).source is None  # §2.6.3: a refused link has a null terminus
    detach = frames.one(Detach)
    assert detach.closed and detach.error is not None and detach.error.condition == conditions.NOT_FOUND
    assert peer.link(0).remote_detach == detach
    assert pump.send(peer.detach(0)).names() == []
    assert pump.send(peer.attach_receiver("r", "missing", 0)).names() == ["Attach", "Detach"]
