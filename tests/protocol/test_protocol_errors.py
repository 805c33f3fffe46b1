"""Protocol errors close the right scope with the right condition (Part 2 §2.8.14-§2.8.18).

A connection error is ``close`` (§2.7.9), a session error ``end`` (§2.7.8), a
link error ``detach`` with closed=true (§2.7.7).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from engine_harness import OpenEngine

from minibroker.amqp import codec
from minibroker.amqp import errors as conditions
from minibroker.amqp.messaging import Source, Target
from minibroker.amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    Attach,
    Begin,
    Close,
    Detach,
    End,
    Error,
    Flow,
    Open,
    Transfer,
)
from minibroker.amqp.sasl_frames import SaslInit
from minibroker.protocol import Connection, ConnectionConfig, events
from minibroker.protocol._state import ConnectionState, LinkState, SessionState
from minibroker.protocol.framing import AMQP_HEADER, FRAME_HEADER, FRAME_SASL
from minibroker.testing import Frames, Peer, connect


def closed_with(frames: Frames, condition: str) -> Error:
    close = frames.last(Close)
    assert close.error is not None, f"close without an error: {frames.names()}"
    assert close.error.condition == condition, close.error
    return close.error


# ------------------------------------------------------------------ protocol header


@pytest.mark.parametrize(
    "header",
    [
        b"HTTP/1.1",
        b"GET / HTTP/1.1\r\n\r\n",
        b"AMQP\x01\x01\x00\x00",
        b"AMQP\x00\x01\x00\x01",
        b"AMQP\x02\x01\x00\x00",
    ],
)
@pytest.mark.parametrize("trickle", [False, True])
def test_bad_protocol_header_is_answered_with_ours_then_finished(header: bytes, trickle: bool) -> None:
    conn = Connection()
    pump = connect(conn, trickle=trickle)
    frames = pump.send(header)
    assert frames.performatives() == [AMQP_HEADER]
    assert pump.finished
    [closed] = pump.events
    assert isinstance(closed, events.ConnectionClosed) and not closed.by_peer
    assert closed.error is not None and closed.error.condition == conditions.FRAMING_ERROR
    assert conn.receive_data(Peer.header()) == [] and conn.data_to_send() == b""


def test_bad_header_is_detected_before_eight_bytes_arrive() -> None:
    conn = Connection()
    assert conn.receive_data(b"GE")
    assert conn.finished and conn.data_to_send() == AMQP_HEADER


# ------------------------------------------------------------------ frames


def test_garbage_frame_body_is_a_decode_error(open_engine: OpenEngine) -> None:
    h = open_engine()
    frames = h.send(Peer.raw_frame(0, b"\xff\xfe\xfd"))
    closed_with(frames, conditions.DECODE_ERROR)
    assert h.pump.finished
    assert h.conn.state is ConnectionState.CLOSE_SENT


@pytest.mark.parametrize(
    "body",
    [
        codec.encode("not a performative"),
        codec.encode([1, 2, 3]),
        codec.encode(SaslInit(mechanism="ANONYMOUS")),  # a SASL body in an AMQP frame
        codec.encode(Source(address="q")),  # a described list, but no performative
        codec.encode(Open(container_id="x"))[:-3],  # truncated
        b"\x00\x53\x12\x45",  # attach with its mandatory fields missing
        b"\x00\x53\x14\xc0\x01\x00",  # transfer list claiming one field but holding none
    ],
    ids=["string", "list", "sasl-body", "source", "truncated-open", "attach-no-fields", "short-list"],
)
def test_undecodable_or_non_performative_body_is_a_decode_error(open_engine: OpenEngine, body: bytes) -> None:
    h = open_engine()
    frames = h.send(Peer.raw_frame(0, body))
    closed_with(frames, conditions.DECODE_ERROR)
    assert h.pump.finished


@pytest.mark.parametrize("size", [0, 4, 7])
def test_frame_size_below_eight_is_a_framing_error(open_engine: OpenEngine, size: int) -> None:
    h = open_engine()
    frames = h.send(FRAME_HEADER.pack(size, 2, 0, 0))
    closed_with(frames, conditions.FRAMING_ERROR)


def test_frame_larger_than_max_frame_size_is_a_framing_error(open_engine: OpenEngine) -> None:
    h = open_engine(ConnectionConfig(max_frame_size=1024))
    # Refused on its header alone: the 1025 bytes need not arrive.
    frames = h.send(FRAME_HEADER.pack(1025, 2, 0, 0))
    error = closed_with(frames, conditions.FRAMING_ERROR)
    assert "1025" in (error.description or "")


def test_frame_of_exactly_max_frame_size_is_accepted(open_engine: OpenEngine) -> None:
    h = open_engine(ConnectionConfig(max_frame_size=1024))
    h.send(h.peer.attach_sender("s", "q", 0))
    head = Transfer(handle=0, delivery_id=0, delivery_tag=b"t", message_format=0, settled=False)
    payload = bytes(1024 - 8 - len(codec.encode(head)))
    frame = h.peer.transfer(0, 0, b"t", payload)
    assert len(frame) == 1024
    h.pump.take_events()
    assert h.send(frame).names() == []
    [received] = h.pump.events
    assert isinstance(received, events.MessageReceived) and received.delivery.payload == payload


@pytest.mark.parametrize(("doff", "size"), [(0, 8), (1, 8), (1, 12), (3, 8), (200, 16)])
def test_bad_data_offset_is_a_framing_error(open_engine: OpenEngine, doff: int, size: int) -> None:
    h = open_engine()
    frames = h.send(FRAME_HEADER.pack(size, doff, 0, 0) + bytes(size - 8))
    closed_with(frames, conditions.FRAMING_ERROR)


def test_extended_header_is_skipped(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.pump.take_events()
    data = h.peer.attach_sender("s", "q", 0)
    body = data[8:]
    frames = h.send(Peer.raw_frame(0, body, doff=4))
    assert frames.names() == ["Attach", "Flow"]


def test_unknown_frame_type_is_a_framing_error(open_engine: OpenEngine) -> None:
    h = open_engine()
    frames = h.send(Peer.raw_frame(0, codec.encode(End()), frame_type=7))
    closed_with(frames, conditions.FRAMING_ERROR)


def test_sasl_frame_after_open_is_a_framing_error(open_engine: OpenEngine) -> None:
    h = open_engine()
    frames = h.send(Peer.sasl_frame(SaslInit(mechanism="ANONYMOUS")))
    closed_with(frames, conditions.FRAMING_ERROR)
    assert Peer.sasl_frame(SaslInit(mechanism="x"))[5] == FRAME_SASL


@pytest.mark.parametrize(
    "performative",
    [
        Attach(name="l", handle=0, role=ROLE_SENDER, target=Target(address="q")),
        Flow(incoming_window=10, next_outgoing_id=0, outgoing_window=10),
        Transfer(handle=0, delivery_id=0, delivery_tag=b"t"),
        Detach(handle=0),
        End(),
    ],
    ids=lambda p: type(p).__name__,
)
def test_frame_on_a_channel_without_a_session_is_a_framing_error(
    open_engine: OpenEngine, performative: object
) -> None:
    h = open_engine()
    frames = h.send(Peer.raw_frame(3, codec.encode(performative)))
    closed_with(frames, conditions.FRAMING_ERROR)
    assert h.pump.finished


def test_open_twice_is_an_illegal_state(open_engine: OpenEngine) -> None:
    h = open_engine()
    frames = h.send(h.peer.open())
    closed_with(frames, conditions.ILLEGAL_STATE)


@pytest.mark.parametrize(
    "performative",
    [
        Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10),
        Attach(name="l", handle=0, role=ROLE_SENDER, target=Target(address="q")),
        End(),
    ],
    ids=lambda p: type(p).__name__,
)
def test_performative_before_open_is_refused(performative: object) -> None:
    """§2.4.1: after the header, the first frame each way is ``open``."""
    conn = Connection()
    pump = connect(conn)
    frames = pump.send(Peer.header() + Peer.raw_frame(0, codec.encode(performative)))
    assert frames.names() == ["ProtocolHeader", "Open", "Close"], "open first, then close (§2.4.1)"
    closed_with(frames, conditions.ILLEGAL_STATE)
    assert not conn.sessions
    assert [type(e) for e in pump.events] == [events.ConnectionClosed]


def test_close_before_open_is_answered_with_open_and_close() -> None:
    conn = Connection()
    frames = connect(conn).send(Peer.header() + Peer().close())
    assert frames.names() == ["ProtocolHeader", "Open", "Close"]
    assert conn.finished


# ------------------------------------------------------------------ sessions


def test_begin_on_a_channel_already_in_use_closes_the_connection(open_engine: OpenEngine) -> None:
    h = open_engine()
    frames = h.send(
        Peer.raw_frame(0, codec.encode(Begin(next_outgoing_id=0, incoming_window=5, outgoing_window=5)))
    )
    error = closed_with(frames, conditions.ILLEGAL_STATE)
    assert "channel 0" in (error.description or "")


def test_begin_naming_a_remote_channel_is_not_allowed(open_engine: OpenEngine) -> None:
    h = open_engine()
    frames = h.send(h.peer.begin(1, remote_channel=0))
    closed_with(frames, conditions.NOT_ALLOWED)


def test_begin_beyond_channel_max_is_a_framing_error(open_engine: OpenEngine) -> None:
    h = open_engine(ConnectionConfig(channel_max=3))
    assert h.send(h.peer.begin(3)).names() == ["Begin"]
    frames = h.send(h.peer.begin(4))
    closed_with(frames, conditions.FRAMING_ERROR)


def test_transfer_on_an_unattached_handle_ends_the_session(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.begin(1))
    frames = h.send(h.peer.transfer(7, 0, b"t", b"x"))
    end = frames.one(End)
    assert end.error is not None and end.error.condition == conditions.UNATTACHED_HANDLE
    assert frames[0].channel == 0
    assert not h.pump.finished
    session = h.conn.sessions[0]
    assert session.state is SessionState.END_SENT
    # Until the peer's end, frames on the session are discarded; then the channel is free again.
    assert h.send(h.peer.transfer(7, 1, b"u", b"y") + h.peer.flow(echo=True)).names() == []
    assert h.send(h.peer.end()).names() == []
    assert 0 not in h.conn.sessions
    assert h.send(h.peer.begin(0)).names() == ["Begin"]
    # The other session was not touched.
    assert h.conn.sessions[1].state is SessionState.MAPPED


@pytest.mark.parametrize("what", ["flow", "disposition", "detach"])
def test_other_performatives_on_an_unattached_handle_end_the_session(
    open_engine: OpenEngine, what: str
) -> None:
    h = open_engine()
    data = {
        "flow": h.peer.flow(5, 10),
        "disposition": h.peer.disposition(0),
        "detach": h.peer.detach(5),
    }[what]
    frames = h.send(data)
    if what == "disposition":
        # A disposition names deliveries, not handles: unknown ids are ignored.
        assert frames.names() == []
        return
    end = frames.one(End)
    assert end.error is not None and end.error.condition == conditions.UNATTACHED_HANDLE


def test_transfer_without_credit_detaches_the_link(open_engine: OpenEngine) -> None:
    h = open_engine(credit=1)
    h.send(h.peer.attach_sender("s", "q", 0))
    h.pump.take_events()
    frames = h.send(h.peer.transfer(0, 0, b"a", b"one") + h.peer.transfer(0, 1, b"b", b"two"))
    detach = frames.one(Detach)
    assert detach.closed and detach.error is not None
    assert detach.error.condition == conditions.TRANSFER_LIMIT_EXCEEDED
    assert not h.pump.finished and h.conn.sessions[0].state is SessionState.MAPPED
    kinds = [type(e) for e in h.pump.events]
    assert kinds == [events.MessageReceived, events.LinkDetached]
    # Late transfers are dropped; the peer's detach completes the link's end and frees the handle.
    assert h.send(h.peer.transfer(0, 2, b"c", b"three")).names() == []
    assert h.send(h.peer.detach(0)).names() == []
    assert h.conn.sessions[0].links_by_remote == {}
    assert h.send(h.peer.attach_sender("s2", "q", 0)).names() == ["Attach", "Flow"]


def test_transfer_on_a_link_the_broker_sends_on_is_not_allowed(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_receiver("r", "q", 0))
    frames = h.send(h.peer.frame(0, Transfer(handle=0, delivery_id=0, delivery_tag=b"t")))
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == conditions.NOT_ALLOWED


def test_first_transfer_without_delivery_id_is_an_invalid_field(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_sender("s", "q", 0))
    frames = h.send(h.peer.frame(0, Transfer(handle=0)))
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == conditions.INVALID_FIELD


def test_a_delivery_tag_over_32_bytes_is_an_invalid_field(open_engine: OpenEngine) -> None:
    """Part 2 §2.8.7: a delivery-tag is at most 32 octets; a longer one detaches its link (the
    broker would hold it for as long as the delivery is unsettled), and the session goes on."""
    h = open_engine(credit=2)
    h.send(h.peer.attach_sender("s", "q", 0))
    h.pump.take_events()
    assert h.send(h.peer.transfer(0, 0, b"t" * 32, b"fits")).names() == []  # taken: the message is received
    detach = h.send(h.peer.transfer(0, 1, b"t" * 33, b"too long a tag")).one(Detach)
    assert detach.error is not None and detach.error.condition == conditions.INVALID_FIELD
    assert "at most 32 bytes" in (detach.error.description or "")
    assert [type(e) for e in h.pump.events] == [events.MessageReceived, events.LinkDetached]
    assert h.conn.sessions[0].state is SessionState.MAPPED


def test_attach_on_a_used_handle_ends_the_session(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_sender("a", "q", 0))
    frames = h.send(h.peer.attach_receiver("b", "q", 0))
    end = frames.one(End)
    assert end.error is not None and end.error.condition == conditions.HANDLE_IN_USE
    assert frames.names() == ["End"]
    ended = [e for e in h.pump.events if isinstance(e, events.SessionEnded)]
    assert len(ended) == 1 and ended[0].error == end.error
    detached = [e for e in h.pump.events if isinstance(e, events.LinkDetached)]
    assert [d.link.name for d in detached] == ["a"] and detached[0].link.state is LinkState.DETACHED


def test_attach_beyond_handle_max_is_a_framing_error(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.begin(1, handle_max=3))
    assert h.send(h.peer.attach_sender("ok", "q", 3, channel=1)).names() == ["Attach", "Flow"]
    frames = h.send(h.peer.attach_sender("too-far", "q", 4, channel=1))
    closed_with(frames, conditions.FRAMING_ERROR)


def test_attach_with_role_receiver_gets_a_sender_attach_back(open_engine: OpenEngine) -> None:
    h = open_engine()
    frames = h.send(h.peer.attach_receiver("r", "q", 0))
    attach = frames.one(Attach)
    assert attach.role == ROLE_SENDER and attach.initial_delivery_count == 0
    frames = h.send(h.peer.attach_sender("s", "q", 1))
    assert frames.one(Attach).role == ROLE_RECEIVER


def test_connection_error_reports_every_link_and_session_gone(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(
        h.peer.attach_sender("s", "q", 0) + h.peer.begin(1) + h.peer.attach_receiver("r", "q", 0, channel=1)
    )
    h.pump.take_events()
    h.send(Peer.raw_frame(0, b"\xff"))
    kinds = [type(e).__name__ for e in h.pump.events]
    assert sorted(kinds) == sorted(
        ["LinkDetached", "SessionEnded", "LinkDetached", "SessionEnded", "ConnectionClosed"]
    )
    assert kinds[-1] == "ConnectionClosed"
    assert not h.conn.sessions


def test_frames_after_a_connection_error_are_ignored(open_engine: OpenEngine) -> None:
    h = open_engine()
    frames = h.send(Peer.raw_frame(0, b"\xff") + h.peer.attach_sender("s", "q", 0))
    assert frames.names() == ["Close"]
    assert h.conn.receive_data(h.peer.close()) == []
    assert h.conn.data_to_send() == b""


def test_peer_close_with_error_is_reported_and_answered(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_sender("s", "q", 0))
    h.pump.take_events()
    error = Error(condition="amqp:internal-error", description="client bug")
    frames = h.send(h.peer.close(error))
    assert frames.names() == ["Close"] and frames.one(Close).error is None
    assert h.conn.state is ConnectionState.END and h.pump.finished
    kinds = [type(e) for e in h.pump.events]
    assert kinds == [events.LinkDetached, events.SessionEnded, events.ConnectionClosed]
    closed = h.pump.events[-1]
    assert closed.by_peer and closed.error == error


# ------------------------------------------------------------------ teardown in the same bytes as an attach


@pytest.mark.parametrize("teardown", ["end", "close", "garbage"])
def test_answering_an_attach_whose_session_is_already_gone_writes_nothing(
    open_engine: OpenEngine, teardown: str
) -> None:
    """The engine reports events per batch of bytes: by the time the user answers an
    attach, the same bytes may have ended its session. Answering must then be a no-op."""
    h = open_engine(auto=False)
    h.pump.take_events()
    tail = {"end": h.peer.end(), "close": h.peer.close(), "garbage": Peer.raw_frame(0, b"\xff")}[teardown]
    frames = h.send(h.peer.attach_receiver("r", "q", 0) + h.peer.attach_sender("s", "q", 1) + tail)
    answered = frames.names()
    attached = [e.link for e in h.pump.events if isinstance(e, events.LinkAttached)]
    assert [link.name for link in attached] == ["r", "s"]
    assert all(link.state is LinkState.DETACHED for link in attached)
    h.conn.accept_link(attached[0], source=attached[0].source, target=attached[0].target)
    h.conn.refuse_link(attached[1], Error(condition="amqp:not-found"))
    h.conn.grant_credit(attached[1], 10)
    h.conn.detach_link(attached[0])
    assert h.pump.read().names() == []
    assert answered == {"end": ["End"], "close": ["Close"], "garbage": ["Close"]}[teardown]


def test_echo_requested_before_the_link_is_answered_sends_no_flow_for_it(open_engine: OpenEngine) -> None:
    h = open_engine()  # the attach is answered only after the whole batch
    frames = h.send(h.peer.attach_receiver("r", "q", 0) + h.peer.flow(0, credit=3, echo=True))
    assert frames.names() == ["Attach"], "a flow naming our handle must not precede our attach"
    assert frames.one(Attach).role == ROLE_SENDER


@pytest.mark.parametrize("teardown", ["end", "close", "garbage", "detach"])
@pytest.mark.parametrize("role", ["receiver", "sender", "refused"])
def test_broker_survives_attach_pipelined_with_teardown(teardown: str, role: str) -> None:
    from minibroker.amqp.message import Message
    from minibroker.broker.clock import ManualClock
    from minibroker.broker.config import BrokerConfig
    from minibroker.broker.engine import Broker

    broker = Broker(BrokerConfig(auto_create=role != "refused"), clock=ManualClock())
    if role != "refused":
        broker.declare_queue("q")
        broker.publish("q", Message(body="stays"))
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.start())
    data = peer.attach_sender("l", "q", 0) if role == "sender" else peer.attach_receiver("l", "q", 0)
    if role == "receiver":
        data += peer.flow(0, credit=5)
    teardowns: dict[str, Callable[[], bytes]] = {
        "end": peer.end,
        "close": peer.close,
        "detach": lambda: peer.detach(0),
    }
    data += teardowns[teardown]() if teardown in teardowns else Peer.raw_frame(0, b"\xff")
    frames = pump.send(data)
    if teardown == "detach":
        # Either the link is answered and detached, or the connection is closed; never a crash.
        assert frames.names()[-1] in ("Detach", "Close")
    else:
        assert frames.names() == (["End"] if teardown == "end" else ["Close"])
    if role != "refused":
        snapshot = broker.queue_snapshot("q")
        assert snapshot.consumers == 0 and snapshot.available == 1
    if pump.finished:
        pump.target.connection_lost()  # type: ignore[attr-defined]
    else:
        assert pump.send(peer.close()).names() == ["Close"]
    assert broker.connections == set()


@pytest.mark.parametrize("teardown", ["detach", "end", "close"])
def test_credit_and_teardown_in_one_read_sends_nothing_after_the_teardown(teardown: str) -> None:
    """A client granting credit and closing its receiver in the same write gets no transfer
    on the handle it just detached (the transfer would follow our detach, §2.6.5)."""
    from minibroker.amqp.message import Message
    from minibroker.broker.clock import ManualClock
    from minibroker.broker.engine import Broker

    broker = Broker(clock=ManualClock())
    broker.declare_queue("q")
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.start() + peer.attach_receiver("r", "q", 0))
    for i in range(3):
        broker.publish("q", Message(body=i))
    assert pump.read().names() == []
    data = peer.flow(0, credit=10)
    data += {"detach": lambda: peer.detach(0), "end": peer.end, "close": peer.close}[teardown]()
    frames = pump.send(data)
    assert frames.names() == [{"detach": "Detach", "end": "End", "close": "Close"}[teardown]]
    snapshot = broker.queue_snapshot("q")
    assert snapshot.available == 3 and snapshot.consumers == 0
    assert all(m.delivery_count == 0 for m in snapshot.messages)


def _described(code: int, fields: list[object]) -> bytes:
    from minibroker.amqp.types import Described, ulong

    return codec.encode(Described(ulong(code), fields))


@pytest.mark.parametrize(
    "body",
    [
        _described(0x13, [None, 10, 0, 10, [1]]),  # flow: handle is a list
        _described(0x13, [None, "ten", 0, 10]),  # flow: incoming-window is a string
        _described(0x12, ["n", "zero", False]),  # attach: handle is a string
        _described(0x14, [[0], 0, b"t"]),  # transfer: handle is a list
        _described(0x15, [True, "first"]),  # disposition: first is a string
        _described(0x11, [None, 0, 10, 10, "many"]),  # begin on a new channel: handle-max is a string
    ],
    ids=[
        "flow-handle",
        "flow-window",
        "attach-handle",
        "transfer-handle",
        "disposition-first",
        "begin-handle-max",
    ],
)
def test_performative_field_of_the_wrong_type_is_a_decode_error(open_engine: OpenEngine, body: bytes) -> None:
    """The codec does not check field types; the engine must not let a TypeError escape."""
    h = open_engine()
    h.send(h.peer.attach_sender("s", "q", 0))
    channel = 1 if body[2] == 0x11 else 0
    frames = h.send(Peer.raw_frame(channel, body))
    closed_with(frames, conditions.DECODE_ERROR)
    assert h.pump.finished


def test_frames_after_a_link_error_in_the_same_read_are_still_handled(open_engine: OpenEngine) -> None:
    h = open_engine(credit=0)
    h.send(h.peer.attach_sender("s", "q", 0))
    h.pump.take_events()
    # A transfer without credit (a link error) and an attach, in one write.
    frames = h.send(h.peer.transfer(0, 0, b"a", b"one") + h.peer.attach_sender("s2", "q2", 1))
    assert frames.one(Detach).error is not None
    attaches = frames.of(Attach)
    assert [a.name for a in attaches] == ["s2"]
    assert not h.pump.finished


def test_a_senders_advanced_delivery_count_uses_up_credit(open_engine: OpenEngine) -> None:
    """§2.6.7: the sender's delivery-count is authoritative, e.g. after it consumed credit on drain."""
    h = open_engine(credit=100)
    h.send(h.peer.attach_sender("s", "q", 0))
    link = h.conn.sessions[0].links_by_remote[0]
    assert (link.delivery_count, link.credit) == (0, 100)
    flow = Flow(
        next_incoming_id=0, incoming_window=2**31 - 1, next_outgoing_id=0, outgoing_window=2**31 - 1,
        handle=0, delivery_count=10, available=0,
    )  # fmt: skip
    h.send(h.peer.frame(0, flow))
    assert (link.delivery_count, link.credit) == (10, 90)
