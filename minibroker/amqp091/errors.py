"""AMQP 0-9-1 reply codes (0-9-1 specification §1.2 "Constants") and the codec's error.

A 0-9-1 peer reports an error by closing: a *soft* error closes the channel (``channel.close``),
a *hard* error closes the connection (``connection.close``), each with a reply code and a text.
:class:`AMQP091Error` carries both, and the class and method ids of the method that failed, so
the engine knows what to send without asking what went wrong.
"""

from __future__ import annotations

from typing import Final

# Soft errors: the channel is closed (§1.2 "soft-error").
CONTENT_TOO_LARGE: Final = 311
NO_ROUTE: Final = 312
NO_CONSUMERS: Final = 313
ACCESS_REFUSED: Final = 403
NOT_FOUND: Final = 404
RESOURCE_LOCKED: Final = 405
PRECONDITION_FAILED: Final = 406

# Hard errors: the connection is closed (§1.2 "hard-error").
CONNECTION_FORCED: Final = 320
INVALID_PATH: Final = 402
FRAME_ERROR: Final = 501
SYNTAX_ERROR: Final = 502
COMMAND_INVALID: Final = 503
CHANNEL_ERROR: Final = 504
UNEXPECTED_FRAME: Final = 505
RESOURCE_ERROR: Final = 506
NOT_ALLOWED: Final = 530
NOT_IMPLEMENTED: Final = 540
INTERNAL_ERROR: Final = 541

REPLY_SUCCESS: Final = 200

#: Reply code -> the name RabbitMQ puts at the start of its reply text (``"NOT_FOUND - no queue
#: 'q' in vhost '/'"``); clients and tests match on these.
REPLY_NAMES: Final[dict[int, str]] = {
    CONTENT_TOO_LARGE: "CONTENT_TOO_LARGE",
    NO_ROUTE: "NO_ROUTE",
    NO_CONSUMERS: "NO_CONSUMERS",
    ACCESS_REFUSED: "ACCESS_REFUSED",
    NOT_FOUND: "NOT_FOUND",
    RESOURCE_LOCKED: "RESOURCE_LOCKED",
    PRECONDITION_FAILED: "PRECONDITION_FAILED",
    CONNECTION_FORCED: "CONNECTION_FORCED",
    INVALID_PATH: "INVALID_PATH",
    FRAME_ERROR: "FRAME_ERROR",
    SYNTAX_ERROR: "SYNTAX_ERROR",
    COMMAND_INVALID: "COMMAND_INVALID",
    CHANNEL_ERROR: "CHANNEL_ERROR",
    UNEXPECTED_FRAME: "UNEXPECTED_FRAME",
    RESOURCE_ERROR: "RESOURCE_ERROR",
    NOT_ALLOWED: "NOT_ALLOWED",
    NOT_IMPLEMENTED: "NOT_IMPLEMENTED",
    INTERNAL_ERROR: "INTERNAL_ERROR",
}

SOFT_ERRORS: Final = frozenset(
    {CONTENT_TOO_LARGE, NO_ROUTE, NO_CONSUMERS, ACCESS_REFUSED, NOT_FOUND, RESOURCE_LOCKED, PRECONDITION_FAILED}
)


class AMQP091Error(Exception):
    """An error a 0-9-1 peer is told about with ``channel.close`` (soft) or ``connection.close`` (hard).

    ``text`` is the human part; :attr:`reply_text` prefixes RabbitMQ's code name as RabbitMQ does
    (``"PRECONDITION_FAILED - inequivalent arg 'durable' ..."``).  ``class_id`` and ``method_id``
    name the method that caused it (0, 0 when no method did, e.g. a malformed frame).
    """

    def __init__(self, reply_code: int, text: str, class_id: int = 0, method_id: int = 0) -> None:
        if reply_code not in REPLY_NAMES:
            raise ValueError(f"{reply_code} is not an AMQP 0-9-1 error reply code; use one of {sorted(REPLY_NAMES)}")
        super().__init__(f"{REPLY_NAMES[reply_code]} - {text}")
        self.reply_code = reply_code
        self.text = text
        self.class_id = class_id
        self.method_id = method_id

    @property
    def reply_text(self) -> str:
        """The text sent in ``close``: at most 255 bytes, as a short string must be (§4.2.5.3)."""
        return _clip(f"{REPLY_NAMES[self.reply_code]} - {self.text}")

    @property
    def closes_connection(self) -> bool:
        """Whether the spec classes this code as a hard error (the connection is closed)."""
        return self.reply_code not in SOFT_ERRORS


class FrameError(AMQP091Error):
    """Bytes that are not a valid 0-9-1 frame or field encoding: a hard ``FRAME_ERROR`` (501).

    The specification (§4.2.3) asks for the connection to be closed "with a frame-error" when a
    frame is malformed; RabbitMQ answers a method whose arguments do not decode with 501 too.
    """

    def __init__(self, text: str, class_id: int = 0, method_id: int = 0) -> None:
        super().__init__(FRAME_ERROR, text, class_id, method_id)


def _clip(text: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= 255:
        return text
    return data[:255].decode("utf-8", "ignore")
