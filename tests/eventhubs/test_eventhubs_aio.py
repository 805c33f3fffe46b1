"""The ``azure.eventhub.aio`` SDK against minibroker's Event Hubs layer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from azure.eventhub import EventData
from azure.eventhub.aio import EventHubConsumerClient, EventHubProducerClient, PartitionContext
from eventhubs_helpers import CLIENT_OPTIONS, HUB, WAIT

import minibroker

pytestmark = pytest.mark.interop


async def stop(client: EventHubConsumerClient, task: asyncio.Task[None]) -> None:
    """Close the client and end its receive task.

    ``receive()`` sees the close only after its load-balancing sleep; cancelling it
    ends it at once (the SDK's samples bound it with ``asyncio.wait_for`` the same way).
    """
    await client.close()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def receive(conn_str: str, count: int, group: str = "$Default", **options: Any) -> list[EventData]:
    """Receive ``count`` events with the aio consumer, then close it."""
    events: list[EventData] = []
    enough = asyncio.Event()

    async def on_event(_context: PartitionContext, event: EventData | None) -> None:
        if event is not None:
            events.append(event)
            if len(events) >= count:
                enough.set()

    client = EventHubConsumerClient.from_connection_string(conn_str, consumer_group=group, **CLIENT_OPTIONS)
    task = asyncio.create_task(client.receive(on_event, **options))
    try:
        await asyncio.wait_for(enough.wait(), WAIT)
    finally:
        await stop(client, task)
    return events


def test_aio_send_by_key_and_by_partition_then_receive(broker: minibroker.ThreadedBroker, conn_str: str) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], list[EventData], list[EventData]]:
        async with EventHubProducerClient.from_connection_string(conn_str, **CLIENT_OPTIONS) as producer:
            hub = await producer.get_eventhub_properties()
            keyed = await producer.create_batch(partition_key="sensor-3")
            keyed.add(EventData("keyed"))
            await producer.send_batch(keyed)
            key_partition = next(p.id for p in broker.event_hub(HUB).partitions if p.depth)
            other = "0" if key_partition == "1" else "1"
            batch = await producer.create_batch(partition_id=other)
            batch.add(EventData("one"))
            batch.add(EventData("two"))
            await producer.send_batch(batch)
            partition = await producer.get_partition_properties(other)
        by_id = await receive(conn_str, 2, partition_id=other, starting_position="-1")
        by_key = await receive(conn_str, 1, "audit", partition_id=key_partition, starting_position="-1")
        return hub, partition, by_id, by_key

    hub, partition, by_id, by_key = asyncio.run(scenario())
    assert hub["partition_ids"] == ["0", "1"]
    assert (partition["beginning_sequence_number"], partition["last_enqueued_sequence_number"]) == (0, 1)
    assert [(e.body_as_str(), e.sequence_number, e.offset) for e in by_id] == [("one", 0, "0"), ("two", 1, "1")]
    assert [(e.body_as_str(), e.partition_key) for e in by_key] == [("keyed", b"sensor-3")]


def test_aio_receive_batch_from_a_sequence_number(broker: minibroker.ThreadedBroker, conn_str: str) -> None:
    async def scenario() -> list[str]:
        async with EventHubProducerClient.from_connection_string(conn_str, **CLIENT_OPTIONS) as producer:
            batch = await producer.create_batch(partition_id="0")
            for n in range(4):
                batch.add(EventData(f"s{n}"))
            await producer.send_batch(batch)
        got: list[str] = []
        enough = asyncio.Event()

        async def on_batch(_context: PartitionContext, events: list[EventData]) -> None:
            got.extend(e.body_as_str() for e in events)
            if len(got) >= 2:
                enough.set()

        client = EventHubConsumerClient.from_connection_string(conn_str, consumer_group="$Default", **CLIENT_OPTIONS)
        task = asyncio.create_task(client.receive_batch(on_batch, partition_id="0", starting_position=1, max_batch_size=10))
        try:
            await asyncio.wait_for(enough.wait(), WAIT)
        finally:
            await stop(client, task)
        return got

    assert asyncio.run(scenario()) == ["s2", "s3"]


def test_aio_consumer_recovers_from_a_dropped_connection(broker: minibroker.ThreadedBroker, conn_str: str) -> None:
    dropped = broker.faults.drop_connection(address=f"{HUB}/ConsumerGroups/$Default/Partitions/1", times=1)
    options = {**CLIENT_OPTIONS, "retry_total": 3, "retry_backoff_factor": 0.01, "retry_mode": "fixed"}

    async def scenario() -> list[str]:
        got: list[str] = []
        first, all_three = asyncio.Event(), asyncio.Event()

        async def on_event(_context: PartitionContext, event: EventData | None) -> None:
            if event is not None:
                got.append(event.body_as_str())
                first.set()
                if len(got) >= 3:
                    all_three.set()

        async with EventHubProducerClient.from_connection_string(conn_str, **options) as producer:
            batch = await producer.create_batch(partition_id="1")
            batch.add(EventData("before"))
            await producer.send_batch(batch)
            client = EventHubConsumerClient.from_connection_string(conn_str, consumer_group="$Default", **options)
            task = asyncio.create_task(client.receive(on_event, partition_id="1", starting_position="-1"))
            try:
                await asyncio.wait_for(first.wait(), WAIT)  # its delivery dropped the connection
                for body in ("after-1", "after-2"):
                    batch = await producer.create_batch(partition_id="1")
                    batch.add(EventData(body))
                    await producer.send_batch(batch)
                await asyncio.wait_for(all_three.wait(), WAIT)
            finally:
                await stop(client, task)
        return got

    assert asyncio.run(scenario()) == ["before", "after-1", "after-2"]
    assert dropped.fired
