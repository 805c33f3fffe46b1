"""The broker's tap sees AMQP 0-9-1 connections (broker/tap.py, front091/connection.py): the frame
log keeps their methods as protocol-neutral records, an observer installed after a connection
opened sees it from then on, and none is called once the last is removed."""

from __future__ import annotations

from typing import Any

from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.amqp091 import methods as m
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.broker.tap import Observer, TapConnection


class Names(Observer):
    def __init__(self) -> None:
        self.seen: list[tuple[str, int, str]] = []

    def frame_in(self, connection: TapConnection, channel: int, performative: Any) -> None:
        self.seen.append(("in", channel, performative.name))

    def frame_out(self, connection: TapConnection, channel: int, performative: Any, frame: bytes) -> bytes:
        self.seen.append(("out", channel, performative.name if performative is not None else "heartbeat"))
        return frame


def _consume_one(client: Client) -> None:
    client.method(1, m.QueueDeclare(queue="orders"))
    client.publish(1, "", "orders", b'{"id": 1}', content_type="application/json")
    client.method(1, m.BasicConsume(queue="orders", consumer_tag="worker"))
    client.method(1, m.BasicAck(delivery_tag=1))
    client.read()


def test_the_frame_log_keeps_091_methods_as_neutral_records() -> None:
    broker = Broker(BrokerConfig(frame_log=100), clock=ManualClock())
    client = Client(broker)
    client.open()
    _consume_one(client)
    records = broker.frames()
    assert {record.protocol for record in records} == {"AMQP 0-9-1"}
    assert {record.connection for record in records} == {"memory"}  # this client announced no product
    shown = [(record.direction, record.channel, record.name) for record in records]
    assert shown[:2] == [("out", 0, "connection.start"), ("in", 0, "connection.start-ok")]
    assert shown[-7:] == [
        ("in", 1, "queue.declare"),
        ("out", 1, "queue.declare-ok"),
        ("in", 1, "basic.publish"),  # one record: the method with its content
        ("in", 1, "basic.consume"),
        ("out", 1, "basic.consume-ok"),
        ("out", 1, "basic.deliver"),
        ("in", 1, "basic.ack"),
    ]
    publish = next(record for record in records if record.name == "basic.publish")
    assert publish.fields == {"exchange": "", "routing-key": "orders", "content-type": "application/json"}
    assert publish.body == "b'{\"id\": 1}'"
    deliver = next(record for record in records if record.name == "basic.deliver")
    assert (deliver.direction, deliver.fields["delivery-tag"], deliver.fields["consumer-tag"]) == ("out", 1, "worker")
    assert deliver.summary.startswith("basic.deliver consumer-tag='worker' delivery-tag=1 exchange='' routing-key='orders'")
    ack = next(record for record in records if record.name == "basic.ack")
    assert (ack.direction, ack.channel, ack.summary) == ("in", 1, "basic.ack delivery-tag=1")


def test_an_observer_installed_later_sees_an_open_connection_until_removed() -> None:
    broker = Broker(BrokerConfig(frame_log=0), clock=ManualClock())
    client = Client(broker)
    client.open()
    assert client.server.engine.hook is None  # no observer: the engine is not hooked
    names = broker.tap.install(Names())
    client.method(1, m.QueueDeclare(queue="orders"))
    assert names.seen == [("in", 1, "queue.declare"), ("out", 1, "queue.declare-ok")]
    broker.tap.remove(names)
    assert client.server.engine.hook is None
    client.method(1, m.QueueDeclare(queue="orders"))
    assert len(names.seen) == 2


def test_a_frame_fault_on_the_broker_leaves_091_frames_alone() -> None:
    """The fault injector acts on AMQP 1.0 frames; a 0-9-1 connection's pass it untouched."""
    broker = Broker(BrokerConfig(frame_log=0), clock=ManualClock())
    broker.faults.delay(seconds=5)
    client = Client(broker)
    client.open()
    client.method(1, m.QueueDeclare(queue="orders"))
    assert [type(method) for method in client.methods()] == [m.QueueDeclareOk]
    assert broker.errors == []
