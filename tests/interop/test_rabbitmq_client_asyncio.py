"""RabbitMQ's client's asyncio API (``AsyncEnvironment``) against minibroker, as its async examples use it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from rabbitmq_amqp_python_client import (
    AddressHelper,
    AsyncEnvironment,
    Converter,
    ExchangeSpecification,
    ExchangeToQueueBindingSpecification,
    ExchangeType,
    Message,
    OutcomeState,
    QuorumQueueSpecification,
    ValidationCodeException,
)
from rabbitmq_helpers import consume_async

import minibroker
from minibroker.rabbitmq import RabbitMQOptions, uri

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(rabbitmq=RabbitMQOptions()) as running:
        yield running


def test_getting_started_async(broker: minibroker.ThreadedBroker) -> None:
    async def main() -> list[str]:
        async with AsyncEnvironment(uri=uri(broker.port)) as environment:
            async with await environment.connection() as connection:
                async with await connection.management() as management:
                    await management.declare_exchange(ExchangeSpecification(name="test-exchange"))
                    await management.declare_queue(QuorumQueueSpecification(name="example-queue"))
                    bind_name = await management.bind(
                        ExchangeToQueueBindingSpecification(
                            source_exchange="test-exchange", destination_queue="example-queue", binding_key="routing-key"
                        )
                    )
                    address = AddressHelper.exchange_address("test-exchange", "routing-key")
                    async with await connection.publisher(address) as publisher:
                        assert await management.purge_queue("example-queue") == 0
                        for i in range(20):
                            status = await publisher.publish(Message(body=Converter.string_to_bytes(f"test message {i}")))
                            assert status.remote_state == OutcomeState.ACCEPTED
                    bodies = await consume_async(connection, AddressHelper.queue_address("example-queue"), 20)
                    await management.unbind(bind_name)
                    await management.delete_queue("example-queue")
                    await management.delete_exchange("test-exchange")
                    return bodies

    assert asyncio.run(main()) == [f"test message {i}" for i in range(20)]
    assert "example-queue" not in broker.queues()


def test_async_consume_and_management_errors(broker: minibroker.ThreadedBroker) -> None:
    async def main() -> list[str]:
        async with AsyncEnvironment(uri=uri(broker.port)) as environment:
            async with await environment.connection() as connection:
                async with await connection.management() as management:
                    await management.declare_exchange(ExchangeSpecification(name="x", exchange_type=ExchangeType.topic))
                    with pytest.raises(ValidationCodeException, match="ErrPreconditionFailed"):
                        await management.declare_exchange(ExchangeSpecification(name="x", exchange_type=ExchangeType.fanout))
                    with pytest.raises(ValidationCodeException, match="404"):
                        await management.queue_info("missing")
                    await management.declare_queue(QuorumQueueSpecification(name="jobs"))
                    async with await connection.publisher(AddressHelper.queue_address("jobs")) as publisher:
                        for i in range(5):
                            await publisher.publish(Message(body=Converter.string_to_bytes(f"job {i}")))
                    return await consume_async(connection, AddressHelper.queue_address("jobs"), 5)

    assert asyncio.run(main()) == [f"job {i}" for i in range(5)]
