"""The usual ``transfer`` read and written, and the usual ``disposition`` written, without building them (Part 2 §2.7.5, §2.7.6).

A producer's transfers are the frames a broker reads most, and nearly every
client encodes them alike: a list8 (Part 1 §1.6.22) whose handle and
delivery-id are uint0, smalluint or uint, whose delivery-tag is a vbin8,
whose booleans are the one-byte true/false/null constants and whose other
fields are null or absent.  :func:`read_transfer` reads exactly that shape
and nothing else; for anything it does not recognise (other encodings, a
``state``, an ``rcv-settle-mode``, ``resume``/``aborted``/``batchable`` set,
a list that does not end where its size says) it returns None and the
engine decodes the frame the general way (``codec.decode_at``), which
judges it.  So the fast path accepts a subset of what the general path
accepts, with the same values.

:func:`transfer_frame` writes the whole frame of a single-frame delivery the
broker sends: the bytes of ``frame(channel, encode_transfer_head(...) +
payload)``, built with one join.  :func:`accepted_disposition_frame` writes
the frame of a disposition whose state is ``accepted``, the outcome of nearly
every message a producer sends, byte for byte what encoding the
``Disposition`` gives; :func:`read_disposition` reads a consumer's usual
disposition (accepted or no state, explicit booleans) the way
:func:`read_transfer` reads a transfer, leaving anything else to the codec.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ..amqp import codec
from ..amqp.messaging import Accepted
from ..amqp.performatives import encode_transfer_head
from .framing import FRAME_AMQP, FRAME_HEADER

__all__ = [
    "DISPOSITION_LIST8", "TRANSFER_LIST8", "DeliverySink", "TransferFields", "TransferTaker", "accepted_disposition_frame",
    "read_disposition", "read_transfer", "settled_transfer_frames", "take_transfers", "transfer_frame",
]  # fmt: skip

#: Described (0x00) smallulong (0x53) code 0x14 (transfer) as a list8 (0xc0): what the fast path reads.
TRANSFER_LIST8 = b"\x00\x53\x14\xc0"
_FIELDS = 11  # handle .. batchable
#: The fields after ``more`` may only be absent or say nothing: rcv-settle-mode and state null,
#: resume, aborted and batchable null or false (0x40 null, 0x42 false).
_NOTHING = (b"\x40", b"\x40", b"\x40\x42", b"\x40\x42", b"\x40\x42")
#: ``settled`` and ``more`` as the one-byte constants true (0x41), false (0x42) or null (0x40):
#: a null ``settled`` is left to the link's default (§2.7.5), a null ``more`` is false.
_SETTLED: dict[int, bool | None] = {0x41: True, 0x42: False, 0x40: None}
_MORE = {0x41: True, 0x42: False, 0x40: False}
#: The fields after the delivery-tag as a client that writes all eleven usually writes them:
#: message-format 0 (uint0), settled false or true, more false, rcv-settle-mode and state null,
#: resume, aborted and batchable false (what ``encode_transfer_head`` writes, and the C client).
_UNSETTLED_TAIL = b"\x43\x42\x42\x40\x40\x42\x42\x42"
_SETTLED_TAIL = b"\x43\x41\x42\x40\x40\x42\x42\x42"


#: What :func:`read_transfer` reads: handle, delivery-id, delivery-tag, message-format, settled,
#: more, and where the performative ends (the payload's start).
TransferFields = tuple[int, int | None, bytes | None, int | None, bool | None, bool, int]


def read_transfer(buf: bytes, pos: int, end: int) -> TransferFields | None:
    """The :data:`TransferFields` of the transfer at ``buf[pos:end]`` (it starts with :data:`TRANSFER_LIST8`),
    the values the general decoder gives, or None when that decoder must read it (the module docstring).

    Called for every message a client sends: one function, no calls, each field's encodings tested
    in the order clients use them (each ``x, pos = ...`` is one assignment, not a tuple).
    """
    try:
        stop = pos + 5 + buf[pos + 4]  # the size byte counts from the count byte on
        count = buf[pos + 5]
        if stop > end or not 1 <= count <= _FIELDS:
            return None
        pos += 6
        code = buf[pos]
        if code == 0x52:  # smalluint
            handle, pos = buf[pos + 1], pos + 2
        elif code == 0x43:  # uint0
            handle, pos = 0, pos + 1
        elif code == 0x70:  # uint
            handle, pos = int.from_bytes(buf[pos + 1 : pos + 5], "big"), pos + 5
        else:
            return None  # null (handle is mandatory) or another type: the general path says what is wrong
        delivery_id: int | None = None
        tag: bytes | None = None
        message_format: int | None = None
        settled: bool | None = None
        more = False
        if count > 1:
            code = buf[pos]
            if code == 0x52:
                delivery_id, pos = buf[pos + 1], pos + 2
            elif code == 0x43:
                delivery_id, pos = 0, pos + 1
            elif code == 0x70:
                delivery_id, pos = int.from_bytes(buf[pos + 1 : pos + 5], "big"), pos + 5
            elif code == 0x40:
                pos += 1
            else:
                return None
        if count > 2:
            code = buf[pos]
            if code == 0xA0:  # vbin8
                tag_end = pos + 2 + buf[pos + 1]
                tag, pos = buf[pos + 2 : tag_end], tag_end
            elif code == 0x40:
                pos += 1
            else:
                return None
        if count == _FIELDS and stop - pos == 8:  # the usual tail (_UNSETTLED_TAIL): one comparison, not eight
            tail = buf[pos:stop]
            if tail == _UNSETTLED_TAIL or tail == _SETTLED_TAIL:
                return handle, delivery_id, tag, 0, tail[1] == 0x41, False, stop
        if count > 3:
            code = buf[pos]
            if code == 0x43:
                message_format, pos = 0, pos + 1
            elif code == 0x52:
                message_format, pos = buf[pos + 1], pos + 2
            elif code == 0x70:
                message_format, pos = int.from_bytes(buf[pos + 1 : pos + 5], "big"), pos + 5
            elif code == 0x40:
                pos += 1
            else:
                return None
        if count > 4:
            settled, pos = _SETTLED[buf[pos]], pos + 1  # KeyError: not a boolean constant
        if count > 5:
            more, pos = _MORE[buf[pos]], pos + 1
        if count > 6:
            for allowed in _NOTHING[: count - 6]:
                if buf[pos] not in allowed:
                    return None
                pos += 1
        if pos != stop:
            return None
    except (IndexError, KeyError):  # the list claims more than the buffer holds, or a boolean is not
        return None  # one of the constants: the general path reports it
    return handle, delivery_id, tag, message_format, settled, more, stop


#: Frame header (§2.3.1: size, doff 2, type 0, channel), then the transfer's descriptor, list8
#: constructor, the list's size and its count (11: every field, as encode_transfer_head writes).
_FRAME_AND_LIST = struct.Struct(">IBBHIBB")
_DESCRIBED_LIST8 = 0x005314C0  # 00 53 14 c0
#: A delivery-id as uint (0x70) and the delivery-tag's vbin8 constructor (0xa0) and length.
_ID_AND_TAG = struct.Struct(">BIBB")
#: Handles as encode_transfer_head writes them: uint0 for 0, smalluint below 256.
_HANDLES = tuple(b"\x43" if handle == 0 else bytes((0x52, handle)) for handle in range(256))
#: message-format 0, settled true/false, then more=false, rcv-settle-mode null, state null,
#: resume=false, aborted=false, batchable=false (as encode_transfer_head writes them).
_TAILS = (_UNSETTLED_TAIL, _SETTLED_TAIL)


#: Where :func:`take_transfers` puts a whole delivery: (delivery-id, settled, payload).
DeliverySink = Callable[[int, bool, bytes], object]
#: What :func:`take_transfers` asks for the deliveries of a link: (channel, handle) -> the sink
#: that takes them, or None to leave that link's frames (and all after them) to the general reader.
TransferTaker = Callable[[int, int], DeliverySink | None]

_UINT = struct.Struct(">I")


def take_transfers(buf: bytes, take: TransferTaker, taken: list[tuple[int, int, int]]) -> int:
    """Hand the whole single-frame deliveries that lead ``buf`` to the sinks ``take`` gives for
    their links; return where the first frame not taken starts (``len(buf)`` when every frame
    was; a partial frame is never taken).  ``taken`` gets ``(channel, handle, count)`` for each
    run of deliveries handed to one link, in order, also when a sink raises: what the caller
    counts as the transfers the general reader would have counted (§2.5.6, §2.6.7).

    A reader of a stream gets runs of hundreds of these, one per message: each goes to its sink
    without a :class:`Frame` or a ``Transfer`` (Part 2 §2.7.5).  A frame is read by
    :func:`read_transfer`; when it has the shape :func:`transfer_frame` and
    :func:`settled_transfer_frames` write (every pre-settled stream delivery a minibroker sends,
    and every single-frame delivery after a link's first 256), the frames after it are read by
    comparing them with it in place (all but the size, delivery-id, tag and payload are the
    same).  Taking stops at the first frame that is anything else: not a transfer, a transfer
    with ``more`` (a multi-frame delivery), one ``read_transfer`` leaves to the codec, one of a
    link ``take`` gives no sink for, a bad frame header (which the general reader then reports).
    """
    pos, end = 0, len(buf)
    unpack = FRAME_HEADER.unpack_from
    uint = _UINT.unpack_from
    starts = buf.startswith
    unsettled_tail, settled_tail = _TAILS
    link: tuple[int, int] | None = None
    sink: DeliverySink | None = None
    count = 0  # deliveries handed to the current link's sink
    # The run's shape, from the last written-shape transfer taken: its bytes from DOFF to the
    # delivery-id's constructor, the tag's constructor and length, and where (from the frame's
    # start) the delivery-id and the payload begin.
    shared = tag_head = b""
    id_at = payload_at = 0
    try:
        while end - pos >= 8:
            if shared:
                stop = pos + uint(buf, pos)[0]
                at, first = pos + id_at, pos + payload_at
                if first <= stop <= end and starts(shared, pos + 4) and starts(tag_head, at + 4):
                    # The tail (settled or not) is compared in place: no slice per frame.
                    settled = starts(settled_tail, first - 8)
                    if settled or starts(unsettled_tail, first - 8):
                        sink(uint(buf, at)[0], settled, buf[first:stop])  # type: ignore[misc]  # set with shared
                        count += 1
                        pos = stop
                        continue
                shared = b""
            size, doff, frame_type, channel = unpack(buf, pos)
            start, stop = pos + 4 * doff, pos + size
            # Incomplete, SASL, or a header with a size or offset no frame can have: the general reader's.
            if stop > end or frame_type != FRAME_AMQP or doff < 2 or start >= stop:
                return pos
            fields = read_transfer(buf, start, stop) if starts(TRANSFER_LIST8, start) else None
            if fields is None or fields[5]:  # another performative, an unusual transfer, or more to come
                return pos
            handle, payload_start = fields[0], fields[6]
            if link != (channel, handle):
                if count:
                    taken.append((*link, count))  # type: ignore[misc]  # count > 0: a link was set
                    count = 0
                link, sink = (channel, handle), take(channel, handle)
            if sink is None:
                return pos
            sink(fields[1] or 0, bool(fields[4]), buf[payload_start:stop])
            count += 1
            # All eleven fields, the handle a uint0 or smalluint, the delivery-id a uint, the tag a
            # vbin8 (as the broker writes them): the run's shape.  A later frame with the same bytes
            # up to the delivery-id (the list's size and count among them) and the same tag length has
            # its other eight fields in eight bytes, one each, which must then be one of the written tails.
            code = buf[start + 6]
            at = start + 8 if code == 0x52 else start + 7 if code == 0x43 else 0
            if buf[start + 5] == _FIELDS and at and buf[at] == 0x70 and buf[at + 5] == 0xA0:
                shared, tag_head = buf[pos + 4 : at + 1], buf[at + 5 : at + 7]
                id_at, payload_at = at + 1 - pos, payload_start - pos
            pos = stop
        return pos
    finally:
        if count:
            taken.append((*link, count))  # type: ignore[misc]  # count > 0: a link was set


def transfer_frame(channel: int, handle: int, delivery_id: int, tag: bytes, settled: bool, payload: bytes) -> bytes:
    """The frame of a single-frame delivery of message-format 0 on ``channel``: header, transfer, payload.

    Byte for byte ``frame(channel, encode_transfer_head(handle, delivery_id, tag, settled) + payload)``;
    ``tag`` is at most 32 bytes (§2.8.7).
    """
    if handle < 256 and delivery_id > 255:  # every delivery after a link's first 256: uint ids
        head = _HANDLES[handle]
        size = 1 + len(head) + 7 + len(tag) + 8  # the list's size: count, handle, id, tag, tail
        return b"".join(
            (
                _FRAME_AND_LIST.pack(8 + 5 + size + len(payload), 2, FRAME_AMQP, channel, _DESCRIBED_LIST8, size, 11),
                head,
                _ID_AND_TAG.pack(0x70, delivery_id, 0xA0, len(tag)),
                tag,
                _TAILS[1 if settled else 0],
                payload,
            )
        )
    head = encode_transfer_head(handle, delivery_id, tag, settled)
    return FRAME_HEADER.pack(8 + len(head) + len(payload), 2, FRAME_AMQP, channel) + head + payload


#: A pre-settled transfer of a run after the frame header and descriptor: the list's size and
#: count, the handle (uint0 or smalluint, else uint), the delivery-id (uint), the tag (vbin8 of a
#: 4-byte counter) and the settled tail, by the handle's encoded length; with a lead, then the
#: lead's bytes and a long (see :func:`settled_transfer_frames`), by both lengths.
_SETTLED_RUN = {n: struct.Struct(f">IBBHIBB{n}sBIBBI8s") for n in (1, 2, 5)}
_LEAD_RUN: dict[tuple[int, int], struct.Struct] = {}


def settled_transfer_frames(
    channel: int, handle: int, delivery_id: int, tag: int, payloads: list[bytes], lead: bytes = b"", number: int = 0,
    settled: bool = True,
) -> bytes:
    """The frames of pre-settled single-frame deliveries of ``payloads``, in order, as one string
    (``settled`` false: of unsettled ones, the same bytes but the settled field).

    The deliveries get consecutive delivery-ids from ``delivery_id`` and delivery-tags that are
    the 4-byte big-endian numbers from ``tag`` on, both wrapping at 2**32 (serial numbers,
    Part 2 §2.8.9); every other field is what :func:`transfer_frame` writes (message-format 0,
    settled, more false).  Each frame is one ``pack`` and its payload, and the run is one
    join: what a stream reader costs the broker per message.  The caller checks each payload
    fits a frame.

    With a ``lead``, each delivery's payload is ``lead``, then ``number`` as a signed 64-bit
    big-endian number (counting up by one per delivery), then the payload given, the first two
    packed with the frame's header: a stream's offset annotation (``streamlog.OFFSET_LEAD``) in
    front of each stored message, without a string made per message to hold the three.
    """
    head = _HANDLES[handle] if handle < 256 else b"\x70" + handle.to_bytes(4)
    size = 1 + len(head) + 7 + 4 + 8  # the list's size: count, handle, id, tag, tail
    overhead = 8 + 5 + size + (len(lead) + 8 if lead else 0)
    tail = _TAILS[1 if settled else 0]
    parts: list[bytes] = []
    append = parts.append
    if lead:
        key = (len(head), len(lead))
        layout = _LEAD_RUN.get(key)
        if layout is None:
            layout = _LEAD_RUN[key] = struct.Struct(f">IBBHIBB{key[0]}sBIBBI8s{key[1]}sq")
        pack = layout.pack
        for payload in payloads:
            append(pack(overhead + len(payload), 2, FRAME_AMQP, channel, _DESCRIBED_LIST8, size, 11, head,
                        0x70, delivery_id, 0xA0, 4, tag, tail, lead, number))  # fmt: skip
            append(payload)
            delivery_id = (delivery_id + 1) & 0xFFFFFFFF
            tag = (tag + 1) & 0xFFFFFFFF
            number += 1
        return b"".join(parts)
    pack = _SETTLED_RUN[len(head)].pack
    for payload in payloads:
        append(pack(overhead + len(payload), 2, FRAME_AMQP, channel, _DESCRIBED_LIST8, size, 11, head,
                    0x70, delivery_id, 0xA0, 4, tag, tail))  # fmt: skip
        append(payload)
        delivery_id = (delivery_id + 1) & 0xFFFFFFFF
        tag = (tag + 1) & 0xFFFFFFFF
    return b"".join(parts)


#: Disposition's descriptor (0x15) and list8 with its size filled in last and 6 fields (as the
#: generic encoder writes every field of a performative).
_DISPOSITION_PREFIX = bytes((0x00, 0x53, 0x15, 0xC0, 0x00, 0x06))


def _encoded_accepted() -> bytes:
    out = bytearray()
    Accepted().encode_into(out)
    return bytes(out)


#: The accepted outcome, encoded (it has no fields: always the same bytes).
_ACCEPTED = _encoded_accepted()


def accepted_disposition_frame(channel: int, role: bool, first: int, last: int | None, settled: bool) -> bytes:
    """The frame of ``Disposition(role=, first=, last=, settled=, state=Accepted())`` on ``channel``.

    Byte for byte ``frame(channel, <that disposition encoded>)``: role, first, last (or null),
    settled, the accepted outcome, batchable false.
    """
    out = bytearray(_DISPOSITION_PREFIX)
    out.append(0x41 if role else 0x42)
    codec.enc_uint(first, out)
    if last is None:
        out.append(0x40)
    else:
        codec.enc_uint(last, out)
    out.append(0x41 if settled else 0x42)
    out += _ACCEPTED
    out.append(0x42)  # batchable: false
    out[4] = len(out) - 5  # the list's size counts from the count byte on
    return FRAME_HEADER.pack(8 + len(out), 2, FRAME_AMQP, channel) + out


#: Described (0x00) smallulong (0x53) code 0x15 (disposition) as a list8 (0xc0).
DISPOSITION_LIST8 = b"\x00\x53\x15\xc0"
#: The accepted outcome as clients write it: an empty list as list0, or as list8 of no items.
_ACCEPTED_FORMS = (b"\x00\x53\x24\x45", b"\x00\x53\x24\xc0\x01\x00")
#: One accepted outcome for every disposition read here (it has no fields to change).
_ACCEPTED_STATE = Accepted()


def read_disposition(buf: bytes, pos: int, end: int) -> tuple[bool, int, int | None, bool, Any, int] | None:
    """Read the disposition at ``buf[pos:end]`` (it starts with :data:`DISPOSITION_LIST8`), if it has the usual shape.

    Returns (role, first, last, settled, state, end of the performative) as the general decoder
    gives them (state an ``Accepted`` or None), or None for the general decoder to read it:
    booleans other than explicit true/false, states other than accepted, batchable set.
    """
    try:
        stop = pos + 5 + buf[pos + 4]
        count = buf[pos + 5]
        if stop > end or not 2 <= count <= 6:
            return None
        pos += 6
        code = buf[pos]
        if code == 0x41:
            role = True
        elif code == 0x42:
            role = False
        else:
            return None
        pos += 1
        first: int
        code = buf[pos]
        if code == 0x52:
            first = buf[pos + 1]
            pos += 2
        elif code == 0x43:
            first = 0
            pos += 1
        elif code == 0x70:
            first = int.from_bytes(buf[pos + 1 : pos + 5], "big")
            pos += 5
        else:
            return None
        last: int | None = None
        settled = False
        state: Any = None
        if count > 2:
            code = buf[pos]
            if code == 0x52:
                last = buf[pos + 1]
                pos += 2
            elif code == 0x43:
                last = 0
                pos += 1
            elif code == 0x70:
                last = int.from_bytes(buf[pos + 1 : pos + 5], "big")
                pos += 5
            elif code == 0x40:
                pos += 1
            else:
                return None
        if count > 3:
            code = buf[pos]
            if code == 0x41:
                settled = True
            elif code != 0x42:
                return None
            pos += 1
        if count > 4:
            if buf[pos] == 0x40:
                pos += 1
            elif buf.startswith(_ACCEPTED_FORMS[0], pos):
                state = _ACCEPTED_STATE
                pos += 4
            elif buf.startswith(_ACCEPTED_FORMS[1], pos):
                state = _ACCEPTED_STATE
                pos += 6
            else:
                return None
        if count > 5:
            if buf[pos] != 0x42:  # batchable: only false here
                return None
            pos += 1
        if pos != stop:
            return None
    except IndexError:
        return None
    return role, first, last, settled, state, stop
