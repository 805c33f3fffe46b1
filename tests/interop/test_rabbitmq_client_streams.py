"""RabbitMQ's client on streams (``x-queue-type: stream``): offsets, stream filters, timestamps.

What the client's stream examples do (declare a stream through /management,
publish to ``/queues/{stream}``, consume from an offset specification with
a message handler, filter by ``x-stream-filter-value``), against the
broker's stream node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from rabbitmq_amqp_python_client import (
    AddressHelper,
    AsyncEnvironment,
    Connection,
    Converter,
    Environment,
    ExchangeSpecification,
    ExchangeToQueueBindingSpecification,
    ExchangeType,
    Message,
    MessageProperties,
    OffsetSpecification,
    QueueType,
    StreamConsumerOptions,
    StreamFilterOptions,
    StreamSpecification,
    ValidationCodeException,
)
from rabbitmq_helpers import consume, consume_async, publish

import minibroker
from minibroker.rabbitmq import RabbitMQOptions, uri

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

STREAM = AddressHelper.queue_address("events")


@pytest.fixture
def clock() -> minibroker.ManualClock:
    return minibroker.ManualClock(start=datetime(2026, 1, 1, tzinfo=UTC).timestamp())


@pytest.fixture
def broker(clock: minibroker.ManualClock) -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(rabbitmq=RabbitMQOptions(), clock=clock) as running:
        yield running


@pytest.fixture
def connection(broker: minibroker.ThreadedBroker) -> Iterator[Connection]:
    environment = Environment(uri=uri(broker.port))
    connection = environment.connection()
    connection.dial()
    connection.management().declare_queue(
        StreamSpecification(name="events", max_len_bytes=10_000_000, max_age=timedelta(days=7))
    )
    try:
        yield connection
    finally:
        environment.close()


def offsets(received: object) -> list[int]:
    return [int(a["x-stream-offset"]) for a in received.annotations]  # type: ignore[attr-defined]


def test_stream_declared_through_management(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    management = connection.management()
    info = management.queue_info("events")
    assert (info.queue_type, info.message_count) == (QueueType.stream, 0)
    assert info.arguments["x-max-age"] == "604800s"
    assert broker.stream("events").count == 0
    publish(connection, STREAM, [f"e{i}" for i in range(3)])
    assert management.queue_info("events").message_count == 3
    with pytest.raises(ValidationCodeException, match="400"):
        management.purge_queue("events")  # RabbitMQ does not purge streams
    management.delete_queue("events")
    assert "events" not in broker.streams()


def test_read_from_offset_specifications(connection: Connection) -> None:
    publish(connection, STREAM, [f"e{i}" for i in range(10)])
    first = consume(connection, STREAM, 10, consumer_options=StreamConsumerOptions(offset_specification=OffsetSpecification.first))
    assert first.bodies == [f"e{i}" for i in range(10)] and offsets(first) == list(range(10))
    from_six = consume(connection, STREAM, 4, consumer_options=StreamConsumerOptions(offset_specification=6))
    assert offsets(from_six) == [6, 7, 8, 9]
    last = consume(connection, STREAM, 1, consumer_options=StreamConsumerOptions(offset_specification=OffsetSpecification.last))
    assert last.bodies == ["e9"]
    # Reading does not consume: the stream still holds everything.
    again = consume(connection, STREAM, 10, consumer_options=StreamConsumerOptions(offset_specification=OffsetSpecification.first))
    assert again.bodies == first.bodies


def test_read_from_a_point_in_time(broker: minibroker.ThreadedBroker, clock: minibroker.ManualClock, connection: Connection) -> None:
    publish(connection, STREAM, ["old"])
    clock.advance(3600)
    publish(connection, STREAM, ["new"])
    since = datetime.fromtimestamp(clock.now() - 60, tz=UTC)
    received = consume(connection, STREAM, 1, consumer_options=StreamConsumerOptions(offset_specification=since))
    assert received.bodies == ["new"]


def test_stream_filters(connection: Connection) -> None:
    publisher = connection.publisher(STREAM)
    for value in ("invoices", "orders", "invoices", None):
        annotations = {"x-stream-filter-value": value} if value is not None else {}
        publisher.publish(Message(body=Converter.string_to_bytes(str(value)), annotations=annotations))
    publisher.close()
    invoices = consume(
        connection,
        STREAM,
        2,
        consumer_options=StreamConsumerOptions(
            offset_specification=OffsetSpecification.first, filter_options=StreamFilterOptions(values=["invoices"])
        ),
    )
    assert invoices.bodies == ["invoices", "invoices"]
    with_unfiltered = consume(
        connection,
        STREAM,
        2,
        consumer_options=StreamConsumerOptions(
            offset_specification=OffsetSpecification.first,
            filter_options=StreamFilterOptions(values=["orders"], match_unfiltered=True),
        ),
    )
    assert with_unfiltered.bodies == ["orders", "None"]


def test_streams_async(broker: minibroker.ThreadedBroker) -> None:
    async def main() -> list[str]:
        async with AsyncEnvironment(uri=uri(broker.port)) as environment:
            async with await environment.connection() as connection:
                async with await connection.management() as management:
                    await management.declare_queue(StreamSpecification(name="audit"))
                async with await connection.publisher(AddressHelper.queue_address("audit")) as publisher:
                    for i in range(5):
                        await publisher.publish(Message(body=Converter.string_to_bytes(f"a{i}")))
                return await consume_async(
                    connection,
                    AddressHelper.queue_address("audit"),
                    5,
                    consumer_options=StreamConsumerOptions(offset_specification=OffsetSpecification.first),
                )

    assert asyncio.run(main()) == [f"a{i}" for i in range(5)]


def test_an_exchange_routes_to_a_stream(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    management = connection.management()
    management.declare_exchange(ExchangeSpecification(name="fan", exchange_type=ExchangeType.fanout))
    management.bind(ExchangeToQueueBindingSpecification(source_exchange="fan", destination_queue="events"))
    publish(connection, AddressHelper.exchange_address("fan", "any"), ["through the exchange"])
    received = consume(connection, STREAM, 1, consumer_options=StreamConsumerOptions(offset_specification=OffsetSpecification.first))
    assert received.bodies == ["through the exchange"]
    assert received.annotations[0]["x-exchange"] == "fan" and received.annotations[0]["x-stream-offset"] == 0


def publish_fruit(connection: Connection) -> None:
    publisher = connection.publisher(STREAM)
    for i in range(4):
        publisher.publish(Message(body=Converter.string_to_bytes(f"apple: {i}")))
    for i in range(3):
        publisher.publish(
            Message(
                body=Converter.string_to_bytes(f"the_right_one {i}"),
                subject=f"something_in_the_filter_{i}",
                application_properties={"a_in_the_filter_key": "a_in_the_filter_value"},
            )
        )
    publisher.close()


def test_sql_filter(connection: Connection) -> None:
    publish_fruit(connection)
    sql = "properties.subject LIKE '%in_the_filter%' AND a_in_the_filter_key = 'a_in_the_filter_value'"
    received = consume(
        connection,
        STREAM,
        3,
        consumer_options=StreamConsumerOptions(
            offset_specification=OffsetSpecification.first, filter_options=StreamFilterOptions(sql=sql)
        ),
    )
    assert received.bodies == [f"the_right_one {i}" for i in range(3)]


def test_properties_and_application_properties_filters(connection: Connection) -> None:
    publish_fruit(connection)
    received = consume(
        connection,
        STREAM,
        1,
        consumer_options=StreamConsumerOptions(
            offset_specification=OffsetSpecification.first,
            filter_options=StreamFilterOptions(
                message_properties=MessageProperties(subject="something_in_the_filter_2"),
                application_properties={"a_in_the_filter_key": "a_in_the_filter_value"},
            ),
        ),
    )
    assert received.bodies == ["the_right_one 2"]
