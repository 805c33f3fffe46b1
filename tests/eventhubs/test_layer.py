"""The Event Hubs layer through the in-memory client peer: no sockets, threads or sleeps.

What the SDK tests show over a socket is pinned down here frame by frame: the
annotations each event carries, positions, owner levels, retention on the
manual clock, and how hostile or mistaken input is answered.
"""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.amqp.message import Message, decode_message, encode_message
from minibroker.amqp.messaging import Accepted, Rejected
from minibroker.amqp.performatives import Attach, Detach, Disposition, Transfer
from minibroker.amqp.transactions import TransactionalState
from minibroker.amqp.types import Described, symbol
from minibroker.broker.clock import ManualClock
from minibroker.broker.engine import Broker
from minibroker.broker.publish import BATCH_FORMAT
from minibroker.config import BrokerConfig
from minibroker.eventhubs.addresses import HubAddress, parse_hub_address, partition_node
from minibroker.eventhubs.events import Position, PositionError, parse_position
from minibroker.eventhubs.layer import EventHubsLayer
from minibroker.eventhubs.options import EventHubOptions, EventHubsOptions
from minibroker.eventhubs.snapshots import snapshot
from minibroker.testing import Frames, Peer, Pump, connect

T0 = 1_700_000_000.0
SELECTOR = symbol("apache.org:selector-filter:string")


def make_broker(**config: Any) -> tuple[Broker, ManualClock]:
    clock = ManualClock(T0)
    hubs = EventHubsOptions(hubs=(EventHubOptions("hub", partitions=2, retention=60),))
    return Broker(BrokerConfig(event_hubs=hubs, **config), clock), clock


def layer_of(broker: Broker) -> EventHubsLayer:
    layer = broker.layer("event_hubs")
    assert isinstance(layer, EventHubsLayer)
    return layer


def open_client(broker: Broker) -> tuple[Peer, Pump]:
    """A client that has attached $cbs, as every Azure SDK does first."""
    peer = Peer("eh-client")
    pump = connect(broker, peer)
    pump.send(peer.start())
    frames = pump.send(peer.attach_sender("cbs", "$cbs", 0))
    assert frames.one(Attach).target is not None
    return peer, pump


def produce(peer: Peer, pump: Pump, address: str, payload: bytes, handle: int = 1, **fields: Any) -> Frames:
    pump.send(peer.attach_sender(f"p{handle}", address, handle))
    return pump.send(peer.transfer(handle, None, None, payload, **fields))


def event(body: str, **annotations: Any) -> bytes:
    return encode_message(Message(body=body.encode(), body_kind="data", message_annotations=annotations or None))


def reader(peer: Peer, pump: Pump, address: str, handle: int, selector: str | None = None, **attach: Any) -> Frames:
    filters = {SELECTOR: Described(SELECTOR, selector)} if selector is not None else None
    frames = pump.send(peer.attach_receiver(f"r{handle}", address, handle, filter=filters, attach_fields=attach))
    frames += pump.send(peer.flow(handle, 100))
    return frames


def events(frames: Frames) -> list[tuple[bytes, dict[Any, Any]]]:
    """Each transferred event's body and message-annotations."""
    out = []
    for frame in frames:
        if isinstance(frame.performative, Transfer):
            message = decode_message(frame.payload)
            out.append((message.body, dict(message.message_annotations or {})))
    return out


def test_events_carry_sequence_number_offset_enqueued_time_and_key() -> None:
    broker, clock = make_broker()
    peer, pump = open_client(broker)
    produce(peer, pump, "hub/Partitions/1", event("a", **{"x-opt-partition-key": "k"}))
    clock.advance(2.5)
    produce(peer, pump, "hub/Partitions/1", event("b"), handle=2)
    got = events(reader(peer, pump, "hub/ConsumerGroups/$Default/Partitions/1", 3, "amqp.annotation.x-opt-offset > '-1'"))
    assert [body for body, _ in got] == [b"a", b"b"]
    first, second = (annotations for _, annotations in got)
    assert first == {
        "x-opt-partition-key": "k",
        "x-opt-sequence-number": 0,
        "x-opt-offset": "0",
        "x-opt-enqueued-time": int(T0 * 1000),
    }
    assert (second["x-opt-sequence-number"], second["x-opt-enqueued-time"]) == (1, int((T0 + 2.5) * 1000))


def test_an_event_enters_its_partition_by_the_publish_path_so_message_observers_see_it() -> None:
    """The pytest plugin's hooks and failure report watch the publish path (publish.Publisher):
    an event a client sends must pass it like any message, not be appended to the stream aside."""
    broker, _clock = make_broker()
    seen: list[tuple[str, bytes]] = []
    broker.router.publisher.observers.append(lambda name, message: seen.append((name, message.decode().body)))
    peer, pump = open_client(broker)
    frames = produce(peer, pump, "hub/Partitions/1", event("observed"))
    assert isinstance(frames.one(Disposition).state, Accepted)
    assert seen == [(partition_node("hub", "1"), b"observed")]


def test_a_batch_lands_in_one_partition_and_each_event_gets_its_number() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    batch = encode_message(Message(body=[event("x"), event("y"), event("z")], body_kind="data"))
    frames = produce(peer, pump, "hub", batch, message_format=BATCH_FORMAT)
    assert isinstance(frames.one(Disposition).state, Accepted)
    hub = snapshot(layer_of(broker).hubs["hub"])
    (full,) = [p for p in hub.partitions if p.depth]
    assert full.bodies == (b"x", b"y", b"z")
    assert full.last_enqueued_sequence_number == 2


def test_a_partition_key_on_the_batch_picks_the_partition_every_time() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    for n in range(6):
        produce(peer, pump, "hub", event(f"e{n}", **{"x-opt-partition-key": "device-9"}), handle=n + 1)
    depths = [p.depth for p in snapshot(layer_of(broker).hubs["hub"]).partitions]
    assert sorted(depths) == [0, 6]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (None, [b"e0", b"e1", b"e2"]),
        ("amqp.annotation.x-opt-sequence-number > '0'", [b"e1", b"e2"]),
        ("amqp.annotation.x-opt-sequence-number >= '0'", [b"e0", b"e1", b"e2"]),
        ("amqp.annotation.x-opt-offset >= '2'", [b"e2"]),
        ("amqp.annotation.x-opt-offset > '@latest'", []),
        (f"amqp.annotation.x-opt-enqueued-time > '{int(T0 * 1000) + 10_000}'", [b"e2"]),
        (f"amqp.annotation.x-opt-enqueued-time >= '{int(T0 * 1000) + 10_000}'", [b"e1", b"e2"]),
        ("amqp.annotation.x-opt-sequence-number > '99'", []),  # beyond the end: waits for new events
    ],
)
def test_positions(selector: str | None, expected: list[bytes]) -> None:
    broker, clock = make_broker()
    peer, pump = open_client(broker)
    for n in range(3):
        produce(peer, pump, "hub/Partitions/0", event(f"e{n}"), handle=n + 1)
        clock.advance(10)
    got = events(reader(peer, pump, "hub/ConsumerGroups/$Default/Partitions/0", 9, selector))
    assert [body for body, _ in got] == expected


def test_a_reader_at_latest_gets_what_comes_next_within_its_credit() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    produce(peer, pump, "hub/Partitions/0", event("old"))
    reader(peer, pump, "hub/ConsumerGroups/$Default/Partitions/0", 5, "amqp.annotation.x-opt-offset > '@latest'")
    frames = produce(peer, pump, "hub/Partitions/0", event("new"), handle=2)
    got = events(frames + pump.read())
    assert [body for body, _ in got] == [b"new"]


def test_track_last_enqueued_adds_delivery_annotations() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    for n in range(2):
        produce(peer, pump, "hub/Partitions/0", event(f"e{n}"), handle=n + 1)
    frames = reader(
        peer, pump, "hub/ConsumerGroups/$Default/Partitions/0", 5, None,
        desired_capabilities=[symbol("com.microsoft:enable-receiver-runtime-metric")],
    )  # fmt: skip
    attach = frames.one(Attach)
    assert attach.offered_capabilities == ["com.microsoft:enable-receiver-runtime-metric"]
    first = decode_message(next(f.payload for f in frames if isinstance(f.performative, Transfer)))
    assert dict(first.delivery_annotations or {}) == {
        "last_enqueued_sequence_number": 1,
        "last_enqueued_offset": "1",
        "last_enqueued_time_utc": int(T0 * 1000),
        "runtime_info_retrieval_time_utc": int(T0 * 1000),
    }


def test_owner_levels() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    epoch = symbol("com.microsoft:epoch")
    address = "hub/ConsumerGroups/$Default/Partitions/0"
    reader(peer, pump, address, 1, None, properties={epoch: 2})
    lower = reader(peer, pump, address, 2, None, properties={epoch: 1})
    refused = lower.one(Detach)
    assert refused.error is not None and refused.error.condition == "amqp:link:stolen"
    assert "higher owner level (2)" in (refused.error.description or "")
    plain = reader(peer, pump, address, 3, None).one(Detach)
    assert plain.error is not None and "owner level 2" in (plain.error.description or "")
    higher = reader(peer, pump, address, 4, None, properties={epoch: 3})
    kicked = higher.one(Detach)  # the broker detaches the owner of level 2
    assert kicked.error is not None and kicked.error.condition == "amqp:link:stolen"
    assert "higher epoch of '3'" in (kicked.error.description or "")
    (owner,) = snapshot(layer_of(broker).hubs["hub"]).partition("0").receivers
    assert owner.owner_level == 3


def test_consumer_groups_are_independent_and_readers_leave_nothing_behind() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    produce(peer, pump, "hub/Partitions/1", event("shared"))
    one = events(reader(peer, pump, "hub/ConsumerGroups/$Default/Partitions/1", 5))
    two = events(reader(peer, pump, "hub/ConsumerGroups/late/Partitions/1", 6))  # auto-created group
    assert [b for b, _ in one] == [b for b, _ in two] == [b"shared"]
    hub = layer_of(broker).hubs["hub"]
    assert hub.consumer_groups == ["$Default", "late"]
    assert len(snapshot(hub).partition("1").receivers) == 2
    pump.send(peer.detach(5) + peer.detach(6))
    assert snapshot(hub).partition("1").receivers == ()
    assert hub.partitions["1"].readers == []


def test_retention_runs_on_the_broker_clock() -> None:
    broker, clock = make_broker()
    peer, pump = open_client(broker)
    produce(peer, pump, "hub/Partitions/0", event("old"))
    clock.advance(30)
    produce(peer, pump, "hub/Partitions/0", event("young"), handle=2)
    assert broker.next_deadline() == T0 + 60
    clock.advance(31)  # the manual clock runs the broker's timers
    partition = snapshot(layer_of(broker).hubs["hub"]).partition("0")
    assert (partition.bodies, partition.begin_sequence_number) == ((b"young",), 1)


@pytest.mark.parametrize(
    ("address", "condition", "words"),
    [
        ("hub/Partitions/7", "amqp:not-found", "partitions ['0', '1']"),
        ("hub/ConsumerGroups/$Default/Partitions/9", "amqp:not-found", "not '9'"),
        ("nohub/Partitions/0", "amqp:not-found", "auto-create is off"),
    ],
)
def test_unknown_partitions_and_hubs_are_refused_with_the_reason(address: str, condition: str, words: str) -> None:
    broker, _clock = make_broker(auto_create=False)
    peer, pump = open_client(broker)
    if "ConsumerGroups" in address:
        frames = pump.send(peer.attach_receiver("r", address, 1))
    else:
        frames = pump.send(peer.attach_sender("s", address, 1))
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == condition
    assert words in (detach.error.description or "")


def test_a_position_filter_it_cannot_read_refuses_the_link() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    frames = reader(peer, pump, "hub/ConsumerGroups/$Default/Partitions/0", 1, "color = 'red'")
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == "amqp:invalid-field"
    assert "x-opt-offset" in (detach.error.description or "")


def test_a_malformed_batch_rejects_that_delivery_only() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    not_a_batch = encode_message(Message(body="text"))  # a batch carries its events in data sections
    frames = produce(peer, pump, "hub/Partitions/0", not_a_batch, message_format=BATCH_FORMAT)
    state = frames.one(Disposition).state
    assert isinstance(state, Rejected) and state.error is not None and state.error.condition == "amqp:decode-error"
    frames = pump.send(peer.transfer(1, None, None, event("fine")))
    assert isinstance(frames.one(Disposition).state, Accepted)  # the link and session go on
    assert snapshot(layer_of(broker).hubs["hub"]).partition("0").bodies == (b"fine",)


def test_receiving_from_the_hub_itself_is_refused_with_where_to_receive() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    detach = pump.send(peer.attach_receiver("r", "hub", 1)).one(Detach)
    assert detach.error is not None and "hub/ConsumerGroups/<group>/Partitions/<id>" in (detach.error.description or "")


def test_a_partition_is_a_broker_stream_that_plain_amqp_clients_can_use() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    produce(peer, pump, "hub/Partitions/0", event("from-sdk"))
    plain = Peer("plain")  # no $cbs: plain AMQP 1.0, no Event Hubs semantics
    plain_pump = connect(broker, plain)
    plain_pump.send(plain.start())
    plain_pump.send(plain.attach_sender("s", "hub/Partitions/0", 1))
    assert isinstance(plain_pump.send(plain.transfer(1, None, None, event("from-amqp"))).one(Disposition).state, Accepted)
    stream = broker.stream_snapshot("hub/Partitions/0")
    assert (stream.first_offset, stream.last_offset) == (0, 1)
    got = events(reader(peer, pump, "hub/ConsumerGroups/$Default/Partitions/0", 5))
    assert [(body, annotations["x-opt-sequence-number"]) for body, annotations in got] == [
        (b"from-sdk", 0),
        (b"from-amqp", 1),
    ]


# ------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("address", "parsed"),
    [
        ("hub", HubAddress("hub", None, None)),
        ("amqps://127.0.0.1:5671/hub/Partitions/3", HubAddress("hub", "3", None)),
        ("hub/ConsumerGroups/$Default/Partitions/0", HubAddress("hub", "0", "$Default")),
        ("hub/Partitions", None),
        ("hub/Subscriptions/x", None),
        ("hub//Partitions/0", None),
    ],
)
def test_addresses(address: str, parsed: HubAddress | None) -> None:
    assert parse_hub_address(address) == parsed


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("amqp.annotation.x-opt-offset > '-1'", Position("offset", -1, False)),
        ("amqp.annotation.x-opt-offset >= '@latest'", Position("offset", None, True)),
        ("amqp.annotation.x-opt-sequence-number>='7'", Position("sequence", 7, True)),
        ("amqp.annotation.x-opt-enqueued-time > '1700000000500'", Position("time", 1_700_000_000.5, False)),
    ],
)
def test_position_filters(text: str, position: Position) -> None:
    assert parse_position(text) == position


@pytest.mark.parametrize(
    "text",
    [
        "amqp.annotation.x-opt-offset < '5'",
        "amqp.annotation.x-opt-sequence-number > 'seven'",
        "amqp.annotation.x-opt-enqueued-time > '@latest'",
        "amqp.annotation.x-opt-offset > '1' OR TRUE",
    ],
)
def test_position_filters_refused(text: str) -> None:
    with pytest.raises(PositionError):
        parse_position(text)


def test_options_say_what_they_take() -> None:
    with pytest.raises(ValueError, match="1 to 1024"):
        EventHubOptions("h", partitions=0)
    with pytest.raises(TypeError, match=r"write \('audit',\)"):
        EventHubOptions("h", consumer_groups="audit")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="without '/'"):
        EventHubOptions("a/b")
    with pytest.raises(TypeError, match="tuple of EventHubOptions"):
        EventHubsOptions(hubs=EventHubOptions("h"))  # type: ignore[arg-type]
    assert EventHubOptions("h", consumer_groups=("x", "$Default")).groups == ("$Default", "x")


def test_five_receivers_per_partition_and_group_then_quota_exceeded() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    address = "hub/ConsumerGroups/$Default/Partitions/0"
    for handle in range(1, 6):
        assert not reader(peer, pump, address, handle).of(Detach)
    sixth = reader(peer, pump, address, 6).one(Detach)
    assert sixth.error is not None and sixth.error.condition == "amqp:resource-limit-exceeded"
    assert "maximum number of allowed receivers" in (sixth.error.description or "")
    assert not reader(peer, pump, "hub/ConsumerGroups/$Default/Partitions/1", 7).of(Detach)  # per partition
    pump.send(peer.detach(1))
    assert not reader(peer, pump, address, 8).of(Detach)  # a place came free


def test_transactional_sends_are_refused() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    frames = produce(peer, pump, "hub/Partitions/0", event("in-txn"), state=TransactionalState(txn_id=b"t1"))
    state = frames.one(Disposition).state
    assert isinstance(state, TransactionalState) and isinstance(state.outcome, Rejected)
    assert state.outcome.error is not None and state.outcome.error.condition == "amqp:not-implemented"
    assert snapshot(layer_of(broker).hubs["hub"]).partition("0").depth == 0


def test_events_go_out_settled_so_nothing_piles_up_for_a_long_reader() -> None:
    broker, _clock = make_broker()
    peer, pump = open_client(broker)
    for n in range(3):
        produce(peer, pump, "hub/Partitions/0", event(f"e{n}"), handle=n + 1)
    frames = reader(peer, pump, "hub/ConsumerGroups/$Default/Partitions/0", 9)  # asks for unsettled, as the SDK does
    assert frames.one(Attach).snd_settle_mode == 1  # the sender decides: settled (Part 2 §2.8.2)
    transfers = [f.performative for f in frames if isinstance(f.performative, Transfer)]
    assert len(transfers) == 3 and all(t.settled for t in transfers)
    (connection,) = broker.connections
    assert all(not session.outgoing_unsettled for session in connection.protocol.sessions.values())
