"""The decoder's fast paths give exactly what the general path gives: the same values, the same errors.

Three fast paths are checked against a general form of the same step:

* list and map bodies read common encodings inline (``codec._items``): compared with a
  reference that calls every value's decoder, on valid encodings and on mutated bytes;
* composites are built by generated straight-line code (``composite._from_list_function``):
  compared with a reference written as loops over the fields, on arbitrary field values;
* ``decode_message`` decodes the usual message in one pass: compared with
  ``decode_message_checked`` on valid messages, shuffled and repeated sections, and mutations.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_codec_roundtrip import scalars, tagged, values

from minibroker.amqp import AMQPDecodeError, Array, codec, composite, encode, symbol, ubyte, uint, ulong
from minibroker.amqp.message import Message, decode_message, decode_message_checked
from minibroker.amqp.messaging import (
    AmqpSequence,
    AmqpValue,
    ApplicationProperties,
    Data,
    DeliveryAnnotations,
    Footer,
    Header,
    MessageAnnotations,
    Properties,
)

# ---------------------------------------------------------------------------
# references: the general forms, written plainly
# ---------------------------------------------------------------------------


def reference_items(buf: Any, p: int, end: int, count: int, depth: int, pos: int) -> tuple[list[Any], int]:
    """A list body as one decoder call per value."""
    items = []
    for _ in range(count):
        if p >= end:
            raise AMQPDecodeError(f"list at offset {pos} holds fewer than its count of {count}")
        item, p = codec._DECODERS[buf[p]](buf, p + 1, depth + 1)
        items.append(item)
    return items, p


@contextmanager
def general_items() -> Iterator[None]:
    fast = codec._items
    codec._items = reference_items
    try:
        yield
    finally:
        codec._items = fast


def outcome(fn: Callable[[], Any]) -> Any:
    """A comparable result: the value (type-tagged) or the error's type and message."""
    try:
        return ("value", tagged(fn()))
    except AMQPDecodeError as exc:
        return ("error", str(exc))


def both(fn: Callable[[], Any]) -> tuple[Any, Any]:
    fast = outcome(fn)
    with general_items():
        general = outcome(fn)
    return fast, general


def reference_from_list(cls: Any, values: Any) -> Any:
    """A composite from its described list, as loops over its fields (Part 1 §1.4)."""
    fields = dataclasses.fields(cls)
    name = str(cls.DESCRIPTOR_NAME)
    if type(values) is not list:
        raise AMQPDecodeError(f"{name} must be a described list, got {type(values).__name__}")
    count = len(fields)
    values = (values + [None] * count)[:count]
    for i, f in enumerate(fields):
        if values[i] is None:
            values[i] = f.default
        elif f.metadata["amqp"] == "symbol*":
            values[i] = values[i].elements if type(values[i]) is Array else [values[i]]
    for i, f in enumerate(fields):
        if f.metadata["mandatory"] and values[i] is None:
            raise AMQPDecodeError(f"{name}: mandatory field {f.name!r} is null or missing")
    for i, f in enumerate(fields):
        wire, value = f.metadata["amqp"], values[i]
        if wire == "*" or value is None:
            continue
        if not isinstance(value, composite.FIELD_TYPES[wire]):
            raise AMQPDecodeError(
                f"{name}: field {f.name!r} must be a {wire}, got {type(value).__name__} {value!r:.40}"
            )
        limit = composite.UNSIGNED_MAX.get(wire)
        if limit is not None and isinstance(value, int) and not 0 <= value <= limit:
            raise AMQPDecodeError(f"{name}: field {f.name!r} must be a {wire}, got {value}")
        if wire == "symbol*" and isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise AMQPDecodeError(f"{name}: field {f.name!r} must hold symbols, got {value!r:.60}")
    return cls(*values)


# ---------------------------------------------------------------------------
# list and map bodies
# ---------------------------------------------------------------------------

#: Values made of the encodings read inline, at their edges (sizes 0 and 255, signed bytes).
inline_values = st.one_of(
    st.none(), st.booleans(),
    st.integers(0, 255).map(uint), st.integers(0, 255).map(ulong), st.integers(0, 255).map(ubyte),
    st.integers(-128, 127), st.just(uint(0)), st.just(ulong(0)),
    st.binary(max_size=255), st.text(max_size=60), st.text(st.characters(max_codepoint=127), max_size=255).map(symbol),
)  # fmt: skip
bodies = st.recursive(
    st.one_of(inline_values, scalars),
    lambda children: st.one_of(
        st.lists(children, max_size=8), st.dictionaries(st.one_of(inline_values, scalars), children, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=300)
@given(st.lists(bodies, max_size=10))
def test_list_bodies_decode_as_the_general_path_does(value: list[Any]) -> None:
    data = encode(value)
    fast, general = both(lambda: codec.decode(data))
    assert fast == general == ("value", tagged(value))


@settings(max_examples=300)
@given(st.dictionaries(st.one_of(inline_values, scalars), bodies, max_size=8))
def test_map_bodies_decode_as_the_general_path_does(value: dict[Any, Any]) -> None:
    data = encode(value)
    fast, general = both(lambda: codec.decode(data))
    assert fast == general == ("value", tagged(value))


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(bodies, max_size=6), values), st.data())
def test_mutated_bodies_give_the_general_paths_value_or_error(value: Any, data: st.DataObject) -> None:
    """Flipped, cut and inserted bytes: whatever the general path says, the fast path says too."""
    encoded = bytearray(encode(value))
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["set", "cut", "insert"]))
        at = data.draw(st.integers(0, max(0, len(encoded) - 1)))
        if action == "set" and encoded:
            encoded[at] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del encoded[at:]
        else:
            encoded.insert(at, data.draw(st.sampled_from([0x40, 0x41, 0x43, 0x52, 0x53, 0x54, 0xA0, 0xA1, 0xA3, 0xFF])))
    for view in (bytes(encoded), memoryview(bytes(encoded))):
        fast, general = both(lambda view=view: codec.decode(view))  # type: ignore[misc]
        assert fast == general


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"\xc0\x03\x02\xa1\x05", "truncated value"),  # a string running past the data
        (b"\xc0\x04\x01\xa1\x02\xff\xfe", "not valid UTF-8"),
        (b"\xc0\x04\x01\xa3\x02\xc3\xa9", "symbol is not ASCII"),
        (b"\xc0\x02\x01\x52", "truncated value"),  # a smalluint without its byte
        (b"\xc0\x04\x02\x40\x40\x40", "does not end where its size says"),
        (b"\xc0\x02\x03\x40", "holds fewer than its count"),
        (b"\xc1\x05\x02\xc0\x01\x00\x40", "is not hashable"),  # a list as a map key
        (b"\xc1\x02\x01\x40", "odd count"),
    ],
)
def test_malformed_bodies_raise_the_general_paths_error(data: bytes, error: str) -> None:
    fast, general = both(lambda: codec.decode(data))
    assert fast == general
    assert fast[0] == "error" and error in fast[1]


def test_inline_reads_keep_the_value_types() -> None:
    got = codec.decode(encode([uint(7), ulong(9), ubyte(200), -3, symbol("s"), "é", b"\x00", None, True, uint(0)]))
    assert [type(v) for v in got] == [uint, ulong, ubyte, int, symbol, str, bytes, type(None), bool, uint]
    assert got == [7, 9, 200, -3, "s", "é", b"\x00", None, True, 0]


# ---------------------------------------------------------------------------
# composites built by generated code
# ---------------------------------------------------------------------------

def _declared() -> list[type]:
    found: dict[int, type] = {}

    def walk(cls: type) -> None:
        for sub in cls.__subclasses__():
            if dataclasses.is_dataclass(sub) and hasattr(sub, "DESCRIPTOR"):
                found[int(sub.DESCRIPTOR)] = sub
            walk(sub)

    walk(composite.Composite)
    return [found[code] for code in sorted(found)]


ascii_symbols = st.text(st.characters(max_codepoint=127), max_size=3).map(symbol)
field_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**65), 2**65), st.integers(0, 300).map(uint), st.integers(0, 255).map(ubyte),
    st.text(max_size=5), st.text(st.characters(max_codepoint=127), max_size=5).map(symbol), st.binary(max_size=4),
    st.builds(Array, st.just("symbol"), st.lists(st.text(st.characters(max_codepoint=127), max_size=3).map(symbol),
                                                 max_size=3)),
    st.builds(Array, st.just("int"), st.lists(st.integers(-3, 3), max_size=2)),
    st.lists(st.one_of(st.integers(0, 3), st.text(max_size=2)), max_size=3),
    st.dictionaries(ascii_symbols, st.integers(0, 3), max_size=2),
)  # fmt: skip


@pytest.mark.parametrize("cls", _declared(), ids=lambda c: c.__name__)
@settings(max_examples=150)
@given(st.one_of(st.lists(field_values, max_size=16), field_values), st.data())
def test_generated_builders_match_the_field_loops(cls: Any, values: Any, data: st.DataObject) -> None:
    fields = dataclasses.fields(cls)
    if isinstance(values, list) and fields and data.draw(st.booleans()):
        # Mostly-valid lists too, so the checks after the first field run: each field's own type.
        values = [data.draw(_valid(f)) for f in fields][: data.draw(st.integers(0, len(fields)))]
    build = codec.SMALL_CODES[int(cls.DESCRIPTOR)]

    def run(fn: Callable[[Any], Any]) -> Any:
        try:
            return ("value", fn(list(values) if isinstance(values, list) else values))
        except AMQPDecodeError as exc:
            return ("error", str(exc))

    assert run(build) == run(lambda v: reference_from_list(cls, v))


#: Run in a fresh interpreter: no builder is generated by importing, and the first decode of a
#: composite leaves its generated builder (code compiled from "<string>") wherever it is called from.
_FIRST_USE = """
from minibroker.amqp import codec, decode, encode, message, performatives
from minibroker.amqp.messaging import Header, Properties

def generated(fn):
    return fn.__code__.co_filename == "<string>"

assert not any(generated(build) for build in codec.DESCRIBED_TYPES.values() if hasattr(build, "__code__"))
flow = performatives.Flow(next_incoming_id=1, incoming_window=2, next_outgoing_id=3, outgoing_window=4)
assert decode(encode(flow)) == flow
for build in (codec.SMALL_CODES[0x13], codec.DESCRIBED_TYPES[flow.DESCRIPTOR],
              codec.DESCRIBED_TYPES[flow.DESCRIPTOR_NAME], performatives.Flow.from_list):
    assert generated(build), build
assert not generated(codec.SMALL_CODES[0x12]), "only the composite decoded is generated"
sent = message.Message(body=b"x", header=Header(durable=True), properties=Properties(subject="s"))
assert message.decode_message(message.encode_message(sent)) == sent
assert message._BUILD_HEADER is codec.SMALL_CODES[0x70] is Header.from_list and generated(Header.from_list)
assert message._BUILD_PROPERTIES is codec.SMALL_CODES[0x73] and generated(message._BUILD_PROPERTIES)
print("ok")
"""


def test_builders_are_generated_on_first_use_and_then_called_directly() -> None:
    out = subprocess.run([sys.executable, "-c", _FIRST_USE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def _valid(f: dataclasses.Field[Any]) -> st.SearchStrategy[Any]:
    wire = f.metadata["amqp"]
    options: dict[str, st.SearchStrategy[Any]] = {
        "boolean": st.booleans(), "ubyte": st.one_of(st.integers(0, 255).map(ubyte), st.just(256)), "ushort": st.integers(0, 70_000),
        "uint": st.one_of(st.integers(0, 2**32 - 1).map(uint), st.sampled_from([-1, 2**32])),
        "ulong": st.one_of(st.integers(0, 2**64 - 1).map(ulong), st.just(2**64)),
        "timestamp": st.integers(-5, 5), "binary": st.binary(max_size=3), "string": st.text(max_size=3),
        "symbol": st.text(st.characters(max_codepoint=127), max_size=3).map(symbol),
        "symbol*": st.one_of(ascii_symbols, st.builds(Array, st.just("symbol"), st.lists(
            st.text(st.characters(max_codepoint=127), max_size=3).map(symbol), max_size=2))),
        "fields": st.dictionaries(ascii_symbols, st.integers(0, 3), max_size=2),
        "map": st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2),
        "list": st.lists(st.integers(0, 3), max_size=2), "*": field_values,
    }  # fmt: skip
    return st.one_of(st.none(), options[wire])


# ---------------------------------------------------------------------------
# messages decoded in one pass
# ---------------------------------------------------------------------------

SECTIONS = [
    Header(durable=True, priority=ubyte(7), delivery_count=uint(2)),
    Header(),
    DeliveryAnnotations({symbol("x-da"): 1}),
    MessageAnnotations({symbol("x-stream-offset"): 12345, symbol("x-opt-ma"): "m"}),
    Properties(message_id="id-1", to="q", subject="s", content_type=symbol("text/plain"), creation_time=1),
    ApplicationProperties({"colour": "red", "n": 3}),
    Data(b"body"),
    Data(b""),
    AmqpSequence([1, "two"]),
    AmqpValue({"k": [1, 2]}),
    AmqpValue(None),
    Footer({symbol("x-hash"): b"\x00"}),
    Footer({symbol("x-hash"): b"\x00"}),
]
#: Sections only the checked path takes: a symbolic descriptor; a data section holding a string
#: and an amqp-sequence holding a string (both errors), a section with an unknown descriptor.
ODD = [
    b"\x00\xa3\x10amqp:data:binary\xa0\x01x",
    b"\x00\x53\x75\xa1\x01x",
    b"\x00\x53\x76\xa1\x01x",
    b"\x00\x53\x99\x40",
]

encoded_sections = st.sampled_from([encode(s) for s in SECTIONS] + ODD)


def message_outcome(decode: Callable[[Any], Message], data: Any) -> Any:
    try:
        return ("value", decode(data))
    except AMQPDecodeError as exc:
        return ("error", str(exc))


@settings(max_examples=500)
@given(st.lists(encoded_sections, max_size=8))
def test_any_sequence_of_sections_decodes_as_the_checked_path_does(sections: list[bytes]) -> None:
    data = b"".join(sections)
    for view in (data, memoryview(data)):
        assert message_outcome(decode_message, view) == message_outcome(decode_message_checked, view)


@settings(max_examples=300)
@given(st.lists(encoded_sections, min_size=1, max_size=6), st.data())
def test_mutated_messages_decode_as_the_checked_path_does(sections: list[bytes], data: st.DataObject) -> None:
    encoded = bytearray(b"".join(sections))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(encoded) - 1))
        if data.draw(st.booleans()):
            encoded[at] = data.draw(st.integers(0, 255))
        else:
            del encoded[at:]
            if not encoded:
                break
    assert message_outcome(decode_message, bytes(encoded)) == message_outcome(decode_message_checked, bytes(encoded))


def test_a_stream_delivery_decodes_in_one_pass() -> None:
    """The shape a stream delivery has: header, annotations with the offset, properties, application
    properties, data; decoded by the one-pass path (no split_sections), to the checked path's result."""
    data = b"".join(encode(s) for s in (SECTIONS[0], SECTIONS[3], SECTIONS[4], SECTIONS[5], SECTIONS[6]))
    calls: list[Any] = []
    from minibroker.amqp import message as module

    original = module.split_sections
    module.split_sections = lambda buf: calls.append(buf) or original(buf)  # type: ignore[assignment,func-returns-value]
    try:
        fast = decode_message(data)
    finally:
        module.split_sections = original
    assert calls == []
    assert fast == decode_message_checked(data)
    assert fast.message_annotations == {"x-stream-offset": 12345, "x-opt-ma": "m"}
    assert fast.body == b"body" and fast.body_kind == "data"
