"""Streams through the broker engine and the in-memory client peer: no sockets, threads or sleeps.

Attach with ``rabbitmq:stream-offset-spec`` (first, last, next, offset,
timestamp), credit, outcomes that change nothing for other readers, the
``x-stream-offset`` annotation, retention on the manual clock, transactional
publishes appended at commit, deletion, and refusals.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_transactions_engine import dispositions_for, setup_controller, txn_accepted

from minibroker.amqp.message import decode_message
from minibroker.amqp.messaging import Accepted, Modified, Rejected, Released
from minibroker.amqp.performatives import SND_SETTLED, Attach, Detach, Disposition, Transfer
from minibroker.amqp.types import Described, symbol, timestamp
from minibroker.api import build_message
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig, StreamOptions
from minibroker.broker.engine import Broker
from minibroker.broker.stream import NOW, SCAN, Stream
from minibroker.testing import Frames, Peer, Pump, connect

T0 = 1_700_000_000.0
OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")
OFFSET = symbol("x-stream-offset")
STREAM_FILTER = symbol("rabbitmq:stream-filter")


def make_broker(**config: Any) -> Broker:
    return Broker(BrokerConfig(**config), ManualClock(T0))


def open_client(broker: Broker) -> tuple[Peer, Pump]:
    peer = Peer("reader")
    pump = connect(broker, peer)
    assert pump.send(peer.start()).names() == ["ProtocolHeader", "Open", "Begin"]
    return peer, pump


def offset_filter(spec: Any) -> dict[Any, Any]:
    return {OFFSET_SPEC: Described(OFFSET_SPEC, spec)}


def read(frames: Frames) -> list[tuple[int, Any]]:
    """(x-stream-offset, body) of each message transferred."""
    out = []
    for frame in frames:
        if isinstance(frame.performative, Transfer):
            message = decode_message(frame.payload)
            assert message.message_annotations is not None
            out.append((message.message_annotations[OFFSET], message.body))
    return out


def publish(broker: Broker, name: str, *bodies: Any) -> None:
    for body in bodies:
        broker.publish(name, build_message(body))


def attach(peer: Peer, pump: Pump, handle: int, address: str, spec: Any = None, credit: int = 100, **kw: Any) -> Frames:
    source = {"filter": offset_filter(spec)} if spec is not None else {}
    return pump.send(peer.attach_receiver(f"r{handle}", address, handle, **source, **kw) + peer.flow(handle, credit=credit))


def test_offset_specs_first_last_next_offset_and_timestamp() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    clock = broker.clock
    assert isinstance(clock, ManualClock)
    for body in ("a", "b", "c"):
        publish(broker, "s", body)
        clock.advance(10)
    peer, pump = open_client(broker)
    assert read(attach(peer, pump, 0, "s", "first")) == [(0, "a"), (1, "b"), (2, "c")]
    assert read(attach(peer, pump, 1, "s", "last")) == [(2, "c")]
    assert read(attach(peer, pump, 2, "s", "next")) == []
    assert read(attach(peer, pump, 3, "s")) == []  # no filter: next
    assert read(attach(peer, pump, 4, "s", 1)) == [(1, "b"), (2, "c")]
    assert read(attach(peer, pump, 5, "s", timestamp(int((T0 + 5) * 1000)))) == [(1, "b"), (2, "c")]
    assert read(attach(peer, pump, 6, "s", "15s")) == [(2, "c")]  # appended within the last 15 s (now T0 + 30)
    # Everyone waiting at the tail gets the next message, with its offset.
    frames = pump.send(b"")
    publish(broker, "s", "d")
    frames = pump.read()
    assert sorted(read(frames)) == [(3, "d")] * 7


def test_the_attach_echoes_the_filter_and_copy_distribution() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    peer, pump = open_client(broker)
    frames = attach(peer, pump, 0, "s", "first")
    source = frames.one(Attach).source
    assert source.address == "s" and source.distribution_mode == "copy"
    assert source.filter == offset_filter("first")


def test_credit_is_honoured_exactly() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    publish(broker, "s", *range(10))
    peer, pump = open_client(broker)
    assert read(attach(peer, pump, 0, "s", "first", credit=3)) == [(0, 0), (1, 1), (2, 2)]
    assert read(pump.send(peer.flow(0, credit=0))) == []
    assert [o for o, _ in read(pump.send(peer.flow(0, credit=4)))] == [3, 4, 5, 6]
    drained = pump.send(peer.flow(0, credit=100, drain=True))
    assert [o for o, _ in read(drained)] == [7, 8, 9]


def test_outcomes_of_one_reader_change_nothing_for_another() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    publish(broker, "s", "a", "b", "c", "d")
    peer, pump = open_client(broker)
    frames = attach(peer, pump, 0, "s", "first")
    ids = [t.delivery_id for t in frames.of(Transfer)]
    for delivery_id, state in zip(ids, (Accepted(), Released(), Rejected(), Modified(delivery_failed=True)), strict=True):
        pump.send(peer.disposition(delivery_id, state=state, settled=True))
    other = attach(peer, pump, 1, "s", "first")
    assert read(other) == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]
    snapshot = broker.stream_snapshot("s")
    assert snapshot.count == 4 and snapshot.bodies == ["a", "b", "c", "d"]
    stats = snapshot.statistics
    assert (stats.acknowledged, stats.released, stats.rejected, stats.modified) == (1, 1, 1, 1)
    assert stats.delivered == 8
    # Nothing came back to the first reader either: it reads on from its own position.
    assert read(pump.read()) == []


def test_unsettled_outcome_is_settled_by_the_broker() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    publish(broker, "s", "a")
    peer, pump = open_client(broker)
    frames = attach(peer, pump, 0, "s", "first", rcv_settle_mode=1)
    (transfer,) = frames.of(Transfer)
    answer = pump.send(peer.disposition(transfer.delivery_id, state=Accepted(), settled=False))
    (disposition,) = dispositions_for(answer, transfer.delivery_id, role=False)
    assert disposition.settled is True and isinstance(disposition.state, Accepted)


def test_presettled_reader() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    publish(broker, "s", "a", "b")
    peer, pump = open_client(broker)
    frames = attach(peer, pump, 0, "s", "first", snd_settle_mode=SND_SETTLED)
    assert all(t.settled for t in frames.of(Transfer)) and len(frames.of(Transfer)) == 2


def test_presettled_reader_sends_a_message_of_several_frames_between_single_frame_ones() -> None:
    """A pre-settled read goes out without a kept delivery when it fits one frame, and by the
    general path when it does not: ids, offsets and order are the same either way (§2.6.12, §2.7.5)."""
    broker = make_broker()
    broker.declare_stream("s")
    publish(broker, "s", "a", "x" * 3000, "c")
    peer = Peer("reader", max_frame_size=512)
    pump = connect(broker, peer)
    pump.send(peer.start())
    frames = attach(peer, pump, 0, "s", "first", snd_settle_mode=SND_SETTLED)
    transfers = [f for f in frames if isinstance(f.performative, Transfer)]
    assert len(transfers) > 3  # the long one took several frames
    messages: list[bytes] = []
    ids = []
    for f in transfers:
        if f.performative.delivery_id is not None:
            ids.append(f.performative.delivery_id)
            messages.append(b"")
        messages[-1] += f.payload
        assert f.performative.settled in (True, None)
    assert ids == [0, 1, 2]
    decoded = [decode_message(m) for m in messages]
    assert [(m.message_annotations or {})[OFFSET] for m in decoded] == [0, 1, 2]
    assert [m.body for m in decoded] == ["a", "x" * 3000, "c"]
    session = next(iter(broker.connections)).protocol.sessions[0]
    assert not session.outgoing_unsettled  # nothing held for pre-settled deliveries


@pytest.mark.parametrize("settle_mode", [SND_SETTLED, None])
def test_a_reader_reads_on_past_a_message_larger_than_its_max_message_size(settle_mode: int | None) -> None:
    broker = make_broker()
    broker.declare_stream("s")
    publish(broker, "s", "a", "x" * 500, "c")
    peer, pump = open_client(broker)
    fields = {"snd_settle_mode": settle_mode} if settle_mode is not None else {}
    frames = attach(peer, pump, 0, "s", "first", credit=2, attach_fields={"max_message_size": 100}, **fields)
    assert read(frames) == [(0, "a"), (2, "c")]  # the large one skipped, and it took no credit
    assert broker.stream_snapshot("s").statistics.delivered == 2


def test_retention_by_age_on_the_manual_clock_and_a_reader_behind_it() -> None:
    broker = make_broker()
    broker.declare_stream("s", StreamOptions(max_age=60))
    clock = broker.clock
    assert isinstance(clock, ManualClock)
    publish(broker, "s", "old-1", "old-2")
    clock.advance(30)
    publish(broker, "s", "new")
    peer, pump = open_client(broker)
    assert read(attach(peer, pump, 0, "s", "first", credit=1)) == [(0, "old-1")]
    assert broker.next_deadline() == T0 + 60
    clock.advance(30)  # old-1 and old-2 are 60 s old: dropped by the timer
    assert broker.stream_snapshot("s").first_offset == 2
    # The reader was at offset 1, which is gone: it goes on from the first retained.
    assert read(pump.send(peer.flow(0, credit=10))) == [(2, "new")]


def test_retention_by_bytes_keeps_the_newest() -> None:
    broker = make_broker()
    size = len(build_message("m-0").encode())
    broker.declare_stream("s", StreamOptions(max_bytes=size * 2))
    publish(broker, "s", *(f"m-{i}" for i in range(5)))
    snapshot = broker.stream_snapshot("s")
    assert (snapshot.first_offset, snapshot.last_offset, snapshot.count) == (3, 4, 2)
    assert snapshot.bodies == ["m-3", "m-4"] and snapshot.offsets == [3, 4]
    assert snapshot.bytes == size * 2
    assert snapshot.statistics.expired == 3


def test_transactional_publish_appends_at_commit() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("snd", "s", 1))
    txn = client.declare(0)
    for body in ("a", "b"):
        delivery_id, frames = client.publish(1, body, txn)
        (answer,) = dispositions_for(frames, delivery_id)
        assert answer.state == txn_accepted(txn)
    publish(broker, "s", "outside")  # appended now, before the transaction's messages
    assert broker.stream_snapshot("s").bodies == ["outside"]
    client.discharge_frames(0, txn)
    snapshot = broker.stream_snapshot("s")
    assert list(zip(snapshot.offsets, snapshot.bodies, strict=True)) == [(0, "outside"), (1, "a"), (2, "b")]


def test_rolled_back_publish_never_appends() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("snd", "s", 1))
    txn = client.declare(0)
    client.publish(1, "a", txn)
    client.discharge(0, txn, fail=True)
    assert broker.stream_snapshot("s").count == 0


def test_clients_publish_to_a_stream_by_address() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    peer, pump = open_client(broker)
    pump.send(peer.attach_sender("snd", "stream://s", 0))
    pump.send(peer.transfer(0, None, None, build_message("hi").encode()))
    assert broker.stream_snapshot("s").bodies == ["hi"]


def test_stream_address_auto_creates_a_stream() -> None:
    broker = make_broker()
    peer, pump = open_client(broker)
    frames = attach(peer, pump, 0, "stream://events", "first")
    assert frames.one(Attach).source is not None
    assert "events" in broker.streams


def test_stream_filters_on_a_queue_are_refused() -> None:
    broker = make_broker()
    broker.declare_queue("q")
    peer, pump = open_client(broker)
    frames = attach(peer, pump, 0, "q", "first")
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == "amqp:invalid-field"
    assert "apply to streams" in detach.error.description and "declare_stream" in detach.error.description


def test_a_bad_offset_spec_refuses_the_link_readably() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    peer, pump = open_client(broker)
    frames = attach(peer, pump, 0, "s", "yesterday")
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == "amqp:invalid-field"
    assert "'yesterday'" in detach.error.description and "'first'" in detach.error.description


def test_deleting_a_stream_detaches_its_readers() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    peer, pump = open_client(broker)
    attach(peer, pump, 0, "s", "first")
    broker.delete_node("s")
    detach = pump.read().one(Detach)
    assert detach.error is not None and detach.error.condition == "amqp:resource-deleted"
    assert "s" not in broker.streams


def test_names_are_shared_with_queues_and_topics() -> None:
    from minibroker.broker.router import NodeError

    broker = make_broker()
    broker.declare_queue("q")
    broker.declare_stream("s")
    with pytest.raises(NodeError, match="'q' is a queue; a queue and a stream cannot share a name"):
        broker.declare_stream("q")
    with pytest.raises(NodeError, match="'s' is a stream"):
        broker.declare_queue("s")
    peer, pump = open_client(broker)
    detach = attach(peer, pump, 0, "queue://s").one(Detach)
    assert detach.error is not None and "'s' is a stream" in detach.error.description


def test_purge_and_reset() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    publish(broker, "s", "a", "b")
    assert broker.purge("s") == 2
    publish(broker, "s", "c")
    assert broker.stream_snapshot("s").offsets == [2]
    broker.reset()
    assert broker.streams == {}


def test_permissions_know_streams() -> None:
    broker = make_broker(permissions={"anonymous": {"events": "receive", "stream://audit": "send"}})
    broker.declare_stream("events")
    broker.declare_stream("audit")
    peer, pump = open_client(broker)
    publish(broker, "events", "e")
    assert read(attach(peer, pump, 0, "events", "first")) == [(0, "e")]  # an existing stream: no "manage" needed
    pump.send(peer.attach_sender("snd", "stream://audit", 1))
    assert pump.frames.of(Detach) == []
    # An unknown stream would be created: that needs "manage".
    detach = attach(peer, pump, 2, "stream://new", "first").one(Detach)
    assert detach.error is not None and detach.error.condition == "amqp:unauthorized-access"
    assert "new" not in broker.streams


def test_faults_on_deliveries_from_a_stream() -> None:
    broker = make_broker()
    broker.declare_stream("events")
    publish(broker, "events", "a", "b")
    released = broker.faults.release(address="events", times=1)
    peer, pump = open_client(broker)
    frames = attach(peer, pump, 0, "events", "first")
    assert released.fired == 1
    (disposition,) = frames.of(Disposition)
    assert disposition.settled and isinstance(disposition.state, Released)
    assert broker.stream_snapshot("events").count == 2  # a stream puts nothing back and loses nothing
    detached = broker.faults.detach_link(address="events")
    publish(broker, "events", "c")
    assert detached.fired == 1
    assert pump.read().one(Detach).error is not None


def test_a_restart_keeps_a_stream_whole() -> None:
    broker = make_broker()
    broker.declare_stream("events")
    broker.publish("events", build_message("transient"))
    broker.publish("events", build_message("durable", durable=True))
    assert broker.drop_transient() == 0
    assert broker.stream_snapshot("events").bodies == ["transient", "durable"]


def test_a_filter_that_matches_nothing_reads_the_log_one_slice_per_dispatch() -> None:
    """A filtering reader visits at most SCAN entries per dispatch; the timer brings the next slice."""
    broker = make_broker()
    broker.declare_stream("s")
    for n in range(3 * SCAN + 10):
        publish(broker, "s", n)
    stream = broker.router.nodes["s"]
    assert isinstance(stream, Stream)
    peer, pump = open_client(broker)
    never = {OFFSET_SPEC: Described(OFFSET_SPEC, "first"), STREAM_FILTER: Described(STREAM_FILTER, "never")}
    assert read(pump.send(peer.attach_receiver("r", "s", 0, filter=never) + peer.flow(0, credit=10))) == []
    assert stream.counters.filtered_out == SCAN
    assert broker.next_deadline() == NOW  # the next slice is due at once
    slices = 1
    while broker.next_deadline() is not None:
        broker.run_timers()
        slices += 1
        assert stream.counters.filtered_out == min(slices * SCAN, 3 * SCAN + 10)
    assert slices == 4
    # A matching message appended later is delivered at once.
    broker.publish("s", build_message("wanted", annotations={"x-stream-filter-value": "never"}))
    assert [body for _offset, body in read(pump.read())] == ["wanted"]


def test_a_filtering_reader_without_credit_is_not_pending() -> None:
    broker = make_broker()
    broker.declare_stream("s")
    for n in range(2 * SCAN):
        publish(broker, "s", n)
    peer, pump = open_client(broker)
    never = {OFFSET_SPEC: Described(OFFSET_SPEC, "first"), STREAM_FILTER: Described(STREAM_FILTER, "never")}
    pump.send(peer.attach_receiver("r", "s", 0, filter=never))
    assert broker.next_deadline() is None  # no credit: nothing to look for, nothing scheduled
