"""pika and the broker's resource alarm: ``connection.blocked`` / ``unblocked`` (RabbitMQ's extension).

``broker.block_publishers(reason)`` raises the alarm RabbitMQ raises when low on memory or disk:
a 0-9-1 connection that has published is told ``connection.blocked`` (pika announces the
capability) and, once it publishes under the alarm, is not read until ``unblock_publishers()``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pika
import pytest
from pika.exceptions import ConnectionBlockedTimeout

import minibroker

pytestmark = pytest.mark.interop

WAIT = 10.0


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker() as running:
        running.declare_queue("q")
        yield running
        assert running.errors() == []


def _connect(broker: minibroker.ThreadedBroker, blocked_timeout: float = WAIT) -> pika.BlockingConnection:
    return pika.BlockingConnection(
        pika.URLParameters(
            f"amqp://guest:guest@127.0.0.1:{broker.port}/%2F?blocked_connection_timeout={blocked_timeout}"
        )
    )


def _pump_until(connection: pika.BlockingConnection, done: list[object]) -> None:
    for _ in range(int(WAIT / 0.05)):
        if done:
            return
        connection.process_data_events(time_limit=0.05)
    raise AssertionError("no connection.blocked / unblocked came")


def test_a_publisher_is_blocked_not_read_and_unblocked(broker: minibroker.ThreadedBroker) -> None:
    connection = _connect(broker)
    blocked: list[object] = []
    unblocked: list[object] = []
    connection.add_on_connection_blocked_callback(lambda _conn, frame: blocked.append(frame.method.reason))
    connection.add_on_connection_unblocked_callback(lambda _conn, frame: unblocked.append(frame))
    channel = connection.channel()
    channel.basic_publish("", "q", b"before")
    broker.wait_for(lambda b: b.queue("q").depth == 1)
    broker.block_publishers("low on memory")
    _pump_until(connection, blocked)
    assert blocked == ["low on memory"]
    channel.basic_publish("", "q", b"the one that finds the alarm")  # read, then reading stops
    channel.basic_publish("", "q", b"unread")
    broker.wait_for(lambda b: b.queue("q").depth == 2)
    connection.process_data_events(time_limit=0.5)
    assert broker.queue("q").depth == 2 and not unblocked
    broker.unblock_publishers()
    _pump_until(connection, unblocked)
    broker.wait_for(lambda b: b.queue("q").depth == 3)
    assert [m.body for m in broker.queue("q").messages] == [b"before", b"the one that finds the alarm", b"unread"]
    connection.close()


def test_a_connection_opened_under_the_alarm_is_told_at_its_first_publish(broker: minibroker.ThreadedBroker) -> None:
    broker.block_publishers("disk low")
    connection = _connect(broker)
    blocked: list[object] = []
    connection.add_on_connection_blocked_callback(lambda _conn, frame: blocked.append(frame.method.reason))
    channel = connection.channel()
    connection.process_data_events(time_limit=0.3)
    assert blocked == []  # a connection that has not published is not told
    channel.basic_publish("", "q", b"first")
    _pump_until(connection, blocked)
    assert blocked == ["disk low"]
    broker.unblock_publishers()
    connection.close()


def test_pikas_blocked_connection_timeout_ends_a_connection_blocked_too_long(broker: minibroker.ThreadedBroker) -> None:
    connection = _connect(broker, blocked_timeout=1.0)
    channel = connection.channel()
    channel.basic_publish("", "q", b"m")
    broker.block_publishers("low on memory")
    with pytest.raises(ConnectionBlockedTimeout):
        for _ in range(int(WAIT / 0.1)):
            connection.process_data_events(time_limit=0.1)
    broker.unblock_publishers()
    broker.wait_for(lambda b: b.statistics().connections == 0)
