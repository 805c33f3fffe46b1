"""Plain AMQP 1.0 clients (python-qpid-proton, rhea) on RabbitMQ 4's addresses and management node.

Nothing RabbitMQ-specific on the client side: a proton or rhea sender
targets ``/exchanges/{name}/{key}`` (or the null address with ``to``), and
a proton request/response pair on ``/management`` binds a headers exchange
with arguments, as RabbitMQ documents HTTP over AMQP.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from proton import Message
from proton.utils import BlockingConnection, SendException
from proton_helpers import connect, receive

import minibroker
from minibroker.rabbitmq import RabbitMQOptions, exchange_address, queue_address

pytestmark = pytest.mark.interop


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(rabbitmq=RabbitMQOptions()) as running:
        running.declare_exchange("orders", "topic")
        for queue, key in (("eu", "orders.eu.*"), ("all", "orders.#")):
            running.declare_queue(queue)
            running.bind("orders", queue=queue, key=key)
        yield running


def request(connection: BlockingConnection, method: str, path: str, body: Any = None) -> tuple[str, Any]:
    """One HTTP-over-AMQP request to /management: the status code (the answer's subject) and body."""
    sender = connection.create_sender("/management")
    receiver = connection.create_receiver("/management")
    try:
        sender.send(Message(id=str(uuid.uuid4()), subject=method, address=path, body=body, reply_to="$me"))
        answer = receiver.receive(timeout=10)  # answers come pre-settled
        return answer.subject, answer.body
    finally:
        sender.close()
        receiver.close()


def test_proton_publishes_to_exchange_addresses(broker: minibroker.ThreadedBroker) -> None:
    with connect(broker) as connection:
        sender = connection.create_sender(exchange_address("orders", "orders.eu.fr"))
        sender.send(Message(body="to both"))
        sender.close()
        by_subject = connection.create_sender(exchange_address("orders"))  # the key is each message's subject
        by_subject.send(Message(body="to all", subject="orders.us"))
        with pytest.raises(SendException):  # unroutable: released
            by_subject.send(Message(body="nowhere", subject="invoices"))
        by_subject.close()
        anonymous = connection.create_sender(None)
        anonymous.send(Message(body="by to", address=exchange_address("orders", "orders.eu.de")))
        anonymous.send(Message(body="plain", address="eu"))  # a plain address still works
        anonymous.close()
        receiver = connection.create_receiver(queue_address("eu"), credit=10)
        eu = receive(receiver, 3)
        receiver.close()
    assert [m.body for m in eu] == ["to both", "by to", "plain"]
    assert eu[0].annotations == {"x-exchange": "orders", "x-routing-key": "orders.eu.fr"}
    broker.assert_queue("all", ["to both", "to all", "by to"])
    assert broker.exchange("orders").unroutable == 1


def test_proton_drives_the_management_node(broker: minibroker.ThreadedBroker) -> None:
    with connect(broker) as connection:
        assert request(connection, "PUT", exchange_address("h"), {"type": "headers", "durable": True})[0] == "204"
        status, info = request(connection, "PUT", queue_address("eu-vip"), {"arguments": {"x-queue-type": "quorum"}})
        assert status == "200" and info["type"] == "quorum"
        binding = {
            "source": "h",
            "destination_queue": "eu-vip",
            "binding_key": "",
            "arguments": {"x-match": "all", "region": "eu", "tier": "vip"},
        }
        assert request(connection, "POST", "/bindings", binding)[0] == "204"
        sender = connection.create_sender(exchange_address("h"))
        sender.send(Message(body="vip", properties={"region": "eu", "tier": "vip"}))
        with pytest.raises(SendException):
            sender.send(Message(body="standard", properties={"region": "eu", "tier": "standard"}))
        sender.close()
        status, text = request(connection, "GET", queue_address("missing"))
        assert status == "404" and "no queue 'missing'" in text
        status, text = request(connection, "PUT", exchange_address("h"), {"type": "fanout"})
        assert status == "409" and "PRECONDITION_FAILED" in text
        assert request(connection, "DELETE", queue_address("eu-vip") + "/messages") == ("200", {"message_count": 1})
    assert broker.exchange("h").bindings[0].arguments == {"x-match": "all", "region": "eu", "tier": "vip"}


def test_headers_exchange_any(broker: minibroker.ThreadedBroker) -> None:
    broker.declare_exchange("alerts", "headers")
    broker.declare_queue("pager")
    broker.bind("alerts", queue="pager", arguments={"x-match": "any", "severity": "critical", "team": "ops"})
    with connect(broker) as connection:
        sender = connection.create_sender(exchange_address("alerts"))
        sender.send(Message(body="ops note", properties={"team": "ops"}))
        sender.send(Message(body="fire", properties={"severity": "critical", "team": "dev"}))
        with pytest.raises(SendException):
            sender.send(Message(body="fyi", properties={"severity": "info"}))
        sender.close()
    broker.assert_queue("pager", ["ops note", "fire"])


def test_rhea_publishes_to_exchange_addresses(broker: minibroker.ThreadedBroker, rhea: Callable[..., Any]) -> None:
    sent = rhea("send", port=broker.port, address=exchange_address("orders", "orders.eu.it"), count=3, body_prefix="r-")
    assert sent["outcomes"] == ["accepted"] * 3
    anonymous = rhea(
        "send",
        port=broker.port,
        anonymous=True,
        messages=[
            {"body": "by to", "to": exchange_address("orders", "orders.us")},
            {"body": "lost", "to": exchange_address("orders", "invoices")},
            {"body": "missing", "to": exchange_address("no-such-exchange", "k")},
        ],
    )
    assert anonymous["outcomes"] == ["accepted", "released", "rejected"]
    assert anonymous["rejections"]["2"]["condition"] == "amqp:not-found"
    broker.assert_queue("eu", ["r-0", "r-1", "r-2"])
    broker.assert_queue("all", ["r-0", "r-1", "r-2", "by to"])
    refused = rhea("send", port=broker.port, address=exchange_address("no-such-exchange"), count=1)
    assert any(e.get("condition") == "amqp:not-found" for e in refused["errors"])
