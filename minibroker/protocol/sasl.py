"""The server's side of SASL: which mechanisms it offers and whom it lets in (Part 5 §5.3).

ANONYMOUS (RFC 4505) is offered while anonymous access is allowed; PLAIN
(RFC 4616) when users are configured.  Framing stays in the connection.
"""

from __future__ import annotations

import hmac

from ..amqp import codec
from ..amqp.errors import AMQPDecodeError
from ..amqp.sasl_frames import SaslInit
from ..amqp.types import symbol

__all__ = ["authenticate", "is_plain_init", "mechanisms", "redacted", "REDACTED"]

#: What stands for a password in anything shown (frame log, traces, reports).
REDACTED = b"<redacted>"
ANONYMOUS = symbol("ANONYMOUS")
PLAIN = symbol("PLAIN")


def mechanisms(users: dict[str, str], allow_anonymous: bool) -> list[str]:
    """The sasl-server-mechanisms to offer, strongest first (§5.3.3.1)."""
    offered: list[str] = []
    if users:
        offered.append(PLAIN)
    if allow_anonymous:
        offered.append(ANONYMOUS)
    return offered


def authenticate(init: SaslInit, users: dict[str, str], allow_anonymous: bool) -> tuple[bool, str | None]:
    """Judge a sasl-init (§5.3.3.2): whether it passes, and the user it names.

    PLAIN's initial response is ``authzid NUL authcid NUL password``; the
    password is compared in constant time.
    """
    if init.mechanism == ANONYMOUS:
        return allow_anonymous, None
    if init.mechanism == PLAIN and users:
        parts = (init.initial_response or b"").split(b"\x00")
        if len(parts) == 3 and parts[0] in (b"", parts[1]):  # no authorization identity, or the same user
            user = parts[1].decode("utf-8", "replace")
            expected = users.get(user)
            if expected is not None and hmac.compare_digest(expected.encode("utf-8"), parts[2]):
                return True, user
    return False, None


def is_plain_init(body: bytes) -> bool:
    """Whether a SASL frame body is a PLAIN ``sasl-init`` (a password to judge), decoding it only to look."""
    try:
        init = codec.decode(body)
    except AMQPDecodeError:
        return False  # judged (and refused) as it is, not held
    return isinstance(init, SaslInit) and init.mechanism == PLAIN


def redacted(frame: object) -> object:
    """A sasl-init fit to be logged: PLAIN's password replaced by ``<redacted>``; other frames unchanged.

    Only the password is hidden; the user names (authzid, authcid) stay, so a
    frame log still says who tried to log in.
    """
    if not isinstance(frame, SaslInit) or not frame.initial_response or frame.mechanism == ANONYMOUS:
        return frame
    parts = frame.initial_response.split(b"\x00")
    shown = b"\x00".join([*parts[:2], REDACTED]) if len(parts) == 3 else REDACTED
    return SaslInit(mechanism=frame.mechanism, initial_response=shown, hostname=frame.hostname)
