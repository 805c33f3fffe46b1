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
* ``renew-session-lock``, ``get-session-state``, ``set-session-state``,
  ``get-message-sessions``;
* a subscription's rules: ``add-rule``, ``remove-rule``, ``enumerate-rules``
  (:mod:`~minibroker.servicebus.rules`);
* anything else: 501 ``amqp:not-implemented``.

Each operation is authorised against the entity the node belongs to, with
the right its Service Bus claim maps to (:data:`OPERATION_RIGHTS`: Listen is
``receive``, Send is ``send``, Manage is ``manage``); a user without it is
answered 401 with ``amqp:unauthorized-access``, as the service answers an
operation its token's claims do not cover ("Service Bus authentication and
authorization": a request without the right claim is unauthorized).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Protocol

from ..amqp import errors as conditions
from ..amqp.errors import AMQPDecodeError
from ..amqp.message import Message
from ..amqp.types import Array, symbol
from ..broker.queue import Queue
from ..broker.stored import StoredMessage
from ..broker.topic import Topic
from .addresses import Entity
from .consumer import LOCK_LOST
from .duplicates import MAX_ID_LENGTH, id_too_long
from .locks import DEFERRED
from .requests import Response
from .rules import RuleError, Rules, RuleSet, describe_rule, rule_from_description
from .scheduler import Scheduler
from .sections import SCHEDULED_ENQUEUE_TIME, delivery_payload, millis
from .sessions import SESSION_LOCK_LOST, Sessions, StateRefused
from .settlement import Settlement

__all__ = ["Management", "ManagementContext", "OPERATION_RIGHTS"]

MESSAGE_NOT_FOUND = "com.microsoft:message-not-found"
SESSION_NOT_FOUND = "com.microsoft:session-not-found"
ENTITY_ALREADY_EXISTS = "com.microsoft:entity-already-exists"
MESSAGING_ENTITY_NOT_FOUND = "com.microsoft:messaging-entity-not-found"
_RECEIVE_AND_DELETE = 0  # receiver-settle-mode first
#: get-message-sessions' last-updated-time when the caller gives none: year 10000 (the SDKs' sentinel).
_NO_TIME_FILTER_MS = 253_402_300_800_000


#: The right each operation needs on the entity (the Service Bus claim it maps to: Listen, Send, Manage).
OPERATION_RIGHTS: dict[str, str] = {
    "com.microsoft:peek-message": "receive",
    "com.microsoft:renew-lock": "receive",
    "com.microsoft:update-disposition": "receive",
    "com.microsoft:receive-by-sequence-number": "receive",
    "com.microsoft:renew-session-lock": "receive",
    "com.microsoft:get-session-state": "receive",
    "com.microsoft:set-session-state": "receive",
    "com.microsoft:get-message-sessions": "receive",
    "com.microsoft:schedule-message": "send",
    "com.microsoft:cancel-scheduled-message": "send",
    "com.microsoft:add-rule": "manage",
    "com.microsoft:remove-rule": "manage",
    "com.microsoft:enumerate-rules": "manage",
}


class ManagementContext(Protocol):
    """What a ``$management`` node acts through (the Service Bus layer provides it)."""

    @property
    def settlement(self) -> Settlement: ...

    @property
    def sessions(self) -> Sessions: ...

    @property
    def scheduler(self) -> Scheduler: ...

    @property
    def rules(self) -> Rules: ...

    def now(self) -> float: ...

    def node_for(self, entity: Entity) -> Queue | Topic | str:
        """The node an entity's operations act on, or why there is none."""

    def queue_of(self, node: Queue | Topic) -> Queue | None:
        """``node`` as a queue (a subscription's is one), or None for a topic."""

    def refusal(self, user: str | None, right: str, address: str) -> str | None:
        """Why ``user`` may not use ``right`` on ``address``, or None if it may."""


def _condition(condition: str) -> dict[str, Any]:
    return {"errorCondition": symbol(condition)}


def _error(status: int, condition: str, description: str) -> Response:
    return Response(status, description, None, _condition(condition))


def _elements(value: Any) -> list[Any]:
    return list(value.elements) if isinstance(value, Array) else list(value or ())


class Management:
    """The ``$management`` node of one entity."""

    def __init__(self, context: ManagementContext, entity: Entity, user: str | None = None) -> None:
        self.context = context
        self.entity = entity
        self.user = user  # whom the connection authenticated: each request is authorised for them
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
            "com.microsoft:get-message-sessions": self.get_message_sessions,
            "com.microsoft:add-rule": self.add_rule,
            "com.microsoft:remove-rule": self.remove_rule,
            "com.microsoft:enumerate-rules": self.enumerate_rules,
        }

    def handle(self, request: Message) -> Response:
        operation = str((request.application_properties or {}).get("operation"))
        method = self._operations.get(operation)
        if method is None:
            return _error(501, conditions.NOT_IMPLEMENTED, f"operation {operation!r} is not emulated by minibroker")
        denied = self.context.refusal(self.user, OPERATION_RIGHTS[operation], self.entity.node)
        if denied is not None:
            return _error(401, conditions.UNAUTHORIZED_ACCESS, f"{operation}: {denied}")
        node = self.context.node_for(self.entity)
        if isinstance(node, str):
            return _error(404, conditions.NOT_FOUND, node)
        body = request.body if isinstance(request.body, dict) else {}
        try:
            return method(node, body)
        except (KeyError, TypeError, ValueError, AMQPDecodeError) as exc:
            return _error(400, conditions.INVALID_FIELD, f"malformed {operation} request: {type(exc).__name__}: {exc}")

    def _queue(self, node: Queue | Topic) -> Queue:
        queue = self.context.queue_of(node)
        if queue is None:
            raise ValueError(f"{node.name!r} is a topic; this operation acts on a queue or subscription")
        return queue

    # ------------------------------------------------------------ receiving

    def peek(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        queue = self._queue(node)
        start = int(body.get("from-sequence-number", 1))
        count = int(body.get("message-count", 1))
        entries = sorted((e for e in queue.entries() if e.seq >= start), key=lambda e: e.seq)[:count]
        if not entries:
            return Response(204, "No messages")
        now = self.context.now()
        return Response(200, "OK", {"messages": [{"message": delivery_payload(e, now, None)} for e in entries]})

    def receive_by_sequence_number(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        queue = self._queue(node)
        settlement = self.context.settlement
        numbers = [int(n) for n in _elements(body["sequence-numbers"])]
        found = [settlement.deferred.get((queue.name, n)) for n in numbers]
        missing = [n for n, f in zip(numbers, found, strict=True) if f is None]
        if missing:
            return _error(404, MESSAGE_NOT_FOUND, f"no deferred message with sequence number(s) {missing}")
        now = self.context.now()
        delete = int(body.get("receiver-settle-mode", 1)) == _RECEIVE_AND_DELETE
        messages: list[dict[str, Any]] = []
        for item in found:
            assert item is not None
            _queue, entry = item
            if delete:
                messages.append({"message": delivery_payload(entry, now, None)})
                settlement.complete(queue, entry)
                continue
            until = now + settlement.lock_duration(queue)
            lock = settlement.lock(queue, entry, DEFERRED, None, until)
            messages.append({"message": delivery_payload(entry, now, until), "lock-token": lock.token})
        return Response(200, "OK", {"messages": messages})

    # ---------------------------------------------------------------- locks

    def renew_lock(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        settlement = self.context.settlement
        locks = [settlement.locks.get(_token(t)) for t in _elements(body["lock-tokens"])]
        if any(lock is None for lock in locks):
            return _error(410, LOCK_LOST, "the lock on the message has expired or was lost")
        now = self.context.now()
        expirations = []
        for lock in locks:
            assert lock is not None
            until = now + settlement.lock_duration(lock.queue)
            if lock.until is not None:  # a session's message follows its session's lock
                settlement.locks.renew(lock, until)
            expirations.append(millis(until))
        return Response(200, "OK", {"expirations": Array("timestamp", expirations)})

    def update_disposition(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        settlement = self.context.settlement
        status = str(body["disposition-status"])
        if status not in ("completed", "abandoned", "suspended", "defered"):
            raise ValueError(f"disposition-status {status!r} is not completed, abandoned, suspended or defered")
        locks = [settlement.locks.get(_token(t)) for t in _elements(body["lock-tokens"])]
        if any(lock is None for lock in locks):
            session = body.get("session-id")  # a session receiver's messages are held by its session
            if session is not None and self.context.sessions.holder(self._queue(node), str(session)) is None:
                return _error(410, SESSION_LOCK_LOST, f"the lock on session {session!r} has expired or was lost")
            return _error(410, LOCK_LOST, "the lock on the message has expired or was lost")
        now = self.context.now()
        for lock in locks:
            assert lock is not None
            settlement.release_lock(lock)
            queue, entry = lock.queue, lock.entry
            if status == "completed":
                settlement.complete(queue, entry)
            elif status == "abandoned":
                settlement.abandon(queue, entry, now, body.get("properties-to-modify"))
            elif status == "suspended":
                settlement.dead_letter(queue, entry, body.get("deadletter-reason"), body.get("deadletter-description"))
            else:
                settlement.defer(queue, entry)
            queue.dispatch(now)
        return Response(200, "OK", {})

    # ------------------------------------------------------------- sessions

    def renew_session_lock(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        sessions = self.context.sessions
        holder = sessions.holder(self._queue(node), str(body["session-id"]))
        if holder is None:
            return _error(410, SESSION_LOCK_LOST, f"session {body['session-id']!r} is not locked by a receiver")
        until = self.context.now() + self.context.settlement.lock_duration(holder.queue)
        sessions.renew(holder, until)
        return Response(200, "OK", {"expiration": millis(until)})

    def get_session_state(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        state = self.context.sessions.state(self._queue(node), _session_id(body))
        return Response(200, "OK", {"session-state": state})

    def set_session_state(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        """Keep a session's state: binary, at most one message's worth (see :mod:`.sessions`)."""
        queue = self._queue(node)
        state = body.get("session-state")
        if state is not None and not isinstance(state, (bytes, bytearray, memoryview)):
            raise TypeError(f"session-state must be binary, got {type(state).__name__}")
        try:
            self.context.sessions.set_state(
                queue, _session_id(body), None if state is None else bytes(state), self.context.now()
            )
        except StateRefused as refused:
            if refused.too_large:  # as the service's link would refuse a request of that size
                return _error(413, conditions.MESSAGE_SIZE_EXCEEDED, str(refused))
            return _error(403, conditions.RESOURCE_LIMIT_EXCEEDED, str(refused))
        return Response(200, "OK", {})

    def get_message_sessions(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        """Sessions with messages or state; with a last-updated-time, those whose state was set after it."""
        raw = body.get("last-updated-time")  # a timestamp, decoded as milliseconds
        after = None if raw is None or int(raw) >= _NO_TIME_FILTER_MS else int(raw) / 1000
        skip, top = int(body.get("skip", 0)), int(body.get("top", 100))
        if skip < 0 or top < 0:
            raise ValueError(f"skip and top must not be negative, got skip={skip}, top={top}")
        listed = list(self.context.sessions.listed(self._queue(node), after))[skip : skip + top]
        if not listed:
            return _error(204, SESSION_NOT_FOUND, "no sessions")
        return Response(200, "OK", {"skip": skip, "sessions-ids": Array("string", listed)})

    # ----------------------------------------------------------- scheduling

    def schedule(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        """Schedule each message, or none: one that would not fit the entity's bounds refuses the request."""
        now = self.context.now()
        scheduler = self.context.scheduler
        numbers: list[int] = []
        for item in body["messages"]:
            encoded = item["message"]
            if not isinstance(encoded, (bytes, bytearray, memoryview)):
                raise TypeError(f"each scheduled message must be an encoded (binary) message, got {type(encoded).__name__}")
            message = StoredMessage(bytes(encoded), now)
            at = (message.message_annotations or {}).get(SCHEDULED_ENQUEUE_TIME)
            refused = scheduler.refusal(node, message)
            if refused is not None:
                for number in numbers:  # all or nothing: the client is told none was scheduled
                    scheduler.cancel(node, number)
                return _error(403, conditions.RESOURCE_LIMIT_EXCEEDED, f"not scheduled: {refused.description}")
            numbers.append(scheduler.schedule(node, message, int(at) / 1000 if at is not None else now))
        return Response(200, "OK", {"sequence-numbers": Array("long", numbers)})

    def cancel(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        for number in _elements(body["sequence-numbers"]):
            self.context.scheduler.cancel(node, int(number))
        return Response(200, "OK", {})


    # ---------------------------------------------------------------- rules

    def _ruleset(self, node: Queue | Topic) -> RuleSet:
        ruleset = self.context.rules.get(node.name)
        if ruleset is None:
            raise ValueError(f"{node.name!r} is not a topic subscription: rules belong to subscriptions")
        return ruleset

    def add_rule(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        ruleset = self._ruleset(node)
        name = str(body["rule-name"])
        description = body["rule-description"]
        if not isinstance(description, dict):
            raise TypeError(f"rule-description must be a map, got {type(description).__name__}")
        if any(rule.name == name for rule, _ in ruleset):
            return _error(409, ENTITY_ALREADY_EXISTS, f"the subscription already has a rule named {name!r}")
        try:
            ruleset.add(rule_from_description(name, description), self.context.now())
        except RuleError as exc:
            return _error(400, conditions.INVALID_FIELD, str(exc))
        return Response(200, "OK", {})

    def remove_rule(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        name = str(body["rule-name"])
        if not self._ruleset(node).remove(name):
            return _error(404, MESSAGING_ENTITY_NOT_FOUND, f"the subscription has no rule named {name!r}")
        return Response(200, "OK", {})

    def enumerate_rules(self, node: Queue | Topic, body: dict[str, Any]) -> Response:
        skip, top = int(body.get("skip", 0)), int(body.get("top", 100))
        if skip < 0 or top < 0:
            raise ValueError(f"skip and top must not be negative, got skip={skip}, top={top}")
        rules = list(self._ruleset(node))[skip : skip + top]
        if not rules:
            return Response(204, "No rules")
        return Response(200, "OK", {"rules": [{"rule-description": describe_rule(r, at)} for r, at in rules]})


def _session_id(body: dict[str, Any]) -> str:
    session = str(body["session-id"])
    if id_too_long(session):
        raise ValueError(f"a session-id is at most {MAX_ID_LENGTH} characters, got {len(session)}")
    return session


def _token(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
