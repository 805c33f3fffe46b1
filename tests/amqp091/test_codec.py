"""The AMQP 0-9-1 codec against pika's, byte for byte, and against hostile bytes.

pika is the reference here because its codec is generated from RabbitMQ's own protocol
description (``amqp-rabbitmq-0.9.1.json``): every method frame, content header and field table
our codec writes must be the bytes pika writes for the same values, and what pika writes must
decode to those values.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import struct
import typing
from typing import Any

import pika.data
import pika.frame
import pika.spec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.amqp.types import byte, float32, int32, short, ubyte, uint, ushort
from minibroker.amqp091.errors import AMQP091Error, FrameError
from minibroker.amqp091.frames import HEARTBEAT, Frame, FrameReader, content_frames, method_frame
from minibroker.amqp091.methods import METHODS, BasicPublish, Method, decode_method, encode_method
from minibroker.amqp091.properties import BasicProperties, decode_content_header
from minibroker.amqp091.values import MAX_NESTING, LongStr, decode_table, encode_table, long

shortstr = st.text(max_size=40).filter(lambda s: len(s.encode()) <= 255)

# Values both codecs write the same way (pika has no width-carrying integer classes, and writes
# no floats: they are checked on their own below).
plain_value = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(max_size=20)
    | st.binary(max_size=20)
    | st.decimals(allow_nan=False, allow_infinity=False, places=2, min_value=-(10**6), max_value=10**6).map(
        # pika writes a decimal normalized (1.50 as 15 scale 1); ours keeps the scale it was given
        decimal.Decimal.normalize
    )
    | st.integers(0, 2**32).map(lambda s: datetime.datetime.fromtimestamp(s, datetime.UTC)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(shortstr, inner, max_size=4),
    max_leaves=12,
)
plain_table = st.dictionaries(shortstr, plain_value, max_size=6)

_WIRE: dict[str, st.SearchStrategy[Any]] = {
    "octet": st.integers(0, 2**8 - 1),
    "short": st.integers(0, 2**16 - 1),
    "long": st.integers(0, 2**32 - 1),
    "longlong": st.integers(0, 2**64 - 1),
    "bit": st.booleans(),
    "shortstr": shortstr,
    "longstr": st.binary(max_size=40),
    "table": plain_table,
}


def _fields(cls: type[Method]) -> list[tuple[str, str]]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return [(f.name, hints[f.name].__metadata__[0]) for f in dataclasses.fields(cls)]  # type: ignore[arg-type]


any_method = st.sampled_from(sorted(METHODS.values(), key=lambda c: (c.CLASS_ID, c.METHOD_ID))).flatmap(
    lambda cls: st.fixed_dictionaries({name: _WIRE[wire] for name, wire in _fields(cls)}).map(lambda kw: cls(**kw))
)


def _pika_method(m: Method) -> Any:
    cls = pika.spec.methods[(m.CLASS_ID << 16) | m.METHOD_ID]
    return cls(*[getattr(m, f.name) for f in dataclasses.fields(m)])  # type: ignore[arg-type]


def test_every_method_pika_knows_is_declared() -> None:
    assert {(c.CLASS_ID << 16) | c.METHOD_ID for c in METHODS.values()} == set(pika.spec.methods)
    for cls in METHODS.values():
        assert pika.spec.methods[(cls.CLASS_ID << 16) | cls.METHOD_ID].NAME.lower() == cls.NAME.replace("-", "")


@settings(max_examples=400)
@given(any_method, st.integers(0, 65535))
def test_method_frames_are_pikas_bytes(m: Method, channel: int) -> None:
    ours = method_frame(channel, m)
    assert ours == pika.frame.Method(channel, _pika_method(m)).marshal()
    (frame,) = FrameReader(1 << 20).feed(ours)
    assert frame == Frame(1, channel, encode_method(m))
    assert decode_method(frame.payload) == m


properties = st.builds(
    BasicProperties,
    content_type=st.none() | shortstr,
    content_encoding=st.none() | shortstr,
    headers=st.none() | plain_table,
    delivery_mode=st.none() | st.integers(0, 255),
    priority=st.none() | st.integers(0, 255),
    correlation_id=st.none() | shortstr,
    reply_to=st.none() | shortstr,
    expiration=st.none() | shortstr,
    message_id=st.none() | shortstr,
    timestamp=st.none() | st.integers(0, 2**32).map(lambda s: datetime.datetime.fromtimestamp(s, datetime.UTC)),
    type=st.none() | shortstr,
    user_id=st.none() | shortstr,
    app_id=st.none() | shortstr,
    cluster_id=st.none() | shortstr,
)


@settings(max_examples=300)
@given(properties, st.binary(max_size=3000), st.sampled_from([4096, 5000]))
def test_content_frames_are_pikas_bytes(props: BasicProperties, body: bytes, frame_max: int) -> None:
    ours = content_frames(7, props, body, frame_max)
    fields = {f.name: getattr(props, f.name) for f in dataclasses.fields(props)}
    if props.timestamp is not None:  # pika's property is whole seconds as an int
        fields["timestamp"] = int(props.timestamp.timestamp())
    pika_props = pika.spec.BasicProperties(**fields)
    header = pika.frame.Header(7, len(body), pika_props).marshal()
    chunk = frame_max - 8
    bodies = b"".join(pika.frame.Body(7, body[i : i + chunk]).marshal() for i in range(0, len(body), chunk))
    assert ours == header + bodies
    frames = FrameReader(frame_max).feed(ours)
    assert [f.type for f in frames] == [2] + [3] * len(range(0, len(body), chunk))
    decoded = decode_content_header(frames[0].payload)
    assert (decoded.class_id, decoded.body_size, decoded.properties) == (60, len(body), props)
    assert b"".join(f.payload for f in frames[1:]) == body


@given(plain_table)
def test_tables_are_pikas_bytes_and_decode_back(table: dict[str, Any]) -> None:
    pieces: list[bytes] = []
    pika.data.encode_table(pieces, table)
    encoded = encode_table(table)
    assert encoded == b"".join(pieces)
    assert decode_table(encoded) == table


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (byte(-5), b"b"),
        (ubyte(200), b"B"),
        (short(-300), b"s"),
        (ushort(60000), b"u"),
        (int32(-(2**31)), b"I"),
        (uint(2**32 - 1), b"i"),
        (long(2**40), b"l"),
        (long(5), b"l"),  # RabbitMQ's x-stream-offset: a small long stays a long
        (float32(1.5), b"f"),
        (-2.25, b"d"),
        (LongStr(b"\xff\xfe"), b"S"),
        (b"\xff", b"x"),
    ],
)
def test_a_value_keeps_its_wire_type(value: Any, code: bytes) -> None:
    encoded = encode_table({"k": value})
    assert encoded[6:7] == code
    decoded = decode_table(encoded)["k"]
    assert decoded == value and type(decoded) is type(value)
    assert encode_table({"k": decoded}) == encoded


def test_decimals_keep_their_scale() -> None:
    value = decimal.Decimal("1.50")
    assert encode_table({"d": value})[6:] == b"D\x02\x00\x00\x00\x96"
    assert str(decode_table(encode_table({"d": value}))["d"]) == "1.50"


def test_unencodable_values_say_what_is_allowed() -> None:
    with pytest.raises(TypeError, match="use bool, int, float"):
        encode_table({"k": object()})
    with pytest.raises(OverflowError, match="64-bit"):
        encode_table({"k": 2**64})
    with pytest.raises(ValueError, match="at most 255 bytes"):
        encode_method(BasicPublish(exchange="x" * 256))


def test_nesting_is_bounded_both_ways() -> None:
    deep: Any = {}
    for _ in range(MAX_NESTING + 1):
        deep = {"n": deep}
    with pytest.raises(ValueError, match="nest deeper"):
        encode_table(deep)
    # The same nesting built by hand on the wire: refused as a frame error, no RecursionError.
    data = b""
    for _ in range(MAX_NESTING + 5):
        inner = b"\x01nF" + data if data else b""
        data = len(inner).to_bytes(4, "big") + inner
    with pytest.raises(FrameError, match="nest deeper"):
        decode_table(data)


def test_one_byte_at_a_time_gives_the_same_frames() -> None:
    wire = (
        method_frame(1, BasicPublish(exchange="e", routing_key="r"))
        + content_frames(1, BasicProperties(headers={"a": [1, "b"]}), b"x" * 10000, 4096)
        + HEARTBEAT
    )
    whole = FrameReader(4096).feed(wire)
    reader = FrameReader(4096)
    trickled = [frame for i in range(len(wire)) for frame in reader.feed(wire[i : i + 1])]
    assert trickled == whole and len(whole) == 1 + 1 + 3 + 1
    assert reader.buffered == 0


def test_an_oversized_frame_is_refused_from_its_header() -> None:
    reader = FrameReader(4096)
    # 7 header bytes announcing 4089 bytes of payload: 4098 > 4096 with header and end.
    with pytest.raises(FrameError, match="larger than the negotiated frame_max 4096"):
        reader.feed(b"\x01\x00\x01\x00\x00\x0f\xf9")
    assert FrameReader(4096).feed(b"\x03\x00\x01\x00\x00\x0f\xf8" + b"x" * 4088 + b"\xce")[0].type == 3


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (b"\x04\x00\x00\x00\x00\x00\x00\xce", "unknown frame type 4"),
        (b"\x08\x00\x00\x00\x00\x00\x00\x00", "frame end octet is 0x00"),
    ],
)
def test_malformed_frames(wire: bytes, message: str) -> None:
    with pytest.raises(FrameError, match=message) as info:
        FrameReader(4096).feed(wire)
    assert info.value.reply_code == 501 and info.value.closes_connection


def test_unknown_method_names_its_ids() -> None:
    with pytest.raises(FrameError, match="unknown method 60.99") as info:
        decode_method(b"\x00\x3c\x00\x63")
    assert (info.value.class_id, info.value.method_id) == (60, 99)


@settings(max_examples=500)
@given(st.binary(max_size=64))
def test_garbage_raises_only_frame_errors(data: bytes) -> None:
    for decode in (decode_method, decode_content_header, decode_table):
        try:
            decode(data)
        except FrameError:
            pass


@given(any_method)
def test_truncated_arguments_are_frame_errors(m: Method) -> None:
    payload = encode_method(m)
    for cut in range(4, len(payload)):
        try:
            decode_method(payload[:cut])
        except FrameError as exc:
            assert (exc.class_id, exc.method_id) == (m.CLASS_ID, m.METHOD_ID)


def test_reply_text_is_rabbitmqs_form_and_fits_a_short_string() -> None:
    error = AMQP091Error(404, "no queue 'q' in vhost '/'", 50, 10)
    assert error.reply_text == "NOT_FOUND - no queue 'q' in vhost '/'"
    assert not error.closes_connection
    assert len(AMQP091Error(406, "é" * 300).reply_text.encode()) <= 255
    with pytest.raises(ValueError, match="not an AMQP 0-9-1 error reply code"):
        AMQP091Error(999, "x")


def test_an_L_integer_is_read_as_signed_64_bit() -> None:
    # py-amqp writes integers past 32 bits as 'L'; RabbitMQ reads it as signed 64-bit.
    table = b"\x03neg" + b"L" + struct.pack(">q", -(2**40))
    assert decode_table(struct.pack(">I", len(table)) + table) == {"neg": -(2**40)}
