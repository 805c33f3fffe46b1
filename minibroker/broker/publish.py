"""What a client publishes: the messages a delivery carries and where each goes.

A delivery of message-format 0 is one AMQP message (Part 3 §3.2); a batch
(:data:`BATCH_FORMAT`, as Azure Service Bus and Event Hubs clients send)
carries one encoded message in each data section of its body.  Other
formats are rejected with ``amqp:not-implemented``.  Each message is routed
by the producer's address, or by its ``to`` on the anonymous relay; the
delivery's outcome is the first rejection, else accepted.
"""

from __future__ import annotations

from typing import Any

from ..amqp import errors as conditions
from ..amqp.errors import AMQPDecodeError
from ..amqp.message import decode_message
from ..amqp.messaging import Accepted, Rejected
from ..amqp.performatives import Error, amqp_error
from ..protocol.endpoints import Delivery
from .limits import admit
from .permissions import Permissions
from .router import Router
from .stored import StoredMessage

__all__ = ["BATCH_FORMAT", "format_refusal", "messages_of", "relay_refusal", "route_all"]

#: Message format of a batch: the body's data sections each hold one encoded message
#: (the format Azure Service Bus and Event Hubs clients send batches in).
BATCH_FORMAT = 0x80013700


def format_refusal(delivery: Delivery) -> Rejected | None:
    """The rejection for a message format this broker does not take, or None."""
    if delivery.message_format in (0, BATCH_FORMAT):
        return None
    return Rejected(
        error=amqp_error(
            conditions.NOT_IMPLEMENTED,
            f"message-format {delivery.message_format:#x} is not supported; this broker takes "
            f"0 (AMQP, Part 3 §3.2) and {BATCH_FORMAT:#x} (a batch of AMQP messages)",
        )
    )


def messages_of(delivery: Delivery, now: float) -> list[StoredMessage]:
    """The messages a delivery carries: itself, or for a batch each of its data sections.

    Raises :class:`AMQPDecodeError` (or ``IndexError``) for a message whose sections are misrepresented.
    """
    if delivery.message_format != BATCH_FORMAT:
        return [StoredMessage(delivery.payload, now)]
    outer = decode_message(delivery.payload)
    if outer.body_kind != "data":
        raise AMQPDecodeError(
            f"a batch (message-format {BATCH_FORMAT:#x}) carries each message in a data section, "
            f"got a body of kind {outer.body_kind!r}"
        )
    body = outer.body
    return [StoredMessage(payload, now) for payload in (body if isinstance(body, list) else [body])]


def route_all(router: Router, address: str | None, messages: list[StoredMessage], now: float) -> Any:
    """Route each message; the outcome for their delivery: the first rejection, else accepted."""
    outcomes: list[Any] = []
    for message in messages:
        node = router.node_for_publish(address, message)
        full = admit(node, message) if not isinstance(node, Error) else None  # max_depth, max_bytes (limits.py)
        if isinstance(node, Error):
            outcomes.append(Rejected(error=node))
        elif full is not None:
            outcomes.append(Rejected(error=full))
        else:
            router.route(node, message, now)
            outcomes.append(Accepted())
    rejected = [o for o in outcomes if isinstance(o, Rejected)]
    return rejected[0] if rejected else outcomes[0]


def relay_refusal(permissions: Permissions, user: str | None, messages: list[StoredMessage]) -> Error | None:
    """The first anonymous-relay message ``user`` may not send to its ``to``, as an error."""
    for message in messages:
        to = message.properties.to if message.properties is not None else None
        denied = permissions.relay_refusal(user, to)
        if denied is not None:
            return denied
    return None
