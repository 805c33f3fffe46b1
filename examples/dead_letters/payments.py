"""A payments consumer and the dead-letter handler that goes with it.

``process_payments`` accepts valid payments and rejects invalid ones with an
``amqp:invalid-field`` error (Part 3 §3.4.2); the broker moves rejected messages to
``payments/$DeadLetterQueue`` with the error in ``x-opt-deadletter-reason`` and
``x-opt-deadletter-description`` annotations.  ``park_dead_letters`` empties that queue into
``payments.parked`` with the reason as an application property, for a person to look at.
"""

from __future__ import annotations

from typing import Any

from proton import Condition, Delivery, Message
from proton.utils import BlockingConnection

QUEUE = "payments"
DEAD_LETTERS = f"{QUEUE}/$DeadLetterQueue"
PARKED = "payments.parked"


def problem(payment: Any) -> str | None:
    """Why a payment cannot be processed, or None."""
    if not isinstance(payment, dict) or "account" not in payment:
        return "no account"
    amount = payment.get("amount")
    if not isinstance(amount, (int, float)) or amount <= 0:
        return f"amount must be a positive number, got {amount!r}"
    return None


def process_payments(url: str, *, timeout: float = 0.5) -> list[dict[str, Any]]:
    """Take every payment: accept valid ones (returned), reject the others with the reason."""
    conn = BlockingConnection(url, timeout=5)
    done: list[dict[str, Any]] = []
    try:
        receiver = conn.create_receiver(QUEUE, credit=10)
        while True:
            try:
                message = receiver.receive(timeout=timeout)
            except Exception:  # noqa: BLE001 - proton raises Timeout when nothing is left
                return done
            reason = problem(message.body)
            if reason is None:
                done.append(message.body)
                receiver.accept()
            else:
                _reject(receiver, reason)
    finally:
        conn.close()


def _reject(receiver: Any, reason: str) -> None:
    """Settle the last delivery as rejected with an error (proton's BlockingReceiver has no API for it)."""
    delivery = receiver.fetcher.unsettled.popleft()
    delivery.local.condition = Condition("amqp:invalid-field", reason)
    delivery.update(Delivery.REJECTED)
    delivery.settle()


def park_dead_letters(url: str, *, timeout: float = 0.5) -> int:
    """Move every dead letter to ``payments.parked`` with its reason; returns how many."""
    conn = BlockingConnection(url, timeout=5)
    moved = 0
    try:
        receiver = conn.create_receiver(DEAD_LETTERS, credit=10)
        parked = conn.create_sender(PARKED)
        while True:
            try:
                message = receiver.receive(timeout=timeout)
            except Exception:  # noqa: BLE001 - proton raises Timeout when nothing is left
                return moved
            annotations = message.annotations or {}
            properties = {
                "reason": str(annotations.get("x-opt-deadletter-reason", "")),
                "description": str(annotations.get("x-opt-deadletter-description", "")),
            }
            parked.send(Message(body=message.body, properties=properties))
            receiver.accept()
            moved += 1
    finally:
        conn.close()
