"""Notifications that are only worth delivering for a while.

``notify`` publishes a notification with a time-to-live (the AMQP header ``ttl``, Part 3
§3.2.1): a notification nobody picked up in time is expired by the broker, and the queue's
dead-letter queue keeps it with the reason, for an "undelivered" report.  ``collect`` takes
what is still deliverable.
"""

from __future__ import annotations

from typing import Any

from proton import Message
from proton.utils import BlockingConnection

QUEUE = "notifications"


def notify(url: str, user: str, text: str, valid_for: float) -> None:
    """Publish a notification that expires after ``valid_for`` seconds."""
    conn = BlockingConnection(url, timeout=5)
    try:
        conn.create_sender(QUEUE).send(Message(body={"user": user, "text": text}, ttl=valid_for))
    finally:
        conn.close()


def collect(url: str, *, timeout: float = 0.5) -> list[dict[str, Any]]:
    """Take every notification still deliverable."""
    conn = BlockingConnection(url, timeout=5)
    taken: list[dict[str, Any]] = []
    try:
        receiver = conn.create_receiver(QUEUE, credit=10)
        while True:
            try:
                message = receiver.receive(timeout=timeout)
            except Exception:  # noqa: BLE001 - proton raises Timeout when nothing is left
                return taken
            taken.append(message.body)
            receiver.accept()
    finally:
        conn.close()
