"""Dead-lettering a pika publish, seen by a pika consumer of the dead-letter queue.

Checked against RabbitMQ 3.10 with the same script first (``front091/deadletter.py``; the bytes
of each scenario are asserted in ``tests/amqp091/test_dead_letter_091.py``): without
``x-dead-letter-routing-key`` a dead letter is routed with its key and its ``CC`` and ``BCC``
keys, with one it goes with that key alone and loses ``CC``; the properties and headers come
through unchanged beside ``x-death`` and ``x-first-death-*``, the expiration removed.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

import pika
import pika_helpers
import pytest
from pika.adapters.blocking_connection import BlockingChannel

pytestmark = pytest.mark.interop

# The shared fixtures (pika_helpers.py), under the names the tests ask for.
broker = pika_helpers.broker
connection = pika_helpers.connection

PROPERTIES = pika.BasicProperties(
    content_type="text/plain", content_encoding="utf-8", delivery_mode=2, priority=3, correlation_id="c1",
    reply_to="r1", message_id="m1", timestamp=1700000000, type="t1", app_id="a1", expiration="60000",
    headers={"zeta": 1, "alpha": "x", "CC": ["k2"], "BCC": ["k3"], "nested": {"b": 1, "a": [1, "s"]}},
)  # fmt: skip


def _get(channel: BlockingChannel, queue: str) -> tuple[Any, Any, bytes] | None:
    method, properties, body = channel.basic_get(queue, auto_ack=True)
    return None if method is None else (method, properties, body)


def _reject_into_dlx(channel: BlockingChannel, dead_letter_key: str | None) -> dict[str, tuple[Any, Any, bytes] | None]:
    channel.exchange_declare("dlx", "direct")
    channel.exchange_declare("srcx", "direct")
    arguments = {"x-dead-letter-exchange": "dlx"}
    if dead_letter_key is not None:
        arguments["x-dead-letter-routing-key"] = dead_letter_key
    channel.queue_declare("src", arguments=arguments)
    for key in ("k1", "k2", "k3"):
        channel.queue_bind("src", "srcx", key)
    for queue, key in (("d1", "k1"), ("d2", "k2"), ("d3", "k3"), ("dk", "dk")):
        channel.queue_declare(queue)
        channel.queue_bind(queue, "dlx", key)
    channel.confirm_delivery()
    channel.basic_publish("srcx", "k1", b"A", PROPERTIES)
    method, _properties, _body = channel.basic_get("src")
    channel.basic_reject(method.delivery_tag, requeue=False)
    channel.queue_declare("src", passive=True)  # a round trip: the reject is handled
    return {queue: _get(channel, queue) for queue in ("d1", "d2", "d3", "dk")}


def _expected_headers(dead: Any, died: float) -> dict[str, Any]:
    death = dead.headers["x-death"][0]
    assert abs(death["time"].timestamp() - died) < 5  # the broker's clock, in whole seconds
    return {
        "alpha": "x", "nested": {"b": 1, "a": [1, "s"]}, "zeta": 1,
        "x-death": [{"count": 1, "reason": "rejected", "queue": "src", "time": death["time"], "exchange": "srcx",
                     "routing-keys": ["k1", "k2"], "original-expiration": "60000"}],
        "x-first-death-exchange": "srcx", "x-first-death-queue": "src", "x-first-death-reason": "rejected",
    }  # fmt: skip


def _kept(properties: Any) -> tuple[Any, ...]:
    return (
        properties.content_type, properties.content_encoding, properties.delivery_mode, properties.priority,
        properties.correlation_id, properties.reply_to, properties.message_id, properties.timestamp,
        properties.type, properties.app_id, properties.expiration,
    )  # fmt: skip


def test_a_dead_letter_without_a_key_goes_with_its_cc_and_bcc_keys_its_properties_intact(
    connection: pika.BlockingConnection,
) -> None:
    got = _reject_into_dlx(connection.channel(), None)
    assert got["dk"] is None
    died = time.time()
    for queue in ("d1", "d2", "d3"):  # k1, CC's k2 and BCC's k3 each reached
        dead = got[queue]
        assert dead is not None, queue
        method, properties, body = dead
        assert (method.exchange, method.routing_key, body) == ("dlx", "k1", b"A")
        assert _kept(properties) == ("text/plain", "utf-8", 2, 3, "c1", "r1", "m1", 1700000000, "t1", "a1", None)
        assert properties.headers == {"CC": ["k2"], **_expected_headers(properties, died)}
        assert list(properties.headers) == sorted(properties.headers)  # RabbitMQ 3.10 sorts them


def test_a_dead_letter_with_a_key_goes_with_that_key_alone_without_cc(connection: pika.BlockingConnection) -> None:
    got = _reject_into_dlx(connection.channel(), "dk")
    assert (got["d1"], got["d2"], got["d3"]) == (None, None, None)
    dead = got["dk"]
    assert dead is not None
    method, properties, body = dead
    assert (method.exchange, method.routing_key, body) == ("dlx", "dk", b"A")
    assert properties.headers == _expected_headers(properties, time.time())


def test_reject_publish_dlx_nacks_and_dead_letters_what_it_refuses(connection: pika.BlockingConnection) -> None:
    channel = connection.channel()
    channel.exchange_declare("dlx", "direct")
    channel.queue_declare("dead")
    channel.queue_bind("dead", "dlx", "full")
    channel.queue_declare("full", arguments={"x-dead-letter-exchange": "dlx", "x-max-length": 1,
                                             "x-overflow": "reject-publish-dlx"})  # fmt: skip
    channel.confirm_delivery()
    channel.basic_publish("", "full", b"R1")
    with pytest.raises(pika.exceptions.NackError):
        channel.basic_publish("", "full", b"R2")
    dead = _get(channel, "dead")
    assert dead is not None
    assert (dead[2], dead[1].headers["x-first-death-reason"], dead[1].headers["x-death"][0]["routing-keys"]) == (
        b"R2", "maxlen", ["full"]
    )
    assert isinstance(dead[1].headers["x-death"][0]["time"], datetime.datetime)
