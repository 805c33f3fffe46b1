"""A small order worker, the kind of application minibroker is for.

It consumes orders from an AMQP queue with python-qpid-proton, publishes an
invoice for each valid order to ``invoices`` and rejects malformed orders (the
broker dead-letters them). A failure while processing is reported as
``modified(delivery-failed)`` so the broker redelivers the order later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proton import Delivery, Message
from proton.utils import BlockingConnection


class InvalidOrder(ValueError):
    """An order that can never be processed."""


def make_invoice(order: dict[str, Any]) -> dict[str, Any]:
    try:
        quantity = int(order["quantity"])
        price = float(order["unit_price"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidOrder(f"order {order.get('id')!r} is malformed: {exc}") from None
    if quantity <= 0:
        raise InvalidOrder(f"order {order.get('id')!r} has quantity {quantity}")
    return {"order": order["id"], "total": round(quantity * price, 2)}


def run_worker(
    url: str,
    max_orders: int,
    *,
    charge: Callable[[dict[str, Any]], None] = lambda invoice: None,
    timeout: float = 5.0,
) -> int:
    """Process up to ``max_orders`` orders; returns how many produced an invoice."""
    conn = BlockingConnection(url, timeout=timeout)
    try:
        orders = conn.create_receiver("orders", credit=1)
        invoices = conn.create_sender("invoices")
        done = 0
        for _ in range(max_orders):
            try:
                message = orders.receive(timeout=timeout)
            except Exception:  # noqa: BLE001 - proton raises Timeout when the queue stays empty
                break
            try:
                invoice = make_invoice(message.body)
                charge(invoice)
            except InvalidOrder:
                orders.reject()  # never retried; the broker dead-letters it
                continue
            except ConnectionError:
                _give_back(orders)  # a transient failure: the broker redelivers the order later
                continue
            invoices.send(Message(body=invoice, correlation_id=message.id))
            orders.accept()
            done += 1
        return done
    finally:
        conn.close()


def _give_back(receiver: Any) -> None:
    """Settle the last received delivery as modified(delivery-failed=true) (AMQP 1.0 Part 3 §3.4.5).

    The broker puts the order back in its place and counts a failed delivery;
    past the queue's max_delivery_count it dead-letters the order.
    """
    delivery = receiver.fetcher.unsettled.popleft()
    delivery.local.failed = True
    delivery.update(Delivery.MODIFIED)
    delivery.settle()
