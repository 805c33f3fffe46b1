"""The ``amqp_broker`` fixture for AMQP 0-9-1 users (pika here; Celery in examples/celery_app):
``amqp091_url``, a reset that closes 0-9-1 connections and forgets what they declared, exclusive
and auto-delete queues that go with their connection, and inspection of queues filled over 0-9-1."""

from __future__ import annotations

import pytest

HELPERS = """
import pika
import pytest

def channel_on(amqp_broker):
    connection = pika.BlockingConnection(pika.URLParameters(amqp_broker.amqp091_url))
    return connection, connection.channel()
"""


def test_the_url_logs_in_as_guest_on_the_default_vhost(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        HELPERS
        + """
def test_url(amqp_broker):
    assert amqp_broker.amqp091_url == f"amqp://guest:guest@127.0.0.1:{amqp_broker.port}/%2F"
    connection, channel = channel_on(amqp_broker)
    assert connection.is_open
    connection.close()

@pytest.mark.amqp_broker(tls=True)
def test_tls_url(amqp_broker):
    assert amqp_broker.amqp091_url == f"amqps://guest:guest@127.0.0.1:{amqp_broker.port}/%2F"
"""
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_a_reset_closes_091_connections_and_forgets_their_declarations(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        HELPERS
        + """
def test_declares_and_leaves_its_connection_open(amqp_broker):
    connection, channel = channel_on(amqp_broker)
    channel.exchange_declare("logs", "topic")
    channel.queue_declare("orders", durable=True)
    channel.queue_bind("orders", "logs", "order.*")
    channel.confirm_delivery()
    channel.basic_publish("logs", "order.new", b"one")
    amqp_broker.assert_queue("orders", [b"one"])
    assert amqp_broker.statistics().connections == 1

def test_the_next_test_starts_empty(amqp_broker):
    assert amqp_broker.statistics().connections == 0
    assert amqp_broker.queues() == []
    connection, channel = channel_on(amqp_broker)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
        channel.exchange_declare("logs", passive=True)
    assert refused.value.reply_code == 404
    connection.close()
"""
    )
    pytester.runpytest("-p", "no:cacheprovider", "--minibroker-fresh").assert_outcomes(passed=2)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)  # with the broker reused


def test_exclusive_and_auto_delete_queues_go_with_their_connection(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        HELPERS
        + """
def declare(amqp_broker):
    connection, channel = channel_on(amqp_broker)
    exclusive = channel.queue_declare("", exclusive=True).method.queue
    channel.queue_declare("replies", auto_delete=True)
    channel.basic_consume("replies", lambda *delivery: None)
    channel.queue_declare("kept")
    assert sorted(amqp_broker.queues()) == sorted([exclusive, "replies", "kept"])
    return connection

def test_closed(amqp_broker):
    declare(amqp_broker).close()
    amqp_broker.wait_for(lambda broker: broker.queues() == ["kept"], timeout=5)

def test_dropped_by_a_crash(amqp_broker):
    declare(amqp_broker)
    amqp_broker.restart()  # the socket goes, no connection.close
    amqp_broker.wait_for(lambda broker: broker.queues() == ["kept"], timeout=5)
"""
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_inspection_sees_queues_filled_over_091(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        HELPERS
        + """
@pytest.mark.amqp_broker("orders")
def test_snapshot(amqp_broker):
    connection, channel = channel_on(amqp_broker)
    channel.confirm_delivery()
    properties = pika.BasicProperties(content_type="application/json", headers={"attempt": 1}, message_id="m-1")
    channel.basic_publish("", "orders", b'{"id": 1}', properties)
    channel.basic_publish("", "orders", b"\\x00\\xff")
    amqp_broker.assert_queue("orders", [b'{"id": 1}', b"\\x00\\xff"])
    first = amqp_broker.queue("orders").messages[0]
    assert (first.properties.content_type, first.properties.message_id) == ("application/json", "m-1")
    assert first.application_properties == {"attempt": 1}
    assert first.annotations["x-routing-key"] == "orders"
    connection.close()

@pytest.mark.amqp_broker("orders")
def test_a_failing_test_shows_the_bodies(amqp_broker):
    connection, channel = channel_on(amqp_broker)
    channel.confirm_delivery()
    channel.basic_publish("", "orders", b"unshipped")
    amqp_broker.assert_queue("orders", [])
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*orders: 1 message(s)*", "*[[]0] b'unshipped'*"])
