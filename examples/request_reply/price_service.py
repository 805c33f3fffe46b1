"""A request/reply service: it answers price requests on the ``prices`` queue.

Each request's body is ``{"sku": ...}``; the reply goes to the request's ``reply-to`` address
with ``correlation-id`` set to the request's ``message-id`` (AMQP 1.0 Part 3 §3.2.4), the way
RPC over AMQP is usually done.  ``ask`` is the client side: it receives replies on a dynamic
(temporary) queue the broker creates for it.
"""

from __future__ import annotations

import uuid
from typing import Any

from proton import Message
from proton.utils import BlockingConnection

PRICES = {"lamp": 12.5, "desk": 149.0}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    sku = request.get("sku")
    if sku not in PRICES:
        return {"sku": sku, "error": f"unknown sku {sku!r}"}
    return {"sku": sku, "price": PRICES[sku]}


def serve(url: str, max_requests: int, *, timeout: float = 5.0) -> int:
    """Answer up to ``max_requests`` requests; returns how many were answered."""
    conn = BlockingConnection(url, timeout=timeout)
    try:
        requests = conn.create_receiver("prices", credit=10)
        replies = conn.create_sender(None)  # anonymous: each reply names its own address in `to`
        answered = 0
        for _ in range(max_requests):
            try:
                request = requests.receive(timeout=timeout)
            except Exception:  # noqa: BLE001 - proton raises Timeout when no request comes
                break
            if request.reply_to:
                replies.send(Message(address=request.reply_to, body=answer(request.body), correlation_id=request.id))
            requests.accept()
            answered += 1
        return answered
    finally:
        conn.close()


def ask(url: str, sku: str, *, timeout: float = 5.0) -> dict[str, Any]:
    """Send one request and wait for its reply on a temporary queue."""
    conn = BlockingConnection(url, timeout=timeout)
    try:
        replies = conn.create_receiver(None, dynamic=True)
        request_id = str(uuid.uuid4())
        conn.create_sender("prices").send(Message(body={"sku": sku}, id=request_id, reply_to=replies.remote_source.address))
        reply = replies.receive(timeout=timeout)
        replies.accept()
        if reply.correlation_id != request_id:
            raise RuntimeError(f"reply to {reply.correlation_id!r}, expected {request_id!r}")
        body: dict[str, Any] = reply.body
        return body
    finally:
        conn.close()
