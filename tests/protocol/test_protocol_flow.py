"""Session windows and transfer ids (Part 2 §2.5.6), link credit and delivery-count (§2.6.7),
multi-frame and aborted deliveries (§2.6.12-§2.6.14), dispositions (§2.7.6), echo (§2.7.4)."""

from __future__ import annotations

from typing import Any

import pytest
from engine_harness import Opened, OpenEngine
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.amqp import errors as conditions
from minibroker.amqp.message import Message, decode_message
from minibroker.amqp.messaging import Accepted, Received, Rejected, Released
from minibroker.amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    Begin,
    Detach,
    Disposition,
    End,
    Flow,
    Transfer,
)
from minibroker.broker.clock import ManualClock
from minibroker.broker.engine import Broker
from minibroker.protocol import Connection, Link, events
from minibroker.protocol.connection import INCOMING_WINDOW
from minibroker.protocol.framing import FRAME_HEADER
from minibroker.testing import Peer, auto_accept, connect, parse_frames

MOD = 2**32


def received(h: Opened) -> list[events.MessageReceived]:
    return [e for e in h.pump.take_events() if isinstance(e, events.MessageReceived)]


def consumer(h: Opened, handle: int = 0, name: str = "out") -> Link:
    """Attach a link the engine sends on (the peer receives); return the engine's link."""
    h.pump.take_events()
    h.send(h.peer.attach_receiver(name, "q", handle))
    [attached] = [e for e in h.pump.take_events() if isinstance(e, events.LinkAttached)]
    return attached.link


def frame_sizes(data: bytes) -> list[int]:
    sizes, pos = [], 0
    while pos < len(data):
        if data[pos : pos + 4] == b"AMQP":
            pos += 8
            continue
        size = FRAME_HEADER.unpack_from(data, pos)[0]
        sizes.append(size)
        pos += size
    return sizes


# ---------------------------------------------------------------- session: transfer ids and windows


def test_incoming_transfer_ids_wrap_modulo_2_32(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.begin(1, next_outgoing_id=MOD - 2) + h.peer.attach_sender("s", "q", 0, channel=1))
    session = h.conn.sessions[1]
    assert session.next_incoming_id == MOD - 2
    h.pump.take_events()
    data = (
        h.peer.transfer(0, 0, b"a", b"one", channel=1)
        + h.peer.transfer(0, 1, b"b", b"x" * 30, channel=1, frame_payload=10)  # three frames
        + h.peer.transfer(0, 2, b"c", b"three", channel=1)
    )
    h.send(data)
    assert [e.delivery.payload for e in received(h)] == [b"one", b"x" * 30, b"three"]
    assert session.next_incoming_id == (MOD - 2 + 5) % MOD == 3
    assert h.peer.session(1).next_outgoing_id == 3
    # A session flow with echo reports it back (§2.7.4).
    frames = h.send(h.peer.flow(channel=1, echo=True))
    flow = frames.one(Flow)
    assert flow.handle is None and flow.next_incoming_id == 3
    assert flow.next_outgoing_id == session.next_outgoing_id == 0
    assert frames[0].channel == session.channel


def test_outgoing_transfer_ids_and_peer_bookkeeping_agree(open_engine: OpenEngine) -> None:
    h = open_engine()
    link = consumer(h)
    h.send(h.peer.flow(0, credit=10))
    h.conn.send_transfer(link, b"1", b"a")
    # Split: the peer's open said max-frame-size 65536, but ours (the engine's) bounds it too.
    h.conn.send_transfer(link, b"2", b"b" * 300_000)
    h.conn.send_transfer(link, b"3", b"c", settled=True)
    frames = h.pump.read()
    transfers = frames.of(Transfer)
    session = h.conn.sessions[0]
    first_ids = [t.delivery_id for t in transfers if t.delivery_id is not None]
    assert first_ids == [0, 1, 2] and session.next_delivery_id == 3  # delivery-ids count deliveries
    assert len(transfers) > 3 and session.next_outgoing_id == len(transfers)  # transfer-ids count frames
    assert h.peer.session().next_incoming_id == session.next_outgoing_id
    assert h.peer.link(0).delivery_count == link.delivery_count == 3
    assert h.peer.link(0).credit == link.credit == 7
    assert set(session.outgoing_unsettled) == {first_ids[0], first_ids[1]}


def test_peer_incoming_window_limits_what_the_broker_sends() -> None:
    broker = Broker(clock=ManualClock())
    broker.declare_queue("q")
    for i in range(5):
        broker.publish("q", Message(body=i))
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.header() + peer.open() + peer.begin(incoming_window=2))
    frames = pump.send(peer.attach_receiver("r", "q", 0) + peer.flow(0, credit=10))
    assert len(frames.of(Transfer)) == 2
    engine_session = pump.target.engine.sessions[0]  # type: ignore[attr-defined]
    assert engine_session.remote_incoming_window == 0
    # §2.5.6: the window is next-incoming-id + incoming-window - next-outgoing-id.
    frames = pump.send(peer.flow(incoming_window=2))
    assert [decode_message(f.payload).body for f in frames if f.name == "Transfer"] == [2, 3]
    frames = pump.send(peer.flow(incoming_window=2))
    assert [decode_message(f.payload).body for f in frames if f.name == "Transfer"] == [4]
    assert engine_session.remote_incoming_window == 1


def test_window_opened_event_and_can_send(open_engine: OpenEngine) -> None:
    h = open_engine(auto=True)
    h.send(h.peer.begin(1, incoming_window=1))
    h.send(h.peer.attach_receiver("r", "q", 0, channel=1) + h.peer.flow(0, credit=5, channel=1))
    link = h.conn.sessions[1].links_by_remote[0]
    assert h.conn.can_send(link)
    h.conn.send_transfer(link, b"t", b"x")
    assert not h.conn.can_send(link)
    h.pump.read()
    h.pump.take_events()
    h.send(h.peer.flow(channel=1, incoming_window=1))
    assert [type(e) for e in h.pump.take_events()] == [events.SessionWindowOpened]
    assert h.conn.can_send(link)


def test_stale_session_flow_leaves_the_window_closed(open_engine: OpenEngine) -> None:
    h = open_engine()
    link = consumer(h)
    h.send(h.peer.flow(0, credit=5))
    h.conn.send_transfer(link, b"a", b"1")
    h.conn.send_transfer(link, b"b", b"2")
    h.pump.read()
    # The peer has not seen our transfers yet: next-incoming-id 0 with a window of 1 is already used up.
    h.send(h.peer.flow(next_incoming_id=0, incoming_window=1))
    assert h.conn.sessions[0].remote_incoming_window == 0


def test_incoming_window_is_replenished_with_a_flow(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_sender("s", "q", 0))
    session = h.conn.sessions[0]
    assert session.incoming_window == INCOMING_WINDOW
    assert h.peer.session().remote_incoming_window == INCOMING_WINDOW
    session.incoming_window = INCOMING_WINDOW // 2
    frames = h.send(h.peer.transfer(0, 0, b"t", b"x"))
    flow = frames.one(Flow)
    assert flow.handle is None and flow.incoming_window == INCOMING_WINDOW and flow.next_incoming_id == 1


def test_transfer_beyond_the_incoming_window_is_a_window_violation(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_sender("s", "q", 0))
    h.conn.sessions[0].incoming_window = 0
    frames = h.send(h.peer.transfer(0, 0, b"t", b"x"))
    end = frames.one(End)
    assert end.error is not None and end.error.condition == conditions.WINDOW_VIOLATION


# ---------------------------------------------------------------- link credit and delivery-count (§2.6.7)


def test_sender_credit_formula_with_stale_receiver_state(open_engine: OpenEngine) -> None:
    h = open_engine()
    link = consumer(h)
    h.send(h.peer.flow(0, credit=5))
    assert link.credit == 5 and link.delivery_count == 0
    for tag in (b"a", b"b", b"c"):
        h.conn.send_transfer(link, tag, b"m")
    assert (link.credit, link.delivery_count) == (2, 3)
    h.pump.take_events()
    # The receiver's flow crossed our transfers: delivery-count(rcv)=1, link-credit(rcv)=5.
    h.conn.receive_data(h.peer.flow(0, credit=5, delivery_count=1))
    assert link.credit == 1 + 5 - 3
    # A flow from even further back cannot make credit negative.
    h.conn.receive_data(h.peer.flow(0, credit=1, delivery_count=0))
    assert link.credit == 0
    h.conn.receive_data(h.peer.flow(0, credit=0, delivery_count=3))
    assert link.credit == 0


def test_sender_delivery_count_wraps(open_engine: OpenEngine) -> None:
    h = open_engine(auto=False)
    h.send(h.peer.attach_receiver("r", "q", 0))
    [attached] = [e for e in h.pump.take_events() if isinstance(e, events.LinkAttached)]
    link = attached.link
    link.delivery_count = MOD - 2
    h.conn.accept_link(link, source=link.source, target=link.target)
    h.pump.read()
    assert h.peer.link(0).delivery_count == MOD - 2  # from initial-delivery-count
    h.send(h.peer.flow(0, credit=3))
    assert link.credit == 3
    for tag in (b"a", b"b", b"c"):
        h.conn.send_transfer(link, tag, b"m")
    h.pump.read()
    assert link.delivery_count == 1 == h.peer.link(0).delivery_count
    h.send(h.peer.flow(0, credit=4))
    assert link.credit == 4


def test_receiver_delivery_count_starts_at_initial_delivery_count_and_wraps(open_engine: OpenEngine) -> None:
    h = open_engine(credit=3)
    frames = h.send(h.peer.attach_sender("s", "q", 0, attach_fields={"initial_delivery_count": MOD - 1}))
    flow = frames.one(Flow)
    assert flow.delivery_count == MOD - 1 and flow.link_credit == 3 and flow.handle == 0
    assert h.peer.link(0).credit == 3
    link = h.conn.sessions[0].links_by_remote[0]
    h.send(h.peer.transfer(0, 0, b"a", b"1") + h.peer.transfer(0, 1, b"b", b"2"))
    assert link.delivery_count == 1 and link.credit == 1
    assert h.peer.link(0).delivery_count == 1 and h.peer.link(0).credit == 1
    frames = h.pump.read()
    h.conn.grant_credit(link, 10)
    flow = h.pump.read().one(Flow)
    assert flow.delivery_count == 1 and flow.link_credit == 10
    assert h.peer.link(0).credit == 10


@pytest.mark.parametrize("sent", [0, 2])
def test_drain_consumes_the_remaining_credit(open_engine: OpenEngine, sent: int) -> None:
    h = open_engine()
    link = consumer(h)
    h.send(h.peer.flow(0, credit=3))
    for i in range(sent):
        h.conn.send_transfer(link, bytes([i]), b"m")
    h.pump.read()
    h.pump.take_events()
    h.send(h.peer.flow(0, credit=5, drain=True))
    [changed] = h.pump.take_events()
    assert isinstance(changed, events.CreditChanged) and changed.drain and link.drain
    assert link.credit == 5
    h.conn.drained(link)
    flow = h.pump.read().one(Flow)
    assert flow.handle == link.handle and flow.drain
    assert flow.link_credit == 0 and flow.delivery_count == sent + 5
    assert link.credit == 0 and not link.drain and link.delivery_count == sent + 5
    assert h.peer.link(0).credit == 0 and h.peer.link(0).delivery_count == sent + 5
    h.conn.drained(link)  # not draining any more: nothing to say
    assert h.pump.read().names() == []


def test_broker_answers_a_drain_with_no_messages_at_once() -> None:
    broker = Broker(clock=ManualClock())
    broker.declare_queue("q")
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.start() + peer.attach_receiver("r", "q", 0))
    frames = pump.send(peer.flow(0, credit=7, drain=True))
    flow = frames.one(Flow)
    assert (flow.delivery_count, flow.link_credit, flow.drain) == (7, 0, True)
    assert (peer.link(0).delivery_count, peer.link(0).credit) == (7, 0)
    # New messages wait for new credit.
    broker.publish("q", Message(body="later"))
    assert pump.read().names() == []
    frames = pump.send(peer.flow(0, credit=1))
    assert frames.one(Transfer).delivery_id == 0


def test_echo_on_a_link_flow_is_answered_with_the_link_state(open_engine: OpenEngine) -> None:
    h = open_engine(credit=9)
    h.send(h.peer.attach_sender("s", "q", 0) + h.peer.attach_receiver("r", "q", 1))
    frames = h.send(h.peer.flow(0, echo=True, available=4))
    flow = frames.one(Flow)
    assert flow.handle == 0 and flow.link_credit == 9 and not flow.echo
    assert h.conn.sessions[0].links_by_remote[0].available == 4
    frames = h.send(h.peer.flow(1, credit=2, echo=True))
    flow = frames.one(Flow)
    assert flow.handle == 1 and flow.link_credit == 2 and flow.delivery_count == 0 and flow.available == 0
    assert h.send(h.peer.flow(1, credit=2)).names() == []


# ---------------------------------------------------------------- multi-frame and aborted deliveries


@settings(max_examples=60, deadline=None)
@given(
    max_frame_size=st.integers(512, 3000),
    size=st.integers(0, 9000),
    tag=st.binary(min_size=1, max_size=32),
)
def test_outgoing_transfers_respect_the_peers_max_frame_size(
    max_frame_size: int, size: int, tag: bytes
) -> None:
    conn = Connection()
    peer = Peer(max_frame_size=max_frame_size)
    pump = connect(conn, peer, on_event=auto_accept(conn))
    pump.send(peer.start() + peer.attach_receiver("r", "q", 0) + peer.flow(0, credit=2))
    link = conn.sessions[0].links_by_remote[0]
    payload = bytes(i % 251 for i in range(size))
    conn.send_transfer(link, b"first", b"warm-up")  # so that ids are not all zero
    conn.data_to_send()
    before = conn.sessions[0].next_outgoing_id
    delivery_id = conn.sessions[0].next_delivery_id
    conn.send_transfer(link, tag, payload)
    data = conn.data_to_send()
    sizes = frame_sizes(data)
    assert max(sizes) <= max_frame_size
    frames = parse_frames(data)
    transfers = frames.of(Transfer)
    assert transfers[0].delivery_id == delivery_id == 1 and transfers[0].delivery_tag == tag
    assert all(t.delivery_id is None and t.delivery_tag is None for t in transfers[1:])
    assert [t.more for t in transfers] == [True] * (len(transfers) - 1) + [False]
    assert b"".join(f.payload for f in frames) == payload
    assert conn.sessions[0].next_outgoing_id == before + len(transfers)
    if len(transfers) > 1:
        assert sizes[0] > max_frame_size - 100, "frames should be filled, not merely small"


def test_incoming_multi_frame_delivery_is_reassembled(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_sender("s", "q", 0))
    h.pump.take_events()
    payload = bytes(range(256)) * 10
    h.send(h.peer.transfer(0, 0, b"big", payload[:1000], more=True))
    assert received(h) == []
    h.send(h.peer.transfer(0, None, None, payload[1000:], frame_payload=700))
    [message] = received(h)
    assert message.delivery.payload == payload and message.delivery.tag == b"big"
    assert message.delivery.delivery_id == 0
    assert h.conn.sessions[0].incoming_unsettled == {0: message.delivery}


def test_continuation_naming_another_delivery_id_is_an_invalid_field(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_sender("s", "q", 0))
    h.send(h.peer.transfer(0, 0, b"a", b"part", more=True))
    frames = h.send(h.peer.frame(0, Transfer(handle=0, delivery_id=5), b"rest"))
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == conditions.INVALID_FIELD


@pytest.mark.parametrize("frames_before_abort", [0, 1, 3])
def test_aborted_delivery_is_discarded(open_engine: OpenEngine, frames_before_abort: int) -> None:
    h = open_engine(credit=5)
    h.send(h.peer.attach_sender("s", "q", 0))
    h.pump.take_events()
    link = h.conn.sessions[0].links_by_remote[0]
    payload = b"z" * (10 * (frames_before_abort + 1))
    data = h.peer.transfer(0, 0, b"gone", payload, frame_payload=10, aborted=True)
    assert len(parse_frames(data)) == frames_before_abort + 1
    h.send(data)
    assert received(h) == []
    assert link.incoming is None and h.conn.sessions[0].incoming_unsettled == {}
    h.send(h.peer.transfer(0, 1, b"kept", b"fine"))
    [message] = received(h)
    assert message.delivery.payload == b"fine" and message.delivery.delivery_id == 1
    assert link.delivery_count == h.peer.link(0).delivery_count == 2


def test_settled_transfers_are_not_kept_unsettled(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_sender("s", "q", 0))
    h.send(h.peer.transfer(0, 0, b"a", b"1", settled=True) + h.peer.transfer(0, 1, b"b", b"2"))
    assert set(h.conn.sessions[0].incoming_unsettled) == {1}


# ---------------------------------------------------------------- dispositions


def deliveries(h: Opened, count: int) -> list[Any]:
    h.send(h.peer.attach_sender("s", "q", 0))
    h.pump.take_events()
    data = b"".join(h.peer.transfer(0, i, bytes([i]), b"m") for i in range(count))
    h.send(data)
    return [e.delivery for e in received(h)]


def test_settle_coalesces_consecutive_dispositions(open_engine: OpenEngine) -> None:
    h = open_engine()
    ds = deliveries(h, 4)
    for d in ds[:3]:
        h.conn.settle(d, Accepted())
    h.conn.settle(ds[3], Rejected())
    frames = h.pump.read()
    assert frames.names() == ["Disposition", "Disposition"]
    first, second = frames.of(Disposition)
    assert (first.role, first.first, first.last, first.settled, first.state) == (
        ROLE_RECEIVER,
        0,
        2,
        True,
        Accepted(),
    )
    assert (second.first, second.last, second.state) == (3, None, Rejected())
    assert h.conn.sessions[0].incoming_unsettled == {}


@pytest.mark.parametrize(
    ("order", "states", "expected"),
    [
        ([0, 2], [Accepted(), Accepted()], {(0, None), (2, None)}),
        ([1, 0], [Accepted(), Accepted()], {(1, None), (0, None)}),
        ([0, 1, 2], [Accepted(), Released(), Accepted()], {(0, None), (1, None), (2, None)}),
        ([0, 1, 2, 3], [Released()] * 4, {(0, 3)}),
        ([0, 1, 2, 3], [Accepted(), Released(), Released(), Accepted()], {(0, None), (1, 2), (3, None)}),
    ],
)
def test_settle_only_coalesces_a_run_with_the_same_state(
    open_engine: OpenEngine, order: list[int], states: list[Any], expected: set[tuple[int, int | None]]
) -> None:
    """Dispositions of different deliveries are independent, so only the ranges matter, not their order."""
    h = open_engine()
    ds = deliveries(h, 4)
    for index, state in zip(order, states, strict=True):
        h.conn.settle(ds[index], state)
    dispositions = h.pump.read().of(Disposition)
    assert len(dispositions) == len(expected)
    assert {(d.first, d.last) for d in dispositions} == expected
    for d in dispositions:
        assert d.state == states[order.index(d.first)]


def test_updates_of_one_delivery_keep_their_order(open_engine: OpenEngine) -> None:
    h = open_engine()
    ds = deliveries(h, 2)
    h.conn.settle(ds[0], Received(section_number=0, section_offset=10), settled=False)
    h.conn.settle(ds[1], Accepted())
    h.conn.settle(ds[0], Accepted())
    dispositions = [d for d in h.pump.read().of(Disposition) if d.first == 0]
    assert [(type(d.state), d.settled) for d in dispositions] == [(Received, False), (Accepted, True)]


def test_pending_disposition_is_written_before_a_later_frame(open_engine: OpenEngine) -> None:
    h = open_engine()
    ds = deliveries(h, 2)
    link = ds[0].link
    h.conn.settle(ds[0], Accepted())
    h.conn.grant_credit(link, 50)
    h.conn.settle(ds[1], Accepted())
    frames = h.pump.read()
    assert frames.names() == ["Disposition", "Flow", "Disposition"]


def test_unsettled_disposition_for_rcv_settle_mode_second(open_engine: OpenEngine) -> None:
    h = open_engine()
    ds = deliveries(h, 2)
    for d in ds:
        h.conn.settle(d, Accepted(), settled=False)
    disposition = h.pump.read().one(Disposition)
    assert (disposition.first, disposition.last, disposition.settled) == (0, 1, False)
    assert set(h.conn.sessions[0].incoming_unsettled) == {0, 1}


def test_peer_disposition_range_settles_what_we_sent(open_engine: OpenEngine) -> None:
    h = open_engine()
    link = consumer(h)
    h.send(h.peer.flow(0, credit=5))
    sent = [h.conn.send_transfer(link, bytes([i]), b"m") for i in range(3)]
    h.pump.read()
    h.pump.take_events()
    h.send(h.peer.disposition(0, 2, state=Accepted()))
    updates = h.pump.take_events()
    assert [(type(u), u.delivery) for u in updates] == [(events.DeliveryUpdated, d) for d in sent]
    assert all(u.settled and u.state == Accepted() for u in updates)
    assert h.conn.sessions[0].outgoing_unsettled == {} and link.unsettled == {}
    # The same range again, or a disposition for the wrong role, changes nothing.
    h.send(h.peer.disposition(0, 2) + h.peer.disposition(0, 2, role=ROLE_SENDER))
    assert h.pump.take_events() == []


def test_implausible_disposition_range_ends_the_session(open_engine: OpenEngine) -> None:
    h = open_engine()
    frames = h.send(h.peer.disposition(5, 4))  # wraps around almost 2**32 ids
    end = frames.one(End)
    assert end.error is not None and end.error.condition == conditions.INVALID_FIELD


def test_begin_answer_reports_windows(open_engine: OpenEngine) -> None:
    h = open_engine()
    begin = h.handshake.one(Begin)
    assert begin.remote_channel == 0 and begin.next_outgoing_id == 0
    assert begin.incoming_window == INCOMING_WINDOW and begin.handle_max == h.conn.config.handle_max


def test_a_flow_after_a_drain_answer_says_what_is_available_then_not_what_was() -> None:
    """§2.7.4 ``available``: what awaits credit at the sender.  The broker answers a drain with
    the queue's unacquired count; a later flow on the link (here the answer to ``echo``) must not
    repeat that count once those messages are gone."""
    broker = Broker(clock=ManualClock())
    broker.declare_queue("q")
    for body in range(3):
        broker.publish("q", Message(body=body))
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.start() + peer.attach_receiver("r", "q", 0))
    assert pump.send(peer.flow(0, credit=0, drain=True)).one(Flow).available == 3
    assert len(pump.send(peer.flow(0, credit=3)).of(Transfer)) == 3
    answer = pump.send(peer.flow(0, echo=True)).one(Flow)
    assert broker.queues["q"].available_count == 0
    assert answer.available == 0
