"""The RabbitMQ layer in the engine, with no socket: queue arguments, dead-lettering, consumers.

The broker runs on a manual clock; requests go to the management handler as
a client's would, messages through the layer's publish path, consumers attach
through :class:`minibroker.testing.Peer`.
"""

from __future__ import annotations

from typing import Any

import pytest

from minibroker import ManualClock, build_message
from minibroker.amqp.message import Message
from minibroker.amqp.messaging import Accepted, Properties, Rejected, Released
from minibroker.amqp.performatives import Detach, Disposition, Transfer
from minibroker.broker.engine import Broker
from minibroker.broker.stored import StoredMessage
from minibroker.config import BrokerConfig
from minibroker.rabbitmq.addresses import Destination, queue_address
from minibroker.rabbitmq.layer import RabbitMQLayer
from minibroker.rabbitmq.management import Response, handle_request
from minibroker.rabbitmq.options import RabbitMQOptions
from minibroker.testing import Peer, connect


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def broker(clock: ManualClock) -> Broker:
    return Broker(BrokerConfig(rabbitmq=RabbitMQOptions()), clock)


def layer_of(broker: Broker) -> RabbitMQLayer:
    layer = broker.layer("rabbitmq")
    assert isinstance(layer, RabbitMQLayer)
    return layer


def request(broker: Broker, method: str, path: str, body: Any = None) -> Response:
    return handle_request(layer_of(broker), Message(body=body, properties=Properties(to=path, subject=method)))


def publish(broker: Broker, queue: str, body: str, **fields: Any) -> Any:
    message = build_message(body, **fields)
    now = broker.now()
    outcome = layer_of(broker).publish(Destination("queue", queue), StoredMessage(message.encode(), now), now)
    broker.flush()
    return outcome


def bodies(broker: Broker, queue: str) -> list[Any]:
    return [m.body for m in broker.queue_snapshot(queue).messages]


def declare(broker: Broker, name: str, **arguments: Any) -> None:
    response = request(broker, "PUT", queue_address(name), {"arguments": arguments})
    assert response.status == 200, response


def dead_letter_setup(broker: Broker) -> None:
    assert request(broker, "PUT", "/exchanges/dlx", {"type": "fanout"}).status == 204
    declare(broker, "dead")
    assert request(broker, "POST", "/bindings", {"source": "dlx", "destination_queue": "dead"}).status == 204


def test_expired_messages_are_dead_lettered_with_their_reason(broker: Broker, clock: ManualClock) -> None:
    dead_letter_setup(broker)
    declare(broker, "work", **{"x-message-ttl": 1000, "x-dead-letter-exchange": "dlx"})
    publish(broker, "work", "late")
    publish(broker, "work", "short", ttl=0.1)  # the lower of the message's and the queue's TTL counts
    clock.advance(0.2)
    assert bodies(broker, "work") == ["late"] and bodies(broker, "dead") == ["short"]
    clock.advance(1)
    assert bodies(broker, "dead") == ["short", "late"]
    dead = broker.queue_snapshot("dead").messages[1]
    annotations = dead.annotations or {}
    assert annotations["x-first-death-reason"] == "expired"
    assert annotations["x-first-death-queue"] == "work"
    assert dead.header is None or dead.header.ttl is None  # RabbitMQ drops the TTL when it dead-letters


def test_drop_head_overflow_dead_letters_the_oldest(broker: Broker) -> None:
    dead_letter_setup(broker)
    declare(broker, "bounded", **{"x-max-length": 2, "x-dead-letter-exchange": "dlx"})  # drop-head: RabbitMQ's default
    for body in ("a", "b", "c"):
        assert isinstance(publish(broker, "bounded", body), Accepted)
    assert bodies(broker, "bounded") == ["b", "c"]
    assert bodies(broker, "dead") == ["a"]
    annotations = broker.queue_snapshot("dead").messages[0].annotations or {}
    assert annotations["x-first-death-reason"] == "maxlen"


def test_reject_publish_overflow_rejects(broker: Broker) -> None:
    declare(broker, "bounded", **{"x-max-length": 1, "x-overflow": "reject-publish"})
    assert isinstance(publish(broker, "bounded", "a"), Accepted)
    outcome = publish(broker, "bounded", "b")
    assert isinstance(outcome, Rejected) and outcome.error.condition == "amqp:resource-limit-exceeded"


def test_priorities_follow_x_max_priority(broker: Broker) -> None:
    declare(broker, "prio", **{"x-max-priority": 9})
    for body, priority in (("low", 1), ("high", 9), ("mid", 5)):
        publish(broker, "prio", body, priority=priority)
    assert bodies(broker, "prio") == ["high", "mid", "low"]
    declare(broker, "fifo")  # a classic queue without x-max-priority ignores priorities, as RabbitMQ's
    for body, priority in (("first", 1), ("second", 9)):
        publish(broker, "fifo", body, priority=priority)
    assert bodies(broker, "fifo") == ["first", "second"]


def test_queue_info_counts_and_deleting_answers_the_count(broker: Broker) -> None:
    declare(broker, "jobs", **{"x-queue-type": "quorum", "x-delivery-limit": 3})
    publish(broker, "jobs", "one")
    info = request(broker, "GET", queue_address("jobs"))
    assert info.status == 200 and info.body["message_count"] == 1 and info.body["type"] == "quorum"
    assert broker.queues["jobs"].options.max_delivery_count == 3
    assert request(broker, "DELETE", queue_address("jobs")) == Response(200, {"message_count": 1})
    assert request(broker, "DELETE", queue_address("jobs")) == Response(200, {"message_count": 0})
    assert request(broker, "GET", queue_address("jobs")).status == 404


def test_unroutable_is_released_and_counted(broker: Broker) -> None:
    assert isinstance(publish(broker, "no-such-queue", "x"), Released)  # the default exchange finds no queue
    assert layer_of(broker).unroutable == 1
    assert layer_of(broker).exchange_snapshot("").unroutable == 1


def test_management_answers_bad_requests_with_400(broker: Broker) -> None:
    assert request(broker, "PUT", "/queues/a/b", {}).status == 400
    assert request(broker, "PUT", queue_address("q"), {"arguments": {"x-queue-type": "lazy"}}).status == 400
    assert request(broker, "PUT", queue_address("q"), {"arguments": {"x-overflow": "explode"}}).status == 400
    assert request(broker, "POST", "/bindings", {"source": "amq.direct"}).status == 400
    assert request(broker, "PATCH", queue_address("q")).status == 405
    assert request(broker, "PUT", queue_address("amq.mine"), {}).status == 403


def test_single_active_consumer(broker: Broker) -> None:
    declare(broker, "sac", **{"x-single-active-consumer": True})
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.header() + peer.open() + peer.begin())
    pump.send(peer.attach_receiver("first", queue_address("sac"), 0) + peer.flow(0, credit=10))
    pump.send(peer.attach_receiver("second", queue_address("sac"), 1) + peer.flow(1, credit=10))
    for body in ("a", "b", "c"):
        publish(broker, "sac", body)
    pump.send(b"")  # read what the broker wrote
    assert [int(t.handle) for t in pump.frames.of(Transfer)] == [0, 0, 0]  # all to the first consumer
    pump.send(peer.detach(0, closed=True))  # the active consumer goes: the next one takes over
    publish(broker, "sac", "d")
    pump.send(b"")
    assert [int(t.handle) for t in pump.frames.of(Transfer)][3:] == [1, 1, 1, 1]  # its 3 unsettled come back, and d


def test_permissions_hold_on_rabbitmq_addresses(clock: ManualClock) -> None:
    broker = Broker(
        BrokerConfig(rabbitmq=RabbitMQOptions(), permissions={"guest": {"/exchanges/logs/*": "send", "/management": "all"}}),
        clock,
    )
    assert request(broker, "PUT", "/exchanges/logs", {"type": "fanout"}).status == 204
    assert request(broker, "PUT", "/exchanges/audit", {"type": "fanout"}).status == 204
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.sasl_plain("guest", "guest") + peer.header() + peer.open() + peer.begin())
    pump.send(peer.attach_sender("named", "/exchanges/audit/k", 0))  # refused at attach
    detach = pump.frames.last(Detach)
    assert detach.error is not None and detach.error.condition == "amqp:unauthorized-access"
    pump.send(peer.attach_sender("relay", None, 1))
    pump.send(peer.transfer(1, 0, b"x", Message(body="x", properties=Properties(to="/exchanges/audit/k")).encode()))
    outcome = pump.frames.last(Disposition).state
    assert isinstance(outcome, Rejected) and outcome.error.condition == "amqp:unauthorized-access"
    pump.send(peer.transfer(1, 1, b"y", Message(body="y", properties=Properties(to="/exchanges/logs/k")).encode()))
    assert isinstance(pump.frames.last(Disposition).state, Released)  # allowed; no queue bound


def test_x_expires_deletes_an_unused_queue(broker: Broker, clock: ManualClock) -> None:
    declare(broker, "idle", **{"x-expires": 10_000})
    declare(broker, "busy", **{"x-expires": 10_000})
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.header() + peer.open() + peer.begin() + peer.attach_receiver("r", queue_address("busy"), 0))
    clock.advance(6)
    assert request(broker, "GET", queue_address("idle")).status == 200  # a read counts as use
    clock.advance(6)
    assert sorted(broker.queues) == ["busy", "idle"]
    clock.advance(5)
    assert sorted(broker.queues) == ["busy"]  # 10 s after its last use
    pump.send(peer.detach(0, closed=True))  # the consumer goes: busy's 10 s start now
    clock.advance(9)
    assert "busy" in broker.queues
    clock.advance(1)
    assert "busy" not in broker.queues


def test_internal_and_auto_delete_exchanges(broker: Broker) -> None:
    declare(broker, "q")
    assert request(broker, "PUT", "/exchanges/inner", {"type": "fanout", "internal": True}).status == 204
    assert request(broker, "PUT", "/exchanges/front", {"type": "fanout", "auto_delete": True}).status == 204
    assert request(broker, "POST", "/bindings", {"source": "inner", "destination_queue": "q"}).status == 204
    assert request(broker, "POST", "/bindings", {"source": "front", "destination_exchange": "inner"}).status == 204
    now = broker.now()
    direct = layer_of(broker).publish(Destination("exchange", "inner", ""), StoredMessage(build_message("x").encode(), now), now)
    assert isinstance(direct, Rejected) and direct.error.condition == "amqp:unauthorized-access"
    through = layer_of(broker).publish(Destination("exchange", "front", ""), StoredMessage(build_message("y").encode(), now), now)
    assert isinstance(through, Accepted) and bodies(broker, "q") == ["y"]  # reached through a binding
    assert request(broker, "DELETE", "/bindings/src=front;dste=inner;key=;args=").status == 204
    assert "front" not in layer_of(broker).exchanges.exchanges  # its last binding went


def test_auto_delete_queue_goes_with_its_last_consumer(broker: Broker) -> None:
    assert request(broker, "PUT", queue_address("temp"), {"auto_delete": True, "arguments": {}}).status == 200
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.header() + peer.open() + peer.begin())
    pump.send(peer.attach_receiver("a", queue_address("temp"), 0) + peer.attach_receiver("b", queue_address("temp"), 1))
    pump.send(peer.detach(0, closed=True))
    assert "temp" in broker.queues  # one consumer left
    pump.send(peer.detach(1, closed=True))
    assert "temp" not in broker.queues


def test_max_queues_bounds_queues_declared_through_management(clock: ManualClock) -> None:
    broker = Broker(BrokerConfig(rabbitmq=RabbitMQOptions(max_queues=2)), clock)
    assert [request(broker, "PUT", queue_address(f"q{i}"), {}).status for i in range(2)] == [200, 200]
    assert request(broker, "PUT", queue_address("q0"), {}).status == 200  # declared again: no new queue
    refused = request(broker, "PUT", queue_address("q2"), {})
    assert refused.status == 403 and "RabbitMQOptions.max_queues" in refused.body
    assert request(broker, "DELETE", queue_address("q0")).status == 200
    assert request(broker, "PUT", queue_address("q2"), {}).status == 200


def test_a_routing_key_over_255_bytes_is_rejected(broker: Broker) -> None:
    assert request(broker, "PUT", "/exchanges/t", {"type": "topic"}).status == 204
    now = broker.now()
    message = StoredMessage(build_message("x").encode(), now)
    outcome = layer_of(broker).publish(Destination("exchange", "t", "é" * 128), message, now)
    assert isinstance(outcome, Rejected) and outcome.error is not None
    assert outcome.error.condition == "amqp:invalid-field" and "256 bytes" in str(outcome.error.description)
    assert isinstance(layer_of(broker).publish(Destination("exchange", "t", "é" * 127 + "a"), message, now), Released)
