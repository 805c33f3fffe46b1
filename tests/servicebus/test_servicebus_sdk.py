"""The real ``azure-servicebus`` SDK (sync) against minibroker's Service Bus layer."""

from __future__ import annotations

import datetime

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import (
    MessageLockLostError,
    ServiceBusError,
    SessionCannotBeLockedError,
)
from servicebus_helpers import CLIENT_OPTIONS, LOCK_DURATION

import minibroker
from minibroker.servicebus import connection_string

pytestmark = pytest.mark.interop


def _utc(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(round(seconds, 3), datetime.UTC)


def test_send_single_and_batch_then_receive_and_complete(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("one", application_properties={"kind": "single"}))
        batch = sender.create_message_batch()
        for i in range(3):
            batch.add_message(ServiceBusMessage(f"batch-{i}"))
        sender.send_messages(batch)
    assert broker.queue("orders").depth == 4
    now = clock.now()
    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        messages = receiver.receive_messages(max_message_count=4, max_wait_time=5)
        assert [str(m) for m in messages] == ["one", "batch-0", "batch-1", "batch-2"]
        assert [m.sequence_number for m in messages] == [1, 2, 3, 4]
        assert messages[0].application_properties == {b"kind": b"single"}
        assert all(m.delivery_count == 0 for m in messages)
        assert messages[0].enqueued_time_utc == _utc(now)
        assert messages[0].locked_until_utc == _utc(now + LOCK_DURATION)
        assert len({m.lock_token for m in messages}) == 4
        for message in messages:
            receiver.complete_message(message)
    assert broker.queue("orders").depth == 0


def test_abandon_redelivers_with_delivery_count(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("retry me"))
    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        (first,) = receiver.receive_messages(max_wait_time=5)
        receiver.abandon_message(first)
        (again,) = receiver.receive_messages(max_wait_time=5)
        assert str(again) == "retry me"
        assert again.delivery_count == 1
        assert again.sequence_number == first.sequence_number
        assert again.lock_token != first.lock_token
        receiver.complete_message(again)
    assert broker.queue("orders").depth == 0


def test_dead_letter_then_read_the_dead_letter_queue(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("poison", application_properties={"id": 7}))
    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        (message,) = receiver.receive_messages(max_wait_time=5)
        receiver.dead_letter_message(message, reason="bad-format", error_description="no customer id")
    assert broker.queue("orders").depth == 0
    assert broker.queue("orders/$DeadLetterQueue").depth == 1
    with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER, prefetch_count=10) as dlq:
        (dead,) = dlq.receive_messages(max_wait_time=5)
        assert str(dead) == "poison"
        assert dead.dead_letter_reason == "bad-format"
        assert dead.dead_letter_error_description == "no customer id"
        assert dead.dead_letter_source == "orders"
        assert dead.application_properties[b"id"] == 7
        dlq.complete_message(dead)
    assert broker.queue("orders/$DeadLetterQueue").depth == 0


def test_max_delivery_count_dead_letters_with_the_service_bus_reason(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient
) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("flaky"))
    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        for _attempt in range(3):  # max_delivery_count=3 in conftest
            (message,) = receiver.receive_messages(max_wait_time=5)
            receiver.abandon_message(message)
    with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER, prefetch_count=10) as dlq:
        (dead,) = dlq.receive_messages(max_wait_time=5)
        assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
        assert dead.delivery_count == 3
    assert broker.queue("orders").depth == 0


def test_defer_then_receive_by_sequence_number(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage("later"), ServiceBusMessage("now")])
    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        later, now = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        receiver.defer_message(later)
        receiver.complete_message(now)
        assert receiver.receive_messages(max_wait_time=0.3) == []  # deferred: not delivered again
        (deferred,) = receiver.receive_deferred_messages([later.sequence_number])
        assert str(deferred) == "later"
        assert deferred.lock_token is not None
        receiver.complete_message(deferred)
        with pytest.raises(ServiceBusError):
            receiver.receive_deferred_messages([later.sequence_number])  # completed: gone
    assert broker.queue("orders").depth == 0


def test_peek_sees_locked_messages_without_locking(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        (locked,) = receiver.receive_messages(max_wait_time=5)
        peeked = receiver.peek_messages(max_message_count=10, sequence_number=1)
        assert [(str(m), m.sequence_number) for m in peeked] == [("m0", 1), ("m1", 2), ("m2", 3)]
        assert receiver.peek_messages(max_message_count=5, sequence_number=3)[0].sequence_number == 3
        assert receiver.peek_messages(max_message_count=5, sequence_number=9) == []
        receiver.complete_message(locked)
    snapshot = broker.queue("orders")
    assert (snapshot.depth, snapshot.acquired) == (2, 0)


def test_schedule_and_cancel_on_the_manual_clock(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    at = _utc(clock.now() + 30)
    with client.get_queue_sender("orders") as sender:
        kept, cancelled = sender.schedule_messages([ServiceBusMessage("kept"), ServiceBusMessage("cancelled")], at)
        sender.cancel_scheduled_messages(cancelled)
    assert broker.queue("orders").depth == 0
    broker.clock.advance(29)
    assert broker.queue("orders").depth == 0
    broker.clock.advance(1)
    assert [m.message.body for m in broker.queue("orders").messages] == [b"kept"]
    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        (message,) = receiver.receive_messages(max_wait_time=5)
        assert message.sequence_number == kept
        assert message.scheduled_enqueue_time_utc == at
        receiver.complete_message(message)


def test_schedule_and_cancel_on_a_topic(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    """A topic numbers nothing itself: the scheduler gives its messages their own numbers to cancel by."""
    at = _utc(clock.now() + 30)
    with client.get_topic_sender("events") as sender:
        kept, cancelled = sender.schedule_messages([ServiceBusMessage("kept"), ServiceBusMessage("cancelled")], at)
        assert kept != cancelled
        sender.cancel_scheduled_messages(cancelled)
    broker.clock.advance(30)
    for subscription in ("audit", "billing"):
        assert [m.message.body for m in broker.queue(f"events/Subscriptions/{subscription}").messages] == [b"kept"]


def test_lock_renewal_and_expiry_on_the_manual_clock(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("slow work"))
    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        (message,) = receiver.receive_messages(max_wait_time=5)
        broker.clock.advance(LOCK_DURATION / 2)
        renewed = receiver.renew_message_lock(message)
        assert renewed == _utc(clock.now() + LOCK_DURATION)
        broker.clock.advance(LOCK_DURATION * 0.9)  # past the first lock, inside the renewed one
        assert broker.queue("orders").acquired == 1
        broker.clock.advance(LOCK_DURATION * 0.2)  # the renewed lock is over: the message is back
        with pytest.raises(MessageLockLostError):
            receiver.complete_message(message)
        (again,) = receiver.receive_messages(max_wait_time=5)
        assert again.delivery_count == 1
        receiver.complete_message(again)
    assert broker.queue("orders").depth == 0


def test_receive_and_delete(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    with client.get_queue_receiver(
        "orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, prefetch_count=10
    ) as receiver:
        messages = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        assert [(str(m), m.sequence_number) for m in messages] == [("a", 1), ("b", 2)]
    assert broker.queue("orders").depth == 0


def test_topic_with_two_subscriptions(broker: minibroker.ThreadedBroker, client: ServiceBusClient) -> None:
    with client.get_topic_sender("events") as sender:
        sender.send_messages([ServiceBusMessage("created"), ServiceBusMessage("paid")])
    for name in ("audit", "billing"):
        with client.get_subscription_receiver("events", name, prefetch_count=10) as receiver:
            messages = receiver.receive_messages(max_message_count=2, max_wait_time=5)
            assert [str(m) for m in messages] == ["created", "paid"]
            for message in messages:
                receiver.complete_message(message)
    assert broker.queue("events/Subscriptions/audit").depth == 0
    assert broker.queue("events/Subscriptions/billing").depth == 0


def test_unknown_management_operation_answers_not_implemented(client: ServiceBusClient) -> None:
    from azure.servicebus._common import mgmt_handlers

    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        with pytest.raises(ServiceBusError, match="not emulated"):
            receiver._mgmt_request_response(b"com.microsoft:get-entity-statistics", {}, mgmt_handlers.default, timeout=5)


def test_plain_amqp_clients_of_the_same_broker_are_unaffected(broker: minibroker.ThreadedBroker) -> None:
    """Only connections that authenticated through $cbs get Service Bus semantics."""
    from proton.utils import BlockingConnection

    with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as sb:
        with sb.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage(b"to proton"))
    connection = BlockingConnection(broker.url, timeout=5)
    try:
        receiver = connection.create_receiver("orders")
        delivered = receiver.receive(timeout=5)
        assert bytes(delivered.body) == b"to proton"
        assert "x-opt-sequence-number" not in (delivered.annotations or {})
        receiver.accept()
    finally:
        connection.close()


def test_sessions_lock_to_one_receiver_and_keep_state(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages([
            ServiceBusMessage("a1", session_id="a"), ServiceBusMessage("b1", session_id="b"),
            ServiceBusMessage("a2", session_id="a"),
        ])  # fmt: skip
    with client.get_queue_receiver("orders", session_id="a", prefetch_count=10) as receiver:
        messages = receiver.receive_messages(max_message_count=3, max_wait_time=2)
        assert [(str(m), m.session_id) for m in messages] == [("a1", "a"), ("a2", "a")]
        with pytest.raises(SessionCannotBeLockedError):
            with client.get_queue_receiver("orders", session_id="a", prefetch_count=10) as rival:
                rival.receive_messages(max_wait_time=1)
        session = receiver.session
        session.set_state(b"step 2")
        assert session.get_state() == b"step 2"
        assert session.renew_lock() == _utc(clock.now() + LOCK_DURATION)
        for message in messages:
            receiver.complete_message(message)
    with client.get_queue_receiver("orders", session_id=NEXT_AVAILABLE_SESSION, prefetch_count=10) as receiver:
        assert receiver.session.session_id == "b"
        (message,) = receiver.receive_messages(max_wait_time=2)
        assert str(message) == "b1"
        receiver.complete_message(message)
    with client.get_queue_receiver("orders", session_id="a", prefetch_count=10) as receiver:
        assert receiver.session.get_state() == b"step 2"  # kept after the first receiver let go
    assert broker.queue("orders").depth == 0


def test_the_sdk_recovers_from_a_dropped_connection(broker: minibroker.ThreadedBroker) -> None:
    fault = broker.faults.drop_connection(address="orders", times=1)
    options = {**CLIENT_OPTIONS, "retry_total": 3, "retry_backoff_factor": 0.01, "retry_mode": "fixed"}
    with ServiceBusClient.from_connection_string(connection_string(broker.port), **options) as sb:
        with sb.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("survives"))  # dropped on the first try, sent again
        assert fault.fired
        with sb.get_queue_receiver("orders", prefetch_count=10) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=5)
            assert str(message) == "survives"
            receiver.complete_message(message)
    assert broker.queue("orders").depth == 0
    assert broker.statistics().connections_total >= 2


def test_a_subscription_of_a_name_already_used_by_a_queue_is_refused_with_the_reason(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient
) -> None:
    with client.get_queue_sender("jobs") as sender:  # auto-creates the queue "jobs"
        sender.send_messages(ServiceBusMessage("x"))
    with pytest.raises(ServiceBusError, match="declare the topic"):
        with client.get_subscription_receiver("jobs", "audit", prefetch_count=10) as receiver:
            receiver.receive_messages(max_wait_time=1)
    assert broker.errors() == []
