"""Protocol errors that carry their wire meaning: a condition and the scope to close.

A :class:`ConnectionError_` closes the connection with ``close``, a
:class:`SessionError` ends one session with ``end``, a :class:`LinkError`
detaches one link with ``detach`` (Part 2 §2.8.14-§2.8.18).
"""

from __future__ import annotations

from ..amqp import errors as conditions

__all__ = ["AMQPProtocolError", "ConnectionError_", "LinkError", "SessionError"]


class AMQPProtocolError(Exception):
    """A protocol violation; ``condition`` is the AMQP error symbol sent to the peer."""

    scope = "connection"

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(f"{condition}: {description}")
        self.condition = condition
        self.description = description


class ConnectionError_(AMQPProtocolError):
    """Closes the whole connection (``close`` with an error)."""

    scope = "connection"


class SessionError(AMQPProtocolError):
    """Ends one session (``end`` with an error)."""

    scope = "session"

    def __init__(self, condition: str, description: str, channel: int) -> None:
        super().__init__(condition, description)
        self.channel = channel


class LinkError(AMQPProtocolError):
    """Detaches one link (``detach`` with closed=true and an error)."""

    scope = "link"

    def __init__(self, condition: str, description: str, channel: int, handle: int) -> None:
        super().__init__(condition, description)
        self.channel = channel
        self.handle = handle


def framing_error(description: str) -> ConnectionError_:
    return ConnectionError_(conditions.FRAMING_ERROR, description)
