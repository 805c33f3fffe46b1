"""RabbitMQ's client meets minibroker's attach and open answers as it meets RabbitMQ 4's.

Two orders the client's own tests rely on.  A consumer's handler first runs in
``consumer.run()``, after ``connection.consumer()`` returned: the broker writes
the attach answer before the first message (``tests/server/test_attach_write.py``
checks the writes), and the client from 1.0 sends its credit only once it has
read the answer (0.6.0 sent it with the attach and could read both together).
An ``open`` naming a virtual host the broker does not have is not answered (the
socket closes, as ``rabbit_amqp_reader`` does), so ``dial()`` raises the
client's ``ConnectionException`` at once instead of recovering forever from
what it takes for a dropped connection.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from rabbitmq_amqp_python_client import (
    AddressHelper,
    AMQPMessagingHandler,
    AsyncEnvironment,
    Connection,
    Environment,
    Event,
    QuorumQueueSpecification,
    StreamConsumerOptions,
    StreamSpecification,
)
from rabbitmq_amqp_python_client.qpid.proton import ConnectionException
from rabbitmq_helpers import Done, publish

import minibroker
from minibroker.rabbitmq import RabbitMQOptions, uri

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

#: Seconds a refused dial may take: RabbitMQ's refusal is prompt (the client's test passes in
#: its CI); a broker whose refusal the client takes for a dropped connection never returns.
REFUSAL_BOUND = 15.0


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(rabbitmq=RabbitMQOptions(vhosts=("/", "tenant-a"))) as running:
        yield running


@pytest.fixture
def connection(broker: minibroker.ThreadedBroker) -> Iterator[Connection]:
    environment = Environment(uri=uri(broker.port))
    connection = environment.connection()
    connection.dial()
    try:
        yield connection
    finally:
        environment.close()


class StopOnFirst(AMQPMessagingHandler):  # type: ignore[misc]
    """The client's test handlers' shape: accept, then end ``consumer.run()`` on the first message."""

    def __init__(self) -> None:
        super().__init__()
        self.offsets: list[Any] = []

    def on_amqp_message(self, event: Event) -> None:
        self.offsets.append((event.message.annotations or {}).get("x-stream-offset"))
        self.delivery_context.accept(event)
        raise Done()


def _consume_first(connection: Connection, address: str, **options: Any) -> StopOnFirst:
    """Attach a consumer to ``address`` holding messages; its handler must first run in ``run()``."""
    handler = StopOnFirst()
    consumer = connection.consumer(address, message_handler=handler, **options)  # raises Done if too early
    try:
        assert handler.offsets == [], "the handler ran before connection.consumer() returned"
        with pytest.raises(Done):
            consumer.run()
    finally:
        consumer.close()
    return handler


def test_a_consumer_is_returned_before_its_handler_runs(connection: Connection) -> None:
    management = connection.management()
    management.declare_queue(QuorumQueueSpecification(name="jobs"))
    address = AddressHelper.queue_address("jobs")
    for round_ in range(5):  # each attach meets ready messages and a flow in the same read
        publish(connection, address, [f"job {round_}.{i}" for i in range(10)])
        assert len(_consume_first(connection, address).offsets) == 1
    management.close()


def test_a_stream_consumer_from_offset_zero_is_returned_before_its_handler_runs(connection: Connection) -> None:
    # The client's test_stream_read_from_offset_zero, with the handler stopping at once.
    management = connection.management()
    management.declare_queue(StreamSpecification(name="events"))
    address = AddressHelper.queue_address("events")
    publish(connection, address, [f"event {i}" for i in range(10)])
    for _ in range(5):
        handler = _consume_first(connection, address, consumer_options=StreamConsumerOptions(offset_specification=0))
        assert handler.offsets == [0]
    management.close()


def _dial(address: str) -> BaseException | None:
    """Dial ``address`` with the client's default recovery, on a thread: what it raised within the bound."""
    outcome: list[BaseException | None] = []

    def dial() -> None:
        try:
            Environment(uri=address).connection().dial()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=dial, daemon=True)  # a hung dial must not hold the test run
    thread.start()
    thread.join(REFUSAL_BOUND)
    assert outcome, f"dial() still running after {REFUSAL_BOUND} s: the refusal was taken for a dropped connection"
    return outcome[0]


def test_an_unknown_virtual_host_fails_the_dial(broker: minibroker.ThreadedBroker) -> None:
    # The client's test_connection_vhost_not_exists: default recovery on, which retried forever
    # when the refusal was an open and a close.
    assert _dial(f"amqp://guest:guest@127.0.0.1:{broker.port}/tenant-a") is None
    refused = _dial(f"amqp://guest:guest@127.0.0.1:{broker.port}/elsewhere")
    assert isinstance(refused, ConnectionException)
    assert "connection aborted" in str(refused)  # the socket closed; no close frame was read
    assert broker.statistics().connections <= 1  # the refused one is gone (the tenant-a one may be closing)


def test_an_unknown_virtual_host_fails_the_async_dial(broker: minibroker.ThreadedBroker) -> None:
    # The client's test_async_connection_vhost_not_exists.
    async def dial() -> None:
        environment = AsyncEnvironment(uri=f"amqp://guest:guest@127.0.0.1:{broker.port}/elsewhere")
        connection = await environment.connection()
        await connection.dial()

    async def main() -> None:
        with pytest.raises(ConnectionException):
            await asyncio.wait_for(dial(), REFUSAL_BOUND)

    asyncio.run(main())
