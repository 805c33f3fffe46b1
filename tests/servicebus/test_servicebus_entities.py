"""Entity settings with the Python SDK: time-to-live, expiry dead-lettering, duplicate detection,
forwarding, scheduled enqueue time on a plain send, and the emulator's config file."""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusError
from servicebus_helpers import CLIENT_OPTIONS

import minibroker
from minibroker.servicebus import EntityProperties, ServiceBusOptions, connection_string
from minibroker.servicebus.emulator import load_emulator_config, parse_duration

pytestmark = pytest.mark.interop

ENTITIES = {
    "expiring": EntityProperties(default_message_time_to_live=10, dead_lettering_on_message_expiration=True),
    "vanishing": EntityProperties(default_message_time_to_live=10),
    "dedup": EntityProperties(requires_duplicate_detection=True, duplicate_detection_history_time_window=30),
    "inbox": EntityProperties(forward_to="outbox"),
    "events/forwarded": EntityProperties(forward_to="collected"),
    "sessions-only": EntityProperties(requires_session=True),
    "strict": EntityProperties(forward_dead_lettered_messages_to="graveyard"),
}


@pytest.fixture
def clock() -> minibroker.ManualClock:
    return minibroker.ManualClock(start=float(int(time.time())))


@pytest.fixture
def broker(clock: minibroker.ManualClock) -> Iterator[minibroker.ThreadedBroker]:
    options = ServiceBusOptions(
        queues=("expiring", "vanishing", "dedup", "inbox", "outbox", "collected", "sessions-only", "strict", "graveyard"),
        topics={"events": ("forwarded", "kept")},
        entities=ENTITIES,
    )
    with minibroker.ThreadedBroker(clock=clock, servicebus=options) as running:
        yield running


@pytest.fixture
def client(broker: minibroker.ThreadedBroker) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as sb:
        yield sb


def _bodies(client: ServiceBusClient, queue: str, sub_queue: ServiceBusSubQueue | None = None) -> list[str]:
    with client.get_queue_receiver(queue, sub_queue=sub_queue, prefetch_count=10) as receiver:
        messages = receiver.receive_messages(max_message_count=10, max_wait_time=1)
        for message in messages:
            receiver.complete_message(message)
        return [str(m) for m in messages]


def test_entity_time_to_live_with_and_without_dead_lettering(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    for queue in ("expiring", "vanishing"):
        with client.get_queue_sender(queue) as sender:
            sender.send_messages([ServiceBusMessage("old"), ServiceBusMessage("own ttl", time_to_live=datetime.timedelta(hours=1))])
    clock.advance(11)  # the entity's 10 s caps the message's own hour
    broker.wait_for(lambda b: b.queue("expiring").depth == 0 and b.queue("vanishing").depth == 0)
    with client.get_queue_receiver("expiring", sub_queue=ServiceBusSubQueue.DEAD_LETTER, prefetch_count=10) as dlq:
        dead = dlq.receive_messages(max_message_count=10, max_wait_time=1)
        assert sorted(str(m) for m in dead) == ["old", "own ttl"]
        assert {m.dead_letter_reason for m in dead} == {"TTLExpiredException"}
        for message in dead:
            dlq.complete_message(message)
    vanishing = broker.statistics().nodes["vanishing"]
    assert (vanishing.expired, vanishing.dead_lettered) == (2, 0)  # gone, not dead-lettered


def test_duplicate_detection_drops_a_message_id_seen_within_the_window(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    with client.get_queue_sender("dedup") as sender:
        sender.send_messages([ServiceBusMessage("a", message_id="a"), ServiceBusMessage("a again", message_id="a")])
        sender.send_messages(ServiceBusMessage("b", message_id="b"))
        clock.advance(31)  # the window has passed: "a" is new again
        sender.send_messages(ServiceBusMessage("a later", message_id="a"))
    assert _bodies(client, "dedup") == ["a", "b", "a later"]
    with client.get_queue_sender("orders") as sender:  # an entity without detection keeps both
        sender.send_messages([ServiceBusMessage("x", message_id="x"), ServiceBusMessage("x", message_id="x")])
    assert broker.queue("orders").depth == 2


def test_forwarding_from_a_queue_and_from_a_subscription(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    with client.get_queue_sender("inbox") as sender:
        sender.send_messages(ServiceBusMessage("passed on"))
        sender.schedule_messages(ServiceBusMessage("scheduled"), datetime.datetime.fromtimestamp(clock.now() + 5, datetime.UTC))
    clock.advance(5)
    broker.wait_for(lambda b: b.queue("outbox").depth == 2)
    with client.get_topic_sender("events") as sender:
        sender.send_messages(ServiceBusMessage("published"))
    assert broker.queue("inbox").depth == 0
    assert _bodies(client, "outbox") == ["passed on", "scheduled"]
    assert _bodies(client, "collected") == ["published"]
    assert broker.queue("events/Subscriptions/forwarded").depth == 0
    assert broker.queue("events/Subscriptions/kept").depth == 1


def test_dead_letters_forwarded_and_sessions_required(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    with client.get_queue_sender("strict") as sender:
        sender.send_messages(ServiceBusMessage("poison"))
    with client.get_queue_receiver("strict", prefetch_count=10) as receiver:
        (message,) = receiver.receive_messages(max_wait_time=5)
        receiver.dead_letter_message(message, reason="bad")
    with client.get_queue_receiver("graveyard", prefetch_count=10) as receiver:
        (dead,) = receiver.receive_messages(max_wait_time=5)
        assert (str(dead), dead.dead_letter_reason) == ("poison", "bad")
        receiver.complete_message(dead)
    with client.get_queue_sender("sessions-only") as sender:
        sender.send_messages(ServiceBusMessage("s", session_id="a"))
    with pytest.raises(ServiceBusError, match="requires sessions"):
        with client.get_queue_receiver("sessions-only", prefetch_count=10) as receiver:
            receiver.receive_messages(max_wait_time=1)
    with client.get_queue_receiver("sessions-only", session_id="a", prefetch_count=10) as receiver:
        (message,) = receiver.receive_messages(max_wait_time=5)
        receiver.complete_message(message)


def test_a_plain_send_with_a_scheduled_enqueue_time_waits_for_it(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    at = datetime.datetime.fromtimestamp(clock.now() + 30, datetime.UTC)
    with client.get_queue_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage("later", scheduled_enqueue_time_utc=at), ServiceBusMessage("now")])
    assert broker.queue("orders").depth == 1
    clock.advance(30)
    broker.wait_for(lambda b: b.queue("orders").depth == 2)
    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        messages = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        # The scheduled message got its number when it was sent (as with schedule_messages).
        assert sorted((str(m), m.sequence_number) for m in messages) == [("later", 1), ("now", 2)]
        assert [m.scheduled_enqueue_time_utc for m in messages if str(m) == "later"] == [at]
        for message in messages:
            receiver.complete_message(message)


EMULATOR_CONFIG = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [
                    {"Name": "jobs", "Properties": {"MaxDeliveryCount": 2, "LockDuration": "PT30S",
                                                    "RequiresDuplicateDetection": True,
                                                    "DuplicateDetectionHistoryTimeWindow": "PT20S"}},
                ],  # fmt: skip
                "Topics": [
                    {
                        "Name": "shop",
                        "Properties": {"DefaultMessageTimeToLive": "PT1H"},
                        "Subscriptions": [
                            {"Name": "everything"},
                            {
                                "Name": "red",
                                "Properties": {"MaxDeliveryCount": 5},
                                "Rules": [
                                    {"Name": "red-sql", "Properties": {"FilterType": "Sql",
                                                                       "SqlFilter": {"SqlExpression": "color = 'red'"},
                                                                       "Action": {"SqlExpression": "SET picked = 'sql'"}}},
                                    {"Name": "vip", "Properties": {"FilterType": "Correlation",
                                                                   "CorrelationFilter": {"Label": "vip"}}},
                                ],
                            },  # fmt: skip
                        ],
                    }
                ],
            }
        ],
        "Logging": {"Type": "File"},
    }
}


def test_the_emulators_config_file_declares_entities_rules_and_settings(
    tmp_path: Path, clock: minibroker.ManualClock
) -> None:
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(EMULATOR_CONFIG))
    options = load_emulator_config(path)
    assert options.entities["jobs"] == EntityProperties(
        lock_duration=30, max_delivery_count=2, requires_duplicate_detection=True,
        duplicate_detection_history_time_window=20,
    )  # fmt: skip
    with minibroker.ThreadedBroker(clock=clock, servicebus=options) as broker:
        with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as client:
            with client.get_topic_sender("shop") as sender:
                sender.send_messages(
                    [
                        ServiceBusMessage("red", application_properties={"color": "red"}),
                        ServiceBusMessage("blue", application_properties={"color": "blue"}),
                        ServiceBusMessage("vip", subject="vip"),
                    ]
                )
            with client.get_subscription_receiver("shop", "red", prefetch_count=10) as receiver:
                messages = receiver.receive_messages(max_message_count=10, max_wait_time=1)
                picked = [(str(m), (m.application_properties or {}).get(b"picked")) for m in messages]
                assert picked == [("red", b"sql"), ("vip", None)]
                assert messages[0].locked_until_utc == datetime.datetime.fromtimestamp(clock.now() + 60, datetime.UTC)
            with client.get_queue_sender("jobs") as sender:
                sender.send_messages([ServiceBusMessage("j", message_id="1"), ServiceBusMessage("j", message_id="1")])
            with client.get_queue_receiver("jobs", prefetch_count=10) as receiver:
                (job,) = receiver.receive_messages(max_message_count=10, max_wait_time=1)
                assert job.locked_until_utc == datetime.datetime.fromtimestamp(clock.now() + 30, datetime.UTC)
                receiver.abandon_message(job)
                (job,) = receiver.receive_messages(max_wait_time=5)
                receiver.abandon_message(job)  # the second delivery: MaxDeliveryCount 2 dead-letters it
        assert broker.queue("jobs/$DeadLetterQueue").depth == 1
        assert broker.queue("shop/Subscriptions/everything").depth == 3


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        ({"UserConfig": {"Namespaces": []}}, "exactly one namespace"),
        ({"UserConfig": {"Namespaces": [{"Queues": [{"Name": ""}]}]}}, r"Queues\[0\]: 'Name'"),
        ({"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "Properties": {"LockDuration": "1 minute"}}]}]}},
         r"Queues\[0\] \(q\).Properties.LockDuration: expected an ISO 8601 duration"),
        ({"UserConfig": {"Namespaces": [{"Topics": [{"Name": "t", "Subscriptions": [
            {"Name": "s", "Rules": [{"Name": "r", "Properties": {"FilterType": "Regex"}}]}]}]}]}},
         "expected 'Sql' or 'Correlation'"),
        ({"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "Properties": {"MaxDeliveryCount": 0}}]}]}},
         "MaxDeliveryCount: expected a positive integer"),
    ],
)  # fmt: skip
def test_a_malformed_config_file_says_where(document: dict[str, object], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        load_emulator_config(document)


@pytest.mark.parametrize(
    ("text", "seconds"), [("PT1M", 60), ("PT20S", 20), ("PT1H", 3600), ("P1DT2H", 93600), ("PT0.5S", 0.5)]
)
def test_iso_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
