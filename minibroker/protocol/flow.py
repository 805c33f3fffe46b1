"""Flow control: ``flow`` frames read and sent, link credit granted and drained (Part 2 §2.5.6, §2.6.7, §2.7.4).

A connection's handlers for flow (see :mod:`._engine`).  A session flow
updates the peer's incoming window: when it opens a window that was shut,
multi-frame deliveries waiting for it go on (``deliveries.send_frames``) and
``SessionWindowOpened`` tells the broker.  A link flow sets the credit of a
link we send on, or, on a link the peer sends on, says how far the peer's
delivery-count went.  The broker grants credit with :func:`grant_credit`,
held back while the peer leaves too many deliveries unsettled (the rest is
granted as it settles: ``dispositions.disposition``).  Every flow of ours is
built by ``endpoints.flow_frame``.
"""

from __future__ import annotations

from typing import Any

from ..amqp.performatives import Flow
from . import events as ev
from ._engine import Engine
from ._state import LINK_TAKES_FLOW, LINK_TRANSFERS, SESSION_HANDLES
from .deliveries import send_frames
from .endpoints import SERIAL_HALF, SERIAL_MOD, Link, Session, flow_frame

__all__ = ["FLOW_LIST8", "drained", "grant_credit", "on_flow", "read_flow", "send_link_flow"]

#: Described (0x00) smallulong (0x53) code 0x13 (flow) as a list8 (0xc0): what :func:`read_flow` reads.
FLOW_LIST8 = 0x005313C0
#: The flow's fields (§2.7.4) by position: the eight uints, then drain and echo; properties (the
#: eleventh) only as null.  The first is the only one of the first four that may be null.
_UINTS = 8
_MANDATORY = (False, True, True, True)
#: The one-byte encodings of a boolean (Part 1 §1.6.2): true, false, null (the field's default, false).
_BOOLEANS = {0x41: True, 0x42: False, 0x40: False}


def on_flow(conn: Engine, channel: int, flow: Flow, payload: bytes) -> None:
    """The peer's flow: its session window, and with a handle that link's flow state (§2.7.4)."""
    session = conn._session(channel)
    if session.state is not SESSION_HANDLES:
        return
    was_blocked = session.remote_incoming_window <= 0
    _take_window(session, flow)
    if was_blocked and session.remote_incoming_window > 0:
        for waiting in list(session.links_by_handle.values()):
            if waiting.outgoing is not None:
                send_frames(conn, waiting)
    if flow.handle is None:
        if flow.echo:
            conn._send(session.channel, flow_frame(session))
    else:
        link = conn._link(session, flow.handle, "flow")
        if link.state not in LINK_TAKES_FLOW:
            return  # sent before the peer saw our detach: no credit for a link we are ending
        if link.is_sender:
            _credit_from_peer(conn, link, flow)
        else:
            _count_from_peer(link, flow)
        if flow.echo:
            send_link_flow(conn, link)
    # Asked again: the deliveries that went on above may have used the window up.
    if was_blocked and session.remote_incoming_window > 0:
        conn._events.append(ev.SessionWindowOpened(session))


def read_flow(buf: bytes, pos: int, end: int) -> Flow | None:
    """The flow at ``buf[pos:end]`` (it starts with :data:`FLOW_LIST8`) as the general decoder gives
    it, or None when that decoder must read it: proton clients send a flow per few messages, each
    read here in one loop instead of through the codec.

    It reads the usual shape only: a list8 of 4 to 11 fields that ends where the frame does, each
    uint a uint0, smalluint or uint (or null where the field may be), each boolean one of the
    one-byte constants, properties null; anything else (a smallulong-coded field, a properties
    map, a missing mandatory field) is the general decoder's to read or refuse.
    """
    try:
        stop = pos + 5 + buf[pos + 4]  # the size byte counts from the count byte on
        count = buf[pos + 5]
        if stop != end or not 4 <= count <= 11:
            return None
        pos += 6
        values: list[Any] = []  # None only where the field may be null (checked as read)
        for index in range(min(count, _UINTS)):
            code = buf[pos]
            if code == 0x70:  # uint
                values.append(int.from_bytes(buf[pos + 1 : pos + 5], "big"))
                pos += 5
            elif code == 0x52:  # smalluint
                values.append(buf[pos + 1])
                pos += 2
            elif code == 0x43:  # uint0
                values.append(0)
                pos += 1
            elif code == 0x40 and not (index < 4 and _MANDATORY[index]):
                values.append(None)
                pos += 1
            else:
                return None
        drain = echo = False
        if count > 8:
            drain, pos = _BOOLEANS[buf[pos]], pos + 1  # KeyError: not a one-byte constant
        if count > 9:
            echo, pos = _BOOLEANS[buf[pos]], pos + 1
        if count > 10:
            if buf[pos] != 0x40:
                return None  # properties: the codec reads the map
            pos += 1
        if pos != stop:
            return None
    except (IndexError, KeyError):
        return None  # the list claims more than the buffer holds, or a boolean is not a constant
    values += [None] * (_UINTS - len(values))
    return Flow(
        next_incoming_id=values[0], incoming_window=values[1], next_outgoing_id=values[2],
        outgoing_window=values[3], handle=values[4], delivery_count=values[5], link_credit=values[6],
        available=values[7], drain=drain, echo=echo,
    )  # fmt: skip


def _take_window(session: Session, flow: Flow) -> None:
    """The room the peer's incoming window leaves us (§2.5.6), and its outgoing window."""
    # next-incoming-id is null only before the peer has seen our begin: then it counts from 0.
    next_incoming = flow.next_incoming_id if flow.next_incoming_id is not None else 0
    session.remote_incoming_window = (next_incoming + flow.incoming_window - session.next_outgoing_id) % SERIAL_MOD
    if session.remote_incoming_window > SERIAL_HALF:
        session.remote_incoming_window = 0  # the peer has not seen all we sent yet
    session.remote_outgoing_window = flow.outgoing_window


def _credit_from_peer(conn: Engine, link: Link, flow: Flow) -> None:
    """A flow on a link we send on: the credit the receiving peer grants (§2.6.7)."""
    # §2.6.7: link-credit(snd) = delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)
    peer_count = flow.delivery_count if flow.delivery_count is not None else 0
    credit = flow.link_credit or 0
    link.credit = max(0, (peer_count + credit - link.delivery_count) % SERIAL_MOD)
    if link.credit > SERIAL_HALF:
        # Serial numbers wrap (RFC-1982): a difference over half the space is negative.
        # The flow was stale (it counted fewer deliveries than we have sent since):
        # the credit it granted is already used up, not four billion messages.
        link.credit = 0
    link.drain = flow.drain
    link.flow_properties = flow.properties
    conn._events.append(ev.CreditChanged(link, flow.drain, flow.properties))


def _count_from_peer(link: Link, flow: Flow) -> None:
    """A flow on a link the peer sends on: what it has available, and its delivery-count (§2.6.7)."""
    link.available = flow.available or 0
    if flow.delivery_count is not None:
        # The sender's delivery-count is authoritative (§2.6.7): transfers it says it
        # made (e.g. consuming credit on drain) use up the credit we granted.
        advanced = (flow.delivery_count - link.delivery_count) % SERIAL_MOD
        if 0 < advanced < SERIAL_HALF:
            link.credit = max(0, link.credit - advanced)
            link.delivery_count = flow.delivery_count


def send_link_flow(conn: Engine, link: Link, echo: bool = False) -> None:
    """Send the link's flow state (§2.7.4); nothing while the link is not attached both ways."""
    if link.state is not LINK_TRANSFERS:
        return
    conn._send(link.session.channel, flow_frame(link.session, link, echo))


def grant_credit(conn: Engine, link: Link, credit: int) -> None:
    """Set the credit of a link the peer sends on, and tell the peer (§2.6.7).

    The credit is capped so that the deliveries the peer has not settled, plus the ones it
    may still send, stay within ``max_unsettled_incoming``; the rest is granted as it settles.
    """
    if not link.is_sender:
        link.wanted_credit = credit
        config = conn.config
        kept = sum(len(session.incoming_unsettled) for session in conn.sessions.values())  # <= 256 sessions
        room = min(config.max_unsettled_incoming - len(link.unsettled), config.max_unsettled_incoming_total - kept)
        if credit > room:
            credit = max(0, room)
            conn._starved[link] = None
        else:
            conn._starved.pop(link, None)
    link.credit = credit
    send_link_flow(conn, link)


def drained(conn: Engine, link: Link) -> None:
    """Answer a drain request once nothing more can be sent (§2.6.7).

    The remaining credit is consumed by advancing the delivery-count, and
    a flow tells the peer so, even when no message was sent.
    """
    if not link.drain or link.state is not LINK_TRANSFERS:
        return
    link.delivery_count = (link.delivery_count + link.credit) % SERIAL_MOD
    link.credit = 0
    send_link_flow(conn, link)
    link.drain = False
