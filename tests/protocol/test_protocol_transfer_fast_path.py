"""The engine's direct transfer reader (protocol/transfers.py) agrees with the general decoder (§2.7.5).

It may decline any frame (the general path then reads it); whatever it accepts, it must read
to the same field values and the same end as ``codec.decode_at``.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from minibroker import Broker
from minibroker.amqp import codec
from minibroker.amqp.messaging import Accepted, Rejected
from minibroker.amqp.performatives import Disposition, End, Transfer
from minibroker.broker.streamlog import OFFSET_LEAD
from minibroker.protocol.framing import frame
from minibroker.protocol.peer import FrameReader, parse_frames
from minibroker.protocol.peer import Peer as ClientPeer
from minibroker.protocol.transfers import (
    DISPOSITION_LIST8,
    TRANSFER_LIST8,
    accepted_disposition_frame,
    read_disposition,
    read_transfer,
    settled_transfer_frames,
    take_transfers,
    transfer_frame,
)
from minibroker.testing import Peer, connect

uints = st.integers(0, 2**32 - 1)


def _general(buf: bytes) -> tuple[Any, ...]:
    transfer, end = codec.decode_at(buf, 0)
    assert isinstance(transfer, Transfer)
    return (
        transfer.handle, transfer.delivery_id, transfer.delivery_tag, transfer.message_format,
        transfer.settled, transfer.more, end,
    )  # fmt: skip


@given(
    handle=uints,
    delivery_id=st.none() | uints,
    tag=st.none() | st.binary(max_size=32),
    message_format=st.none() | uints,
    settled=st.none() | st.booleans(),
    more=st.booleans(),
)
def test_what_the_codec_writes_is_read_the_same(
    handle: int, delivery_id: int | None, tag: bytes | None, message_format: int | None, settled: bool | None, more: bool
) -> None:
    out = bytearray()
    Transfer(
        handle=handle, delivery_id=delivery_id, delivery_tag=tag, message_format=message_format, settled=settled, more=more
    ).encode_into(out)
    buf = bytes(out) + b"payload"
    assert buf.startswith(TRANSFER_LIST8)
    fields = read_transfer(buf, 0, len(buf))
    assert fields is not None  # the usual shape: never left to the general path
    assert fields == _general(buf)


@given(handle=uints, delivery_id=uints, tag=st.binary(max_size=32), settled=st.booleans(), more=st.booleans())
@example(handle=0, delivery_id=0, tag=b"", settled=False, more=False)
@example(handle=0, delivery_id=0, tag=b"", settled=True, more=False)
def test_all_eleven_fields_as_clients_write_them_are_read_the_same(
    handle: int, delivery_id: int, tag: bytes, settled: bool, more: bool
) -> None:
    # Every field written, format 0 and the rest false or null: the fields after the tag are
    # compared at once with the usual ones (_UNSETTLED_TAIL, _SETTLED_TAIL), or read one by one.
    out = bytearray()
    Transfer(
        handle=handle, delivery_id=delivery_id, delivery_tag=tag, message_format=0, settled=settled, more=more,
        rcv_settle_mode=None, resume=False, aborted=False, batchable=False,
    ).encode_into(out)
    buf = bytes(out) + b"payload"
    assert buf[5] == 11  # the list's count: all eleven fields
    assert read_transfer(buf, 0, len(buf)) == _general(buf)


@given(aborted=st.booleans(), resume=st.booleans(), rcv_settle_mode=st.none() | st.integers(0, 1), state=st.booleans())
def test_a_transfer_saying_more_is_left_to_the_general_path(
    aborted: bool, resume: bool, rcv_settle_mode: int | None, state: bool
) -> None:
    out = bytearray()
    Transfer(
        handle=1, delivery_id=2, delivery_tag=b"t", aborted=aborted, resume=resume, rcv_settle_mode=rcv_settle_mode,
        state=Accepted() if state else None,
    ).encode_into(out)
    fields = read_transfer(bytes(out), 0, len(out))
    if aborted or resume or rcv_settle_mode is not None or state:
        assert fields is None
    else:
        assert fields == _general(bytes(out))


@given(st.binary(max_size=64), st.integers(0, 70))
def test_whatever_it_accepts_of_arbitrary_bytes_the_codec_reads_alike(rest: bytes, cut: int) -> None:
    buf = TRANSFER_LIST8 + rest
    end = min(len(buf), cut + 4)
    fields = read_transfer(buf, 0, end)
    if fields is None:
        return
    assert fields[-1] <= end
    assert fields == _general(buf[: fields[-1]])


def test_a_proton_c_transfer_is_routed_and_a_malformed_one_judged_by_the_general_path() -> None:
    """The four-field list proton-c writes (handle, delivery-id, tag, format) takes the fast path end to end."""
    broker = Broker()
    broker.declare_queue("q")
    peer = Peer()
    pump = connect(broker, peer)
    pump.send(peer.start() + peer.attach_sender("s", "q", handle=0))
    message = b"\x00\x53\x70\x45\x00\x53\x77\xa1\x02hi"  # header (empty list), amqp-value "hi"
    head = b"\x00\x53\x14\xc0\x0a\x04\x43\x43\xa0\x04\x01\x00\x00\x00\x43"
    frames = pump.send(peer.raw_frame(0, head + message))
    assert frames.names() == ["Disposition"]
    assert isinstance(frames.one(Disposition).state, Accepted)
    assert broker.queues["q"].depth == 1
    # handle 7 is not attached: the general path's error (amqp:session:unattached-handle) ends the session
    bad = b"\x00\x53\x14\xc0\x0c\x04\x52\x07\x52\x01\xa0\x04\x02\x00\x00\x00\x43"
    frames = pump.send(peer.raw_frame(0, bad + message))
    assert frames.names() == ["End"]
    error = frames.one(End).error
    assert error is not None and error.condition == "amqp:session:unattached-handle"
    assert broker.queues["q"].depth == 1


@given(
    channel=st.integers(0, 65535),
    handle=uints,
    delivery_id=uints,
    tag=st.binary(max_size=32),
    settled=st.booleans(),
    payload=st.binary(max_size=64),
)
@example(channel=0, handle=0, delivery_id=300, tag=b"\x00\x00\x01\x2d", settled=False, payload=b"body")
@example(channel=7, handle=255, delivery_id=2**32 - 1, tag=b"", settled=True, payload=b"")
@example(channel=1, handle=256, delivery_id=256, tag=bytes(32), settled=False, payload=b"x")
def test_the_transfer_frame_is_the_generic_encoding(
    channel: int, handle: int, delivery_id: int, tag: bytes, settled: bool, payload: bytes
) -> None:
    head = bytearray()
    Transfer(handle=handle, delivery_id=delivery_id, delivery_tag=tag, message_format=0, settled=settled).encode_into(head)
    assert transfer_frame(channel, handle, delivery_id, tag, settled, payload) == frame(channel, bytes(head) + payload)


@given(
    channel=st.integers(0, 65535),
    role=st.booleans(),
    first=uints,
    last=st.none() | uints,
    settled=st.booleans(),
)
@example(channel=0, role=True, first=0, last=None, settled=True)
@example(channel=3, role=False, first=300, last=2**32 - 1, settled=False)
def test_the_accepted_disposition_frame_is_the_generic_encoding(
    channel: int, role: bool, first: int, last: int | None, settled: bool
) -> None:
    body = bytearray()
    Disposition(role=role, first=first, last=last, settled=settled, state=Accepted()).encode_into(body)
    assert accepted_disposition_frame(channel, role, first, last, settled) == frame(channel, bytes(body))


def _general_disposition(buf: bytes) -> tuple[Any, ...]:
    disposition, end = codec.decode_at(buf, 0)
    assert isinstance(disposition, Disposition)
    return (disposition.role, disposition.first, disposition.last, disposition.settled, disposition.state, end)


@given(role=st.booleans(), first=uints, last=st.none() | uints, settled=st.booleans(), accepted=st.booleans())
def test_a_disposition_the_codec_writes_is_read_the_same(
    role: bool, first: int, last: int | None, settled: bool, accepted: bool
) -> None:
    out = bytearray()
    Disposition(role=role, first=first, last=last, settled=settled, state=Accepted() if accepted else None).encode_into(
        out
    )
    buf = bytes(out)
    assert buf.startswith(DISPOSITION_LIST8)
    read = read_disposition(buf, 0, len(buf))
    assert read is not None
    assert read == _general_disposition(buf)


@given(st.binary(max_size=40), st.integers(0, 50))
@example(b"\x0b\x06\x41\x43\x52\x05\x41\x00\x53\x24\x45\x42", 50)  # proton's accepted range
@example(b"\x0c\x06\x41\x43\x40\x41\x00\x53\x24\xc0\x01\x00\x42", 50)  # accepted as list8
def test_whatever_it_accepts_of_arbitrary_disposition_bytes_the_codec_reads_alike(rest: bytes, cut: int) -> None:
    buf = DISPOSITION_LIST8 + rest
    end = min(len(buf), cut + 4)
    read = read_disposition(buf, 0, end)
    if read is None:
        return
    assert read[-1] <= end
    assert read == _general_disposition(buf[: read[-1]])


def test_the_accepted_ranges_clients_send_take_the_direct_reader() -> None:
    for rest in (b"\x0b\x06\x41\x43\x52\x05\x41\x00\x53\x24\x45\x42", b"\x0c\x06\x41\x43\x40\x41\x00\x53\x24\xc0\x01\x00\x42"):
        buf = DISPOSITION_LIST8 + rest
        read = read_disposition(buf, 0, len(buf))
        assert read is not None and isinstance(read[4], Accepted)
        assert read == _general_disposition(buf)


def test_a_rejected_disposition_is_left_to_the_general_path() -> None:
    out = bytearray()
    Disposition(role=True, first=1, settled=True, state=Rejected()).encode_into(out)
    assert read_disposition(bytes(out), 0, len(out)) is None


def _frames_both_ways(body: bytes) -> tuple[Any, Any]:
    """What the client's FrameReader reads of one frame, and what the codec alone reads of it."""
    try:
        general: Any = codec.decode_at(body, 0)
        general = (general[0], body[general[1] :])
    except Exception as exc:  # noqa: BLE001 - the reader must fail alike
        general = type(exc)
    try:
        read = FrameReader().feed(frame(0, body))
        fast: Any = (read[0].performative, read[0].payload)
    except Exception as exc:  # noqa: BLE001
        fast = type(exc)
    return fast, general


@given(
    handle=uints,
    delivery_id=st.none() | uints,
    tag=st.none() | st.binary(max_size=32),
    settled=st.none() | st.booleans(),
    more=st.booleans(),
    aborted=st.booleans(),
    payload=st.binary(max_size=16),
)
def test_the_client_frame_reader_reads_transfers_as_the_codec_does(
    handle: int, delivery_id: int | None, tag: bytes | None, settled: bool | None, more: bool, aborted: bool,
    payload: bytes,
) -> None:
    out = bytearray()
    Transfer(
        handle=handle, delivery_id=delivery_id, delivery_tag=tag, message_format=0, settled=settled, more=more,
        aborted=aborted,
    ).encode_into(out)
    fast, general = _frames_both_ways(bytes(out) + payload)
    assert fast == general
    assert fast[0] == Transfer(
        handle=handle, delivery_id=delivery_id, delivery_tag=tag, message_format=0, settled=settled, more=more,
        aborted=aborted,
    )


@given(st.binary(max_size=64))
@example(b"\x02\x01\x43")  # handle only: the other fields take their defaults
@example(b"\x04\x02\x52\x07\x40")  # delivery-id null
def test_the_client_frame_reader_reads_any_transfer_bytes_as_the_codec_does(rest: bytes) -> None:
    fast, general = _frames_both_ways(TRANSFER_LIST8 + rest)
    assert fast == general  # the same Transfer and payload, or the same error



def _described(f: Any) -> tuple[Any, ...]:
    performative = f.performative
    if isinstance(performative, Transfer):
        return ("transfer", performative.delivery_id, f.payload)
    return (type(performative).__name__,)


def _general_deliveries(data: bytes) -> list[tuple[int, int, int, bool, bytes]]:
    """The whole single-frame deliveries leading ``data``, read by the general decoder."""
    out = []
    for f in parse_frames(data):
        transfer = f.performative
        if not isinstance(transfer, Transfer) or transfer.more:
            break
        out.append((f.channel, transfer.handle, transfer.delivery_id or 0, bool(transfer.settled), f.payload))
    return out


def _taken(data: bytes) -> tuple[list[tuple[int, int, int, bool, bytes]], int]:
    """What ``take_transfers`` hands each link's sink, and where it stops; the runs it counts
    must be those deliveries, link by link."""
    got: list[tuple[int, int, int, bool, bytes]] = []

    def take(channel: int, handle: int) -> Any:
        return lambda delivery_id, settled, payload: got.append((channel, handle, delivery_id, settled, payload))

    runs: list[tuple[int, int, int]] = []
    end = take_transfers(data, take, runs)
    assert runs == [(*link, len(list(group))) for link, group in itertools.groupby(got, key=lambda g: g[:2])]
    return got, end


@given(
    channel=st.integers(0, 65535),
    handle=st.integers(0, 300),
    delivery_id=uints,
    tag=st.binary(max_size=32),
    settled=st.booleans(),
    payload=st.binary(max_size=40),
)
def test_what_the_broker_writes_is_taken_with_the_values_the_codec_reads(
    channel: int, handle: int, delivery_id: int, tag: bytes, settled: bool, payload: bytes
) -> None:
    """Every frame ``transfer_frame`` writes (its own bytes above delivery-id 255, the codec's below)
    is taken whole, with the channel, handle, delivery-id, settled and payload the codec reads."""
    data = transfer_frame(channel, handle, delivery_id, tag, settled, payload)
    got, end = _taken(data)
    assert end == len(data)
    assert got == _general_deliveries(data) == [(channel, handle, delivery_id, settled, payload)]


@given(
    channel=st.integers(0, 65535),
    handle=st.sampled_from([0, 1, 255, 256, 2**32 - 1]),
    delivery_id=st.sampled_from([0, 255, 256, 2**32 - 2]),
    tag=st.sampled_from([0, 2**32 - 1]),
    payloads=st.lists(st.binary(max_size=40), max_size=4),
    lead=st.sampled_from([b"", b"L", OFFSET_LEAD]),
    number=st.sampled_from([0, -1, 2**63 - 4]),
)
def test_a_settled_run_is_the_frames_the_codec_reads(
    channel: int, handle: int, delivery_id: int, tag: int, payloads: list[bytes], lead: bytes, number: int
) -> None:
    """``settled_transfer_frames``: one pre-settled transfer per payload, ids and tags counting
    on and wrapping at 2**32 (§2.8.9), read back by the general decoder and taken whole; with a
    lead, each payload after the lead and a long counting up from ``number``."""
    data = settled_transfer_frames(channel, handle, delivery_id, tag, payloads, lead, number)
    frames = parse_frames(data)
    if lead:
        payloads = [lead + (number + n).to_bytes(8, "big", signed=True) + p for n, p in enumerate(payloads)]
    assert [(f.channel, f.payload) for f in frames] == [(channel, p) for p in payloads]
    assert [f.performative for f in frames] == [
        Transfer(handle=handle, delivery_id=(delivery_id + n) % 2**32, delivery_tag=((tag + n) % 2**32).to_bytes(4),
                 message_format=0, settled=True, more=False)  # fmt: skip
        for n in range(len(payloads))
    ]
    got, end = _taken(data)
    assert end == len(data) and got == _general_deliveries(data)


@given(
    channel=st.integers(0, 65535),
    handle=st.sampled_from([0, 1, 255, 256, 2**32 - 1]),
    delivery_id=st.integers(256, 2**32 - 5),
    tag=st.sampled_from([0, 2**32 - 1]),
    payloads=st.lists(st.binary(max_size=40), min_size=1, max_size=4),
)
def test_an_unsettled_run_is_the_frames_transfer_frame_writes(
    channel: int, handle: int, delivery_id: int, tag: int, payloads: list[bytes]
) -> None:
    """``settled_transfer_frames(settled=False)`` (a queue's run, ``deliveries.send_run``, which
    takes delivery-ids from 256 on): byte for byte ``transfer_frame`` of each delivery."""
    data = settled_transfer_frames(channel, handle, delivery_id, tag, payloads, settled=False)
    assert data == b"".join(
        transfer_frame(channel, handle, delivery_id + n, ((tag + n) % 2**32).to_bytes(4), False, payload)
        for n, payload in enumerate(payloads)
    )
    assert not any(frame.performative.settled for frame in parse_frames(data))


@given(
    delivery_id=st.integers(256, 2**32 - 3),
    tag=st.binary(max_size=8),
    which=st.integers(0, 2),
    at=st.integers(0, 60),
    byte=st.integers(0, 255),
)
@example(delivery_id=1000, tag=b"abcd", which=1, at=13, byte=0x40)  # the run's second tag made null
def test_a_changed_byte_is_taken_as_the_codec_reads_it_or_left_to_it(
    delivery_id: int, tag: bytes, which: int, at: int, byte: int
) -> None:
    """One byte of the performative of one of three written transfers changed (the first of a run,
    or one compared with the run's first): ``take_transfers`` takes what the general decoder
    reads, or stops there and leaves the rest to the general reader."""
    frames = [bytearray(transfer_frame(3, 7, delivery_id + n, tag, n != 1, b"payload%d" % n)) for n in range(3)]
    changed = frames[which]
    changed[8 + at % (len(changed) - 8 - len(b"payload0"))] = byte  # the frame header's checks are the general reader's
    data = b"".join(frames)
    ends = [sum(len(f) for f in frames[:n]) for n in range(4)]
    got, end = _taken(data)
    assert end == ends[len(got)]
    try:
        general = _general_deliveries(data)
    except (ValueError, codec.AMQPDecodeError):
        assert len(got) <= which  # a malformed frame is never taken
        general = _general_deliveries(data[: ends[which]])
    assert got == general[: len(got)]


def test_a_run_of_ten_field_transfers_ending_like_the_written_tail_is_left_to_the_codec() -> None:
    """Transfers of ten fields (no batchable) are no run: the next one's last eight bytes before its
    payload can equal a written tail while its message-format is ``true``, which the codec refuses."""

    def ten_fields(tag: bytes, rest: bytes, payload: bytes) -> bytes:
        body = b"\x0a\x43\x70\x00\x00\x03\xe8\xa0" + bytes((len(tag),)) + tag + rest
        return frame(0, TRANSFER_LIST8 + bytes((len(body),)) + body + payload)

    first = ten_fields(b"tagC", b"\x43\x41\x42\x40\x40\x42\x42", b"one")  # valid: format 0, settled
    second = ten_fields(b"tagC", b"\x41\x42\x40\x40\x42\x42\x42", b"two")  # format true
    got, end = _taken(first + second)
    assert (got, end) == ([(0, 0, 1000, True, b"one")], len(first))


def test_a_frame_too_short_for_its_transfer_ends_a_run() -> None:
    """The second of a run says it is shorter than its own transfer: it is not taken (the general
    reader reports it), even though its other bytes are those of the run."""
    first = transfer_frame(0, 0, 1000, b"tag0", True, b"one")
    second = bytearray(transfer_frame(0, 0, 1001, b"tag1", True, b"two"))
    second[:4] = (8 + 12).to_bytes(4, "big")  # ends inside the transfer's fields
    got, end = _taken(first + bytes(second) + bytes(64))
    assert (got, end) == ([(0, 0, 1000, True, b"one")], len(first))


@given(
    kinds=st.lists(st.sampled_from(["transfer", "written", "more", "end", "empty"]), max_size=12),
    handles=st.lists(st.integers(0, 1), min_size=12, max_size=12),
    cuts=st.lists(st.integers(1, 300), max_size=6),
    refuse=st.sets(st.integers(0, 1)),
)
def test_a_taker_sees_leading_transfers_and_every_frame_keeps_its_order(
    kinds: list[str], handles: list[int], cuts: list[int], refuse: set[int]
) -> None:
    """However the bytes arrive, the deliveries taken (on the links the taker gives a sink for)
    and the frames returned (after each feed) are every frame, in the order sent: a transfer
    behind a frame not taken is never taken before that frame is returned."""
    data = b""
    for n, kind in enumerate(kinds):
        handle = handles[n]
        if kind == "written":  # as the broker writes it: delivery-id above 255 (the id's low byte is n)
            data += transfer_frame(1, handle, 256 * 7 + n, b"tag", n % 2 == 0, b"w%d" % n)
        elif kind in ("transfer", "more"):
            out = bytearray()
            Transfer(handle=handle, delivery_id=n, delivery_tag=b"t", message_format=0, settled=True,
                     more=kind == "more").encode_into(out)  # fmt: skip
            data += frame(1, bytes(out) + b"m%d" % n)
        elif kind == "end":
            out = bytearray()
            End().encode_into(out)
            data += frame(1, bytes(out))
        else:
            data += frame(1, b"")
    events: list[tuple[Any, ...]] = []

    def take(channel: int, handle: int) -> Any:
        assert channel == 1
        if handle in refuse:
            return None
        return lambda delivery_id, settled, payload: events.append(("transfer", delivery_id, payload))

    reader, pos = FrameReader(), 0
    for cut in [*cuts, len(data)]:
        events += [_described(f) for f in reader.feed(data[pos : pos + cut], take)]
        pos += cut
    assert events == [_described(f) for f in parse_frames(data)]
    assert not reader.pending


@given(count=st.integers(1, 12), credit=st.integers(0, 8), delivery_count=st.sampled_from([0, 7, 2**32 - 3]))
def test_counting_taken_transfers_at_once_counts_as_observing_each(count: int, credit: int, delivery_count: int) -> None:
    """``Peer.count_transfers`` (the Client's intake, after a read) leaves the session's
    next-incoming-id and the link's delivery-count and credit where observing each transfer
    would (Part 2 §2.5.6, §2.6.7), serial numbers wrapping."""

    def peer_with_a_receiver() -> Any:
        peer = ClientPeer()
        peer.begin()
        session = peer.session()
        session.remote_channel, session.next_incoming_id = 3, 2**32 - 5
        peer.attach_receiver("r", "q", 0)
        link = peer.link(0)
        link.remote_handle, link.credit, link.delivery_count = 5, credit, delivery_count
        return peer, session, link

    observed, session_a, link_a = peer_with_a_receiver()
    out = bytearray()
    Transfer(handle=5, delivery_id=0, delivery_tag=b"t", settled=True).encode_into(out)
    observed.observe(parse_frames(frame(3, bytes(out) + b"m") * count))
    counted, session_b, link_b = peer_with_a_receiver()
    counted.count_transfers(3, 5, count)
    assert (session_b.next_incoming_id, link_b.delivery_count, link_b.credit, link_b.receiving_more) == (
        session_a.next_incoming_id, link_a.delivery_count, link_a.credit, link_a.receiving_more)  # fmt: skip


def _sending_peer(credit: int, max_frame_size: int) -> tuple[ClientPeer, Any]:
    peer = ClientPeer()
    peer.remote_max_frame_size = max_frame_size
    peer.begin()
    peer.attach_sender("s", "q", 0)
    link = peer.link(0)
    link.credit = credit
    return peer, link


@given(
    delivery_id=st.none() | uints,
    tag=st.none() | st.binary(max_size=40),
    settled=st.booleans(),
    size=st.sampled_from([0, 10, 470, 600, 2000]),
    credit=st.integers(0, 3),
)
def test_a_sender_s_single_frame_transfer_is_the_general_one(
    delivery_id: int | None, tag: bytes | None, settled: bool, size: int, credit: int
) -> None:
    """``Peer.transfer`` of the usual delivery (one frame, message-format 0, no other field) is
    written by ``transfer_frame``; the codec reads the same transfer and payload as from the general
    writer's frames, and the session's and link's counters move the same (§2.5.6, §2.6.7)."""
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    fast, fast_link = _sending_peer(credit, 512)  # 600 and 2000 bytes take several frames
    general, general_link = _sending_peer(credit, 512)
    got = parse_frames(fast.transfer(0, delivery_id, tag, payload, settled))
    # A frame_payload makes the general writer write it: the whole payload in one frame when it
    # fits, as the usual delivery is written; else split as the default would.
    one_frame = len(got) == 1
    expected = parse_frames(general.transfer(0, delivery_id, tag, payload, settled, frame_payload=size if one_frame else None))
    assert len(expected) == len(got)
    assert [f.performative for f in got] == [f.performative for f in expected]
    assert b"".join(f.payload for f in got) == payload == b"".join(f.payload for f in expected)
    for peer, link in ((fast, fast_link), (general, general_link)):
        assert (peer.session().next_outgoing_id, peer.session().next_delivery_id) == (
            len(expected), ((delivery_id or 0) + 1) % 2**32
        )
        assert (link.delivery_count, link.credit, link.sending_more) == (1, max(0, credit - 1), False)
