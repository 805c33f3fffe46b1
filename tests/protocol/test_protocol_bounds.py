"""Per-frame work is bounded by the frame, never by history or by numbers the peer picks.

Counted, not timed: ids looked up per disposition, bytes held per reassembled delivery.
"""

from __future__ import annotations

from typing import Any

from engine_harness import OpenEngine

from minibroker.amqp import errors as conditions
from minibroker.amqp.messaging import Accepted
from minibroker.amqp.performatives import RCV_SECOND, ROLE_SENDER, Close, Detach, Transfer
from minibroker.amqp.types import symbol
from minibroker.protocol import Connection, ConnectionConfig, events
from minibroker.protocol.connection import MAX_ATTACH_BYTES, MAX_FRAGMENTS
from minibroker.testing import Peer, parse_frames


class CountingDict(dict[int, Any]):
    """A delivery table that counts lookups: the work a disposition does."""

    lookups = 0

    def get(self, key: int, default: Any = None) -> Any:  # type: ignore[override]
        CountingDict.lookups += 1
        return super().get(key, default)


def test_a_wide_disposition_range_costs_the_unsettled_deliveries_not_its_width(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_receiver("out", "q", 0) + h.peer.flow(0, credit=10))
    [link] = [e.link for e in h.pump.take_events() if isinstance(e, events.LinkAttached)]
    session = h.conn.sessions[0]
    session.outgoing_unsettled = CountingDict()
    sent = [h.conn.send_transfer(link, bytes([i]), b"m") for i in range(3)]
    h.pump.read()
    CountingDict.lookups = 0
    h.send(h.peer.disposition(0, 2**31 - 1, state=Accepted()) * 50)
    updates = [e for e in h.pump.take_events() if isinstance(e, events.DeliveryUpdated)]
    assert [u.delivery for u in updates] == sent  # the three in range, once
    assert CountingDict.lookups <= 3  # not 50 * 2**31
    assert session.outgoing_unsettled == {}


def test_a_narrow_range_visits_its_ids_only(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_receiver("out", "q", 0) + h.peer.flow(0, credit=100))
    [link] = [e.link for e in h.pump.take_events() if isinstance(e, events.LinkAttached)]
    session = h.conn.sessions[0]
    session.outgoing_unsettled = CountingDict()
    for i in range(100):
        h.conn.send_transfer(link, i.to_bytes(2, "big"), b"m")
    h.pump.read()
    CountingDict.lookups = 0
    h.send(h.peer.disposition(10, 11, state=Accepted()))
    assert CountingDict.lookups == 2
    assert len(session.outgoing_unsettled) == 98


def test_reassembly_holds_one_buffer_and_counts_empty_frames(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_sender("in", "q", 0))
    h.pump.take_events()
    h.send(h.peer.transfer(0, None, None, b"ab", more=True))
    link = h.conn.sessions[0].links_by_remote[0]
    empty = h.peer.frame(0, Transfer(handle=0, more=True))
    h.send(empty * 10 + h.peer.frame(0, Transfer(handle=0, more=True), b"cd"))
    delivery = link.incoming
    assert delivery is not None and delivery.frames == bytearray(b"abcd") and delivery.sent == 12
    frames = h.send(empty * (MAX_FRAGMENTS - 12 + 1))
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == conditions.RESOURCE_LIMIT_EXCEEDED
    assert link.incoming is None


def _closed(conn: Connection) -> list[events.ConnectionClosed]:
    return [e for e in conn.take_events() if isinstance(e, events.ConnectionClosed)]


def test_the_handshake_times_out_from_the_first_tick_however_the_bytes_trickle() -> None:
    conn = Connection(ConnectionConfig(handshake_timeout=10.0, idle_timeout=60.0))
    assert conn.tick(100.0) == 10.0 + 100.0
    for second, byte in enumerate(b"AMQP\x00\x01\x00", start=1):  # a byte a second: 7 of the header's 8
        conn.receive_data(bytes([byte]))  # keeps the idle timer fresh, not the handshake's
        assert conn.tick(100.0 + second) == 110.0 and not conn.finished
    assert conn.tick(110.0) is None
    assert conn.finished
    [closed] = _closed(conn)
    assert closed.error is not None and closed.error.condition == conditions.RESOURCE_LIMIT_EXCEEDED


def test_after_open_the_handshake_timeout_no_longer_applies() -> None:
    conn = Connection(ConnectionConfig(handshake_timeout=10.0, idle_timeout=None))
    conn.tick(0.0)
    peer = Peer()
    conn.receive_data(peer.header() + peer.open())
    assert conn.tick(1000.0) is None and not conn.finished


def test_a_header_without_open_gets_open_then_close_at_the_timeout() -> None:
    conn = Connection(ConnectionConfig(handshake_timeout=5.0, idle_timeout=None))
    conn.tick(0.0)
    conn.receive_data(Peer.header())
    conn.data_to_send()
    conn.tick(5.0)
    frames = parse_frames(conn.data_to_send())
    assert frames.names() == ["Open", "Close"]
    error = frames.one(Close).error
    assert error is not None and "handshake" in str(error.description)


def test_deliveries_in_progress_on_all_links_together_hold_one_message_s_worth(open_engine: OpenEngine) -> None:
    h = open_engine(ConnectionConfig(max_message_size=1000))
    h.send(h.peer.attach_sender("a", "q", 0) + h.peer.attach_sender("b", "q", 1))
    h.pump.take_events()
    h.send(h.peer.transfer(0, None, None, b"x" * 600, more=True))
    assert h.conn.assembling == 600
    frames = h.send(h.peer.transfer(1, None, None, b"y" * 600, more=True))  # each fits; both do not
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == conditions.RESOURCE_LIMIT_EXCEEDED
    assert h.conn.assembling == 600  # the refused one's bytes are gone
    h.send(h.peer.transfer(0, None, None, b"z", more=False))
    assert h.conn.assembling == 0


def test_unsettled_deliveries_are_bounded_over_the_connection_too(open_engine: OpenEngine) -> None:
    config = ConnectionConfig(max_unsettled_incoming=5, max_unsettled_incoming_total=8)
    h = open_engine(config, auto=False)
    second = {"rcv_settle_mode": RCV_SECOND}
    h.send(h.peer.attach_sender("a", "q", 0, **second) + h.peer.attach_sender("b", "q", 1, **second))
    links = [e.link for e in h.pump.take_events() if isinstance(e, events.LinkAttached)]
    for link in links:
        h.conn.accept_link(link, source=link.source, target=link.target)
        h.conn.grant_credit(link, 5)
    h.pump.read()
    h.send(b"".join(h.peer.transfer(0, None, None, b"m") for _ in range(5)))
    deliveries = [e.delivery for e in h.pump.take_events() if isinstance(e, events.MessageReceived)]
    for delivery in deliveries:
        h.conn.settle(delivery, Accepted(), settled=False)  # rcv-settle-mode second: the peer settles
    h.conn.grant_credit(links[1], 5)
    assert links[1].credit == 3  # 8 over the connection, 5 kept for link a
    h.conn.grant_credit(links[0], 5)
    assert links[0].credit == 0
    h.send(h.peer.disposition(0, 4, role=ROLE_SENDER))  # the peer settles link a's five
    assert (links[0].credit, links[1].credit) == (5, 5)


def test_receive_data_handles_at_most_max_frames_and_says_what_is_left(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_sender("in", "q", 0))
    h.pump.take_events()
    h.conn.receive_data(h.peer.empty_frame() * 2500, max_frames=1000)
    assert h.conn.backlogged
    h.conn.receive_data(b"", max_frames=1000)
    assert h.conn.backlogged
    h.conn.receive_data(b"", max_frames=1000)
    assert not h.conn.backlogged and h.conn._in == b""


def test_the_links_of_a_connection_hold_a_bounded_total_of_attach_bytes(open_engine: OpenEngine) -> None:
    h = open_engine()
    big = {"properties": {symbol("padding"): "p" * (60 * 1024)}}
    per_link = MAX_ATTACH_BYTES // (60 * 1024)
    frames = h.send(b"".join(h.peer.attach_sender(f"l{i}", "q", i, attach_fields=big) for i in range(per_link - 2)))
    assert not frames.of(Close)
    held = h.conn.attach_bytes
    assert held > (per_link - 3) * 60 * 1024
    h.send(h.peer.detach(0))  # a detached link's attach is no longer held
    assert h.conn.attach_bytes < held
    frames = h.send(b"".join(h.peer.attach_sender(f"m{i}", "q", 500 + i, attach_fields=big) for i in range(4)))
    close = frames.one(Close)
    assert close.error is not None and close.error.condition == conditions.RESOURCE_LIMIT_EXCEEDED


def test_a_receiving_peers_attach_ends_the_batch_before_its_flow(open_engine: OpenEngine) -> None:
    # With max_frames (the server), the attach answer is written before the flow read with it can
    # turn into transfers: RabbitMQ's order, which a blocking client's consumer() relies on.
    h = open_engine(ConnectionConfig(attach_answer_alone=True), auto=False)
    (attached,) = h.conn.receive_data(h.peer.attach_receiver("out", "q", 0) + h.peer.flow(0, 5), max_frames=1000)
    assert isinstance(attached, events.LinkAttached) and h.conn.backlogged
    h.conn.accept_link(attached.link, source=attached.link.source, target=attached.link.target)
    assert [type(e) for e in h.conn.receive_data(b"", max_frames=1000)] == [events.CreditChanged]
    assert not h.conn.backlogged


def test_a_sending_peers_attach_does_not_end_the_batch(open_engine: OpenEngine) -> None:
    h = open_engine(ConnectionConfig(attach_answer_alone=True), auto=False)
    data = h.peer.attach_sender("in", "q", 0) + h.peer.attach_sender("in2", "q", 1)
    assert [type(e) for e in h.conn.receive_data(data, max_frames=1000)] == [events.LinkAttached] * 2
    assert not h.conn.backlogged


def test_without_attach_answer_alone_attach_and_flow_are_one_batch(open_engine: OpenEngine) -> None:
    h = open_engine(auto=False)
    data = h.peer.attach_receiver("out", "q", 0) + h.peer.flow(0, 5)
    assert [type(e) for e in h.conn.receive_data(data, max_frames=1000)] == [events.LinkAttached, events.CreditChanged]
    assert not h.conn.backlogged
