"""kombu (over py-amqp) under injected 0-9-1 faults: what kombu raises, as it raises it against
RabbitMQ 3.10 (a deleted queue's ``basic.cancel``, a nacked confirm, a permission refusal, a
lost socket, a requeued delivery)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import amqp
import pytest
from kombu import Connection, Consumer, Producer, Queue

import minibroker

pytestmark = pytest.mark.interop

TIMEOUT = 10
JOBS = Queue("jobs", routing_key="jobs")


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker() as running:
        running.declare_queue("jobs")
        yield running
        assert running.errors() == []


@pytest.fixture
def connection(broker: minibroker.ThreadedBroker) -> Iterator[Connection]:
    with Connection(broker.amqp091_url, connect_timeout=TIMEOUT, transport_options={"confirm_publish": True}) as opened:
        opened.connect()
        yield opened


def test_cancel_consumer_raises_consumer_cancelled(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    broker.publish("jobs", b"job 1")
    fault = broker.faults.cancel_consumer(address="jobs")
    got: list[Any] = []
    with Consumer(connection, [JOBS], callbacks=[lambda body, message: got.append(message)], prefetch_count=1):
        with pytest.raises(amqp.exceptions.ConsumerCancelled):  # py-amqp's answer to basic.cancel
            for _ in range(TIMEOUT * 10):
                connection.drain_events(timeout=0.1)
    assert fault.fired == 1 and len(got) == 1


def test_reject_publish_raises_message_nacked(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    broker.faults.reject_publish(address="jobs")
    producer = Producer(connection.channel())
    with pytest.raises(amqp.exceptions.MessageNacked):
        producer.publish(b"refused", routing_key="jobs", retry=False)
    producer.publish(b"retried", routing_key="jobs", retry=False)
    assert broker.queue("jobs").bodies == [b"retried"]


def test_refuse_declare_raises_access_refused(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    broker.faults.refuse_declare(address="orders")
    with pytest.raises(amqp.exceptions.AccessRefused) as refused:
        Queue("orders", routing_key="orders", durable=True)(connection.channel()).declare()
    assert refused.value.reply_text == "ACCESS_REFUSED - access to queue 'orders' in vhost '/' refused for user 'guest'"


def test_drop_connection_is_a_lost_socket_and_release_redelivers(
    broker: minibroker.ThreadedBroker, connection: Connection
) -> None:
    broker.publish("jobs", b"job 1")
    broker.faults.drop_connection(address="jobs")
    with Consumer(connection, [JOBS], callbacks=[lambda body, message: None], prefetch_count=1):
        with pytest.raises(connection.connection_errors):
            for _ in range(TIMEOUT * 10):
                connection.drain_events(timeout=0.1)
    broker.faults.release(address="jobs")
    redelivered: list[bool] = []
    with Connection(broker.amqp091_url, connect_timeout=TIMEOUT) as again:

        def on_message(body: Any, message: Any) -> None:
            redelivered.append(message.delivery_info["redelivered"])
            message.ack()

        with Consumer(again, [JOBS], callbacks=[on_message], prefetch_count=1):
            while len(redelivered) < 2:
                again.drain_events(timeout=TIMEOUT)
    # Back after the lost connection (redelivered), then requeued by the release (redelivered again).
    assert redelivered == [True, True]
    assert [firing.kind for firing in broker.faults.history] == ["drop_connection", "release"]
    assert broker.queue("jobs").depth == 0
