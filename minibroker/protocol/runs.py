"""The usual frames of an open connection, read in one loop (Part 2 §2.3.1, §2.7.4-§2.7.6).

Once a connection is open and no hook watches its frames, nearly every frame
a busy peer sends is a transfer, a disposition or a flow of the usual shape
(``transfers.py``, ``flow.read_flow``).  :func:`read_run` reads such frames one after the other:
each frame's header and its performative's descriptor come from one
``unpack_from``, the transfer or disposition is read straight from the
frame, and the handlers (``deliveries.receive``, ``dispositions.disposition``,
``flow.on_flow``) are called with its fields.  It stops at the first frame it does not take
(another performative, an unusual encoding, an incomplete frame, a header
the general reader must judge), which the engine's general reader
(``Connection._process``) then handles, so the loop accepts a subset of
what the general reader accepts, with the same effects.

With ``ConnectionConfig.batch_events`` the whole messages read in a row on
one link are reported as one :class:`~.events.MessagesReceived` instead of
a ``MessageReceived`` each: one event, and one call into the broker, per
batch of transfers read together.
"""

from __future__ import annotations

import struct

from . import events as ev
from ._engine import Engine
from .deliveries import receive
from .dispositions import disposition
from .endpoints import Delivery, Link
from .errors import LinkError, SessionError
from .flow import FLOW_LIST8, on_flow, read_flow
from .transfers import read_disposition, read_transfer

__all__ = ["read_run"]

#: A frame header (§2.3.1: size, doff, type, channel) and the first four bytes after it.
_HEAD = struct.Struct(">IBBHI")
#: Those four bytes for a transfer and a disposition: described (0x00) smallulong (0x53) code,
#: as a list8 (0xc0) (``transfers.TRANSFER_LIST8``, ``DISPOSITION_LIST8``).
_TRANSFER = 0x005314C0
_DISPOSITION = 0x005315C0


def read_run(conn: Engine, buf: bytes, pos: int, end: int, budget: int) -> tuple[int, int]:
    """Handle the usual transfers and dispositions at ``buf[pos:end]``, at most ``budget`` frames;
    return where the first frame not handled starts and how many frames were.

    A link or session error a frame raises ends that link or session (``conn._fail``) and the
    loop goes on with the next frame, as the general reader does.
    """
    unpack = _HEAD.unpack_from
    limit = conn.config.max_frame_size
    batch = conn.config.batch_events
    events = conn._events
    frames = 0
    # The messages read in a row on one link, reported together (batch_events).
    run_link: Link | None = None
    run: list[Delivery] = []
    try:
        while frames < budget and end - pos >= 12:
            size, doff, frame_type, channel, word = unpack(buf, pos)
            frame_end = pos + size
            # Anything but a whole AMQP frame with the 8-byte header is the general reader's to judge.
            if doff != 2 or frame_type or frame_end > end or size < 12 or size > limit:
                break
            body = pos + 8
            try:
                if word == _TRANSFER:
                    fields = read_transfer(buf, body, frame_end)
                    if fields is None:
                        break
                    handle, delivery_id, tag, message_format, settled, more, perf_end = fields
                    delivery = receive(
                        conn, channel, handle, delivery_id, tag, message_format, settled, more, None, False,
                        buf[perf_end:frame_end],
                    )  # fmt: skip
                    if delivery is not None:
                        if not batch:
                            events.append(ev.MessageReceived(delivery.link, delivery))
                        elif delivery.link is run_link:
                            run.append(delivery)
                        else:
                            if run:
                                events.append(ev.MessagesReceived(run_link, run))  # type: ignore[arg-type]  # set with run
                            run_link, run = delivery.link, [delivery]
                elif word == _DISPOSITION:
                    read = read_disposition(buf, body, frame_end)
                    if read is None or read[5] != frame_end:
                        break
                    if run:  # what came before the disposition is reported before what it causes
                        events.append(ev.MessagesReceived(run_link, run))  # type: ignore[arg-type]
                        run_link, run = None, []
                    disposition(conn, channel, read[0], read[1], read[2], read[3], read[4])
                elif word == FLOW_LIST8:
                    flow = read_flow(buf, body, frame_end)
                    if flow is None:
                        break
                    if run:  # what came before the flow is reported before what it causes
                        events.append(ev.MessagesReceived(run_link, run))  # type: ignore[arg-type]
                        run_link, run = None, []
                    on_flow(conn, channel, flow, b"")
                else:
                    break
            except (LinkError, SessionError) as exc:
                if run:
                    events.append(ev.MessagesReceived(run_link, run))  # type: ignore[arg-type]
                    run_link, run = None, []
                conn._fail(exc)  # only that link or session ends (Connection._decoded)
            pos = frame_end
            frames += 1
            if conn.finished:
                break
    finally:
        if run:
            events.append(ev.MessagesReceived(run_link, run))  # type: ignore[arg-type]
    return pos, frames
