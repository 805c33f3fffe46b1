"""Every state an accepted connection, its sessions and its links pass through, in one place.

Theory of operation.  The engine is a server: it reacts to what the peer
sends, and every endpoint it keeps is in a state named as in the
specification.  A state changes only through :func:`advance`, with an
:class:`Input` that is either something received (``RECV_*``) or something
sent (``SEND_*``), or the end of what the endpoint lives in (its session or
connection going away).  Four tables say which inputs each state takes:

* :data:`PHASE_TRANSITIONS`: before any AMQP frame, the protocol headers and
  the SASL exchange (Part 2 §2.2, Part 5 §5.1-§5.3).  A connection waits for
  a header; the SASL header leads to the SASL frames, and a successful
  ``sasl-outcome`` back to waiting for the AMQP header; the AMQP header (taken
  as anonymous when that is allowed) leads to AMQP frames.
* :data:`CONNECTION_TRANSITIONS`: Part 2 §2.4.6, for the states a listening
  endpoint passes (it answers a header and an ``open`` at once, so the
  ``HDR_RCVD``/``OPEN_RCVD`` states last no longer than one call).
* :data:`SESSION_TRANSITIONS`: Part 2 §2.5.5; a session also ends with its
  connection.
* :data:`LINK_TRANSITIONS`: attach and detach, Part 2 §2.6.3-§2.6.5; a link
  is also detached when its session ends.

Beside the tables, a few names (``SESSION_HANDLES``, ``LINK_TAKES_FLOW``,
...) say in which states the frames that move no endpoint are handled, and
where a frame is ignored because the endpoint is going away.

A pair missing from a table is a protocol violation: :func:`advance` raises
:class:`IllegalTransition`, a connection error ``amqp:illegal-state`` naming
the endpoint, the state it was in and the input it could not take.  The
engine narrows the scope where the specification allows (a session or link
error) before it gets here.  :func:`advance` is typed per table, so a state
only ever holds a state of its own kind.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, overload

from ..amqp import errors as conditions
from .errors import ConnectionError_

__all__ = [
    "Phase", "ConnectionState", "SessionState", "LinkState", "Input", "PHASE_TRANSITIONS",
    "CONNECTION_TRANSITIONS", "SESSION_TRANSITIONS", "LINK_TRANSITIONS", "advance", "IllegalTransition",
    "CONNECTION_DISCARDING", "CONNECTION_CLOSING", "CONNECTION_AWAITS_OPEN", "SESSION_HANDLES", "LINK_TAKES_FLOW", "LINK_TRANSFERS",
    "LINK_AWAITS_ANSWER",
]  # fmt: skip


class Phase(enum.Enum):
    """Where a connection is before and around its AMQP frames (Part 2 §2.2, Part 5 §5.1)."""

    AWAIT_HEADER = "AWAIT_HEADER"  # no protocol header yet
    SASL = "SASL"  # SASL header exchanged: SASL frames (Part 5 §5.3)
    AUTHENTICATED = "AUTHENTICATED"  # sasl-outcome ok sent: the AMQP header comes next
    FRAMES = "FRAMES"  # AMQP header exchanged: AMQP frames


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

    RECV_SASL_HEADER = "recv SASL protocol header"
    SEND_SASL_OK = "send sasl-outcome ok"
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
    CONNECTION_ENDED = "end with its connection"
    SESSION_ENDED = "end with its session"


P, C, S, L, In = Phase, ConnectionState, SessionState, LinkState, Input

PHASE_TRANSITIONS: dict[tuple[Phase, Input], Phase] = {
    (P.AWAIT_HEADER, In.RECV_SASL_HEADER): P.SASL,
    (P.SASL, In.SEND_SASL_OK): P.AUTHENTICATED,
    (P.AWAIT_HEADER, In.RECV_HEADER): P.FRAMES,  # anonymous, when allowed
    (P.AUTHENTICATED, In.RECV_HEADER): P.FRAMES,
}

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
    # The connection ended (closed, failed or lost): every session goes with it.
    **{(state, In.CONNECTION_ENDED): S.UNMAPPED for state in S},
}

LINK_TRANSITIONS: dict[tuple[LinkState, Input], LinkState] = {
    (L.DETACHED, In.RECV_ATTACH): L.ATTACH_RCVD,
    (L.ATTACH_RCVD, In.SEND_ATTACH): L.ATTACHED,
    (L.ATTACHED, In.RECV_DETACH): L.DETACH_RCVD,
    (L.ATTACHED, In.SEND_DETACH): L.DETACH_SENT,
    (L.DETACH_RCVD, In.SEND_DETACH): L.DETACHED,
    (L.DETACH_SENT, In.RECV_DETACH): L.DETACHED,
    # The session ended: its links are detached without being closed (§2.6.5).
    **{(state, In.SESSION_ENDED): L.DETACHED for state in L},
}

# Frames a state takes without a transition, and frames it ignores.  The tables above say which
# performatives move an endpoint; these say where the others (flow, transfer, disposition) are
# handled, and where a frame that is no violation is read and dropped because the endpoint is
# going away: the peer may have sent it before it saw our close, end or detach.  Identity tests
# against these names (``state is not SESSION_HANDLES``) cost no more than the bare member.

#: §2.4.3: once we sent close, every frame but the peer's close is read and discarded.
CONNECTION_DISCARDING = C.CLOSE_SENT
#: §2.4.3: the connection states in which our own close is a no-op: we sent one already.
CONNECTION_CLOSING = (C.CLOSE_SENT, C.END)
#: §2.4.1: the only connection state in which a frame other than open or close is an error.
CONNECTION_AWAITS_OPEN = C.HDR_EXCH
#: §2.5.5: the session state whose attach, flow, transfer, disposition and detach are handled; in
#: END_SENT they are ignored until the peer's end.  Dispositions we have queued for a session in
#: any other state are dropped, and ``end_session`` on one is a no-op.
SESSION_HANDLES = S.MAPPED
#: A flow naming a link in another state (we sent detach) was sent before the peer saw our
#: detach: it grants no credit (§2.6.5, §2.7.4).
LINK_TAKES_FLOW = (L.ATTACHED, L.ATTACH_RCVD)
#: The link state that takes transfers; in another (we sent detach), a late transfer still counts
#: against the session window (§2.5.6) and is then dropped.  Our own transfers, flows, drain
#: answers and detaches go out in this state only.
LINK_TRANSFERS = L.ATTACHED
#: The link state our attach answers (``accept_link``, ``refuse_link``): in any other the link is
#: already gone with its session or connection, and the answer is a no-op.
LINK_AWAITS_ANSWER = L.ATTACH_RCVD

_TABLES: dict[type[enum.Enum], tuple[str, Mapping[tuple[Any, Input], Any]]] = {
    Phase: ("connection", PHASE_TRANSITIONS),
    ConnectionState: ("connection", CONNECTION_TRANSITIONS),
    SessionState: ("session", SESSION_TRANSITIONS),
    LinkState: ("link", LINK_TRANSITIONS),
}


@overload
def advance(state: Phase, event: Input, endpoint: str) -> Phase: ...
@overload
def advance(state: ConnectionState, event: Input, endpoint: str) -> ConnectionState: ...
@overload
def advance(state: SessionState, event: Input, endpoint: str) -> SessionState: ...
@overload
def advance(state: LinkState, event: Input, endpoint: str) -> LinkState: ...


def advance(state: Any, event: Input, endpoint: str) -> Any:
    """The state after ``event``; a missing pair raises :class:`IllegalTransition`.

    Every violation found while reading frames is a connection-level
    ``amqp:illegal-state`` unless the caller narrows it (a session or link
    violation is reported by the engine with the session's or link's scope).
    """
    kind, table = _TABLES[type(state)]
    try:
        return table[(state, event)]
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
