"""The in-memory client peer of :mod:`minibroker.testing` itself."""

from __future__ import annotations

import pytest

from minibroker.amqp import codec
from minibroker.amqp.messaging import Accepted, Source, Target
from minibroker.amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    End,
    Flow,
    Open,
    Transfer,
)
from minibroker.amqp.sasl_frames import SaslInit
from minibroker.broker.clock import ManualClock
from minibroker.broker.engine import Broker, BrokerConnection
from minibroker.protocol import Connection
from minibroker.protocol.framing import AMQP_HEADER, FRAME_HEADER, SASL_HEADER
from minibroker.testing import (
    Frame,
    FrameReader,
    Frames,
    Peer,
    ProtocolHeader,
    connect,
    exchange,
    parse_frames,
)


def test_builders_round_trip_through_the_reader() -> None:
    peer = Peer(container_id="c", max_frame_size=1000)
    data = (
        peer.sasl_anonymous()
        + peer.header()
        + peer.open(hostname="h")
        + peer.begin(2)
        + peer.attach_sender("s", "q", 0, channel=2, durable=1)
        + peer.attach_receiver("r", "q", 1, channel=2, distribution_mode="copy")
        + peer.flow(1, credit=3, channel=2)
        + peer.transfer(0, None, None, b"p", channel=2)
        + peer.disposition(0, 3, channel=2)
        + peer.detach(1, channel=2)
        + peer.end(2)
        + peer.empty_frame()
        + peer.close()
    )
    frames = parse_frames(data)
    assert frames.names() == [
        "ProtocolHeader", "SaslInit", "ProtocolHeader", "Open", "Begin", "Attach", "Attach", "Flow",
        "Transfer", "Disposition", "Detach", "End", "EmptyFrame", "Close",
    ]  # fmt: skip
    assert frames[0].performative == SASL_HEADER and frames[2].performative == AMQP_HEADER
    assert frames.one(SaslInit).mechanism == "ANONYMOUS"
    assert frames.one(Open) == Open(container_id="c", hostname="h", max_frame_size=1000)
    sender, receiver = frames.of(Attach)
    assert sender.role == ROLE_SENDER and sender.target == Target(address="q", durable=1)
    assert sender.initial_delivery_count == 0
    assert receiver.role == ROLE_RECEIVER and receiver.source == Source(address="q", distribution_mode="copy")
    flow = frames.one(Flow)
    assert (flow.handle, flow.link_credit, flow.delivery_count, flow.next_outgoing_id) == (1, 3, 0, 0)
    transfer = frames.one(Transfer)
    assert (transfer.delivery_id, transfer.delivery_tag, transfer.more) == (0, b"\x00\x00\x00\x00", False)
    assert frames[8].payload == b"p"
    assert frames.one(Disposition) == Disposition(
        role=ROLE_RECEIVER, first=0, last=3, settled=True, state=Accepted()
    )
    assert frames.one(Detach).closed
    assert all(f.channel == 2 for f in frames[4:12])
    assert isinstance(frames[0].performative, ProtocolHeader)


def test_counters_follow_what_the_peer_sends() -> None:
    peer = Peer()
    peer.remote_max_frame_size = 512
    peer.begin(next_outgoing_id=2**32 - 1)
    peer.attach_sender("s", "q", 0, attach_fields={"initial_delivery_count": 7})
    assert peer.link(0).delivery_count == 7 and peer.link(0).is_sender
    data = peer.transfer(0, None, None, bytes(1200))
    transfers = parse_frames(data).of(Transfer)
    assert len(transfers) == 3
    assert peer.session().next_outgoing_id == 2
    assert peer.session().next_delivery_id == 1
    assert peer.link(0).delivery_count == 8
    assert max(FRAME_HEADER.unpack_from(data, pos)[0] for pos in _frame_starts(data)) <= 512
    # A delivery left open is continued without a delivery-id.
    peer.transfer(0, None, None, b"a", more=True)
    assert peer.link(0).sending_more
    continuation = parse_frames(peer.transfer(0, None, None, b"b")).one(Transfer)
    assert continuation.delivery_id is None and not continuation.more
    assert peer.link(0).delivery_count == 9 and peer.session().next_delivery_id == 2
    peer.detach(0)
    with pytest.raises(KeyError, match="no link with handle 0"):
        peer.link(0)
    peer.end()
    with pytest.raises(KeyError, match="no session on channel 0"):
        peer.session()


def _frame_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        pos += FRAME_HEADER.unpack_from(data, pos)[0]
    return starts


def test_aborted_transfer_marks_the_last_frame() -> None:
    peer = Peer()
    peer.begin()
    peer.attach_sender("s", "q", 0)
    transfers = parse_frames(peer.transfer(0, 0, b"t", bytes(25), frame_payload=10, aborted=True)).of(
        Transfer
    )
    assert [(t.more, t.aborted) for t in transfers] == [(True, False), (True, False), (False, True)]
    assert not peer.link(0).sending_more


def test_reader_keeps_partial_frames() -> None:
    data = Peer.header() + Peer().open() + Peer.empty_frame()
    reader = FrameReader()
    got = Frames()
    for i in range(len(data)):
        got += reader.feed(data[i : i + 1])
    assert got.names() == ["ProtocolHeader", "Open", "EmptyFrame"]
    assert reader.pending == b""
    assert reader.feed(data[:20]).names() == ["ProtocolHeader"] and len(reader.pending) == 12


def test_parse_frames_rejects_trailing_and_malformed_bytes() -> None:
    with pytest.raises(ValueError, match="trailing"):
        parse_frames(Peer().open()[:-1])
    with pytest.raises(ValueError, match="malformed"):
        parse_frames(FRAME_HEADER.pack(4, 2, 0, 0))


def test_frames_lookups() -> None:
    frames = Frames([Frame(0, End(), b""), Frame(0, Close(), b""), Frame(0, End(), b"")])
    assert frames.of(End) == [End(), End()]
    assert frames.last(Close) == Close()
    with pytest.raises(AssertionError, match="expected one End, got 2"):
        frames.one(End)
    with pytest.raises(AssertionError, match="no Begin"):
        frames.last(Begin)
    ch, performative, payload = frames[1]
    assert (ch, performative, payload) == (0, Close(), b"")


def test_raw_frame_writes_the_extended_header() -> None:
    body = codec.encode(End())
    data = Peer.raw_frame(3, body, doff=3)
    assert FRAME_HEADER.unpack_from(data) == (12 + len(body), 3, 0, 3)
    assert parse_frames(data) == [Frame(3, End(), b"")]


def test_connect_accepts_a_broker_an_engine_or_a_broker_connection() -> None:
    broker = Broker(clock=ManualClock())
    pump = connect(broker)
    assert isinstance(pump.target, BrokerConnection)
    assert pump.target in broker.connections
    assert exchange(Connection(), Peer().start()).names() == ["ProtocolHeader", "Open", "Begin"]
    assert exchange(broker.connect(lambda: None), Peer().start(), trickle=True).names() == [
        "ProtocolHeader", "Open", "Begin",
    ]  # fmt: skip


def test_peer_observes_the_servers_answers() -> None:
    broker = Broker(clock=ManualClock())
    broker.declare_queue("q")
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.start(sasl=True))
    assert peer.sasl_outcome is not None and peer.sasl_outcome.code == 0
    assert peer.remote_open is not None and peer.remote_max_frame_size == broker.config.max_frame_size
    session = peer.session()
    assert session.remote_channel == 0 and session.remote_begin is not None and session.next_incoming_id == 0
    pump.send(peer.attach_sender("s", "q", 0))
    link = peer.link(0)
    assert link.remote_handle == 0 and link.remote_attach is not None
    assert link.credit == broker.config.link_credit
    pump.send(peer.close())
    assert peer.remote_close == Close()
