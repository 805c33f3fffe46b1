"""Session endpoints: ``begin`` and ``end`` read, answered and sent (Part 2 §2.5, §2.7.2, §2.7.7).

A connection's handlers for sessions (see :mod:`._engine`).  The engine never
begins a session itself: it answers the peer's ``begin`` on the lowest free
channel of its own, and ends a session when the peer does, when the broker
asks (:func:`end_session`, also for a session error) or with the connection
(:func:`drop_session`).  However a session ends, its links are reported
detached first and its tables emptied (:func:`session_gone`).
"""

from __future__ import annotations

from ..amqp import errors as conditions
from ..amqp.performatives import Begin, End, Error
from . import events as ev
from ._engine import Engine
from ._state import SESSION_HANDLES, Input, LinkState, SessionState, advance
from .deliveries import drop_incoming
from .endpoints import INCOMING_WINDOW, Session
from .errors import ConnectionError_, framing_error

__all__ = ["drop_session", "end_session", "on_begin", "on_end", "session_gone", "unmap"]


def on_begin(conn: Engine, channel: int, begin: Begin, payload: bytes) -> None:
    """The peer begins a session on ``channel``: map it and answer at once (§2.5.2)."""
    if begin.remote_channel is not None:  # it would answer a begin of ours, and we send none
        raise ConnectionError_(
            conditions.NOT_ALLOWED,
            f"begin on channel {channel} names remote-channel {begin.remote_channel}, "
            "but this server never begins sessions itself",
        )
    if channel > conn.config.channel_max:
        raise framing_error(f"channel {channel} exceeds channel-max {conn.config.channel_max}")
    if channel in conn.sessions:
        raise ConnectionError_(conditions.ILLEGAL_STATE, f"channel {channel} already has a session")
    # Our channel is the lowest free one: numbers are reused as sessions end, so they stay small.
    local = next(c for c in range(len(conn._sessions_local) + 1) if c not in conn._sessions_local)
    session = Session(local, channel, min(begin.handle_max, conn.config.handle_max))
    session.state = advance(session.state, Input.RECV_BEGIN, f"on channel {channel}")
    # The peer's counters start ours for its direction; our own windows are the ones we advertise.
    session.next_incoming_id = begin.next_outgoing_id
    session.remote_incoming_window = begin.incoming_window
    session.remote_outgoing_window = begin.outgoing_window
    session.incoming_window = INCOMING_WINDOW
    conn.sessions[channel] = session
    conn._sessions_local[local] = session
    conn._send(
        local,
        Begin(
            remote_channel=channel,
            next_outgoing_id=session.next_outgoing_id,
            incoming_window=session.incoming_window,
            outgoing_window=session.outgoing_window,
            handle_max=session.handle_max,
        ),
    )
    session.state = advance(session.state, Input.SEND_BEGIN, f"on channel {channel}")
    conn._events.append(ev.SessionBegun(session))


def on_end(conn: Engine, channel: int, end: End, payload: bytes) -> None:
    """The peer ends a session: answer, unless it answers ours (§2.5.7)."""
    session = conn._session(channel)
    session.state = advance(session.state, Input.RECV_END, f"on channel {channel}")
    if session.state is SessionState.END_RCVD:  # the peer began: it is owed our end
        conn._send(session.channel, End())
        session_gone(conn, session, end.error)
        session.state = advance(session.state, Input.SEND_END, f"on channel {channel}")
    # Both ends have sent end (either order): the channel numbers are free for a new begin.
    unmap(conn, session)


def end_session(conn: Engine, session: Session, error: Error | None = None) -> None:
    """End a session (§2.5.7); its links are reported detached."""
    if session.state is not SESSION_HANDLES:
        return
    conn._send(session.channel, End(error=error))
    session.state = advance(session.state, Input.SEND_END, f"on channel {session.remote_channel}")
    # Reported gone now, not at the peer's end: nothing more happens on it, and the peer may never answer.
    session_gone(conn, session, error)


def drop_session(conn: Engine, session: Session, error: Error | None) -> None:
    """The connection ended: the session goes with it."""
    # In END_SENT the session was reported gone when we sent our end.
    if session.state is SessionState.MAPPED or session.state is SessionState.END_RCVD:
        session_gone(conn, session, error)
    session.state = advance(session.state, Input.CONNECTION_ENDED, f"on channel {session.remote_channel}")
    unmap(conn, session)


def session_gone(conn: Engine, session: Session, error: Error | None) -> None:
    """Report the session ended, after its links; they are detached without being closed (§2.6.5)."""
    for link in list(session.links_by_handle.values()):
        conn.attach_bytes -= link.attach_size
        if link.state is not LinkState.ATTACH_RCVD:  # an unanswered attach was never counted
            conn.links_answered -= 1
        if link.state is not LinkState.DETACHED:
            conn._events.append(ev.LinkDetached(link, False, error))
        link.state = advance(link.state, Input.SESSION_ENDED, repr(link.name))
        link.credit = 0
        # The link may live on in reference cycles until a collection: its buffers need not.
        drop_incoming(conn, link)
        conn._starved.pop(link, None)
        link.outgoing = None
        link.unsettled.clear()
    session.links_by_handle.clear()
    session.links_by_remote.clear()
    session.outgoing_unsettled.clear()
    session.incoming_unsettled.clear()
    conn._events.append(ev.SessionEnded(session, error))


def unmap(conn: Engine, session: Session) -> None:
    """Forget an ended session's channels (its state is already UNMAPPED)."""
    conn.sessions.pop(session.remote_channel, None)
    conn._sessions_local.pop(session.channel, None)
