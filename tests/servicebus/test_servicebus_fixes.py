"""What the official ``azure-servicebus`` samples tripped on (sync SDK), each as the service behaves."""

from __future__ import annotations

import datetime
import threading

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.exceptions import OperationTimeoutError, SessionLockLostError
from servicebus_helpers import CLIENT_OPTIONS, LOCK_DURATION

import minibroker
from minibroker.servicebus import ServiceBusOptions, connection_string

pytestmark = pytest.mark.interop


def _utc(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(round(seconds, 3), datetime.UTC)


def test_an_annotated_message_with_delivery_annotations_is_sent_and_received(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient
) -> None:
    # The SDK encodes delivery-annotations after the body (the real service takes that).
    message = AmqpAnnotatedMessage(
        value_body={"order": 7},
        header={"priority": 5},
        annotations={"x-custom": "ma"},
        delivery_annotations={"x-da": "hop"},
        properties={"subject": "s", "message_id": "m-7"},
        application_properties={"kind": "value"},
    )
    with client.get_queue_sender("orders") as sender:
        sender.send_messages(message)
        sender.send_messages(AmqpAnnotatedMessage(data_body=[b"one", b"two"], delivery_annotations={"x-da": 1}))
    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        first, second = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        raw = first.raw_amqp_message
        assert raw.body == {b"order": 7}
        assert raw.header is not None and raw.header.priority == 5
        assert raw.annotations is not None and raw.annotations[b"x-custom"] == b"ma"
        assert first.message_id == "m-7" and first.subject == "s"
        assert first.application_properties == {b"kind": b"value"}
        assert list(second.raw_amqp_message.body) == [b"one", b"two"]
        receiver.complete_message(first)
        receiver.complete_message(second)
    assert broker.queue("orders").depth == 0


def test_session_messages_are_held_by_the_session_lock_while_it_is_renewed(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage("s1", session_id="a"), ServiceBusMessage("s2", session_id="a")])
    with client.get_queue_receiver("orders", session_id="a", prefetch_count=10) as receiver:
        messages = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        assert [m.locked_until_utc for m in messages] == [None, None]
        for _ in range(3):  # three renewals take the session past two message lock durations
            clock.advance(LOCK_DURATION * 0.7)
            assert receiver.session.renew_lock() == _utc(clock.now() + LOCK_DURATION)
        for message in messages:
            receiver.complete_message(message)
    assert broker.queue("orders").depth == 0


def test_a_session_lock_that_is_not_renewed_expires_and_frees_the_session(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("s1", session_id="a"))
    with client.get_queue_receiver("orders", session_id="a", prefetch_count=10) as receiver:
        (message,) = receiver.receive_messages(max_wait_time=5)
        clock.advance(LOCK_DURATION + 1)
        broker.wait_for(lambda b: b.queue("orders").acquired == 0, timeout=5)
        with pytest.raises(SessionLockLostError):
            receiver.complete_message(message)
    with client.get_queue_receiver("orders", session_id="a", prefetch_count=10) as receiver:
        (again,) = receiver.receive_messages(max_wait_time=5)
        assert str(again) == "s1" and again.delivery_count == 1
        receiver.complete_message(again)
    assert broker.queue("orders").depth == 0


def test_the_broker_gives_a_message_id_when_the_sender_sets_none(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient
) -> None:
    with client.get_topic_sender("events") as sender:
        sender.send_messages(AmqpAnnotatedMessage(value_body="no id"))  # (a ServiceBusMessage gets one from the SDK)
    ids = []
    for subscription in ("audit", "billing"):
        with client.get_subscription_receiver("events", subscription, prefetch_count=10) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=5)
            ids.append(message.message_id)
            receiver.complete_message(message)
    assert isinstance(ids[0], str) and len(ids[0]) == 32
    assert ids[0] == ids[1]  # stamped once, when the topic took it
    with client.get_queue_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage("kept", message_id="mine"), AmqpAnnotatedMessage(data_body=b"given")])
    with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
        kept, given = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        assert kept.message_id == "mine"
        assert given.message_id not in (None, "mine", ids[0])


def test_list_sessions_names_sessions_with_messages_or_state(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    assert list(client.list_queue_sessions("orders")) == []
    with client.get_queue_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage("x", session_id=s) for s in ("b", "a", "b")])
    assert sorted(client.list_queue_sessions("orders")) == ["a", "b"]
    before = _utc(clock.now())
    clock.advance(1)
    with client.get_queue_receiver("orders", session_id="a", prefetch_count=10) as receiver:
        receiver.session.set_state(b"seen")
    assert list(client.list_queue_sessions("orders", state_updated_after=before)) == ["a"]
    assert list(client.list_queue_sessions("orders", state_updated_after=_utc(clock.now() + 1))) == []


def _advancing(clock: minibroker.ManualClock, done: threading.Event, step: float) -> threading.Thread:
    """Move the broker's clock on while a blocking SDK call waits on it (bounded: 1000 steps)."""

    def run() -> None:
        for _ in range(1000):
            if done.wait(0.05):
                return
            clock.advance(step)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _session_attach_arrived(broker: minibroker.ThreadedBroker) -> bool:
    """Whether a receiver's attach asking for any session (a null session filter) reached the broker."""
    for record in broker.frames():
        source = getattr(record.performative, "source", None)
        filters = getattr(source, "filter", None) or {}
        if record.direction == "in" and record.name == "attach" and any(str(k).endswith("session-filter") for k in filters):
            return True
    return False


def test_next_available_session_waits_for_a_session_to_get_messages(clock: minibroker.ManualClock) -> None:
    got: list[str | None] = []
    with minibroker.ThreadedBroker(clock=clock, servicebus=ServiceBusOptions(), frame_log=500) as broker:
        with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as client:

            def receive() -> None:
                with client.get_queue_receiver("orders", session_id=NEXT_AVAILABLE_SESSION, prefetch_count=10) as receiver:
                    got.append(receiver.session.session_id)
                    (message,) = receiver.receive_messages(max_wait_time=5)
                    receiver.complete_message(message)

            waiter = threading.Thread(target=receive, daemon=True)
            waiter.start()
            broker.wait_for(_session_attach_arrived, timeout=10)  # held: no session has messages yet
            assert not got
            with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as other:
                with other.get_queue_sender("orders") as sender:
                    sender.send_messages(ServiceBusMessage("hello", session_id="late"))
            waiter.join(timeout=20)
            assert not waiter.is_alive()
        assert got == ["late"]
        assert broker.queue("orders").depth == 0


def test_a_send_to_a_topic_wakes_a_subscription_receiver_waiting_for_a_session(clock: minibroker.ManualClock) -> None:
    """The send reaches the topic's subscription queues, so those are where a freed session is looked for."""
    got: list[str | None] = []
    options = ServiceBusOptions(topics={"events": ("audit",)})
    with minibroker.ThreadedBroker(clock=clock, servicebus=options, frame_log=500) as broker:
        with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as client:

            def receive() -> None:
                with client.get_subscription_receiver(
                    "events", "audit", session_id=NEXT_AVAILABLE_SESSION, prefetch_count=10
                ) as receiver:
                    got.append(receiver.session.session_id)
                    (message,) = receiver.receive_messages(max_wait_time=5)
                    receiver.complete_message(message)

            waiter = threading.Thread(target=receive, daemon=True)
            waiter.start()
            broker.wait_for(_session_attach_arrived, timeout=10)  # held: no session has messages yet
            assert not got
            with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as other:
                with other.get_topic_sender("events") as sender:
                    sender.send_messages(ServiceBusMessage("hello", session_id="late"))
            waiter.join(timeout=20)
            assert not waiter.is_alive()
        assert got == ["late"]
        assert broker.queue("events/Subscriptions/audit").depth == 0


def test_next_available_session_times_out_on_the_broker_clock(
    broker: minibroker.ThreadedBroker, client: ServiceBusClient, clock: minibroker.ManualClock
) -> None:
    done = threading.Event()
    ticking = _advancing(clock, done, 5.0)  # the broker's wait (60 s without a client timeout) passes
    try:
        with pytest.raises(OperationTimeoutError):
            with client.get_queue_receiver("orders", session_id=NEXT_AVAILABLE_SESSION, prefetch_count=10) as receiver:
                receiver.receive_messages(max_wait_time=1)
    finally:
        done.set()
        ticking.join(timeout=5)
