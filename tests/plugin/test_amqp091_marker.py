"""The marker's ``queues=`` options, ``exchanges=`` and ``bindings=`` for AMQP 0-9-1 users: declared
by the marker, used by pika, which declares the queues again as its users' code does."""

from __future__ import annotations

import pytest

TESTS = """
import pika
import pytest
from pika.exceptions import NackError


def channel_on(amqp_broker):
    connection = pika.BlockingConnection(pika.URLParameters(amqp_broker.amqp091_url))
    channel = connection.channel()
    channel.confirm_delivery()
    return connection, channel


@pytest.mark.amqp_broker(queues=[("orders", {"max_depth": 1, "dead_letter_address": "parked"}), "parked"])
def test_queue_options_hold_under_a_clients_declaration(amqp_broker):
    connection, channel = channel_on(amqp_broker)
    channel.queue_declare("orders", durable=True)  # as pika users declare: the marker's options stay
    channel.basic_publish("", "orders", b"first")
    with pytest.raises(NackError):  # max_depth 1, overflow reject-publish: a nack under confirms
        channel.basic_publish("", "orders", b"second")
    method, _properties, body = channel.basic_get("orders")
    channel.basic_reject(method.delivery_tag, requeue=False)  # dead-lettered to the marker's address
    connection.process_data_events(time_limit=0.2)
    amqp_broker.wait_for(lambda b: b.queue("parked").depth == 1)
    assert amqp_broker.queue("parked").bodies == [b"first"]
    connection.close()


@pytest.mark.amqp_broker(queues=[("orders", {"max_depth": 5})])
def test_a_declarations_x_arguments_win(amqp_broker):
    connection, channel = channel_on(amqp_broker)
    channel.queue_declare("orders", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    channel.basic_publish("", "orders", b"first")
    with pytest.raises(NackError):
        channel.basic_publish("", "orders", b"second")
    connection.close()


@pytest.mark.amqp_broker(
    queues=["errors", "everything"],
    exchanges=[("logs", "topic")],
    bindings=[("logs", "errors", "*.error"), ("logs", "everything", "#")],
)
def test_exchanges_and_bindings_route_pika_publishes(amqp_broker):
    connection, channel = channel_on(amqp_broker)
    channel.exchange_declare("logs", "topic", passive=True)  # declared by the marker
    channel.basic_publish("logs", "kern.error", b"disk full")
    channel.basic_publish("logs", "kern.info", b"booted")
    got = []
    channel.basic_consume("errors", lambda ch, method, props, body: got.append((method.exchange, method.routing_key, body)))
    for _ in range(100):  # at most 5 s
        if got:
            break
        connection.process_data_events(time_limit=0.05)
    assert got == [("logs", "kern.error", b"disk full")]
    assert amqp_broker.queue("everything").bodies == [b"disk full", b"booted"]
    connection.close()
"""


def test_the_markers_declarations_serve_pika(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TESTS)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=3)


def test_a_failing_tests_report_lists_the_091_faults_that_fired(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
import pika
import pytest
from minibroker.testing import faults


@pytest.mark.amqp_broker(queues=["jobs"], faults=[faults.cancel_consumer(address="jobs")])
def test_fails(amqp_broker):
    connection = pika.BlockingConnection(pika.URLParameters(amqp_broker.amqp091_url))
    channel = connection.channel()
    channel.basic_publish("", "jobs", b"job 1")
    cancelled = []
    channel.basic_consume("jobs", lambda *args: None, consumer_tag="worker")
    channel.add_on_cancel_callback(lambda frame: cancelled.append(frame))
    for _ in range(100):
        if cancelled:
            break
        connection.process_data_events(time_limit=0.05)
    assert not cancelled
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*faults fired:*",
        "*faults.cancel_consumer(address='jobs') connection=127.0.0.1:* link=worker address=jobs "
        "on basic.deliver channel=1 delivery-tag=1*",
    ])  # fmt: skip
