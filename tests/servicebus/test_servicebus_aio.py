"""The ``azure.servicebus.aio`` SDK against minibroker's Service Bus layer."""

from __future__ import annotations

import asyncio

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.aio import ServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage
from servicebus_helpers import CLIENT_OPTIONS, LOCK_DURATION

import minibroker
from minibroker.servicebus import connection_string

pytestmark = pytest.mark.interop


def test_aio_send_receive_complete_and_dead_letter(broker: minibroker.ThreadedBroker) -> None:
    async def scenario() -> tuple[list[str], list[int], str | None]:
        async with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as sb:
            async with sb.get_queue_sender("orders") as sender:
                await sender.send_messages([ServiceBusMessage("ok"), ServiceBusMessage("poison")])
            async with sb.get_queue_receiver("orders", prefetch_count=10) as receiver:
                ok, poison = await receiver.receive_messages(max_message_count=2, max_wait_time=5)
                await receiver.complete_message(ok)
                await receiver.dead_letter_message(poison, reason="unreadable")
                bodies = [str(ok), str(poison)]
                numbers = [ok.sequence_number or 0, poison.sequence_number or 0]
            async with sb.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER, prefetch_count=10) as dlq:
                (dead,) = await dlq.receive_messages(max_wait_time=5)
                await dlq.complete_message(dead)
                return bodies, numbers, dead.dead_letter_reason

    bodies, numbers, reason = asyncio.run(scenario())
    assert bodies == ["ok", "poison"]
    assert numbers == [1, 2]
    assert reason == "unreadable"
    assert broker.queue("orders").depth == 0
    assert broker.queue("orders/$DeadLetterQueue").depth == 0


def test_aio_peek_defer_and_receive_deferred(broker: minibroker.ThreadedBroker) -> None:
    async def scenario() -> tuple[list[int], str]:
        async with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as sb:
            async with sb.get_queue_sender("orders") as sender:
                await sender.send_messages(ServiceBusMessage("later"))
            async with sb.get_queue_receiver("orders", prefetch_count=10) as receiver:
                (message,) = await receiver.receive_messages(max_wait_time=5)
                await receiver.defer_message(message)
                peeked = await receiver.peek_messages(max_message_count=5, sequence_number=1)
                (deferred,) = await receiver.receive_deferred_messages([message.sequence_number or 0])
                await receiver.complete_message(deferred)
                return [m.sequence_number or 0 for m in peeked], str(deferred)

    peeked, body = asyncio.run(scenario())
    assert peeked == [1]
    assert body == "later"
    assert broker.queue("orders").depth == 0


def test_aio_annotated_message_with_delivery_annotations(broker: minibroker.ThreadedBroker) -> None:
    # The SDK encodes delivery-annotations after the body (the real service takes that).
    async def scenario() -> tuple[object, str | None]:
        async with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as sb:
            async with sb.get_queue_sender("orders") as sender:
                await sender.send_messages(
                    AmqpAnnotatedMessage(value_body=[1, 2], delivery_annotations={"x-da": "hop"}, properties={"message_id": "v"})
                )
            async with sb.get_queue_receiver("orders", prefetch_count=10) as receiver:
                (message,) = await receiver.receive_messages(max_wait_time=5)
                await receiver.complete_message(message)
                return message.raw_amqp_message.body, message.message_id

    assert asyncio.run(scenario()) == ([1, 2], "v")
    assert broker.queue("orders").depth == 0


def test_aio_session_lock_renewal_keeps_session_messages_settleable(
    broker: minibroker.ThreadedBroker, clock: minibroker.ManualClock
) -> None:
    async def scenario() -> tuple[list[object], list[str]]:
        async with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as sb:
            async with sb.get_queue_sender("orders") as sender:
                await sender.send_messages([ServiceBusMessage(f"m{i}", session_id="s") for i in range(2)])
            sessions = [s async for s in sb.list_queue_sessions("orders")]
            async with sb.get_queue_receiver("orders", session_id="s", prefetch_count=10) as receiver:
                messages = await receiver.receive_messages(max_message_count=2, max_wait_time=5)
                for _ in range(3):
                    clock.advance(LOCK_DURATION * 0.7)
                    await receiver.session.renew_lock()
                for message in messages:
                    await receiver.complete_message(message)
                return [m.locked_until_utc for m in messages], sessions

    until, sessions = asyncio.run(scenario())
    assert until == [None, None]
    assert sessions == ["s"]
    assert broker.queue("orders").depth == 0
