"""Findings 3 and 4: Service Bus duplicate detection neither loses a message nor grows without bound.

Before the fix the entity remembered a message-id before its queue admitted the message: on a
duplicate-detecting queue with ``max_depth=1`` a message refused for want of room was retried by
its producer, answered Accepted as a duplicate, and never stored.  And ids of any length were
kept (100,000 of them per entity): distinct 64 KiB message-ids took the broker from 33 MiB to
1.9 GiB.  Now an id is remembered once its message is stored or scheduled, a message-id or session
id over 128 characters is refused as Service Bus refuses it (``com.microsoft:argument-out-of-range``,
the connection kept), and each entity's ids are bounded in count and in bytes.
"""

from __future__ import annotations

import datetime
import tracemalloc
import uuid
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusError, ServiceBusQuotaExceededError
from hostile_peer import good_client_round_trip  # tests/hostile is on sys.path

import minibroker
from minibroker.broker.config import QueueOptions
from minibroker.servicebus import ServiceBusOptions, connection_string
from minibroker.servicebus.duplicates import MAX_REMEMBERED, MAX_REMEMBERED_BYTES, DuplicateDetection
from minibroker.servicebus.layer import ServiceBusLayer
from minibroker.servicebus.options import EntityProperties

pytestmark = pytest.mark.interop

#: No retries, no keep-alive thread: the SDK answers at once (as tests/servicebus does).
CLIENT_OPTIONS = {"retry_total": 0, "socket_timeout": 0.05, "keep_alive": 0}
DETECTING = {"jobs": EntityProperties(requires_duplicate_detection=True)}


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    options = ServiceBusOptions(queues=("jobs",), entities=DETECTING)
    with minibroker.ThreadedBroker(servicebus=options, queue_defaults=QueueOptions(max_depth=1)) as running:
        yield running


@pytest.fixture
def client(broker: minibroker.ThreadedBroker) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as sb:
        yield sb


def _held(broker: minibroker.ThreadedBroker) -> int:
    return broker._read(lambda: servicebus_layer(broker).duplicates.bytes_held("jobs"))


def servicebus_layer(broker: minibroker.ThreadedBroker) -> ServiceBusLayer:
    """The broker's Service Bus layer (turned on by the $cbs attach, beside the Event Hubs layer)."""
    layer = broker._broker.layer("servicebus")
    assert isinstance(layer, ServiceBusLayer)
    return layer


def test_a_message_refused_for_want_of_room_is_stored_when_retried(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient
) -> None:
    with client.get_queue_sender("jobs") as sender, client.get_queue_receiver("jobs", max_wait_time=5) as receiver:
        sender.send_messages(ServiceBusMessage("a", message_id="A"))
        with pytest.raises(ServiceBusQuotaExceededError):
            sender.send_messages(ServiceBusMessage("b", message_id="B"))  # the queue holds one: refused
        (first,) = receiver.receive_messages(max_message_count=1)
        receiver.complete_message(first)
        sender.send_messages(ServiceBusMessage("b", message_id="B"))  # the producer retries, as it should
        (second,) = receiver.receive_messages(max_message_count=1)
        receiver.complete_message(second)
        assert (str(first), str(second)) == ("a", "b")
        sender.send_messages(ServiceBusMessage("b again", message_id="B"))  # now B was kept: a duplicate
    assert broker.queue("jobs").depth == 0
    good_client_round_trip(broker)


def test_a_scheduled_message_counts_as_kept(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    with client.get_queue_sender("jobs") as sender:
        sender.send_messages(ServiceBusMessage("later", message_id="S", scheduled_enqueue_time_utc=later))
        sender.send_messages(ServiceBusMessage("now", message_id="S"))  # a duplicate of the scheduled one
    assert broker.queue("jobs").depth == 0
    assert _held(broker) > 0


def _raw_send(client: ServiceBusClient, message_id: object) -> None:
    """Send a message whose id the SDK would refuse itself (it checks 128 characters before sending)."""
    message = ServiceBusMessage("x")
    message._raw_amqp_message.properties.message_id = message_id  # past the SDK's own check
    with client.get_queue_sender("jobs") as sender:
        sender.send_messages(message)


@pytest.mark.parametrize("length", [129, 64 * 1024])
def test_a_message_id_over_128_characters_is_refused_and_not_remembered(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, length: int
) -> None:
    with pytest.raises(ServiceBusError, match="at most 128 characters"):
        _raw_send(client, "i" * length)
    assert broker.queue("jobs").depth == 0
    assert _held(broker) == 0
    good_client_round_trip(broker)


def test_a_binary_message_id_over_128_bytes_is_refused(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    with pytest.raises(ServiceBusError, match="at most 128 characters"):
        _raw_send(client, b"\x01" * (64 * 1024))
    assert _held(broker) == 0


def test_a_message_id_of_128_characters_is_kept(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    _raw_send(client, "i" * 128)
    assert broker.queue("jobs").depth == 1
    assert 128 < _held(broker) < 1024


def test_a_session_id_over_128_characters_is_refused(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    message = ServiceBusMessage("x")
    message._raw_amqp_message.properties.group_id = "s" * 129
    with client.get_queue_sender("jobs") as sender, pytest.raises(ServiceBusError, match="SessionId"):
        sender.send_messages(message)
    assert broker.queue("jobs").depth == 0


def test_the_store_of_one_entity_is_bounded_in_ids_and_bytes() -> None:
    """Wide ids (4 bytes a character in memory) meet the byte bound first; the store counts what it
    holds and tracemalloc agrees with the count within 10%."""
    store = DuplicateDetection()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(MAX_REMEMBERED + 10_000):
            store.remember("jobs", f"{n:08d}" + "\U0001f600" * 120, 0.0)
        traced = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    held = store.bytes_held("jobs")
    assert held <= MAX_REMEMBERED_BYTES
    assert traced <= MAX_REMEMBERED_BYTES * 1.1
    assert store.count("jobs") < MAX_REMEMBERED  # the bytes bound came first
    assert store.is_duplicate("jobs", f"{MAX_REMEMBERED + 9_999:08d}" + "\U0001f600" * 120, 0.0, 600.0)
    assert not store.is_duplicate("jobs", f"{0:08d}" + "\U0001f600" * 120, 0.0, 600.0)  # the oldest went first


def test_narrow_ids_meet_the_count_bound() -> None:
    store = DuplicateDetection()
    for n in range(MAX_REMEMBERED + 5):
        store.remember("jobs", uuid.UUID(int=n).hex, 0.0)
    assert store.count("jobs") == MAX_REMEMBERED
    assert store.bytes_held("jobs") <= MAX_REMEMBERED_BYTES
