"""AMQP error conditions (Part 2 §2.8.15-§2.8.18, Part 4 §4.5.8) and the codec's errors."""

from __future__ import annotations

from typing import Final

from .types import symbol

# amqp-error (Part 2 §2.8.15)
INTERNAL_ERROR: Final = symbol("amqp:internal-error")
NOT_FOUND: Final = symbol("amqp:not-found")
UNAUTHORIZED_ACCESS: Final = symbol("amqp:unauthorized-access")
DECODE_ERROR: Final = symbol("amqp:decode-error")
RESOURCE_LIMIT_EXCEEDED: Final = symbol("amqp:resource-limit-exceeded")
NOT_ALLOWED: Final = symbol("amqp:not-allowed")
INVALID_FIELD: Final = symbol("amqp:invalid-field")
NOT_IMPLEMENTED: Final = symbol("amqp:not-implemented")
RESOURCE_LOCKED: Final = symbol("amqp:resource-locked")
PRECONDITION_FAILED: Final = symbol("amqp:precondition-failed")
RESOURCE_DELETED: Final = symbol("amqp:resource-deleted")
ILLEGAL_STATE: Final = symbol("amqp:illegal-state")
FRAME_SIZE_TOO_SMALL: Final = symbol("amqp:frame-size-too-small")

# connection-error (Part 2 §2.8.16)
CONNECTION_FORCED: Final = symbol("amqp:connection:forced")
FRAMING_ERROR: Final = symbol("amqp:connection:framing-error")
CONNECTION_REDIRECT: Final = symbol("amqp:connection:redirect")

# session-error (Part 2 §2.8.17)
WINDOW_VIOLATION: Final = symbol("amqp:session:window-violation")
ERRANT_LINK: Final = symbol("amqp:session:errant-link")
HANDLE_IN_USE: Final = symbol("amqp:session:handle-in-use")
UNATTACHED_HANDLE: Final = symbol("amqp:session:unattached-handle")

# link-error (Part 2 §2.8.18)
DETACH_FORCED: Final = symbol("amqp:link:detach-forced")
TRANSFER_LIMIT_EXCEEDED: Final = symbol("amqp:link:transfer-limit-exceeded")
MESSAGE_SIZE_EXCEEDED: Final = symbol("amqp:link:message-size-exceeded")
LINK_REDIRECT: Final = symbol("amqp:link:redirect")
STOLEN: Final = symbol("amqp:link:stolen")

# transaction-error (Part 4 §4.5.8)
TRANSACTION_UNKNOWN_ID: Final = symbol("amqp:transaction:unknown-id")
TRANSACTION_ROLLBACK: Final = symbol("amqp:transaction:rollback")
TRANSACTION_TIMEOUT: Final = symbol("amqp:transaction:timeout")


class AMQPDecodeError(ValueError):
    """Bytes that are not a valid AMQP encoding; on the wire this is ``amqp:decode-error``."""

    condition = DECODE_ERROR
