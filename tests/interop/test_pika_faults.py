"""pika under injected faults: each 0-9-1 fault kind, and what pika reports, as from RabbitMQ 3.10.

Each test declares one fault on ``broker.faults`` (the same declarations as for AMQP 1.0) and
drives pika's ``BlockingConnection`` over a real socket into it.  The codes, texts and methods
asserted are what RabbitMQ 3.10 sends in the same situation (checked against it: an admin's
``close_connection``, a permission refusal, a deleted queue's ``basic.cancel``, a nack under
``x-overflow: reject-publish``, a memory alarm).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import (
    AMQPConnectionError,
    ChannelClosedByBroker,
    ConnectionClosedByBroker,
    NackError,
    StreamLostError,
)

import minibroker

pytestmark = pytest.mark.interop

TIMEOUT = 10.0


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker() as running:
        running.declare_queue("jobs")
        yield running
        assert running.errors() == []


def _connect(broker: minibroker.ThreadedBroker) -> pika.BlockingConnection:
    return pika.BlockingConnection(
        pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{broker.port}/%2F?blocked_connection_timeout={TIMEOUT}")
    )


@pytest.fixture
def connection(broker: minibroker.ThreadedBroker) -> Iterator[pika.BlockingConnection]:
    opened = _connect(broker)
    try:
        yield opened
    finally:
        if opened.is_open:
            opened.close()


def _pump(connection: pika.BlockingConnection, done: Any) -> None:
    """Process pika's events until ``done()`` (bounded: a missing frame fails, it does not hang)."""
    for _ in range(int(TIMEOUT / 0.02)):
        if done():
            return
        connection.process_data_events(time_limit=0.02)
    raise AssertionError("the expected frame never came")


def _consume(connection: pika.BlockingConnection, channel: BlockingChannel, count: int) -> list[tuple[Any, bytes]]:
    got: list[tuple[Any, bytes]] = []
    channel.basic_consume("jobs", lambda _ch, method, _props, body: got.append((method, body)))
    _pump(connection, lambda: len(got) >= count)
    return got


# ------------------------------------------------------------------ connection and channel


def test_drop_connection_on_a_delivery_is_a_lost_stream_and_the_job_comes_back(
    broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection
) -> None:
    broker.publish("jobs", b"job 1")
    fault = broker.faults.drop_connection(address="jobs")
    channel = connection.channel()
    with pytest.raises(StreamLostError):  # no connection.close: the socket just ends
        # The socket ends right after consume-ok and the delivery: pika may read the end while
        # it still waits in basic_consume, or later.
        channel.basic_consume("jobs", lambda *_: None)
        _pump(connection, lambda: False)
    assert fault.fired == 1
    [firing] = broker.faults.history
    assert (firing.kind, firing.address, firing.frame) == ("drop_connection", "jobs", "basic.deliver channel=1 delivery-tag=1")
    again = _connect(broker)
    [(method, body)] = _consume(again, again.channel(), 1)
    assert (body, method.redelivered) == (b"job 1", True)  # what the lost channel held, redelivered (§1.8)
    again.close()


def test_drop_connection_on_a_delivery_routed_by_another_connections_publish(
    broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection
) -> None:
    """The drop fires while the broker reads the publisher: the consumer's writer is woken for
    it, so the delivery queued before goes out, then the socket ends (a Celery worker runs the
    task, and its late ack cannot come).  Without that wake-up the delivery was lost with the
    connection whenever its writer next woke.

    What reached the consumer is read from pika's socket input, not from its callback: pika
    reads until the socket would block, so when the delivery and the end of the stream are
    both there it closes the connection without dispatching the delivery."""
    fault = broker.faults.drop_connection(address="jobs", link=lambda consumer_tag: True)
    received = bytearray()
    impl: Any = connection._impl  # noqa: SLF001 (pika's connection under the blocking adapter)
    on_data = impl._on_data_available

    def record(data: bytes) -> None:
        received.extend(data)
        on_data(data)

    impl._on_data_available = record
    channel = connection.channel()
    channel.basic_consume("jobs", lambda *_: None)
    publisher = _connect(broker)
    publisher.channel().basic_publish("", "jobs", b"job 1")
    with pytest.raises(StreamLostError):
        _pump(connection, lambda: False)
    assert fault.fired == 1
    assert b"job 1" in received  # the delivery's body frame reached the consumer before the end
    publisher.close()


def test_drop_connection_on_a_publish_loses_that_publish(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection) -> None:
    broker.faults.drop_connection(address="jobs", after=1)
    channel = connection.channel()
    channel.confirm_delivery()
    channel.basic_publish("", "jobs", b"first")
    with pytest.raises(AMQPConnectionError):
        channel.basic_publish("", "jobs", b"second")
    assert broker.queue("jobs").bodies == [b"first"]


def test_close_connection_is_320_connection_forced(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection) -> None:
    broker.publish("jobs", b"job 1")
    fault = broker.faults.close_connection(address="jobs")
    channel = connection.channel()
    with pytest.raises(ConnectionClosedByBroker) as closed:
        channel.basic_consume("jobs", lambda *_: None)
        _pump(connection, lambda: False)
    # RabbitMQ's words for an administrator's close are "CONNECTION_FORCED - <reason>".
    assert closed.value.reply_code == 320
    assert closed.value.reply_text == f"CONNECTION_FORCED - closed by {fault!r}"
    assert broker.queue("jobs").depth == 1  # back on the queue, for the next consumer


def test_close_channel_406_on_a_delivery_closes_only_that_channel(
    broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection
) -> None:
    broker.publish("jobs", b"job 1")
    broker.faults.close_channel(address="jobs", code=406, text="delivery acknowledgement on channel 1 timed out")
    channel = connection.channel()
    with pytest.raises(ChannelClosedByBroker) as closed:
        channel.basic_consume("jobs", lambda *_: None)
        _pump(connection, lambda: False)
    assert (closed.value.reply_code, closed.value.reply_text) == (
        406, "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out",
    )  # fmt: skip
    assert connection.is_open  # a soft error: the connection and its other channels go on
    [(method, body)] = _consume(connection, connection.channel(), 1)
    assert (body, method.redelivered) == (b"job 1", True)


def test_close_channel_on_a_publish_refuses_it(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection) -> None:
    fault = broker.faults.close_channel(address="jobs")
    channel = connection.channel()
    channel.confirm_delivery()
    with pytest.raises(ChannelClosedByBroker) as closed:
        channel.basic_publish("", "jobs", b"refused")
    assert closed.value.reply_code == 406
    assert closed.value.reply_text == f"PRECONDITION_FAILED - channel 1 closed by {fault!r}"
    assert broker.queue("jobs").depth == 0


def test_close_channel_with_320_closes_the_connection(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection) -> None:
    broker.faults.close_channel(address="jobs", code=320, text="broker forced connection closure with reason 'shutdown'")
    channel = connection.channel()
    with pytest.raises(ConnectionClosedByBroker) as closed:
        channel.basic_publish("", "jobs", b"x")
        _pump(connection, lambda: False)
    # RabbitMQ's text when it stops.
    assert (closed.value.reply_code, closed.value.reply_text) == (
        320, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'",
    )  # fmt: skip


# ------------------------------------------------------------------ consumers and deliveries


def test_cancel_consumer_sends_basic_cancel(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection) -> None:
    broker.publish("jobs", b"job 1")
    broker.publish("jobs", b"job 2")
    fault = broker.faults.cancel_consumer(address="jobs")
    channel = connection.channel()
    channel.basic_qos(prefetch_count=1)
    cancelled: list[str] = []
    got: list[tuple[Any, bytes]] = []
    tag = channel.basic_consume("jobs", lambda _ch, method, _props, body: got.append((method, body)))
    channel.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    _pump(connection, lambda: cancelled and got)
    assert cancelled == [tag] and fault.fired == 1  # basic.cancel, as for a deleted queue
    [(method, body)] = got
    channel.basic_ack(method.delivery_tag)  # the delivery stays the channel's to acknowledge
    connection.process_data_events(time_limit=0.2)
    assert broker.queue("jobs").bodies == [b"job 2"]  # no more deliveries to the cancelled consumer
    assert channel.is_open


def test_release_redelivers_with_redelivered_set(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection) -> None:
    broker.publish("jobs", b"job 1")
    fault = broker.faults.release(address="jobs")
    channel = connection.channel()
    got = _consume(connection, channel, 2)
    assert [(body, method.redelivered) for method, body in got] == [(b"job 1", False), (b"job 1", True)]
    for method, _body in got:
        channel.basic_ack(method.delivery_tag)  # the first tag's ack is no error (and does nothing)
    connection.process_data_events(time_limit=0.2)
    assert channel.is_open and fault.fired == 1
    assert broker.queue("jobs").depth == 0 and broker.queue("jobs").acquired == 0


def test_release_at_outcome_takes_the_ack_as_a_requeue(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection) -> None:
    broker.publish("jobs", b"job 1")
    broker.faults.release(address="jobs", at="outcome")
    channel = connection.channel()
    channel.basic_qos(prefetch_count=1)
    got: list[tuple[Any, bytes]] = []

    def on_message(ch: BlockingChannel, method: Any, _props: Any, body: bytes) -> None:
        got.append((method, body))
        ch.basic_ack(method.delivery_tag)

    channel.basic_consume("jobs", on_message)
    _pump(connection, lambda: len(got) >= 2)
    assert [(body, method.redelivered) for method, body in got] == [(b"job 1", False), (b"job 1", True)]
    connection.process_data_events(time_limit=0.2)
    assert broker.queue("jobs").depth == 0


# ------------------------------------------------------------------ publishing


def test_reject_publish_is_a_nack_under_confirms(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection) -> None:
    fault = broker.faults.reject_publish(address="jobs")
    channel = connection.channel()
    channel.confirm_delivery()
    with pytest.raises(NackError):  # basic.nack, as RabbitMQ answers a publish a full queue refuses
        channel.basic_publish("", "jobs", b"refused")
    channel.basic_publish("", "jobs", b"retried")
    assert fault.fired == 1 and broker.queue("jobs").bodies == [b"retried"]


def test_refuse_declare_is_403_in_rabbitmqs_words(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection) -> None:
    broker.faults.refuse_declare(address="orders")
    channel = connection.channel()
    with pytest.raises(ChannelClosedByBroker) as closed:
        channel.queue_declare("orders", durable=True)
    assert (closed.value.reply_code, closed.value.reply_text) == (
        403, "ACCESS_REFUSED - access to queue 'orders' in vhost '/' refused for user 'guest'",
    )  # fmt: skip
    connection.channel().queue_declare("orders", durable=True)  # fires once: the retry declares it
    assert "orders" in broker.queues()


def test_refuse_declare_of_an_exchange_with_406(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection) -> None:
    text = "inequivalent arg 'type' for exchange 'logs' in vhost '/': received 'topic' but current is 'direct'"
    broker.faults.refuse_declare(address="logs", code=406, text=text)
    with pytest.raises(ChannelClosedByBroker) as closed:
        connection.channel().exchange_declare("logs", "topic")
    assert (closed.value.reply_code, closed.value.reply_text) == (406, f"PRECONDITION_FAILED - {text}")


def test_block_publishers_blocks_then_unblocks(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection) -> None:
    blocked: list[str] = []
    unblocked: list[object] = []
    connection.add_on_connection_blocked_callback(lambda _conn, frame: blocked.append(frame.method.reason))
    connection.add_on_connection_unblocked_callback(lambda _conn, frame: unblocked.append(frame))
    fault = broker.faults.block_publishers(address="jobs", reason="low on memory", seconds=0.3)
    channel = connection.channel()
    channel.basic_publish("", "jobs", b"raises the alarm")
    _pump(connection, lambda: blocked)
    assert blocked == ["low on memory"] and fault.fired == 1
    _pump(connection, lambda: unblocked)  # connection.unblocked once the broker's clock passes 0.3 s
    channel.basic_publish("", "jobs", b"after")
    broker.wait_for(lambda b: b.queue("jobs").depth == 2)


def test_delay_holds_the_confirm(broker: minibroker.ThreadedBroker, connection: pika.BlockingConnection) -> None:
    fault = broker.faults.delay(0.5, address="jobs", frames="basic.ack")
    channel = connection.channel()
    channel.confirm_delivery()
    started = time.monotonic()
    channel.basic_publish("", "jobs", b"slow")  # waits for its basic.ack
    assert time.monotonic() - started >= 0.5  # a lower bound: the held frame came no earlier
    assert fault.fired == 1 and broker.queue("jobs").depth == 1
