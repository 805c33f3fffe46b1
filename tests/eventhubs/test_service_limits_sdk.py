"""azure-eventhub against ``minibroker serve``'s defaults: hubs made on first use, and the service's size limit.

Each test starts a broker with no hub declared, as ``minibroker serve --port 0`` does, so
that whatever the SDK does first is what makes the hub.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.eventhub import EventData, EventHubProducerClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from eventhubs_helpers import CLIENT_OPTIONS

import minibroker
from minibroker.eventhubs import connection_string

pytestmark = pytest.mark.interop

#: Azure Event Hubs quotas, "Maximum size of Event Hubs publication": 1 MB (Standard, Premium, Dedicated).
ONE_MB = 1024 * 1024


@pytest.fixture
def plain_broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker() as running:
        yield running


def producer_for(broker: minibroker.ThreadedBroker, hub: str) -> EventHubProducerClient:
    return EventHubProducerClient.from_connection_string(connection_string(broker.port), eventhub_name=hub, **CLIENT_OPTIONS)


def test_a_producers_first_send_to_an_undeclared_hub_makes_the_hub(plain_broker: minibroker.ThreadedBroker) -> None:
    # azure-eventhub's producer link asks for no capability (pyamqp drops georeplication):
    # the client's open names the SDK, and that makes the name a hub, not a queue.
    with producer_for(plain_broker, "first-send") as producer:
        producer.send_batch([EventData("x")])
        properties = producer.get_eventhub_properties()
        partition = producer.get_partition_properties(properties["partition_ids"][0])
    assert properties["eventhub_name"] == "first-send"
    assert properties["partition_ids"] == ["0", "1", "2", "3"]
    assert partition["eventhub_name"] == "first-send"
    assert plain_broker.event_hub("first-send").depth == 1
    assert "first-send" not in plain_broker.statistics().nodes  # no plain queue of that name


def test_a_partition_send_before_any_management_call_lands_in_that_partition(
    plain_broker: minibroker.ThreadedBroker,
) -> None:
    with producer_for(plain_broker, "by-partition") as producer:
        producer.send_batch([EventData("to 2")], partition_id="2")
        assert producer.get_partition_properties("2")["last_enqueued_sequence_number"] == 0
    assert plain_broker.event_hub("by-partition").partition("2").bodies == (b"to 2",)


def test_a_service_bus_senders_first_send_still_makes_a_queue(plain_broker: minibroker.ThreadedBroker) -> None:
    conn_str = (
        f"Endpoint=sb://127.0.0.1:{plain_broker.port};SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true"
    )
    with ServiceBusClient.from_connection_string(conn_str, retry_total=0) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("order"))
    assert plain_broker.queue("orders").depth == 1


def test_a_batch_filled_until_full_holds_1_mb_and_is_stored_whole(plain_broker: minibroker.ThreadedBroker) -> None:
    # The official samples' loop: add until ValueError, then send.  With the broker's general
    # 128 MiB advertised, the loop ran for minutes; the service advertises 1 MB.
    with producer_for(plain_broker, "filled") as producer:
        batch = producer.create_batch()
        assert batch.max_size_in_bytes == ONE_MB
        added = 0
        while True:
            try:
                batch.add(EventData("Message inside EventBatchData"))
            except ValueError:
                break
            added += 1
        producer.send_batch(batch)
    assert added > 10_000
    assert plain_broker.event_hub("filled").depth == added


def test_an_event_over_1_mb_is_refused_by_the_sdk_from_the_advertised_size(plain_broker: minibroker.ThreadedBroker) -> None:
    with producer_for(plain_broker, "large") as producer:
        with pytest.raises(ValueError, match="exceeds the Event Hub frame size limit"):
            producer.send_batch([EventData(b"x" * (ONE_MB + 1))])
        producer.send_batch([EventData(b"x" * (ONE_MB - 1024))])
    assert plain_broker.event_hub("large").depth == 1
