"""``$cbs`` and the ``$management`` node of each entity (the operations the SDKs call).

Requests carry ``operation`` in application-properties and a map body;
responses carry ``statusCode``/``statusDescription`` (and ``errorCondition``
on failure), with 200 and a map body on success.  Operations:

* ``com.microsoft:peek-message``: messages from a sequence number on, locked
  and deferred ones included, none locked (204 when there are none);
* ``com.microsoft:renew-lock``: new expiry times for lock tokens;
* ``com.microsoft:update-disposition``: settle by lock token (completed,
  abandoned, suspended = dead-letter, defered);
* ``com.microsoft:schedule-message`` / ``cancel-scheduled-message``;
* ``com.microsoft:receive-by-sequence-number``: deferred messages, locked anew;
* ``renew-session-lock``, ``get-session-state``, ``set-session-state``;
* anything else: 501 ``amqp:not-implemented``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..amqp import errors as conditions
from ..amqp.errors import AMQPDecodeError
from ..amqp.message import Message
from ..amqp.types import Array, symbol
from ..broker.queue import Queue
from ..broker.stored import StoredMessage
from ..broker.topic import Topic
from .addresses import Entity
from .consumer import LOCK_LOST
from .locks import DEFERRED
from .requests import Response
from .sections import SCHEDULED_ENQUEUE_TIME, millis

if TYPE_CHECKING:
    from .layer import ServiceBusLayer

__all__ = ["Management", "put_token"]

MESSAGE_NOT_FOUND = "com.microsoft:message-not-found"
SESSION_LOCK_LOST = "com.microsoft:session-lock-lost"
_RECEIVE_AND_DELETE = 0  # receiver-settle-mode first


def put_token(request: Message) -> Response:
    """``$cbs`` put-token: any token is accepted (202)."""
    operation = (request.application_properties or {}).get("operation")
    if operation != "put-token":
        return Response(501, f"$cbs supports put-token, not {operation!r}", None, _condition(conditions.NOT_IMPLEMENTED))
    return Response(202, "Accepted")


def _condition(condition: str) -> dict[str, Any]:
    return {"errorCondition": symbol(condition)}


def _error(status: int, condition: str, description: str) -> Response:
    return Response(status, description, None, _condition(condition))


def _elements(value: Any) -> list[Any]:
    return list(value.elements) if isinstance(value, Array) else list(value or ())


class Management:
    """The ``$management`` node of one entity."""

    def __init__(self, layer: ServiceBusLayer, entity: Entity) -> None:
        self.layer = layer
        self.entity = entity
        self._operations: dict[str, Callable[[Queue | Topic, dict[str, Any]], Response]] = {
            "com.microsoft:peek-message": self.peek,
            "com.microsoft:renew-lock": self.renew_lock,
            "com.microsoft:update-disposition": self.update_disposition,
            "com.microsoft:schedule-message": self.schedule,
            "com.microsoft:cancel-scheduled-message": self.cancel,
            "com.microsoft:receive-by-sequence-number": self.receive_by_sequence_number,
            "com.microsoft:renew-session-lock": self.renew_session_lock,
            "com.microsoft:get-session-state": self.get_session_state,
            "com.microsoft:set-session-state": self.set_session_state,
        }

    def handle(self, request: Message) -> Response:
        operation = str((request.application_properties or {}).get("operation"))
        method = self._operations.get(operation)
        if method is None:
            return _error(501, conditions.NOT_IMPLEMENTED, f"operation {operation!r} is not emulated by minibroker")
        node = self.layer.node_for(self.entity)
        if isinstance(node, str):
            return _error(404, conditions.NOT_FOUND, node)
        body = request.body if isinstance(request.body, dict) else {}
        try:
            return method(node, body)
        except (KeyError, TypeError, ValueError, AMQPDecodeError) as exc:
            return _error(400, conditions.INVALID_FIELD, f"malformed {operation} request: {type(exc).__name__}: {exc}")

    def _queue(self, node: Queue | Topic) -> Queue:
        if not isinstance(node, Queue):
            raise ValueError(f"{node.name!r} is a topic; this operation acts on a queue or subscription")
        return node

    # ------------------------------------------------------------ receiving

    def peek(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        queue = self._queue(node)
        start = int(body.get("from-sequence-number", 1))
        count = int(body.get("message-count", 1))
        entries = sorted((e for e in queue.entries() if e.seq >= start), key=lambda e: e.seq)[:count]
        if not entries:
            return Response(204, "No messages")
        now = self.layer.broker.clock.now()
        return Response(200, "OK", {"messages": [{"message": self.layer.outgoing(e, now, None)} for e in entries]})

    def receive_by_sequence_number(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        queue = self._queue(node)
        layer = self.layer
        numbers = [int(n) for n in _elements(body["sequence-numbers"])]
        found = [layer.deferred.get((queue.name, n)) for n in numbers]
        missing = [n for n, f in zip(numbers, found, strict=True) if f is None]
        if missing:
            return _error(404, MESSAGE_NOT_FOUND, f"no deferred message with sequence number(s) {missing}")
        now = layer.broker.clock.now()
        delete = int(body.get("receiver-settle-mode", 1)) == _RECEIVE_AND_DELETE
        messages: list[dict[str, Any]] = []
        for item in found:
            assert item is not None
            _queue, entry = item
            if delete:
                messages.append({"message": layer.outgoing(entry, now, None)})
                layer.complete(queue, entry)
                continue
            until = now + layer.options.lock_duration
            lock = layer.lock(queue, entry, DEFERRED, None, until)
            messages.append({"message": layer.outgoing(entry, now, until), "lock-token": lock.token})
        return Response(200, "OK", {"messages": messages})

    # ---------------------------------------------------------------- locks

    def renew_lock(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        layer = self.layer
        locks = [layer.locks.get(_token(t)) for t in _elements(body["lock-tokens"])]
        if any(lock is None for lock in locks):
            return _error(410, LOCK_LOST, "the lock on the message has expired or was lost")
        until = layer.broker.clock.now() + layer.options.lock_duration
        for lock in locks:
            assert lock is not None
            layer.locks.renew(lock, until)
        return Response(200, "OK", {"expirations": Array("timestamp", [millis(until)] * len(locks))})

    def update_disposition(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        layer = self.layer
        status = str(body["disposition-status"])
        if status not in ("completed", "abandoned", "suspended", "defered"):
            raise ValueError(f"disposition-status {status!r} is not completed, abandoned, suspended or defered")
        locks = [layer.locks.get(_token(t)) for t in _elements(body["lock-tokens"])]
        if any(lock is None for lock in locks):
            return _error(410, LOCK_LOST, "the lock on the message has expired or was lost")
        now = layer.broker.clock.now()
        for lock in locks:
            assert lock is not None
            layer.release_lock(lock)
            queue, entry = lock.queue, lock.entry
            if status == "completed":
                layer.complete(queue, entry)
            elif status == "abandoned":
                layer.abandon(queue, entry, now, body.get("properties-to-modify"))
            elif status == "suspended":
                layer.dead_letter(queue, entry, body.get("deadletter-reason"), body.get("deadletter-description"))
            else:
                layer.defer(queue, entry)
            queue.dispatch(now)
        return Response(200, "OK", {})

    # ------------------------------------------------------------- sessions

    def renew_session_lock(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        layer = self.layer
        if layer.sessions.holder(self._queue(node), str(body["session-id"])) is None:
            return _error(410, SESSION_LOCK_LOST, f"session {body['session-id']!r} is not locked by a receiver")
        return Response(200, "OK", {"expiration": millis(layer.broker.clock.now() + layer.options.lock_duration)})

    def get_session_state(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        return Response(200, "OK", {"session-state": self.layer.sessions.state(self._queue(node), str(body["session-id"]))})

    def set_session_state(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        self.layer.sessions.set_state(self._queue(node), str(body["session-id"]), body.get("session-state"))
        return Response(200, "OK", {})

    # ----------------------------------------------------------- scheduling

    def schedule(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        layer = self.layer
        now = layer.broker.clock.now()
        numbers = []
        for item in body["messages"]:
            message = StoredMessage(bytes(item["message"]), now)
            at = (message.message_annotations or {}).get(SCHEDULED_ENQUEUE_TIME)
            numbers.append(layer.schedule(node, message, int(at) / 1000 if at is not None else now))
        return Response(200, "OK", {"sequence-numbers": Array("long", numbers)})

    def cancel(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        for number in _elements(body["sequence-numbers"]):
            self.layer.cancel(node, int(number))
        return Response(200, "OK", {})


def _token(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
