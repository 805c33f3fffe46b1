"""What the 0-9-1 engine shows an observer: one entry per method, a message's content folded in.

A :class:`~.connection.Connection` whose ``hook`` is set (a :class:`FrameHook`) tells it of every
method it decodes (``frame_in``, before acting on it) and every method it queues (``frame_out``,
with the encoded bytes, which the hook may pass on, replace or withhold), as the AMQP 1.0 engine
does with performatives (``minibroker.protocol.hooks``).  A method that carries content
(``basic.publish``, ``basic.deliver``, ``basic.get-ok``, ``basic.return``: §2.3.5.2) is one
:class:`MethodFrame` with its content header's properties and its body: a publish is told when
its last body frame arrives, a delivery with all its frames' bytes.  Heartbeats (§4.2.7) going
out are told as ``frame_out(0, None, bytes)``, as 1.0 keep-alives are; heartbeats in are not.

:class:`MethodFrame` describes itself for the protocol-neutral frame record
(:class:`minibroker.broker.statistics.FrameRecord`): its ``name`` (``basic.deliver``), key
``fields`` (``delivery-tag``, ``consumer-tag``, ``routing-key`` ...), a one-line ``summary()``
and a short ``body_summary()``.  Credentials are never shown: the engine hands observers
:func:`redacted` methods (``connection.start-ok``'s PLAIN response keeps the user name and loses
the password, as a 1.0 ``sasl-init`` does; AMQPLAIN's and a new secret are replaced whole).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Protocol

from ..records import record
from .methods import Method
from .properties import BasicProperties

__all__ = ["REDACTED", "FrameHook", "MethodFrame", "redacted"]

#: What replaces a password or secret in what observers see.
REDACTED = b"<redacted>"
#: Method arguments that carry credentials (§1.4.2.2 start-ok, §1.4.2.4 secure-ok, RabbitMQ's update-secret).
SECRETS = ("response", "new_secret")

#: Longest body shown in a summary (repr characters).
BODY_SHOWN = 60
#: Method arguments never shown: credentials, deprecated placeholders, and tables too long to
#: help on one line (the server's and client's properties).
HIDDEN = frozenset(
    {"ticket", "response", "challenge", "new_secret", "server_properties", "client_properties", "mechanisms", "locales"}
)
#: Arguments shown even when empty: the default exchange ``''`` and an empty routing key mean something.
ALWAYS = frozenset({"exchange", "routing_key"})
#: The method a close names as its cause: 0 when none did (a normal close).
_IDS = frozenset({"class_id", "method_id"})
#: Message properties shown with a content-bearing method, when present.
PROPERTIES = ("content_type", "delivery_mode", "correlation_id", "reply_to", "message_id", "expiration")


class FrameHook(Protocol):
    """Sees every method of one 0-9-1 connection (the broker's tap, through the front end)."""

    def frame_in(self, channel: int, frame: MethodFrame) -> None:
        """A method (with its content, for a publish) was read, not yet acted on."""

    def frame_out(self, channel: int, frame: MethodFrame | None, data: bytes) -> bytes:
        """``data`` (the method's frames, or a heartbeat when ``frame`` is None) is about to be
        queued: return the bytes to queue instead (``b""``: none)."""


def redacted(method: Method) -> Method:
    """``method`` fit to be logged: a PLAIN response (``\\0user\\0password``, RFC 4616) keeps its
    user, any other credential is replaced whole; a method without credentials is returned as is."""
    changes: dict[str, bytes] = {}
    for key in SECRETS:
        secret = getattr(method, key, None)
        if isinstance(secret, bytes) and secret:
            parts = secret.split(b"\x00")
            changes[key] = b"\x00".join([*parts[:2], REDACTED]) if len(parts) == 3 else REDACTED
    return dataclasses.replace(method, **changes) if changes else method  # type: ignore[type-var]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= BODY_SHOWN else text[: BODY_SHOWN - 3] + "..."


@record(frozen=True, slots=True)
class MethodFrame:
    """A method frame as an observer sees it, with the content that followed it (if any)."""

    #: The wire protocol, for the protocol-neutral frame record.
    PROTOCOL: ClassVar[str] = "AMQP 0-9-1"

    method: Method
    properties: BasicProperties | None = None
    body: bytes | None = None

    @property
    def name(self) -> str:
        """The specification's ``class.method`` name: ``basic.publish``."""
        return self.method.NAME

    def fields(self) -> dict[str, Any]:
        """The method's arguments worth showing, by their specification names (``delivery-tag``):
        bits only when set, strings only when not empty (the exchange and routing key always),
        and for content the message properties that are present (``content-type`` ...)."""
        shown: dict[str, Any] = {}
        for item in dataclasses.fields(self.method):  # type: ignore[arg-type]  # every Method is a dataclass
            key = item.name
            value = getattr(self.method, key)
            empty = value is False or value in ("", b"") or value == {} or (key in _IDS and value == 0)
            if key in HIDDEN or value is None or (empty and key not in ALWAYS):
                continue
            shown[key.replace("_", "-")] = value
        if self.properties is not None:
            for key in PROPERTIES:
                value = getattr(self.properties, key)
                if value is not None:
                    shown[key.replace("_", "-")] = value
        return shown

    def body_summary(self) -> str | None:
        """The body's bytes, cut short (``b'{"id": 1}'``); None for a method without content."""
        return None if self.body is None else _shown(self.body)

    def summary(self) -> str:
        """One line: ``basic.deliver consumer-tag='ctag1' delivery-tag=1 exchange='' routing-key='orders' body=b'one'``."""
        parts = [self.name]
        for key, value in self.fields().items():
            parts.append(key if value is True else f"{key}={_shown(value) if not isinstance(value, int) else value}")
        body = self.body_summary()
        if body is not None:
            parts.append(f"body={body}")
        return " ".join(parts)
