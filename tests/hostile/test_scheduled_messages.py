"""Scheduled Service Bus messages count against their entity's bounds when they are scheduled.

Before the fix a scheduled message was held by the scheduler whatever the entity's bounds: a
client could park any number of 64 KiB messages, scheduled an hour ahead, beside a queue bounded
at 1 MiB (2,000 of them: broker RSS 31 -> 157 MiB), by ``schedule_messages`` or by a plain send with
``scheduled_enqueue_time_utc``.  Now scheduling counts what the queue holds and what is already
scheduled for it; what would not fit is refused (``ServiceBusQuotaExceededError``), the
connection kept, and nothing of a refused ``schedule_messages`` call stays scheduled.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusQuotaExceededError
from hostile_peer import good_client_round_trip  # tests/hostile is on sys.path
from test_duplicate_detection import CLIENT_OPTIONS, servicebus_layer

import minibroker
from minibroker.broker.config import QueueOptions
from minibroker.servicebus import ServiceBusOptions, connection_string

pytestmark = pytest.mark.interop

BODY = b"s" * (64 * 1024)
BOUND = 1024 * 1024


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    options = ServiceBusOptions(queues=("jobs",))
    with minibroker.ThreadedBroker(servicebus=options, queue_defaults=QueueOptions(max_bytes=BOUND)) as running:
        yield running


@pytest.fixture
def client(broker: minibroker.ThreadedBroker) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as sb:
        yield sb


def _scheduled_bytes(broker: minibroker.ThreadedBroker) -> int:
    scheduler = servicebus_layer(broker).scheduler
    return broker._read(lambda: sum(len(m.payload) for m in scheduler._waiting.get("jobs", {}).values()))


def _later() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)


def test_schedule_messages_stops_at_the_entity_s_bound(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    scheduled = 0
    with client.get_queue_sender("jobs") as sender:
        with pytest.raises(ServiceBusQuotaExceededError, match="not scheduled"):
            for _ in range(100):
                sender.schedule_messages(ServiceBusMessage(BODY), _later())
                scheduled += 1
        assert 0 < scheduled < 16  # 16 bodies of 64 KiB are 1 MiB: the encoded messages fit fewer
        with pytest.raises(ServiceBusQuotaExceededError):  # a batch that does not fit: none of it stays
            sender.schedule_messages([ServiceBusMessage(b"small"), ServiceBusMessage(BODY)], _later())
    assert _scheduled_bytes(broker) <= BOUND
    assert broker._read(lambda: len(servicebus_layer(broker).scheduler._waiting["jobs"])) == scheduled
    good_client_round_trip(broker)


def test_a_send_with_a_scheduled_time_stops_at_the_entity_s_bound(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient
) -> None:
    sent = 0
    with client.get_queue_sender("jobs") as sender:
        with pytest.raises(ServiceBusQuotaExceededError):
            for _ in range(100):
                sender.send_messages(ServiceBusMessage(BODY, scheduled_enqueue_time_utc=_later()))
                sent += 1
        assert 0 < sent < 16
    assert _scheduled_bytes(broker) <= BOUND


def test_a_cancelled_message_gives_its_room_back(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    with client.get_queue_sender("jobs") as sender:
        numbers = []
        with pytest.raises(ServiceBusQuotaExceededError):
            for _ in range(100):
                numbers.extend(sender.schedule_messages(ServiceBusMessage(BODY), _later()))
        sender.cancel_scheduled_messages(numbers[0])
        sender.schedule_messages(ServiceBusMessage(BODY), _later())  # room again
