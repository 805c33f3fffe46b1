"""Dispositions: delivery states and settlement read and sent (Part 2 §2.6.12, §2.7.6).

A connection's handlers for dispositions (see :mod:`._engine`).  The peer's
disposition (the usual one read straight from the frame by ``transfers.py``,
the rest decoded, :func:`on_disposition`) names a range of delivery-ids; the
work is bounded by the deliveries unsettled, not by the range.  The broker's
:func:`settle` queues our disposition, and consecutive deliveries with the
same outcome are coalesced into one ``first..last`` range; :func:`flush`
writes the ranges before any frame other than a transfer and when output is
collected.  A peer that settles may let credit held back flow again
(``flow.grant_credit``).
"""

from __future__ import annotations

from typing import Any

from ..amqp import errors as conditions
from ..amqp.messaging import Accepted
from ..amqp.performatives import ROLE_RECEIVER, ROLE_SENDER, Disposition
from . import events as ev
from ._engine import Engine
from ._state import LINK_TRANSFERS, SESSION_HANDLES
from .endpoints import SERIAL_HALF, SERIAL_MOD, Delivery, Link, Session
from .errors import SessionError
from .flow import grant_credit
from .transfers import accepted_disposition_frame

__all__ = ["disposition", "flush", "on_disposition", "settle", "settle_received"]


def on_disposition(conn: Engine, channel: int, disposition_: Disposition, payload: bytes) -> None:
    """A decoded disposition: the fields :func:`disposition` takes, from a frame the fast path left alone."""
    disposition(
        conn,
        channel,
        disposition_.role,
        disposition_.first,
        disposition_.last,
        disposition_.settled,
        disposition_.state,
    )


def disposition(
    conn: Engine, channel: int, role: bool, first: int, last: int | None, settled: bool, state: Any
) -> None:
    """A disposition's fields (§2.7.6), from :func:`on_disposition` or read directly (transfers.py)."""
    session = conn._session(channel)
    if session.state is not SESSION_HANDLES:
        return
    last = last if last is not None else first
    width = (last - first) % SERIAL_MOD
    if width >= SERIAL_HALF:
        # RFC-1982 (§2.8.9): last is "before" first, so the range names nothing sensible.
        raise SessionError(
            conditions.INVALID_FIELD, f"disposition range {first}..{last} ends before it starts", channel
        )
    # The peer as receiver settles what we sent; as sender, what we received.
    table = session.outgoing_unsettled if role == ROLE_RECEIVER else session.incoming_unsettled
    # The work is bounded by the unsettled deliveries, not by the range the peer names: a wide
    # range walks the table (kept in delivery-id order, as ids are assigned), a narrow one the ids.
    if width == 0:
        ids: Any = (first,)  # the usual case, one delivery: no generator per disposition
    elif width < len(table):
        if first + width < SERIAL_MOD:
            ids = range(first, first + width + 1)  # no wrap: a plain range
        else:
            ids = ((first + offset) % SERIAL_MOD for offset in range(width + 1))
    else:
        ids = [delivery_id for delivery_id in table if (delivery_id - first) % SERIAL_MOD <= width]
    released = False
    events = conn._events
    # With batch_events (and no hook watching), the range's deliveries on one link are one event.
    batch = conn.config.batch_events and conn.hook is None
    run_link: Link | None = None
    run: list[Delivery] = []
    for delivery_id in ids:
        delivery = table.get(delivery_id)
        if delivery is not None:
            link = delivery.link
            if state is not None:
                delivery.state = state
            if settled:
                delivery.remote_settled = True
                del table[delivery_id]
                link.unsettled.pop(delivery_id, None)
                released = released or not link.is_sender
            if not batch:
                events.append(ev.DeliveryUpdated(link, delivery, state, settled))
            elif link is run_link:
                run.append(delivery)
            else:
                if run:
                    events.append(ev.DeliveriesUpdated(run_link, run, state, settled))  # type: ignore[arg-type]  # set with run
                run_link, run = link, [delivery]
    if run:
        events.append(ev.DeliveriesUpdated(run_link, run, state, settled))  # type: ignore[arg-type]
    if released and conn._starved:  # the peer settled: the credit held back is granted now
        for link in list(conn._starved):
            if link.state is LINK_TRANSFERS:
                grant_credit(conn, link, link.wanted_credit)
            else:
                conn._starved.pop(link, None)


def settle(conn: Engine, delivery: Delivery, state: Any, settled: bool = True) -> None:
    """Tell the peer a delivery's state, settling it (§2.7.6).

    Dispositions are coalesced into ``first..last`` ranges of consecutive
    delivery-ids with the same state, and written before any frame other
    than a transfer (which they never need to precede) and at the latest
    when output is collected.
    """
    link = delivery.link
    session = link.session
    if settled:
        delivery.settled = True
        if link.is_sender:
            session.outgoing_unsettled.pop(delivery.delivery_id, None)
            link.unsettled.pop(delivery.delivery_id, None)
        else:
            session.incoming_unsettled.pop(delivery.delivery_id, None)
            if link.rcv_settle_mode:
                link.unsettled.pop(delivery.delivery_id, None)
    if not link.is_sender:
        # The outcome is decided: the message is in a node now, if anywhere; waiting for the
        # peer to settle (rcv-settle-mode second) holds the delivery's state, not its bytes.
        delivery.payload = b""
    if session.state is not SESSION_HANDLES:
        return  # the session is ending: no frame of ours may follow our end (§2.5.5)
    role = ROLE_SENDER if link.is_sender else ROLE_RECEIVER
    delivery_id = delivery.delivery_id
    last = conn._last_disposition
    if (
        last is not None
        and last[0] is session
        and last[1] is role
        and last[4] is settled
        and last[5] is state
        and (last[3] + 1) % SERIAL_MOD == delivery_id
    ):
        last[3] = delivery_id  # the usual case: the next delivery, the same outcome object
        return
    _open_range(conn, session, role, delivery_id, delivery_id, settled, state)


def settle_received(conn: Engine, link: Link, first: int, last: int, state: Any) -> None:
    """:func:`settle` for the deliveries ``first..last`` (consecutive delivery-ids) the peer sent on
    ``link`` and the broker settles as soon as it has read them (``Link.settles_at_once``): one
    range for them all, and no :class:`Delivery` (they were never kept in the unsettled tables)."""
    session = link.session
    if session.state is not SESSION_HANDLES:
        return  # the session is ending: no frame of ours may follow our end (§2.5.5)
    pending = conn._last_disposition
    if (
        pending is not None
        and pending[0] is session
        and pending[1] is ROLE_RECEIVER
        and pending[4] is True
        and pending[5] is state
        and (pending[3] + 1) % SERIAL_MOD == first
    ):
        pending[3] = last
        return
    _open_range(conn, session, ROLE_RECEIVER, first, last, True, state)


def _open_range(conn: Engine, session: Session, role: bool, first: int, last: int, settled: bool, state: Any) -> None:
    """Queue ``first..last`` where the range :func:`settle` extended last does not take it."""
    # One open range per session, role, settlement and kind of outcome; a delivery that does not
    # extend its range closes it (kept in order in _disposition_ranges) and starts the next.
    key = (id(session), role, settled, type(state))
    pending = conn._dispositions.get(key)
    if pending is not None:
        if (pending[3] + 1) % SERIAL_MOD == first and (pending[5] is state or pending[5] == state):
            pending[3] = last
            conn._last_disposition = pending
            return
        conn._disposition_ranges.append(pending)
    pending = conn._dispositions[key] = [session, role, first, last, settled, state]
    conn._last_disposition = pending


def flush(conn: Engine) -> None:
    """Write the dispositions queued by :func:`settle`: the ranges closed, in order, then the open ones."""
    ranges = conn._disposition_ranges
    ranges.extend(conn._dispositions.values())
    conn._dispositions = {}
    conn._disposition_ranges = []
    conn._last_disposition = None
    for session, role, first, last, settled, state in ranges:
        if session.state is not SESSION_HANDLES:
            continue  # it ended after the disposition was queued
        if type(state) is Accepted and conn.hook is None:
            # The usual outcome, written directly (transfers.py): the same bytes as below.
            data = accepted_disposition_frame(session.channel, role, first, last if last != first else None, settled)
            conn._out.append(data)
            conn.output_size += len(data)
        else:
            conn._write(
                session.channel,
                Disposition(
                    role=role, first=first, last=last if last != first else None, settled=settled, state=state
                ),
            )
