"""Every connection, session and link transition in one place.

Theory of operation: the engine is a server, so it reacts to what the peer
opens.  Each endpoint keeps a state named as in the specification (Part 2
§2.4.6 connection states, §2.5.5 session states, §2.6.2-§2.6.3 link
attach/detach) and changes it only through :func:`advance`, with an input
that is either a frame received (``RECV_*``) or a frame sent (``SEND_*``).  A
pair missing from a table is a protocol violation: :func:`advance` raises the
error the specification prescribes for that scope, naming the endpoint, the
state it was in and the input it could not take.
"""

from __future__ import annotations

import enum

from ..amqp import errors as conditions
from .errors import ConnectionError_

__all__ = [
    "ConnectionState", "SessionState", "LinkState", "Input", "CONNECTION_TRANSITIONS",
    "SESSION_TRANSITIONS", "LINK_TRANSITIONS", "advance",
]  # fmt: skip


class ConnectionState(enum.Enum):
    """Connection states of §2.4.6 that a listening endpoint passes through."""

    START = "START"
    HDR_EXCH = "HDR_EXCH"
    OPENED = "OPENED"
    CLOSE_RCVD = "CLOSE_RCVD"
    CLOSE_SENT = "CLOSE_SENT"
    END = "END"


class SessionState(enum.Enum):
    """Session states of §2.5.5."""

    UNMAPPED = "UNMAPPED"
    BEGIN_RCVD = "BEGIN_RCVD"
    MAPPED = "MAPPED"
    END_SENT = "END_SENT"
    END_RCVD = "END_RCVD"


class LinkState(enum.Enum):
    """Link endpoint states (attach §2.6.3, detach §2.6.5)."""

    DETACHED = "DETACHED"
    ATTACH_RCVD = "ATTACH_RCVD"
    ATTACHED = "ATTACHED"
    DETACH_SENT = "DETACH_SENT"
    DETACH_RCVD = "DETACH_RCVD"


class Input(enum.Enum):
    """Frames received or sent that move an endpoint between states."""

    RECV_HEADER = "recv protocol header"
    RECV_OPEN = "recv open"
    SEND_OPEN = "send open"
    RECV_CLOSE = "recv close"
    SEND_CLOSE = "send close"
    RECV_BEGIN = "recv begin"
    SEND_BEGIN = "send begin"
    RECV_END = "recv end"
    SEND_END = "send end"
    RECV_ATTACH = "recv attach"
    SEND_ATTACH = "send attach"
    RECV_DETACH = "recv detach"
    SEND_DETACH = "send detach"


C, S, L, In = ConnectionState, SessionState, LinkState, Input

CONNECTION_TRANSITIONS: dict[tuple[ConnectionState, Input], ConnectionState] = {
    (C.START, In.RECV_HEADER): C.HDR_EXCH,  # we answer a header with ours at once
    (C.HDR_EXCH, In.RECV_OPEN): C.HDR_EXCH,  # open received; ours follows immediately
    (C.HDR_EXCH, In.SEND_OPEN): C.OPENED,
    (C.HDR_EXCH, In.SEND_CLOSE): C.CLOSE_SENT,  # refuse before opening (e.g. bad open)
    (C.OPENED, In.RECV_CLOSE): C.CLOSE_RCVD,
    (C.OPENED, In.SEND_CLOSE): C.CLOSE_SENT,
    (C.CLOSE_RCVD, In.SEND_CLOSE): C.END,
    (C.CLOSE_SENT, In.RECV_CLOSE): C.END,
}

SESSION_TRANSITIONS: dict[tuple[SessionState, Input], SessionState] = {
    (S.UNMAPPED, In.RECV_BEGIN): S.BEGIN_RCVD,
    (S.BEGIN_RCVD, In.SEND_BEGIN): S.MAPPED,
    (S.MAPPED, In.RECV_END): S.END_RCVD,
    (S.MAPPED, In.SEND_END): S.END_SENT,
    (S.END_RCVD, In.SEND_END): S.UNMAPPED,
    (S.END_SENT, In.RECV_END): S.UNMAPPED,
}

LINK_TRANSITIONS: dict[tuple[LinkState, Input], LinkState] = {
    (L.DETACHED, In.RECV_ATTACH): L.ATTACH_RCVD,
    (L.ATTACH_RCVD, In.SEND_ATTACH): L.ATTACHED,
    (L.ATTACHED, In.RECV_DETACH): L.DETACH_RCVD,
    (L.ATTACHED, In.SEND_DETACH): L.DETACH_SENT,
    (L.DETACH_RCVD, In.SEND_DETACH): L.DETACHED,
    (L.DETACH_SENT, In.RECV_DETACH): L.DETACHED,
}

_TABLES = {
    ConnectionState: ("connection", CONNECTION_TRANSITIONS),
    SessionState: ("session", SESSION_TRANSITIONS),
    LinkState: ("link", LINK_TRANSITIONS),
}


def advance(state: enum.Enum, event: Input, endpoint: str) -> enum.Enum:
    """The state after ``event``; a missing pair raises the error for that scope.

    Every violation found while reading frames is a connection-level
    ``amqp:illegal-state`` unless the caller narrows it (a session or link
    violation is reported by the engine with the session's or link's scope).
    """
    kind, table = _TABLES[type(state)]
    try:
        new_state: enum.Enum = table[(state, event)]  # type: ignore[index]
        return new_state
    except KeyError:
        raise IllegalTransition(kind, endpoint, state, event) from None


class IllegalTransition(ConnectionError_):
    """An input the endpoint's state does not allow."""

    def __init__(self, kind: str, endpoint: str, state: enum.Enum, event: Input) -> None:
        super().__init__(
            conditions.ILLEGAL_STATE,
            f"{kind} {endpoint} is in state {state.value} and cannot {event.value}",
        )
        self.kind = kind
        self.state = state
        self.event = event
