"""pika against minibroker's permissions on AMQP 0-9-1: RabbitMQ's configure / write / read per method.

``BrokerConfig.permissions`` grants ``manage`` / ``send`` / ``receive``, taken as RabbitMQ's
configure / write / read (``minibroker/front091/access.py``).  The user here has RabbitMQ's
``set_permissions bob '^bob\\.c.*' '^bob\\.w.*' '^bob\\.r.*'``; each refusal and its text is
what RabbitMQ 3.10 answered for the same user and method (checked with rabbitmqctl when written).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import ChannelClosedByBroker

import minibroker

pytestmark = pytest.mark.interop

PERMISSIONS = {"bob": {"bob.c*": "manage", "bob.w*": "send", "bob.r*": "receive"}, "guest": {"*": "all"}}


def _parameters(broker: minibroker.ThreadedBroker, user: str, password: str) -> pika.URLParameters:
    return pika.URLParameters(f"amqp://{user}:{password}@127.0.0.1:{broker.port}/%2F?blocked_connection_timeout=10")


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(users={"bob": "pw"}, permissions=PERMISSIONS) as running:
        admin = pika.BlockingConnection(_parameters(running, "guest", "guest"))
        channel = admin.channel()
        for queue in ("bob.r.q", "bob.w.q", "bob.c.q", "other.q"):
            channel.queue_declare(queue)
        for exchange in ("bob.r.x", "bob.w.x", "other.x"):
            channel.exchange_declare(exchange, "fanout")
        admin.close()
        yield running
        assert running.errors() == []


def _refused(broker: minibroker.ThreadedBroker, act: Callable[[BlockingChannel], Any]) -> str:
    """Run ``act`` as bob on a fresh channel: the 403 reply text it meets ('' when allowed)."""
    connection = pika.BlockingConnection(_parameters(broker, "bob", "pw"))
    try:
        channel = connection.channel()
        channel.confirm_delivery()  # a publish waits for its answer, so a refusal is seen here
        try:
            act(channel)
        except ChannelClosedByBroker as closed:
            assert closed.reply_code == 403, closed
            return str(closed.reply_text)
        return ""
    finally:
        connection.close()


def _text(kind: str, name: str) -> str:
    return f"ACCESS_REFUSED - access to {kind} '{name}' in vhost '/' refused for user 'bob'"


@pytest.mark.parametrize(
    ("act", "refused_on"),
    [
        (lambda ch: ch.queue_declare("other.q2"), ("queue", "other.q2")),
        (lambda ch: ch.queue_declare("other.q", passive=True), None),
        (lambda ch: ch.queue_declare("bob.c.q"), None),
        # x-dead-letter-exchange: read on the queue too (bob may only configure bob.c.*).
        (lambda ch: ch.queue_declare("bob.c.q3", arguments={"x-dead-letter-exchange": "other.x"}), ("queue", "bob.c.q3")),
        (lambda ch: ch.exchange_declare("other.x2", "fanout"), ("exchange", "other.x2")),
        (lambda ch: ch.exchange_declare("bob.c.x", "fanout"), None),
        (lambda ch: ch.exchange_declare("bob.c.x", "fanout", arguments={"alternate-exchange": "other.x"}), ("exchange", "bob.c.x")),
        (lambda ch: ch.exchange_delete("other.x"), ("exchange", "other.x")),
        (lambda ch: ch.queue_delete("other.q"), ("queue", "other.q")),
        (lambda ch: ch.queue_purge("other.q"), ("queue", "other.q")),
        (lambda ch: ch.queue_purge("bob.r.q"), None),
        (lambda ch: ch.basic_publish("", "bob.w.q", b"m"), ("exchange", "amq.default")),
        (lambda ch: ch.basic_publish("other.x", "", b"m"), ("exchange", "other.x")),
        (lambda ch: ch.basic_publish("bob.w.x", "", b"m"), None),
        (lambda ch: ch.basic_get("other.q"), ("queue", "other.q")),
        (lambda ch: ch.basic_get("bob.r.q"), None),
        (lambda ch: ch.basic_consume("other.q", lambda *_: None), ("queue", "other.q")),
        (lambda ch: ch.queue_bind("bob.r.q", "bob.r.x"), ("queue", "bob.r.q")),
        (lambda ch: ch.queue_bind("bob.w.q", "other.x"), ("exchange", "other.x")),
        (lambda ch: ch.queue_bind("bob.w.q", "bob.r.x"), None),
        (lambda ch: ch.queue_unbind("bob.r.q", "bob.r.x"), ("queue", "bob.r.q")),
        (lambda ch: ch.exchange_bind("bob.w.x", "other.x"), ("exchange", "other.x")),
        (lambda ch: ch.exchange_bind("bob.r.x", "bob.r.x"), ("exchange", "bob.r.x")),
    ],
)
def test_each_method_needs_rabbitmqs_permission(
    broker: minibroker.ThreadedBroker, act: Callable[[BlockingChannel], Any], refused_on: tuple[str, str] | None
) -> None:
    assert _refused(broker, act) == ("" if refused_on is None else _text(*refused_on))


def test_server_named_queue_needs_configure_on_its_name(broker: minibroker.ThreadedBroker) -> None:
    text = _refused(broker, lambda ch: ch.queue_declare(""))
    assert text.startswith("ACCESS_REFUSED - access to queue 'amq.gen-") and text.endswith("refused for user 'bob'")
    assert not [name for name in broker.queues() if name.startswith("amq.gen-")]


def test_a_refusal_closes_only_the_channel(broker: minibroker.ThreadedBroker) -> None:
    connection = pika.BlockingConnection(_parameters(broker, "bob", "pw"))
    refused = connection.channel()
    with pytest.raises(ChannelClosedByBroker):
        refused.queue_purge("other.q")
    channel = connection.channel()
    channel.basic_publish("bob.w.x", "", b"still served")
    assert connection.is_open
    connection.close()


def test_user_id_must_be_the_login(broker: minibroker.ThreadedBroker) -> None:
    connection = pika.BlockingConnection(_parameters(broker, "bob", "pw"))
    channel = connection.channel()
    channel.confirm_delivery()
    channel.basic_publish("bob.w.x", "", b"mine", pika.BasicProperties(user_id="bob"))
    with pytest.raises(ChannelClosedByBroker) as closed:
        channel.basic_publish("bob.w.x", "", b"forged", pika.BasicProperties(user_id="alice"))
    assert (closed.value.reply_code, closed.value.reply_text) == (
        406,
        "PRECONDITION_FAILED - user_id property set to 'alice' but authenticated user was 'bob'",
    )
    connection.close()


def test_direct_reply_to_needs_no_read_permission() -> None:
    """RabbitMQ checks no permission on the ``amq.rabbitmq.reply-to`` pseudo-queue (rabbit_channel's
    ``basic.consume`` clause for it calls no ``check_read_permitted``; the reply's publisher needs
    write on its exchange as any publisher): checked with RabbitMQ 3.10, where a user with read on
    ``^bob\\.r.*`` only consumed from it and got the reply, while ``basic.get`` on another queue was 403."""
    permissions = {"bob": {"bob.w*": "send", "amq.default": "send"}, "guest": {"*": "all"}}
    with minibroker.ThreadedBroker(users={"bob": "pw"}, permissions=permissions) as running:
        admin = pika.BlockingConnection(_parameters(running, "guest", "guest"))
        bob = pika.BlockingConnection(_parameters(running, "bob", "pw"))
        try:
            server = admin.channel()
            server.queue_declare("bob.w.requests")
            client = bob.channel()
            replies: list[bytes] = []
            client.basic_consume("amq.rabbitmq.reply-to", lambda _c, _m, _p, body: replies.append(body), auto_ack=True)
            properties = pika.BasicProperties(reply_to="amq.rabbitmq.reply-to")
            client.basic_publish("", "bob.w.requests", b"request", properties)
            request = None
            while request is None or request[0] is None:
                bob.process_data_events(0.05)
                request = server.basic_get("bob.w.requests", auto_ack=True)
            server.basic_publish("", request[1].reply_to, b"reply")
            while not replies:
                bob.process_data_events(0.05)
            assert replies == [b"reply"]
            with pytest.raises(ChannelClosedByBroker) as closed:
                client.basic_get("bob.w.requests")  # read is still refused on real queues
            assert closed.value.reply_code == 403
        finally:
            bob.close()
            admin.close()
        assert running.errors() == []
