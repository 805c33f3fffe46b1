"""Helpers for the tests with RabbitMQ's own AMQP 1.0 client (rabbitmq-amqp-python-client).

The client's consumers run a blocking loop (``consumer.run()``) that a
message handler ends by raising an exception that is not an ``Exception``
(the client's own tests do the same with a ``BaseException``).
"""

from __future__ import annotations

from typing import Any

from rabbitmq_amqp_python_client import AMQPMessagingHandler, Connection, Converter, Event, Message


class Done(BaseException):
    """Raised by a handler to end ``consumer.run()`` once it has what it waited for."""


class Collect(AMQPMessagingHandler):  # type: ignore[misc]
    """Accepts (unless pre-settled) and keeps up to ``count`` messages, then ends the consumer's loop."""

    def __init__(self, count: int, settle: bool = True) -> None:
        super().__init__()
        self.count = count
        self.settle = settle
        self.messages: list[Message] = []
        self.annotations: list[dict[str, Any]] = []
        #: Set once the consumer exists: messages may arrive while it is being created.
        self.running = False

    def on_amqp_message(self, event: Event) -> None:
        self.messages.append(event.message)
        self.annotations.append(dict(event.message.annotations or {}))
        if self.settle:
            self.delivery_context.accept(event)
        if self.running and len(self.messages) >= self.count:
            raise Done()

    @property
    def bodies(self) -> list[str]:
        return [Converter.bytes_to_string(m.body) for m in self.messages]


def consume(connection: Connection, address: str, count: int, handler: Collect | None = None, **options: Any) -> Collect:
    """Consume ``count`` messages from ``address`` with a handler, as the client's examples do."""
    if handler is None:
        handler = Collect(count, settle=options.pop("settle", True))
    consumer = connection.consumer(address, message_handler=handler, **options)
    handler.running = True
    try:
        if len(handler.messages) < count:
            consumer.run()
    except Done:
        pass
    finally:
        consumer.close()
    return handler


def publish(connection: Connection, address: str, bodies: list[str]) -> list[Any]:
    """Publish each body to ``address``; the outcome of each (``remote_state``)."""
    publisher = connection.publisher(address)
    try:
        return [publisher.publish(Message(body=Converter.string_to_bytes(b))).remote_state for b in bodies]
    finally:
        publisher.close()
