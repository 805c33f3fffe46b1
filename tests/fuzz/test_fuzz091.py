"""Fuzzing the AMQP 0-9-1 codec and the 0-9-1 engine with its front end, with Hypothesis.

CI runs a bounded number of examples per test (``MINIBROKER_FUZZ_EXAMPLES``, as ``test_fuzz.py``);
``atheris_fuzz091.py`` is the long, coverage-guided run.  The decoders may only raise
``AMQP091Error`` (FrameError, SYNTAX_ERROR and the like: what the engine turns into a close);
the broker, fed anything after a valid handshake, must close cleanly or serve, and stay
serving (:mod:`fuzz091_harness`).
"""

from __future__ import annotations

import struct
from typing import Any

from fuzz091_harness import check, fresh_broker, handshake, moves, run_input
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz import EXAMPLES, FUZZ, resplit

from minibroker.amqp091.errors import AMQP091Error
from minibroker.amqp091.frames import FrameReader
from minibroker.amqp091.methods import decode_method
from minibroker.amqp091.properties import decode_content_header
from minibroker.amqp091.values import decode_table, encode_table

_FRAME = struct.Struct(">BHI")

#: Field-table values of every kind the codec writes, nested a little.
field_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False),
        st.text(max_size=12),
        st.binary(max_size=12),
    ),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=10,
)


def _decoders(data: bytes) -> None:
    for decode in (decode_table, decode_method, decode_content_header):
        try:
            decode(data)
        except AMQP091Error:
            pass


@FUZZ
@given(st.binary(max_size=400))
def test_decoders_raise_only_amqp091_errors(data: bytes) -> None:
    """Field tables, method frames and content headers from any bytes: a value or an AMQP091Error."""
    _decoders(data)


@FUZZ
@given(st.dictionaries(st.text(max_size=8), field_values, max_size=5), st.integers(0, 400), st.integers(0, 255))
def test_mutated_tables_raise_only_amqp091_errors(table: dict[str, Any], at: int, value: int) -> None:
    """A valid table round-trips; with one byte changed it decodes or raises AMQP091Error."""
    encoded = encode_table(table)
    assert encode_table(decode_table(encoded)) == encoded
    at %= len(encoded)
    _decoders(encoded[:at] + bytes([value]) + encoded[at + 1 :])


@FUZZ
@given(st.sampled_from(moves(1)), st.integers(0, 10_000), st.integers(0, 255), st.integers(0, 3))
def test_mutated_methods_and_headers_raise_only_amqp091_errors(frames: bytes, at: int, value: int, cut: int) -> None:
    """Every frame of the fuzz alphabet with one byte changed, or cut short, in its payload."""
    for frame in FrameReader(1 << 20).feed(frames):
        payload = frame.payload
        if payload:
            i = at % len(payload)
            _decoders(payload[:i] + bytes([value]) + payload[i + 1 :])
            _decoders(payload[: len(payload) - cut])


@FUZZ
@given(st.binary(max_size=400), st.lists(st.integers(0, 400), max_size=6))
def test_frame_reader_raises_only_frame_errors(data: bytes, cuts: list[int]) -> None:
    reader = FrameReader(4096)
    try:
        for chunk in resplit(data, cuts):
            reader.feed(chunk)
            assert reader.buffered <= 4096 + 8
    except AMQP091Error:
        pass


MOVES = {channel: moves(channel) for channel in (1, 2, 3)}


@st.composite
def raw_frame(draw: Any) -> bytes:
    """A frame with a random (mostly valid) type, channel and payload."""
    kind = draw(st.sampled_from([1, 1, 2, 3, 8, 0, 4, 206]))
    channel = draw(st.sampled_from([0, 1, 1, 2, 3, 2047, 65535]))
    payload = draw(st.binary(max_size=40))
    return _FRAME.pack(kind, channel, len(payload)) + payload + b"\xce"


@st.composite
def session(draw: Any) -> list[bytes]:
    """Valid moves on channels 0-3, random frames, and byte mutations, after a valid handshake."""
    chunks = []
    for _ in range(draw(st.integers(1, 24))):
        # Mostly valid moves, so a session gets deep before a random frame ends it (most of those
        # are connection errors); channel errors are recovered from by close-ok and open.
        choice = draw(st.integers(0, 19))
        if choice < 17:
            chunks.append(draw(st.sampled_from(MOVES[draw(st.sampled_from([1, 1, 2, 3]))])))
        elif choice < 19:
            chunks.append(draw(raw_frame()))
        else:
            chunk = draw(st.sampled_from(MOVES[1]))
            at = draw(st.integers(0, len(chunk) - 1))
            chunks.append(chunk[:at] + bytes([draw(st.integers(0, 255))]) + chunk[at + 1 :])
    return chunks


@FUZZ
@given(st.binary(max_size=300))
def test_broker_on_random_bytes_after_the_protocol_header(data: bytes) -> None:
    broker = fresh_broker()
    check(broker, run_input(broker, [handshake()[0], data]))


@FUZZ
@given(session(), st.integers(2, 3), st.lists(st.integers(0, 20_000), max_size=6), st.sampled_from([0.0, 0.0, 7.0]))
def test_broker_on_random_frame_sequences_after_a_handshake(
    chunks: list[bytes], channels: int, cuts: list[int], tick: float
) -> None:
    """Random sequences of valid, random and mutated frames on open channels, split anywhere,
    with the clock running (heartbeats) or not: a clean close or service, never an exception."""
    broker = fresh_broker()
    opening = handshake(channels=channels)
    check(broker, run_input(broker, opening + resplit(b"".join(chunks), cuts), tick_every=tick))


@settings(FUZZ, max_examples=max(10, EXAMPLES // 5))
@given(session())
def test_handshake_mutations(chunks: list[bytes]) -> None:
    """A handshake with one of its frames replaced by a move: refused cleanly."""
    broker = fresh_broker()
    opening = handshake()
    opening[1 + len(chunks) % 4] = chunks[0]
    check(broker, run_input(broker, opening + chunks[1:]))
