"""RabbitMQ's sender-selected distribution (``CC`` / ``BCC`` headers) with pika over real sockets.

The same script was run against RabbitMQ 3.10 first; the queues reached, the headers delivered
and returned, and the 406 texts asserted here are what that node answered.
"""

from __future__ import annotations

from typing import Any

import pika
import pika_helpers
import pytest
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import ChannelClosedByBroker

pytestmark = pytest.mark.interop

# The shared fixtures (pika_helpers.py), under the names the tests ask for.
broker = pika_helpers.broker
connection = pika_helpers.connection


def _drain(channel: BlockingChannel, *queues: str) -> dict[str, list[tuple[bytes, str, Any]]]:
    out: dict[str, list[tuple[bytes, str, Any]]] = {}
    for queue in queues:
        while True:
            method, properties, body = channel.basic_get(queue, auto_ack=True)
            if method is None:
                break
            out.setdefault(queue, []).append((body, method.routing_key, properties.headers))
    return out


def test_cc_and_bcc_route_to_more_queues_and_bcc_is_not_delivered(connection: pika.BlockingConnection) -> None:
    channel = connection.channel()
    channel.confirm_delivery()
    channel.exchange_declare("ccx", "direct")
    for queue, keys in (("q1", ["k1"]), ("q2", ["k2"]), ("q3", ["k3"]), ("q4", ["k1", "k2"])):
        channel.queue_declare(queue)
        for key in keys:
            channel.queue_bind(queue, "ccx", key)
    channel.queue_declare("t2")
    channel.queue_bind("t2", "amq.topic", "b.#")
    channel.basic_publish("ccx", "k1", b"m1", pika.BasicProperties(headers={"CC": ["k2"], "BCC": ["k3"], "other": 1}))
    channel.basic_publish("amq.topic", "a.x", b"m2", pika.BasicProperties(headers={"CC": ["b.y.z"]}))
    seen = [(b"m1", "k1", {"CC": ["k2"], "other": 1})]
    assert _drain(channel, "q1", "q2", "q3", "q4", "t2") == {
        "q1": seen, "q2": seen, "q3": seen, "q4": seen, "t2": [(b"m2", "a.x", {"CC": ["b.y.z"]})],
    }  # fmt: skip
    returned: list[tuple[str, Any]] = []
    channel.add_on_return_callback(lambda _ch, method, props, _body: returned.append((method.routing_key, props.headers)))
    with pytest.raises(pika.exceptions.UnroutableError):
        channel.basic_publish("ccx", "zzz", b"m3", pika.BasicProperties(headers={"BCC": ["zz"], "CC": ["yy"]}), mandatory=True)
    connection.process_data_events(0.2)
    assert returned == [("zzz", {"CC": ["yy"]})]


def test_a_cc_that_is_not_an_array_closes_the_channel_406(connection: pika.BlockingConnection) -> None:
    channel = connection.channel()
    channel.queue_declare("q1")
    channel.basic_publish("", "q1", b"m", pika.BasicProperties(headers={"CC": "q1"}))
    with pytest.raises(ChannelClosedByBroker) as closed:
        channel.queue_declare("q1", passive=True)
    assert (closed.value.reply_code, closed.value.reply_text) == (
        406, 'PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"CC",longstr}',
    )  # fmt: skip
    assert connection.channel().queue_declare("q1", passive=True).method.message_count == 0
