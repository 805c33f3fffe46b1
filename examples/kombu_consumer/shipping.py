"""A kombu (AMQP 0-9-1) consumer that ships orders, in two versions: one with a classic bug.

For each message on ``orders`` (body ``{"order": id, "items": n}``) the consumer records a
shipment in its database and publishes a notice to ``shipped``, with publisher confirms; it
acknowledges the order only once the notice is confirmed.  Any connection or channel error
(a dropped connection, a closed channel, a cancelled consumer, a nacked publish) makes it
reconnect and carry on: the broker delivers what it had not acknowledged again, with
``redelivered`` set.

* :func:`forgetful` records every delivery it gets: an order delivered twice is shipped twice.
  With a well-behaved broker it is never delivered twice, so a happy-path test never notices.
* :func:`idempotent` ships an order only if the database has no shipment for it yet.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kombu import Connection, Consumer, Producer, Queue
from kombu.message import Message

#: The queues, declared by the consumer as RabbitMQ users do (durable, on the default exchange).
ORDERS = Queue("orders", routing_key="orders", durable=True)
SHIPPED = Queue("shipped", routing_key="shipped", durable=True)


class Shipments:
    """The consumer's database: one row per shipped order, in order."""

    def __init__(self) -> None:
        self.rows: list[str] = []

    def ship(self, order: str) -> None:
        self.rows.append(order)

    def has(self, order: str) -> bool:
        return order in self.rows


#: What a consumer does with one order: record it, then publish its notice (acknowledging is the loop's).
Handle = Callable[[dict[str, Any], Message, Producer, Shipments], None]


def forgetful(body: dict[str, Any], message: Message, notices: Producer, shipments: Shipments) -> None:
    shipments.ship(body["order"])  # BUG: a redelivered order is shipped again
    notices.publish({"shipped": body["order"]}, routing_key="shipped", declare=[SHIPPED], retry=False)


def idempotent(body: dict[str, Any], message: Message, notices: Producer, shipments: Shipments) -> None:
    if not shipments.has(body["order"]):  # a redelivered order is shipped once
        shipments.ship(body["order"])
    notices.publish({"shipped": body["order"]}, routing_key="shipped", declare=[SHIPPED], retry=False)


def _acking(handle: Handle, notices: Producer, shipments: Shipments) -> Callable[[dict[str, Any], Message], None]:
    def on_message(body: dict[str, Any], message: Message) -> None:
        handle(body, message, notices, shipments)
        message.ack()  # only once the notice is confirmed: until then a failure brings it back

    return on_message


def consume(url: str, handle: Handle, shipments: Shipments, *, until: Callable[[], bool], timeout: float = 10.0) -> int:
    """Consume ``orders`` until ``until()`` holds, reconnecting after errors; returns the reconnects."""
    reconnects = -1
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the consumer did not finish within {timeout} s ({reconnects} reconnects)")
        reconnects += 1
        connection = Connection(url, connect_timeout=timeout, transport_options={"confirm_publish": True})
        # py-amqp's nacked publish (MessageNacked) is among the recoverable ones only.
        errors = connection.connection_errors + connection.channel_errors + connection.recoverable_connection_errors
        try:
            with connection:
                on_message = _acking(handle, Producer(connection.channel()), shipments)
                with Consumer(connection, [ORDERS], callbacks=[on_message], prefetch_count=1, accept=["json"]):
                    while not until():
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"the consumer did not finish within {timeout} s ({reconnects} reconnects)")
                        try:
                            connection.drain_events(timeout=0.02)
                        except TimeoutError:  # nothing came: check until() again
                            pass
        except errors:
            continue  # the broker dropped or closed something: start again
    return max(reconnects, 0)
