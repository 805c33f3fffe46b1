"""kombu (over py-amqp) against minibroker over real sockets, on the same port as AMQP 1.0.

Each test runs kombu's ``Connection`` (transport ``pyamqp``) against a ``ThreadedBroker``; what
it asserts is what the same code saw against RabbitMQ 3.10 (checked by hand when written).
py-amqp logs in with AMQPLAIN when asked to, sends its queue arguments as kombu builds them, and
with the ``confirm_publish`` transport option waits for each publish's confirm.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator
from typing import Any

import amqp
import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue
from kombu.message import Message

import minibroker

pytestmark = pytest.mark.interop

TIMEOUT = 10


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(clock=minibroker.ManualClock()) as running:
        yield running
        assert running.errors() == []


def _connect(broker: minibroker.ThreadedBroker, password: str = "guest", **options: Any) -> Connection:
    return Connection(f"amqp://guest:{password}@127.0.0.1:{broker.port}//", connect_timeout=TIMEOUT, **options)


@pytest.fixture
def connection(broker: minibroker.ThreadedBroker) -> Iterator[Connection]:
    # With confirms each publish returns once the message is in its queues: the checks after it
    # then hold against RabbitMQ too, where a publish reaches its queue asynchronously.
    with _connect(broker, transport_options={"confirm_publish": True}) as opened:
        opened.connect()
        yield opened


def _drain(connection: Connection, consumer: Consumer, got: list[Any], count: int) -> None:
    with consumer:
        while len(got) < count:
            connection.drain_events(timeout=TIMEOUT)


@pytest.mark.parametrize("login_method", ["AMQPLAIN", "PLAIN"])
def test_login_methods(broker: minibroker.ThreadedBroker, login_method: str) -> None:
    with _connect(broker, login_method=login_method) as connection:
        connection.connect()
        assert connection.connection.server_properties["product"] == "RabbitMQ"  # as RabbitMQ says it; "information" names minibroker
    with _connect(broker, login_method=login_method, password="wrong") as refused:
        with pytest.raises(amqp.exceptions.AccessRefused):
            refused.connect()
        broker.wait_for(lambda b: b.statistics().connections == 0, timeout=TIMEOUT)


@pytest.mark.parametrize(
    ("kind", "binding_key", "routing_key", "arguments"),
    [
        ("direct", "a.b", "a.b", None),
        ("topic", "a.*", "a.b", None),
        ("fanout", "", "anything", None),
        ("headers", "", "", {"x-match": "all", "h": "1"}),
    ],
)
def test_exchange_kinds_declare_bind_publish_consume(
    connection: Connection, kind: str, binding_key: str, routing_key: str, arguments: dict[str, str] | None
) -> None:
    exchange = Exchange(f"k-{kind}", type=kind, auto_delete=True)
    queue = Queue(
        f"kq-{kind}", exchange=exchange, routing_key=binding_key, binding_arguments=arguments,
        queue_arguments={"x-queue-type": "classic", "x-max-priority": 5, "x-max-length": 10},
    )  # fmt: skip
    channel = connection.channel()
    producer = Producer(channel, exchange=exchange)
    producer.publish({"kind": kind}, routing_key=routing_key, headers={"h": "1"}, priority=3, declare=[queue])
    producer.publish({"kind": "second"}, routing_key="z.z", headers={"h": "2"})  # routed by fanout only
    got: list[tuple[Any, str, Any]] = []

    def on_message(body: Any, message: Message) -> None:
        got.append((body, message.delivery_info["routing_key"], message.properties.get("priority")))
        message.ack()

    _drain(connection, Consumer(channel, queues=[queue], callbacks=[on_message]), got, 2 if kind == "fanout" else 1)
    assert got[0] == ({"kind": kind}, routing_key, 3)
    assert got[1:] == ([({"kind": "second"}, "z.z", 0)] if kind == "fanout" else [])
    assert queue(channel).queue_declare(passive=True).message_count == 0


def test_reject_requeue_and_drop(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    channel = connection.channel()
    queue = Queue("work", durable=True)
    producer = Producer(channel)
    for body in ("a", "b", "c"):
        producer.publish(body, routing_key="work", declare=[queue], serializer="json")
    seen: list[tuple[str, bool]] = []

    def on_message(body: str, message: Message) -> None:
        seen.append((body, message.delivery_info["redelivered"]))
        if body == "a":
            message.ack()
        elif body == "b" and not message.delivery_info["redelivered"]:
            message.requeue()  # basic.reject requeue=true: comes again, redelivered
        elif body == "b":
            message.ack()
        else:
            message.reject()  # basic.reject requeue=false: dropped

    _drain(connection, Consumer(channel, queues=[queue], callbacks=[on_message]), seen, 4)
    assert seen == [("a", False), ("b", False), ("c", False), ("b", True)]
    broker.wait_for(lambda b: b.queue("work").depth == 0, timeout=TIMEOUT)


def test_simple_queue(connection: Connection) -> None:
    with connection.SimpleQueue("simple") as simple:
        simple.put({"n": 1})
        simple.put({"n": 2})
        first = simple.get(timeout=TIMEOUT)
        assert first.payload == {"n": 1}
        first.ack()
        second = simple.get(timeout=TIMEOUT)
        second.requeue()
        again = simple.get(timeout=TIMEOUT)
        assert (again.payload, again.delivery_info["redelivered"]) == ({"n": 2}, True)
        again.ack()
        assert simple.qsize() == 0
        with pytest.raises(simple.Empty):
            simple.get(block=False)


def test_message_ttl_on_the_manual_clock(broker: minibroker.ThreadedBroker, connection: Connection) -> None:
    channel = connection.channel()
    queue = Queue("short-lived", queue_arguments={"x-message-ttl": 5000})
    Producer(channel).publish("soon gone", routing_key="short-lived", declare=[queue])
    assert queue(channel).queue_declare(passive=True).message_count == 1
    broker.clock.advance(6)
    assert queue(channel).queue_declare(passive=True).message_count == 0
    assert queue(channel).get() is None


def _get(broker: minibroker.ThreadedBroker, queue: Queue, channel: Any) -> Message:
    """basic.get once the broker holds a message in ``queue`` (a reject before it is asynchronous)."""
    broker.wait_for(lambda b: b.queue(queue.name).available > 0, timeout=TIMEOUT)
    message = queue(channel).get()
    assert message is not None
    return message


def test_retry_cycle_through_dead_letter_exchanges_counts_x_death(
    broker: minibroker.ThreadedBroker, connection: Connection
) -> None:
    # The retry pattern kombu and Celery users build: a rejected job is dead-lettered to a
    # retry queue whose TTL dead-letters it back.  x-death counts each (queue, reason), latest first.
    channel = connection.channel()
    work_exchange = Exchange("work-x", type="direct")
    work = Queue("work", exchange=work_exchange, routing_key="job", queue_arguments={"x-dead-letter-exchange": "retry-x"})
    retry = Queue(
        "retry", exchange=Exchange("retry-x", type="fanout"), routing_key="",
        queue_arguments={"x-message-ttl": 200, "x-dead-letter-exchange": "work-x"},
    )  # fmt: skip
    Producer(channel, exchange=work_exchange).publish("job", routing_key="job", declare=[work, retry])
    seen = []
    for _attempt in range(3):
        message = _get(broker, work, channel)
        seen.append(message.headers)
        message.reject()
        broker.wait_for(lambda b: b.queue("retry").available == 1, timeout=TIMEOUT)
        broker.clock.advance(1)
    assert seen[0] == {}

    def deaths(headers: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(d["queue"], d["reason"], d["count"], d["exchange"], d["routing-keys"]) for d in headers["x-death"]]

    assert deaths(seen[1]) == [("retry", "expired", 1, "retry-x", ["job"]), ("work", "rejected", 1, "work-x", ["job"])]
    assert deaths(seen[2]) == [("retry", "expired", 2, "retry-x", ["job"]), ("work", "rejected", 2, "work-x", ["job"])]
    first = {name: value for name, value in seen[2].items() if name.startswith("x-first-death-")}
    assert first == {"x-first-death-exchange": "work-x", "x-first-death-queue": "work", "x-first-death-reason": "rejected"}
    assert all(isinstance(death["time"], datetime.datetime) for death in seen[2]["x-death"])
    final = _get(broker, work, channel)
    assert (final.delivery_info["exchange"], final.delivery_info["routing_key"]) == ("work-x", "job")
    final.ack()


def test_publisher_confirms(broker: minibroker.ThreadedBroker) -> None:
    # confirm_publish: each publish waits for its basic.ack; a basic.nack (a full reject-publish
    # queue) raises MessageNacked.
    with _connect(broker, transport_options={"confirm_publish": True}) as connection:
        channel = connection.channel()
        queue = Queue("full", queue_arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
        producer = Producer(channel)
        producer.publish("kept", routing_key="full", declare=[queue])
        with pytest.raises(amqp.exceptions.MessageNacked):
            producer.publish("refused", routing_key="full")
        assert broker.queue("full").bodies == [b"kept"]


def test_inequivalent_redeclare_as_kombu_reports_it(connection: Connection) -> None:
    channel = connection.channel()
    Queue("argued", queue_arguments={"x-max-length": 5})(channel).declare()
    with pytest.raises(amqp.exceptions.PreconditionFailed) as refused:
        Queue("argued", queue_arguments={"x-max-length": 6})(connection.channel()).declare()
    assert refused.value.reply_text == (
        "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'argued' in vhost '/': "
        "received '6' but current is '5'"
    )


def test_headers_of_every_kind_come_back_as_sent(connection: Connection) -> None:
    # py-amqp writes integers past 32 bits as 'L', None as void; Celery's task headers hold
    # arrays (timelimit) and None (parent_id): all come back as RabbitMQ gives them back.
    headers = {
        "none": None, "list": [1, "two", None], "table": {"d": 1, "e": [True]}, "dec": decimal.Decimal("1.5"),
        "s": "x", "f": 1.5, "bool": False, "big": 2**40, "neg": -(2**40), "bytes": b"\xff\x00",
    }  # fmt: skip
    channel = connection.channel()
    queue = Queue("headers")
    Producer(channel).publish("x", routing_key="headers", headers=headers, declare=[queue])
    message = queue(channel).get(no_ack=True)
    assert message is not None and message.headers == headers


def test_deleting_the_queue_a_consumer_reads_answers_before_cancelling_it(connection: Connection) -> None:
    # As kombu's own test_ack_from_another_thread does: the consumer's channel deletes its queue
    # inside ``with consumer``. delete-ok comes first (RabbitMQ's order), so the delete returns
    # and the broker's basic.cancel reaches py-amqp only after, where Consumer.__exit__ absorbs it.
    queue = Queue("read-and-deleted")
    channel = connection.channel()
    Producer(channel).publish("x", routing_key="read-and-deleted", declare=[queue])
    got: list[Any] = []
    consumer = Consumer(connection, [queue], callbacks=[lambda body, message: got.append(message.ack())])
    with consumer:
        connection.drain_events(timeout=TIMEOUT)
        assert queue(consumer.channel).delete() == 0  # its message count: the one message was acked
    assert len(got) == 1
