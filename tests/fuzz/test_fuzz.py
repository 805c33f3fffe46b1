"""Fuzzing the decoder, the frame reader and the broker engine with Hypothesis.

CI runs a bounded number of examples per test; the long run raises it::

    MINIBROKER_FUZZ_EXAMPLES=20000 python -m pytest tests/fuzz -p no:randomly --hypothesis-show-statistics

Every input must end in a clean close with a spec condition (or be served),
never in an exception, and leave the broker serving a fresh client with its
queues intact (see :mod:`fuzz_harness`).
"""

from __future__ import annotations

import os
from typing import Any

from fuzz_harness import check, conversation, fresh_broker, run_input
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.amqp import codec
from minibroker.amqp.errors import AMQPDecodeError
from minibroker.amqp.types import Described, symbol, ulong
from minibroker.protocol import Connection
from minibroker.testing import Peer

EXAMPLES = int(os.environ.get("MINIBROKER_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    # No derandomize here: in CI the suite's `ci` profile (tests/conftest.py) makes the inputs the
    # same every run; local runs, and the long run, explore.
)

# ---------------------------------------------------------------- strategies

#: AMQP values of every primitive and compound kind, nested a little.
amqp_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1).map(lambda n: ulong(n) if n >= 2**63 else n),
    st.integers(0, 2**32 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.text(st.characters(max_codepoint=127), max_size=12).map(symbol),
    st.binary(max_size=20),
)
amqp_values = st.recursive(
    amqp_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.text(st.characters(max_codepoint=127), max_size=6).map(symbol), children, max_size=4),
        st.tuples(st.integers(0, 0x80).map(ulong), children).map(lambda dv: Described(*dv)),
    ),
    max_leaves=12,
)


@st.composite
def random_performative(draw: Any) -> bytes:
    """A frame whose body is a described list with a performative's descriptor and random fields."""
    descriptor = draw(st.integers(0x10, 0x18) | st.sampled_from([0x24, 0x25, 0x26, 0x27, 0x28, 0x31, 0x33]))
    fields = draw(st.lists(amqp_values, max_size=12))
    channel = draw(st.sampled_from([0, 0, 0, 1, 7, 65535]))
    return Peer.raw_frame(channel, codec.encode(Described(ulong(descriptor), fields)))


@st.composite
def valid_conversation(draw: Any) -> list[bytes]:
    return conversation(
        sasl=draw(st.sampled_from(["none", "anonymous", "plain", "bad-plain"])),
        transfers=draw(st.integers(0, 4)),
        frame_payload=draw(st.sampled_from([None, None, 3, 17])),
        settled=draw(st.booleans()),
        credit=draw(st.integers(0, 6)),
        outcome=draw(st.integers(0, 3)),
        finish=draw(st.integers(0, 3)),
    )


@st.composite
def mutated_conversation(draw: Any) -> list[bytes]:
    """A valid conversation with frames dropped, duplicated, swapped, replaced and bytes changed."""
    chunks = draw(valid_conversation())
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["drop", "dup", "swap", "replace", "flip", "insert", "cut", "truncate"]))
        i = draw(st.integers(0, len(chunks) - 1))
        chunk = chunks[i]
        if kind == "drop" and len(chunks) > 1:
            del chunks[i]
        elif kind == "dup":
            chunks.insert(i, chunk)
        elif kind == "swap":
            j = draw(st.integers(0, len(chunks) - 1))
            chunks[i], chunks[j] = chunks[j], chunks[i]
        elif kind == "replace":
            chunks[i] = draw(random_performative())
        elif kind == "flip" and chunk:
            at = draw(st.integers(0, len(chunk) - 1))
            value = draw(st.integers(0, 255))
            chunks[i] = chunk[:at] + bytes([value]) + chunk[at + 1 :]
        elif kind == "insert":
            at = draw(st.integers(0, len(chunk)))
            chunks[i] = chunk[:at] + draw(st.binary(min_size=1, max_size=8)) + chunk[at:]
        elif kind == "cut" and chunk:
            at = draw(st.integers(0, len(chunk) - 1))
            chunks[i] = chunk[:at] + chunk[at + draw(st.integers(1, 8)) :]
        elif kind == "truncate":
            del chunks[i + 1 :]
            chunks[i] = chunk[: draw(st.integers(0, len(chunk)))]
    return chunks


def resplit(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at the given offsets (reduced modulo its length), in order."""
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


# --------------------------------------------------------------------- tests


@FUZZ
@given(st.binary(max_size=300))
def test_decoder_raises_only_decode_errors(data: bytes) -> None:
    """Any bytes decode to a value or raise AMQPDecodeError (Part 1 §1.6), nothing else."""
    try:
        codec.decode_at(data, 0)
    except AMQPDecodeError:
        pass


@FUZZ
@given(st.binary(max_size=400), st.lists(st.integers(0, 400), max_size=6))
def test_frame_reader_on_random_bytes_after_a_header(data: bytes, cuts: list[int]) -> None:
    """The protocol engine alone: random bytes after a valid header, split anywhere, never raise."""
    connection = Connection()
    for chunk in resplit(Peer.header() + data, cuts):
        connection.receive_data(chunk)
        connection.data_to_send()


@FUZZ
@given(st.binary(max_size=300))
def test_broker_on_random_bytes(data: bytes) -> None:
    broker = fresh_broker()
    check(broker, run_input(broker, [data]))


@FUZZ
@given(st.lists(random_performative(), min_size=1, max_size=6), st.booleans())
def test_broker_on_random_performatives_after_open(frames: list[bytes], sasl: bool) -> None:
    """Performatives with random field values, after a valid open and begin."""
    broker = fresh_broker()
    opening = conversation(sasl="anonymous" if sasl else "none", transfers=0, credit=0, finish=0)[:-3]
    check(broker, run_input(broker, opening + frames))


@FUZZ
@given(mutated_conversation(), st.lists(st.integers(0, 10_000), max_size=8))
def test_broker_on_mutated_conversations(chunks: list[bytes], cuts: list[int]) -> None:
    """A mutated client conversation, re-split at random points, never hurts the broker."""
    broker = fresh_broker()
    check(broker, run_input(broker, resplit(b"".join(chunks), cuts)))


@FUZZ
@given(valid_conversation(), st.lists(st.integers(0, 10_000), max_size=8))
def test_valid_conversations_split_anywhere_close_cleanly(chunks: list[bytes], cuts: list[int]) -> None:
    """The unmutated conversations cut at random points (replies may batch differently)."""
    broker = fresh_broker()
    check(broker, run_input(broker, resplit(b"".join(chunks), cuts)))


@settings(FUZZ, max_examples=max(10, EXAMPLES // 10))
@given(valid_conversation())
def test_one_byte_trickle_matches_frame_by_frame(chunks: list[bytes]) -> None:
    """Fed one byte at a time, a conversation gets exactly the replies it gets frame by frame."""
    framed_broker = fresh_broker()
    framed = run_input(framed_broker, chunks)
    trickled_broker = fresh_broker()
    data = b"".join(chunks)
    trickled = run_input(trickled_broker, [data[i : i + 1] for i in range(len(data))])
    assert trickled.names() == framed.names()
    check(framed_broker, framed)
    check(trickled_broker, trickled)
    depth = {name: q.depth for name, q in framed_broker.queues.items()}
    assert {name: q.depth for name, q in trickled_broker.queues.items()} == depth
