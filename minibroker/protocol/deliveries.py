"""Deliveries: ``transfer`` frames read and written (Part 2 §2.6.12-§2.6.14, §2.7.5).

A connection's handlers for transfers (see :mod:`._engine`).  In: the
engine reads the usual transfer straight from the frame (``transfers.py``)
and the rest through :func:`on_transfer`; both end in :func:`transfer`,
which keeps the session window, takes link credit, and assembles a delivery
of several frames in one growing buffer, bounded by ``MAX_FRAGMENTS`` and
max-message-size, before it raises ``MessageReceived``.  Out: the broker's
:func:`send_transfer` writes a single-frame delivery as one prebuilt frame
(``transfers.transfer_frame``), and splits a larger one to the peer's
max-frame-size, as far as the peer's session window allows
(:func:`send_frames`, called again when a flow opens the window).
"""

from __future__ import annotations

import struct
from typing import Any, NoReturn

from ..amqp import errors as conditions
from ..amqp.performatives import Transfer
from . import events as ev
from ._engine import Engine
from ._state import LINK_TRANSFERS, SESSION_HANDLES
from .endpoints import INCOMING_WINDOW, SERIAL_MOD, Delivery, Link, flow_frame
from .errors import LinkError, SessionError
from .transfers import settled_transfer_frames, transfer_frame

__all__ = [
    "MAX_FRAGMENTS", "MAX_TAG", "TRANSFER_OVERHEAD", "can_send", "drop_incoming", "on_transfer", "receive", "send_frames",
    "send_run", "send_settled", "send_settled_run", "send_transfer", "settled_run_room", "transfer",
]  # fmt: skip

#: Bytes a transfer frame spends before its payload: the 8-byte frame header (§2.3.1) plus a
#: bound on the transfer's own fields (handle, delivery-id, message-format, settled, more:
#: at most 5 bytes each, and the list and descriptor headers) besides its delivery-tag.
TRANSFER_OVERHEAD = 8 + 64
#: §2.8.7: a delivery-tag is at most 32 bytes; the fast path's list8 relies on it.
MAX_TAG = 32
#: Transfer frames one delivery may take (§2.6.14 lets a delivery span any number): 65,536 frames of
#: the smallest legal max-frame-size (512 bytes) carry 32 MiB, of ours (256 KiB) 16 GiB; a peer that
#: splits finer, or sends empty continuation frames, is sending frames, not a message.
MAX_FRAGMENTS = 2**16
#: The delivery-tags of a run (:func:`send_run`): 4-byte big-endian numbers.
_TAG = struct.Struct(">I")

# ------------------------------------------------------------------------------------------- in


def on_transfer(conn: Engine, channel: int, transfer_: Transfer, payload: bytes) -> None:
    """A decoded transfer: the fields :func:`transfer` takes, from a frame the fast path left alone."""
    transfer(
        conn,
        channel,
        transfer_.handle,
        transfer_.delivery_id,
        transfer_.delivery_tag,
        transfer_.message_format,
        transfer_.settled,
        transfer_.more,
        transfer_.state,
        transfer_.aborted,
        payload,
    )


def transfer(
    conn: Engine,
    channel: int,
    handle: int,
    delivery_id: int | None,
    tag: bytes | None,
    message_format: int | None,
    settled: bool | None,
    more: bool,
    state: Any,
    aborted: bool,
    payload: bytes,
) -> None:
    """A transfer's fields (§2.7.5), from :func:`on_transfer` or read directly (transfers.py)."""
    delivery = receive(conn, channel, handle, delivery_id, tag, message_format, settled, more, state, aborted, payload)
    if delivery is not None:
        conn._events.append(ev.MessageReceived(delivery.link, delivery))


def receive(
    conn: Engine,
    channel: int,
    handle: int,
    delivery_id: int | None,
    tag: bytes | None,
    message_format: int | None,
    settled: bool | None,
    more: bool,
    state: Any,
    aborted: bool,
    payload: bytes,
) -> Delivery | None:
    """:func:`transfer`'s work but the event: the whole delivery the frame completes, or None
    (more frames to come, aborted, or dropped); ``runs.read_run`` reports it, alone or in a batch."""
    session = conn.sessions.get(channel)
    if session is None:
        session = conn._session(channel)  # raises
    if session.state is not SESSION_HANDLES:
        return None
    link = session.links_by_remote.get(handle)
    if link is None:
        link = conn._link(session, handle, "transfer")  # raises
    # Every transfer frame takes one from the session's incoming window (§2.5.6), even a dropped one.
    session.next_incoming_id = (session.next_incoming_id + 1) % SERIAL_MOD
    session.incoming_window -= 1
    if session.incoming_window < 0:
        raise SessionError(
            conditions.WINDOW_VIOLATION, f"transfer beyond the session incoming window of {INCOMING_WINDOW}", channel
        )
    if session.incoming_window < INCOMING_WINDOW // 2:
        # Half used: open it again now, long before a peer that honours it would have to wait.
        session.incoming_window = INCOMING_WINDOW
        conn._send(session.channel, flow_frame(session))
    if link.state is not LINK_TRANSFERS:
        return None  # the link is being detached; late transfers are dropped
    if link.is_sender:
        raise LinkError(
            conditions.NOT_ALLOWED, f"transfer on link {link.name!r}, where the broker is the sender", channel, handle
        )
    delivery = link.incoming
    if delivery is None:
        if link.credit <= 0 or delivery_id is None or tag is None or len(tag) > MAX_TAG:
            _refuse_first(link, delivery_id, tag, channel, handle)
        delivery = Delivery(delivery_id, tag, link, False)
        delivery.remote_settled = bool(settled) or link.snd_settle_mode == 1  # 1: the sender settles all
        delivery.message_format = message_format or 0
        delivery.state = state
        link.credit -= 1
        link.delivery_count = (link.delivery_count + 1) % SERIAL_MOD
    else:
        _continue(delivery, delivery_id, settled, state, channel, handle)
    if aborted:
        drop_incoming(conn, link)  # an aborted delivery is discarded (§2.6.14)
        return None
    if more or delivery.frames is not None:
        if not _assemble(conn, link, delivery, payload, more, channel, handle):
            return None  # more frames to come
    else:  # the common single-frame message: no list to build
        if link.receive_limit and len(payload) > link.receive_limit:
            check_size(conn, link, len(payload), channel, handle)  # raises
        delivery.payload = payload
    link.incoming = None
    if not delivery.remote_settled:
        if link.settles_at_once and delivery.state is None and not delivery.message_format and conn.hook is None:
            return delivery  # settled before this pass ends: nothing to keep it for (Link.settles_at_once)
        session.incoming_unsettled[delivery.delivery_id] = delivery
        if link.rcv_settle_mode:  # second: we keep it until the peer settles, so it counts per link
            link.unsettled[delivery.delivery_id] = delivery
    return delivery


def _refuse_first(link: Link, delivery_id: int | None, tag: bytes | None, channel: int, handle: int) -> NoReturn:
    """Raise the link error for a delivery's first transfer that may not start one (§2.6.7, §2.7.5)."""
    if link.credit <= 0:
        raise LinkError(
            conditions.TRANSFER_LIMIT_EXCEEDED,
            f"transfer on link {link.name!r} without link credit (wait for a flow granting credit)",
            channel,
            handle,
        )
    if delivery_id is None or tag is None:
        raise LinkError(
            conditions.INVALID_FIELD,
            "the first transfer of a delivery must carry delivery-id and delivery-tag",
            channel,
            handle,
        )
    # The tag is held for as long as the delivery is unsettled: the spec's bound keeps it small.
    raise LinkError(
        conditions.INVALID_FIELD,
        f"a delivery-tag is at most {MAX_TAG} bytes (Part 2 §2.8.7), got {len(tag)}",
        channel,
        handle,
    )


def _continue(
    delivery: Delivery, delivery_id: int | None, settled: bool | None, state: Any, channel: int, handle: int
) -> None:
    """A further transfer of the delivery in progress: it may settle it or give its state (§2.7.5)."""
    if delivery_id is not None and delivery_id != delivery.delivery_id:
        raise LinkError(
            conditions.INVALID_FIELD,
            f"transfer continues delivery {delivery.delivery_id} but names delivery-id {delivery_id}",
            channel,
            handle,
        )
    if settled:
        delivery.remote_settled = True
    if state is not None:
        delivery.state = state


def _assemble(
    conn: Engine, link: Link, delivery: Delivery, payload: bytes, more: bool, channel: int, handle: int
) -> bool:
    """Add a frame of a multi-frame delivery (§2.6.14); True when it was the last one."""
    # One growing buffer and a frame count: each frame costs its own bytes, never the
    # fragments before it, and empty continuation frames count against MAX_FRAGMENTS.
    if delivery.frames is None:
        delivery.frames = bytearray()
    link.incoming = delivery
    delivery.frames += payload
    conn.assembling += len(payload)
    delivery.sent += 1
    if delivery.sent > MAX_FRAGMENTS:
        drop_incoming(conn, link)
        raise LinkError(
            conditions.RESOURCE_LIMIT_EXCEEDED,
            f"a delivery may span at most {MAX_FRAGMENTS} transfer frames; send larger frames "
            f"(up to max-frame-size {conn.config.max_frame_size})",
            channel,
            handle,
        )
    if link.receive_limit:
        check_size(conn, link, len(delivery.frames), channel, handle)
    limit = conn.config.max_message_size
    if limit and conn.assembling > limit:
        # All deliveries in progress on this connection together: one message's worth.
        drop_incoming(conn, link)
        raise LinkError(
            conditions.RESOURCE_LIMIT_EXCEEDED,
            f"deliveries in progress on this connection hold over {limit} bytes (max-message-size); "
            "finish one delivery before starting the next",
            channel,
            handle,
        )
    if more:
        return False
    delivery.payload = bytes(delivery.frames)
    drop_incoming(conn, link)
    return True


def drop_incoming(conn: Engine, link: Link) -> None:
    """The link's delivery in progress is complete, aborted or refused: stop counting its bytes."""
    delivery = link.incoming
    if delivery is not None:
        if delivery.frames is not None:
            conn.assembling -= len(delivery.frames)
            delivery.frames = None
        link.incoming = None


def check_size(conn: Engine, link: Link, size: int, channel: int, handle: int) -> None:
    """Enforce the max-message-size we advertised for links the peer sends on (§2.7.3)."""
    limit = link.receive_limit
    if limit and size > limit:
        drop_incoming(conn, link)
        raise LinkError(
            conditions.MESSAGE_SIZE_EXCEEDED,
            f"a message of {size} bytes or more exceeds this link's max-message-size {limit}: "
            "send messages of at most that size",
            channel,
            handle,
        )


# ------------------------------------------------------------------------------------------ out


def can_send(conn: Engine, link: Link) -> bool:
    """Whether a transfer may go out now: link credit and session window allow it."""
    return link.credit > 0 and link.session.remote_incoming_window > 0 and link.state is LINK_TRANSFERS


def send_transfer(
    conn: Engine, link: Link, tag: bytes, payload: bytes, settled: bool = False, state: Any = None
) -> Delivery:
    """Send a message on a sending link, split to max-frame-size (§2.6.12, §2.7.5).

    Transfers are written straight away; pending dispositions are not
    flushed first, since no transfer depends on them.  A message of several
    frames goes out as far as the peer's session window allows (§2.5.6); the
    rest follows when a flow opens the window, and until then the link takes
    no new delivery (``link.outgoing`` is set).
    """
    session = link.session
    delivery_id = session.next_delivery_id
    session.next_delivery_id = (delivery_id + 1) % SERIAL_MOD
    delivery = Delivery(delivery_id, tag, link, settled)
    room = conn.remote_max_frame_size - TRANSFER_OVERHEAD - len(tag)
    # One frame with no state: prebuilt bytes (transfers.py), no Transfer object, the usual case.
    if len(payload) <= room and state is None and len(tag) <= MAX_TAG:
        data = transfer_frame(session.channel, link.handle, delivery_id, tag, settled, payload)
        if conn.hook is not None:
            # The hook sees what the bytes encode; the bytes stay those of the fast path.
            transfer_ = Transfer(
                handle=link.handle, delivery_id=delivery_id, delivery_tag=tag, message_format=0, settled=settled
            )
            data = conn.hook.frame_out(session.channel, transfer_, data)
        conn._out.append(data)
        conn.output_size += len(data)
        session.next_outgoing_id = (session.next_outgoing_id + 1) % SERIAL_MOD
        session.remote_incoming_window -= 1
    else:  # several frames, or a state to encode: the general writer, window by window
        delivery.payload = payload
        delivery.state = state
        delivery.sent = 0
        link.outgoing = delivery
        send_frames(conn, link)
    link.delivery_count = (link.delivery_count + 1) % SERIAL_MOD
    link.credit -= 1
    if not settled:  # kept until the peer's disposition settles it (dispositions.py)
        session.outgoing_unsettled[delivery_id] = delivery
        link.unsettled[delivery_id] = delivery
    return delivery


def send_settled(conn: Engine, link: Link, tag: bytes, payload: bytes) -> bool:
    """Send a pre-settled delivery of one frame and keep no :class:`Delivery` for it; False if
    it needs :func:`send_transfer` (more than one frame, a long tag, or a hook watching frames).

    A pre-settled delivery is never settled again (§2.6.12), so nothing refers to it once
    written: readers of a stream send one per message, and the object would be garbage at once.
    """
    if conn.hook is not None or len(payload) > conn.remote_max_frame_size - TRANSFER_OVERHEAD - len(tag):
        return False
    if len(tag) > MAX_TAG:
        return False
    session = link.session
    delivery_id = session.next_delivery_id
    session.next_delivery_id = (delivery_id + 1) % SERIAL_MOD
    data = transfer_frame(session.channel, link.handle, delivery_id, tag, True, payload)
    conn._out.append(data)
    conn.output_size += len(data)
    session.next_outgoing_id = (session.next_outgoing_id + 1) % SERIAL_MOD
    session.remote_incoming_window -= 1
    link.delivery_count = (link.delivery_count + 1) % SERIAL_MOD
    link.credit -= 1
    return True


def settled_run_room(conn: Engine) -> int | None:
    """The largest payload :func:`send_settled_run` sends in one frame, or None when a hook
    watches frames (each delivery must then go through :func:`send_transfer`)."""
    if conn.hook is not None:
        return None
    return conn.remote_max_frame_size - TRANSFER_OVERHEAD - 4  # the run's delivery-tags are 4 bytes


def _queue_run(conn: Engine, link: Link, data: bytes, count: int) -> None:
    """Queue a run's frames (``count`` deliveries, one frame each) for the peer and move the
    session's and link's counters past them, as ``count`` single transfers would (§2.5.6, §2.6.7)."""
    session = link.session
    conn._out.append(data)
    conn.output_size += len(data)
    session.next_delivery_id = (session.next_delivery_id + count) % SERIAL_MOD
    session.next_outgoing_id = (session.next_outgoing_id + count) % SERIAL_MOD
    session.remote_incoming_window -= count
    link.delivery_count = (link.delivery_count + count) % SERIAL_MOD
    link.credit -= count


def send_settled_run(
    conn: Engine, link: Link, tag: int, payloads: list[bytes], lead: bytes = b"", number: int = 0
) -> None:
    """:func:`send_settled` for many deliveries at once: one frame each, delivery-tags the
    4-byte numbers from ``tag`` on (``transfers.settled_transfer_frames``, also for ``lead``
    and ``number``: bytes every payload starts with), written as one string.

    The caller checks what :func:`send_settled` would: no hook and every payload (with its
    lead and number) at most :func:`settled_run_room`; and that the link's credit and the
    session's outgoing window (§2.5.6, §2.6.7) take them all.
    """
    count = len(payloads)
    if not count:
        return
    session = link.session
    delivery_id = session.next_delivery_id
    _queue_run(conn, link, settled_transfer_frames(session.channel, link.handle, delivery_id, tag, payloads, lead, number), count)


def send_run(conn: Engine, link: Link, tag: int, payloads: list[bytes], settled: bool) -> list[Delivery] | None:
    """Send the deliveries of ``payloads`` as one string of single frames, as :func:`send_transfer`
    would one by one, and return them in order (pre-settled: none, as :func:`send_settled_run`);
    None, sending nothing, when they must go one by one: a hook watches frames, a payload needs
    several frames, or a delivery-id is among the first 256 (or wraps), which ``transfer_frame``
    writes shorter (a run's frames are byte for byte what it writes for the others).

    Delivery-tags are the 4-byte numbers from ``tag`` on (``transfers.settled_transfer_frames``).
    The caller checks that the link's credit and the session window (§2.5.6, §2.6.7) take them
    all.  An unsettled delivery is kept until the peer's disposition settles it (dispositions.py):
    one call and one string per run of a queue's messages to a consumer, a :class:`Delivery` each.
    """
    count = len(payloads)
    session = link.session
    delivery_id = session.next_delivery_id
    if conn.hook is not None or not 255 < delivery_id < SERIAL_MOD - count:
        return None
    if max(map(len, payloads)) > conn.remote_max_frame_size - TRANSFER_OVERHEAD - 4:
        return None
    _queue_run(conn, link, settled_transfer_frames(session.channel, link.handle, delivery_id, tag, payloads, settled=settled), count)
    if settled:
        return []
    table = session.outgoing_unsettled
    unsettled = link.unsettled
    pack = _TAG.pack
    deliveries = []
    for _ in range(count):
        delivery = Delivery(delivery_id, pack(tag), link, False)
        table[delivery_id] = unsettled[delivery_id] = delivery
        deliveries.append(delivery)
        delivery_id += 1
        tag = (tag + 1) & 0xFFFFFFFF
    return deliveries


def send_frames(conn: Engine, link: Link) -> None:
    """Write the frames of the link's multi-frame delivery that the session window allows."""
    delivery = link.outgoing
    if delivery is None:
        return
    session = link.session
    payload = delivery.payload
    room = conn.remote_max_frame_size - TRANSFER_OVERHEAD - len(delivery.tag)
    while session.remote_incoming_window > 0 and link.state is LINK_TRANSFERS:
        offset = delivery.sent
        if offset == 0:  # the first frame names the delivery; the others only continue it (§2.7.5)
            transfer_ = Transfer(
                handle=link.handle,
                delivery_id=delivery.delivery_id,
                delivery_tag=delivery.tag,
                message_format=0,
                settled=delivery.settled,
                state=delivery.state,
            )
        else:
            transfer_ = Transfer(handle=link.handle)
        transfer_.more = offset + room < len(payload)
        conn._write(session.channel, transfer_, payload[offset : offset + room])
        delivery.sent = offset + room
        session.next_outgoing_id = (session.next_outgoing_id + 1) % SERIAL_MOD
        session.remote_incoming_window -= 1
        if not transfer_.more:
            link.outgoing = None
            delivery.payload = b""
            return
