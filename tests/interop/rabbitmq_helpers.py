"""Helpers for the tests with RabbitMQ's own AMQP 1.0 client (rabbitmq-amqp-python-client).

The client's consumers run a blocking loop (``consumer.run()``) that a
message handler ends by raising an exception that is not an ``Exception``
(the client's own tests do the same with a ``BaseException``).  From 1.0 a
consumer takes messages only through a handler (``consume()`` is gone), and
the handler first runs inside ``run()``: a ``Done`` raised by
``connection.consumer(...)`` would mean messages came before it returned.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rabbitmq_amqp_python_client import (
    AMQPMessagingHandler,
    AsyncConnection,
    Connection,
    Consumer,
    Converter,
    Event,
    Message,
)


class Done(BaseException):
    """Raised by a handler to end ``consumer.run()`` once it has what it waited for."""


class Collect(AMQPMessagingHandler):  # type: ignore[misc]
    """Accepts (unless ``settle`` is False) and keeps ``count`` messages, then ends the consumer's loop."""

    def __init__(self, count: int, settle: bool = True) -> None:
        super().__init__()
        self.count = count
        self.settle = settle
        self.messages: list[Message] = []
        self.annotations: list[dict[str, Any]] = []

    def on_amqp_message(self, event: Event) -> None:
        self.messages.append(event.message)
        self.annotations.append(dict(event.message.annotations or {}))
        if self.settle:
            self.delivery_context.accept(event)
        if len(self.messages) >= self.count:
            raise Done()

    @property
    def bodies(self) -> list[str]:
        return [Converter.bytes_to_string(m.body) for m in self.messages]


def run(consumer: Consumer, handler: Collect) -> Collect:
    """Run ``consumer``'s loop until ``handler`` has its messages; then close the consumer."""
    try:
        consumer.run()
    except Done:
        pass
    finally:
        consumer.close()
    return handler


def consume(connection: Connection, address: str, count: int, handler: Collect | None = None, **options: Any) -> Collect:
    """Consume ``count`` messages from ``address`` with a handler, as the client's examples do."""
    if handler is None:
        handler = Collect(count, settle=options.pop("settle", True))
    return run(connection.consumer(address, message_handler=handler, **options), handler)


def publish(connection: Connection, address: str, bodies: list[str]) -> list[Any]:
    """Publish each body to ``address``; the outcome of each (``remote_state``)."""
    publisher = connection.publisher(address)
    try:
        return [publisher.publish(Message(body=Converter.string_to_bytes(b))).remote_state for b in bodies]
    finally:
        publisher.close()


class Counting(AMQPMessagingHandler):  # type: ignore[misc]
    """Accepts messages; sets ``done`` (from the client's thread) when ``count`` have come."""

    def __init__(self, count: int, loop: asyncio.AbstractEventLoop, done: asyncio.Event) -> None:
        super().__init__()
        self.count = count
        self.loop = loop
        self.done = done
        self.bodies: list[str] = []

    def on_amqp_message(self, event: Event) -> None:
        self.bodies.append(Converter.bytes_to_string(event.message.body))
        self.delivery_context.accept(event)
        if len(self.bodies) == self.count:
            self.loop.call_soon_threadsafe(self.done.set)


async def consume_async(connection: AsyncConnection, address: str, count: int, **options: Any) -> list[str]:
    """The asyncio API's way: run the consumer as a task until ``count`` messages came; their bodies."""
    done = asyncio.Event()
    handler = Counting(count, asyncio.get_running_loop(), done)
    async with await connection.consumer(address, message_handler=handler, **options) as consumer:
        task = asyncio.create_task(consumer.run())
        await asyncio.wait_for(done.wait(), timeout=30)
        await consumer.stop_processing()
        await asyncio.wait_for(task, timeout=10)
    return handler.bodies
