"""Link endpoints: ``attach`` and ``detach`` read, answered and sent (Part 2 §2.6.3-§2.6.5, §2.7.3, §2.7.8).

A connection's handlers for links (see :mod:`._engine`).  The peer's attach
makes a :class:`~.endpoints.Link` in ``ATTACH_RCVD`` and a ``LinkAttached``
event; the broker answers it with :func:`accept_link` or :func:`refuse_link`
(an attach with a null terminus, then a detach).  A link ends with a
detach from either side (:func:`on_detach`, :func:`detach_link`) or with its
session (``sessions.session_gone``); its unsettled deliveries are forgotten
then.  Every attach of ours is built by ``endpoints.attach_frame``.
"""

from __future__ import annotations

from typing import Any

from ..amqp import errors as conditions
from ..amqp.performatives import Attach, Detach, Error
from ..amqp.types import symbol
from . import events as ev
from ._engine import Engine
from ._state import LINK_AWAITS_ANSWER, LINK_TRANSFERS, SESSION_HANDLES, Input, LinkState, advance
from .deliveries import drop_incoming
from .endpoints import Link, attach_frame
from .errors import ConnectionError_, SessionError

__all__ = ["MAX_ATTACH_BYTES", "accept_link", "detach_link", "on_attach", "on_detach", "refuse_link"]

#: Bytes of attach frames the links of one connection may hold together (a link keeps its attach
#: and termini while it lives).  A usual attach is a few hundred bytes; 16 MiB is 16 KiB for each
#: of 1024 links, where max-frame-size alone would allow 256 MiB.
MAX_ATTACH_BYTES = 16 * 1024 * 1024


def on_attach(conn: Engine, channel: int, attach: Attach, payload: bytes) -> None:
    """The peer attaches a link: keep it, unanswered, for the broker to judge (§2.6.3)."""
    session = conn._session(channel)
    if session.state is not SESSION_HANDLES:
        return  # discarding after we ended the session
    if attach.handle > session.handle_max:
        raise ConnectionError_(
            conditions.FRAMING_ERROR,
            f"attach handle {attach.handle} exceeds handle-max {session.handle_max}",
        )
    if attach.handle in session.links_by_remote:
        raise SessionError(conditions.HANDLE_IN_USE, f"handle {attach.handle} is already attached", channel)
    size = conn._frame_size
    if conn.attach_bytes + size > MAX_ATTACH_BYTES:
        raise ConnectionError_(
            conditions.RESOURCE_LIMIT_EXCEEDED,
            f"the links of this connection hold {conn.attach_bytes} bytes of attach frames; one more of "
            f"{size} bytes would pass {MAX_ATTACH_BYTES} (detach links, or send smaller termini)",
        )
    handles = session.links_by_handle
    # Our handle is the lowest free one, as our channels are: handle-max bounds the numbers, not the count.
    local = next(h for h in range(len(handles) + 1) if h not in handles)
    link = Link(session, attach, local)
    link.attach_size = size
    link.receive_limit = None if link.is_sender else conn.config.max_message_size  # accept_link may lower it
    conn.attach_bytes += size
    session.links_by_remote[attach.handle] = link
    handles[local] = link
    conn._events.append(ev.LinkAttached(link))


def accept_link(
    conn: Engine,
    link: Link,
    *,
    source: Any,
    target: Any,
    snd_settle_mode: int | None = None,
    rcv_settle_mode: int | None = None,
    offered_capabilities: list[str] | None = None,
    properties: dict[Any, Any] | None = None,
    max_message_size: int | None = None,
) -> None:
    """Answer the peer's attach, establishing the link (§2.6.3).

    ``max_message_size`` lowers, for a link the peer sends on, the connection's
    max-message-size (a service's own quota); larger messages end the link with
    ``amqp:link:message-size-exceeded`` (§2.7.3).  A no-op when the link is already
    gone: the peer may end the session or close the connection in the same bytes as the attach.
    """
    if link.state is not LINK_AWAITS_ANSWER:
        return
    if not link.is_sender:
        limit = conn.config.max_message_size
        link.receive_limit = min(limit, max_message_size) if limit and max_message_size else (limit or max_message_size)
    link.source = source
    link.target = target
    if snd_settle_mode is not None:
        link.snd_settle_mode = snd_settle_mode
    if rcv_settle_mode is not None:
        link.rcv_settle_mode = rcv_settle_mode
    answer = attach_frame(
        link,
        source,
        target,
        snd_settle_mode=link.snd_settle_mode,
        rcv_settle_mode=link.rcv_settle_mode,
        # Our limit on what the peer sends us; on a link we send on, the peer states its own.
        max_message_size=link.receive_limit,
        offered_capabilities=[symbol(c) for c in offered_capabilities] if offered_capabilities else None,
        properties=properties,
    )
    conn._send(link.session.channel, answer)
    link.state = advance(link.state, Input.SEND_ATTACH, repr(link.name))
    conn.links_answered += 1


def refuse_link(conn: Engine, link: Link, error: Error) -> None:
    """Refuse a link: attach with a null source or target, then detach (§2.6.3)."""
    if link.state is not LINK_AWAITS_ANSWER:
        return  # already gone with its session or connection
    # The terminus on our side is null: that is the refusal; the peer's own terminus is echoed.
    source, target = (None, link.target) if link.is_sender else (link.source, None)
    conn._send(link.session.channel, attach_frame(link, source, target))
    link.state = advance(link.state, Input.SEND_ATTACH, repr(link.name))
    conn.links_answered += 1
    detach_link(conn, link, error)


def detach_link(conn: Engine, link: Link, error: Error | None = None, closed: bool = True) -> None:
    """Detach a link from our side (§2.6.5); the peer's detach completes it."""
    if link.state is not LINK_TRANSFERS:
        return
    conn._send(link.session.channel, Detach(handle=link.handle, closed=closed, error=error))
    link.state = advance(link.state, Input.SEND_DETACH, repr(link.name))
    forget_deliveries(conn, link)


def forget_deliveries(conn: Engine, link: Link) -> None:
    """The link is detaching: its unsettled deliveries leave the session's tables (§2.6.5)."""
    session = link.session
    table = session.outgoing_unsettled if link.is_sender else session.incoming_unsettled
    for delivery_id in link.unsettled:
        table.pop(delivery_id, None)
    link.unsettled.clear()
    drop_incoming(conn, link)
    conn._starved.pop(link, None)
    link.outgoing = None
    link.credit = 0  # nothing more may be sent on it (§2.6.7), even for events still queued


def on_detach(conn: Engine, channel: int, detach: Detach, payload: bytes) -> None:
    """The peer detaches a link: answer, unless it answers ours, and forget the link (§2.6.5)."""
    session = conn._session(channel)
    if session.state is not SESSION_HANDLES:
        return
    link = conn._link(session, detach.handle, "detach")
    if link.state is LINK_AWAITS_ANSWER:
        # The peer detached before we answered its attach (both in one write):
        # answer the attach, echoing its termini, so the detach below completes it.
        conn._send(session.channel, attach_frame(link, link.source, link.target))
        link.state = advance(link.state, Input.SEND_ATTACH, repr(link.name))
    else:
        conn.links_answered -= 1
    link.state = advance(link.state, Input.RECV_DETACH, repr(link.name))
    if link.state is LinkState.DETACH_RCVD:
        conn._send(session.channel, Detach(handle=link.handle, closed=detach.closed))
        link.state = advance(link.state, Input.SEND_DETACH, repr(link.name))
        conn._events.append(ev.LinkDetached(link, detach.closed, detach.error))
    forget_deliveries(conn, link)
    del session.links_by_remote[detach.handle]
    conn.attach_bytes -= link.attach_size
    session.links_by_handle.pop(link.handle, None)
