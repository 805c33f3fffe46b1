"""azure-eventhub (sync) against minibroker: the SDK unchanged, over a real loopback socket."""

from __future__ import annotations

import datetime
import threading
from typing import Any

import pytest
from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient, PartitionContext
from eventhubs_helpers import CLIENT_OPTIONS, HUB, WAIT, receive, wait_until

import minibroker
from minibroker.eventhubs import connection_string

pytestmark = pytest.mark.interop

def send(producer: EventHubProducerClient, bodies: list[str], **batch_options: Any) -> None:
    batch = producer.create_batch(**batch_options)
    for body in bodies:
        batch.add(EventData(body))
    producer.send_batch(batch)


def consumer(conn_str: str, group: str = "$Default", **options: Any) -> EventHubConsumerClient:
    return EventHubConsumerClient.from_connection_string(conn_str, consumer_group=group, **CLIENT_OPTIONS, **options)


def test_hub_and_partition_properties(
    broker: minibroker.ThreadedBroker, producer: EventHubProducerClient, clock: minibroker.ManualClock
) -> None:
    hub = producer.get_eventhub_properties()
    assert hub["eventhub_name"] == HUB
    assert hub["partition_ids"] == ["0", "1"]
    empty = producer.get_partition_properties("1")
    assert (empty["is_empty"], empty["beginning_sequence_number"], empty["last_enqueued_sequence_number"]) == (True, 0, -1)
    send(producer, ["a", "b", "c"], partition_id="1")
    props = producer.get_partition_properties("1")
    assert props["id"] == "1" and props["is_empty"] is False
    assert (props["beginning_sequence_number"], props["last_enqueued_sequence_number"]) == (0, 2)
    assert props["last_enqueued_offset"] == "2"
    assert props["last_enqueued_time_utc"] == datetime.datetime.fromtimestamp(clock.now(), datetime.UTC)
    assert broker.event_hub(HUB).partition("1").bodies == (b"a", b"b", b"c")
    assert broker.event_hub(HUB).partition("0").depth == 0


def test_events_carry_sequence_number_offset_and_enqueued_time(
    producer: EventHubProducerClient, conn_str: str, clock: minibroker.ManualClock
) -> None:
    send(producer, ["first"], partition_id="0")
    clock.advance(5)
    send(producer, ["second"], partition_id="0")
    events = receive(consumer(conn_str), 2, partition_id="0", starting_position="-1")
    assert [e.body_as_str() for e in events] == ["first", "second"]
    assert [e.sequence_number for e in events] == [0, 1]
    assert [e.offset for e in events] == ["0", "1"]
    start = clock.now() - 5
    assert [e.enqueued_time for e in events] == [
        datetime.datetime.fromtimestamp(t, datetime.UTC) for t in (start, start + 5)
    ]


def test_the_same_partition_key_always_lands_in_the_same_partition(
    broker: minibroker.ThreadedBroker, producer: EventHubProducerClient, conn_str: str
) -> None:
    for n in range(4):
        send(producer, [f"d7-{n}"], partition_key="device-7")
    snapshot = broker.event_hub(HUB)
    (partition,) = [p for p in snapshot.partitions if p.depth]
    assert partition.bodies == (b"d7-0", b"d7-1", b"d7-2", b"d7-3")
    assert partition.partition_keys == ("device-7",) * 4
    events = receive(consumer(conn_str), 4, partition_id=partition.id, starting_position="-1")
    assert {e.partition_key for e in events} == {b"device-7"}  # the SDK hands the annotation back as sent


def test_events_without_a_key_go_round_robin(broker: minibroker.ThreadedBroker, producer: EventHubProducerClient) -> None:
    for n in range(4):
        send(producer, [str(n)])
    assert [p.depth for p in broker.event_hub(HUB).partitions] == [2, 2]


@pytest.mark.parametrize(
    ("position", "inclusive", "expected"),
    [
        ("-1", False, ["e0", "e1", "e2", "e3"]),  # the start of the partition
        (1, False, ["e2", "e3"]),  # after sequence number 1
        (1, True, ["e1", "e2", "e3"]),  # from sequence number 1
        ("2", False, ["e3"]),  # after offset "2"
        ("2", True, ["e2", "e3"]),
    ],
)
def test_receive_from_a_sequence_number_or_an_offset(
    producer: EventHubProducerClient, conn_str: str, position: Any, inclusive: bool, expected: list[str]
) -> None:
    send(producer, ["e0", "e1", "e2", "e3"], partition_id="0")
    events = receive(
        consumer(conn_str), len(expected), partition_id="0", starting_position=position,
        starting_position_inclusive=inclusive,
    )  # fmt: skip
    assert [e.body_as_str() for e in events] == expected


@pytest.mark.parametrize(("inclusive", "expected"), [(False, ["t2"]), (True, ["t1", "t2"])])
def test_receive_from_an_enqueued_time(
    producer: EventHubProducerClient, conn_str: str, clock: minibroker.ManualClock, inclusive: bool, expected: list[str]
) -> None:
    send(producer, ["t0"], partition_id="1")
    clock.advance(10)
    middle = datetime.datetime.fromtimestamp(clock.now(), datetime.UTC)
    send(producer, ["t1"], partition_id="1")
    clock.advance(10)
    send(producer, ["t2"], partition_id="1")
    events = receive(
        consumer(conn_str), len(expected), partition_id="1", starting_position=middle,
        starting_position_inclusive=inclusive,
    )  # fmt: skip
    assert [e.body_as_str() for e in events] == expected


def test_receive_from_latest_gets_only_later_events(
    broker: minibroker.ThreadedBroker, producer: EventHubProducerClient, conn_str: str
) -> None:
    send(producer, ["old"], partition_id="0")
    client = consumer(conn_str)
    events: list[EventData] = []
    thread = threading.Thread(
        target=client.receive,
        kwargs={"on_event": lambda _c, e: events.append(e), "partition_id": "0", "starting_position": "@latest"},
    )
    thread.start()
    try:
        wait_until(lambda: len(broker.event_hub(HUB).partition("0").receivers) == 1, "the receiver to attach")
        send(producer, ["new"], partition_id="0")
        wait_until(lambda: len(events) == 1, "the new event")
    finally:
        client.close()
        thread.join(WAIT)
    assert [e.body_as_str() for e in events] == ["new"]


def test_receive_batch(producer: EventHubProducerClient, conn_str: str) -> None:
    send(producer, [f"b{n}" for n in range(5)], partition_id="1")
    client = consumer(conn_str)
    batches: list[list[EventData]] = []
    thread = threading.Thread(
        target=client.receive_batch,
        kwargs={
            "on_event_batch": lambda _c, batch: batches.append(batch) if batch else None,
            "partition_id": "1", "starting_position": "-1", "max_batch_size": 5,
        },
    )  # fmt: skip
    thread.start()
    try:
        wait_until(lambda: sum(len(b) for b in batches) == 5, "five events in batches")
    finally:
        client.close()
        thread.join(WAIT)
    assert [e.body_as_str() for b in batches for e in b] == [f"b{n}" for n in range(5)]


def test_consumer_groups_read_independently(
    broker: minibroker.ThreadedBroker, producer: EventHubProducerClient, conn_str: str
) -> None:
    send(producer, ["x", "y"], partition_id="0")
    default = receive(consumer(conn_str), 2, partition_id="0", starting_position="-1")
    audit = receive(consumer(conn_str, "audit"), 2, partition_id="0", starting_position="-1")
    assert [e.body_as_str() for e in default] == [e.body_as_str() for e in audit] == ["x", "y"]
    assert broker.event_hub(HUB).consumer_groups == ("$Default", "audit")
    assert broker.event_hub(HUB).partition("0").depth == 2  # reading removes nothing


def test_track_last_enqueued_event_properties(producer: EventHubProducerClient, conn_str: str) -> None:
    send(producer, ["p", "q", "r"], partition_id="0")
    client = consumer(conn_str)
    seen: list[dict[str, Any] | None] = []

    def on_event(context: PartitionContext, event: EventData | None) -> None:
        if event is not None:
            seen.append(context.last_enqueued_event_properties)

    thread = threading.Thread(
        target=client.receive,
        kwargs={
            "on_event": on_event, "partition_id": "0", "starting_position": "-1",
            "track_last_enqueued_event_properties": True,
        },
    )  # fmt: skip
    thread.start()
    try:
        wait_until(lambda: len(seen) == 3, "three events")
    finally:
        client.close()
        thread.join(WAIT)
    last = seen[0]
    assert last is not None
    assert (last["sequence_number"], last["offset"]) == (2, "2")


def test_a_higher_owner_level_disconnects_the_lower(
    broker: minibroker.ThreadedBroker, producer: EventHubProducerClient, conn_str: str
) -> None:
    low = consumer(conn_str)
    errors: list[Exception] = []
    thread = threading.Thread(
        target=low.receive,
        kwargs={
            "on_event": lambda _c, _e: None, "on_error": lambda _c, error: errors.append(error),
            "partition_id": "0", "starting_position": "-1", "owner_level": 1,
        },
    )  # fmt: skip
    thread.start()
    try:
        wait_until(lambda: len(broker.event_hub(HUB).partition("0").receivers) == 1, "the first receiver")
        send(producer, ["mine"], partition_id="0")
        events = receive(consumer(conn_str), 1, partition_id="0", starting_position="-1", owner_level=2)
        wait_until(lambda: bool(errors), "the first receiver's error")
    finally:
        low.close()
        thread.join(WAIT)
    assert [e.body_as_str() for e in events] == ["mine"]
    assert "higher epoch of '2'" in str(errors[0])


def test_a_receiver_without_owner_level_cannot_join_an_owned_partition(
    broker: minibroker.ThreadedBroker, conn_str: str
) -> None:
    owner = consumer(conn_str)
    thread = threading.Thread(
        target=owner.receive,
        kwargs={"on_event": lambda _c, _e: None, "partition_id": "1", "starting_position": "-1", "owner_level": 5},
    )
    thread.start()
    try:
        wait_until(lambda: len(broker.event_hub(HUB).partition("1").receivers) == 1, "the owner")
        with pytest.raises(Exception, match="owner level 5"):
            receive(consumer(conn_str), 1, partition_id="1", starting_position="-1")
        (receiver,) = broker.event_hub(HUB).partition("1").receivers
        assert receiver.owner_level == 5
    finally:
        owner.close()
        thread.join(WAIT)


def test_hubs_are_created_on_first_use(broker: minibroker.ThreadedBroker) -> None:
    conn_str = connection_string(broker.port, "orders")
    with EventHubProducerClient.from_connection_string(conn_str, **CLIENT_OPTIONS) as producer:
        assert producer.get_partition_ids() == ["0", "1", "2", "3"]
        send(producer, ["o1"])
    events = receive(consumer(conn_str), 1, partition_id="0", starting_position="-1")
    assert events[0].body_as_str() == "o1"
    assert broker.event_hub("orders").depth == 1


def test_retention_drops_events_on_the_broker_clock(
    broker: minibroker.ThreadedBroker, clock: minibroker.ManualClock
) -> None:
    broker.declare_event_hub("short", partitions=1, retention=60)
    conn_str = connection_string(broker.port, "short")
    with EventHubProducerClient.from_connection_string(conn_str, **CLIENT_OPTIONS) as producer:
        send(producer, ["gone"])
        clock.advance(30)
        send(producer, ["kept"])
        clock.advance(31)
        assert broker.event_hub("short").partition("0").bodies == (b"kept",)
        props = producer.get_partition_properties("0")
    assert (props["beginning_sequence_number"], props["last_enqueued_sequence_number"]) == (1, 1)


def test_the_sdk_recovers_from_dropped_connections(broker: minibroker.ThreadedBroker, conn_str: str) -> None:
    sent = broker.faults.drop_connection(address=f"{HUB}/Partitions/0", times=1)
    options = {**CLIENT_OPTIONS, "retry_total": 3, "retry_backoff_factor": 0.01, "retry_mode": "fixed"}
    producer = EventHubProducerClient.from_connection_string(conn_str, **options)
    with producer:
        send(producer, ["r0", "r1"], partition_id="0")  # dropped on the first try, sent again
        assert sent.fired
        received = broker.faults.drop_connection(address=f"{HUB}/ConsumerGroups/$Default/Partitions/0", times=1)
        client = EventHubConsumerClient.from_connection_string(conn_str, consumer_group="$Default", **options)
        events: list[EventData] = []
        thread = threading.Thread(
            target=client.receive,
            kwargs={"on_event": lambda _c, e: events.append(e), "partition_id": "0", "starting_position": "-1"},
        )
        thread.start()
        try:
            wait_until(lambda: received.fired and len(events) == 2, "both events and the dropped connection")
            send(producer, ["r2"], partition_id="0")  # the receiver reconnected: it gets what comes next
            wait_until(lambda: len(events) == 3, lambda: f"the event after the drop (got {len(events)})")
        finally:
            client.close()
            thread.join(WAIT)
    assert [e.body_as_str() for e in events] == ["r0", "r1", "r2"]
    assert broker.statistics().connections_total >= 4  # each client connected again after its drop


def test_receive_from_every_partition_with_the_in_memory_checkpoint_store(
    producer: EventHubProducerClient, conn_str: str
) -> None:
    send(producer, ["zero"], partition_id="0")
    send(producer, ["one"], partition_id="1")
    events = receive(consumer(conn_str), 2, starting_position="-1")  # no partition_id: the SDK claims them all
    assert sorted((e.body_as_str(), e.sequence_number) for e in events) == [("one", 0), ("zero", 0)]
