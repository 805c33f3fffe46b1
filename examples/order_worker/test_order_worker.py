"""Tests of the order worker against a real broker in the test process (the ``amqp_broker`` fixture)."""

from __future__ import annotations

from typing import Any

import pytest
from order_worker import run_worker

import minibroker

DLQ = "orders/$DeadLetterQueue"

# Every test here gets a broker whose "orders" queue dead-letters after two failed deliveries.
pytestmark = pytest.mark.amqp_broker(queues=[("orders", {"max_delivery_count": 2})])


def order(order_id: str, quantity: Any = 2, unit_price: Any = 9.5) -> dict[str, Any]:
    return {"id": order_id, "quantity": quantity, "unit_price": unit_price}


def test_each_valid_order_gets_one_invoice(amqp_broker: minibroker.ThreadedBroker) -> None:
    for n in range(3):
        amqp_broker.publish("orders", order(f"o{n}", quantity=n + 1), message_id=f"o{n}")

    assert run_worker(amqp_broker.url, max_orders=3) == 3

    invoices = amqp_broker.assert_queue(
        "invoices",
        bodies=[
            {"order": "o0", "total": 9.5},
            {"order": "o1", "total": 19.0},
            {"order": "o2", "total": 28.5},
        ],
    )
    assert [m.properties.correlation_id for m in invoices.messages] == ["o0", "o1", "o2"]
    amqp_broker.assert_queue("orders", depth=0)


def test_malformed_orders_are_dead_lettered_with_the_reason(amqp_broker: minibroker.ThreadedBroker) -> None:
    amqp_broker.publish("orders", order("bad", quantity="many"))
    amqp_broker.publish("orders", order("good"))

    assert run_worker(amqp_broker.url, max_orders=2) == 1

    dead = amqp_broker.queue(DLQ).messages
    assert [m.body["id"] for m in dead] == ["bad"]
    assert dead[0].annotations["x-opt-deadletter-reason"] == "amqp:rejected"
    amqp_broker.assert_queue("invoices", bodies=[{"order": "good", "total": 19.0}])


def test_a_transient_failure_is_retried_and_then_dead_lettered(amqp_broker: minibroker.ThreadedBroker) -> None:
    amqp_broker.publish("orders", order("flaky"))
    attempts: list[dict[str, Any]] = []

    def charge(invoice: dict[str, Any]) -> None:
        attempts.append(invoice)
        raise ConnectionError("payment service unavailable")

    run_worker(amqp_broker.url, max_orders=5, charge=charge, timeout=1)

    # Delivered three times (delivery-count 0, 1, 2), then over max_delivery_count=2.
    assert len(attempts) == 3
    assert amqp_broker.queue("orders").depth == 0
    dead = amqp_broker.queue(DLQ).messages
    assert dead[0].annotations["x-opt-deadletter-reason"] == "MaxDeliveryCountExceeded"
    assert amqp_broker.queue("invoices").depth == 0
