"""Round-trip, canonical-form, golden-vector and error tests for the AMQP 1.0 codec (Part 1 §1.2-§1.6)."""

from __future__ import annotations

import math
import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.amqp import (
    AMQPDecodeError,
    Array,
    Described,
    byte,
    char,
    codec,
    decimal32,
    decimal64,
    decimal128,
    decode,
    decode_at,
    encode,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)
from minibroker.amqp.composite import Composite, DescribedValue

# ---------------------------------------------------------------------------
# A type-strict view of a value: Python's == says ubyte(1) == uint(1) == True
# and nan != nan, so round trips are compared through this instead.
# ---------------------------------------------------------------------------

_INT_TYPES = (ubyte, ushort, uint, ulong, byte, short, int32, timestamp, decimal32, decimal64)


def tagged(v: Any) -> Any:
    """A hashable, type-tagged tree; floats by bit pattern (every NaN alike)."""
    t = type(v)
    if v is None:
        return ("null",)
    if t is bool:
        return ("boolean", v)
    if t is int:
        return ("long", v)
    if t in _INT_TYPES:
        return (t.__name__, int(v))
    if t is float:
        return ("double", "nan" if math.isnan(v) else struct.pack(">d", v))
    if t is float32:
        return ("float", "nan" if math.isnan(v) else struct.pack(">f", v))
    if t is decimal128:
        return ("decimal128", bytes(v))
    if t is char:
        return ("char", str(v))
    if t is symbol:
        return ("symbol", str(v))
    if t is str:
        return ("string", v)
    if t is bytes:
        return ("binary", v)
    if t is uuid.UUID:
        return ("uuid", v.bytes)
    if t is list:
        return ("list", tuple(tagged(x) for x in v))
    if t is dict:
        return ("map", tuple((tagged(k), tagged(x)) for k, x in v.items()))
    if t is Described:
        return ("described", tagged(v.descriptor), tagged(v.value))
    if t is Array:
        descriptor = None if v.descriptor is None else tagged(v.descriptor)
        return ("array", v.type, descriptor, tuple(tagged(x) for x in v.elements))
    if isinstance(v, (Composite, DescribedValue)):
        # Mutated bytes can turn into a registered descriptor, e.g. `00 53 17 45` is an empty end.
        return ("composite", t.__name__, tagged(v.described_body()))
    raise TypeError(f"no tag for {t.__name__}: {v!r}")


# ---------------------------------------------------------------------------
# strategies
# ---------------------------------------------------------------------------


def _bounded(cls: Any, lo: int, hi: int, *edges: int) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(sorted({lo, hi, 0 if lo <= 0 <= hi else lo, *edges})), st.integers(lo, hi)
    ).map(cls)


def _no_nan_payloads(x: float) -> float:
    # NaN payloads may be canonicalised by float<->double conversions; keep the quiet NaN only.
    return math.nan if math.isnan(x) else x


def _long_text(alphabet: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Text whose UTF-8 form is at or beyond the 255-byte boundary of the 8-bit forms."""
    return st.one_of(
        st.builds(lambda c, n: c * n, alphabet, st.integers(250, 300)),
        st.builds(lambda s, n: s * n, st.text(alphabet, min_size=1, max_size=4), st.integers(64, 130)),
    )


ascii_chars = st.characters(max_codepoint=127)
unicode_chars = st.characters(exclude_categories=("Cs",))

nulls = st.none()
booleans = st.booleans()
ubytes = _bounded(ubyte, 0, 2**8 - 1, 1, 127, 128)
ushorts = _bounded(ushort, 0, 2**16 - 1, 255, 256)
uints = _bounded(uint, 0, 2**32 - 1, 1, 255, 256)
ulongs = _bounded(ulong, 0, 2**64 - 1, 1, 255, 256, 2**32)
bytes8 = _bounded(byte, -(2**7), 2**7 - 1, -1)
shorts = _bounded(short, -(2**15), 2**15 - 1, -129, -128, 127, 128)
int32s = _bounded(int32, -(2**31), 2**31 - 1, -129, -128, -1, 127, 128)
longs = _bounded(int, -(2**63), 2**63 - 1, -129, -128, -1, 127, 128)
timestamps = _bounded(timestamp, -(2**63), 2**63 - 1, 1_700_000_000_000)
decimal32s = _bounded(decimal32, 0, 2**32 - 1)
decimal64s = _bounded(decimal64, 0, 2**64 - 1)
decimal128s = st.binary(min_size=16, max_size=16).map(decimal128)
float32s = st.floats(width=32).map(_no_nan_payloads).map(float32)
doubles = st.floats().map(_no_nan_payloads)
chars = unicode_chars.map(char)
uuids = st.uuids()
binaries = st.one_of(st.binary(max_size=20), _long_text(ascii_chars).map(str.encode))
strings = st.one_of(st.text(unicode_chars, max_size=20), _long_text(unicode_chars))
symbols = st.one_of(st.text(ascii_chars, max_size=20), _long_text(ascii_chars)).map(symbol)

#: AMQP type name -> strategy for one value of it; the keys are the array element types too.
SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "null": nulls,
    "boolean": booleans,
    "ubyte": ubytes,
    "ushort": ushorts,
    "uint": uints,
    "ulong": ulongs,
    "byte": bytes8,
    "short": shorts,
    "int": int32s,
    "long": longs,
    "float": float32s,
    "double": doubles,
    "decimal32": decimal32s,
    "decimal64": decimal64s,
    "decimal128": decimal128s,
    "char": chars,
    "timestamp": timestamps,
    "uuid": uuids,
    "binary": binaries,
    "string": strings,
    "symbol": symbols,
}
scalars = st.one_of(*SCALARS.values())

# Descriptors no composite type is registered under, so they decode as Described.
_REGISTERED_CODES = {int(k) for k in codec.DESCRIBED_TYPES if isinstance(k, ulong)}
ulong_descriptors = st.one_of(
    st.integers(0, 2**64 - 1).filter(lambda n: n not in _REGISTERED_CODES),
    st.sampled_from([0x00, 0xFF, 0x100, 0x0000_0137_0000_0001]),  # domain-id:descriptor-id form
).map(ulong)
symbol_descriptors = st.text(ascii_chars, max_size=30).map(lambda s: symbol("com.example:" + s))
descriptors = st.one_of(ulong_descriptors, symbol_descriptors)


def scalar_arrays(described: bool = True) -> st.SearchStrategy[Array]:
    """Arrays of every primitive element type, some of them described."""

    def build(kind: str) -> st.SearchStrategy[Array]:
        elements = st.lists(SCALARS[kind], max_size=6)
        plain = elements.map(lambda xs: Array(kind, xs))
        if not described:
            return plain
        with_descriptor = st.builds(
            lambda d, xs: Array(kind, [Described(d, x) for x in xs], descriptor=d), descriptors, elements
        )
        return st.one_of(plain, with_descriptor)

    return st.sampled_from(sorted(SCALARS)).flatmap(build)


# Keys must be hashable: scalars and described scalars.
keys = st.one_of(scalars, st.builds(Described, descriptors, scalars))


def _compounds(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    lists = st.lists(children, max_size=6)
    maps = st.dictionaries(keys, children, max_size=5)
    arrays_of_lists = st.lists(lists, max_size=4).map(lambda xs: Array("list", xs))
    arrays_of_maps = st.lists(maps, max_size=4).map(lambda xs: Array("map", xs))
    inner_arrays = st.one_of(scalar_arrays(), arrays_of_lists, arrays_of_maps)
    arrays_of_arrays = st.lists(inner_arrays, max_size=4).map(lambda xs: Array("array", xs))
    described_lists = st.builds(
        lambda d, xs: Array("list", [Described(d, x) for x in xs], descriptor=d),
        descriptors,
        st.lists(lists, max_size=3),
    )
    described_maps = st.builds(
        lambda d, xs: Array("map", [Described(d, x) for x in xs], descriptor=d),
        descriptors,
        st.lists(maps, max_size=3),
    )
    return st.one_of(
        lists,
        maps,
        st.builds(Described, descriptors, children),
        arrays_of_lists,
        arrays_of_maps,
        arrays_of_arrays,
        described_lists,
        described_maps,
    )


values = st.recursive(st.one_of(scalars, scalar_arrays()), _compounds, max_leaves=20)

# Compounds past the 8-bit size or count limits (list32/map32/array32).
big_lists = st.one_of(
    st.lists(st.none(), min_size=256, max_size=300),  # count > 255, body < 256 bytes
    st.lists(strings, min_size=1, max_size=3).filter(lambda xs: len(encode(xs)) > 256),
    st.lists(ubytes, min_size=120, max_size=140),  # body straddles 255 bytes
)
big_maps = st.one_of(
    st.dictionaries(uints, st.none(), min_size=128, max_size=150),  # count > 255
    st.dictionaries(symbols, strings, min_size=1, max_size=3).filter(lambda m: len(encode(m)) > 256),
)
big_arrays = st.one_of(
    st.lists(ubytes, min_size=256, max_size=300).map(lambda xs: Array("ubyte", xs)),
    st.lists(strings, min_size=1, max_size=3).map(lambda xs: Array("string", xs)),
    st.lists(st.none(), min_size=256, max_size=260).map(lambda xs: Array("null", xs)),
    st.lists(big_lists, min_size=1, max_size=2).map(lambda xs: Array("list", xs)),
)
big_values = st.one_of(
    big_lists, big_maps, big_arrays, st.lists(st.one_of(big_lists, big_maps, big_arrays), max_size=3)
)


# ---------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------


def check_roundtrip(v: Any) -> None:
    data = encode(v)
    decoded = decode(data)
    assert tagged(decoded) == tagged(v)
    # Our encoder's output is canonical: re-encoding what it decodes gives the same bytes.
    assert encode(decoded) == data
    # decode_at and skip_at agree with decode on where the value ends, also mid-buffer.
    framed = b"\x40" + data + b"\x41"
    again, end = decode_at(framed, 1)
    assert end == len(framed) - 1
    assert tagged(again) == tagged(v)
    assert codec.skip_at(framed, 1) == end


@pytest.mark.parametrize("kind", sorted(SCALARS))
@settings(max_examples=40)
@given(data=st.data())
def test_scalar_roundtrip(kind: str, data: st.DataObject) -> None:
    check_roundtrip(data.draw(SCALARS[kind]))


@settings(max_examples=150)
@given(scalar_arrays())
def test_scalar_array_roundtrip(v: Array) -> None:
    check_roundtrip(v)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_nested_value_roundtrip(v: Any) -> None:
    check_roundtrip(v)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(big_values)
def test_wide_compound_roundtrip(v: Any) -> None:
    check_roundtrip(v)


@settings(max_examples=100)
@given(st.lists(st.one_of(scalars, scalar_arrays()), max_size=8))
def test_lists_of_anything_roundtrip(v: list[Any]) -> None:
    check_roundtrip(v)


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(st.builds(Described, descriptors, values))
def test_described_roundtrip(v: Described) -> None:
    check_roundtrip(v)


def test_compound_width_boundaries() -> None:
    """The 8-bit forms are used exactly while size and count both fit in a byte (§1.6.22-§1.6.24)."""
    # A list of 126 ubyte(0): body 252 bytes, size 253 -> list8; 127 -> size 255 -> list8; 128 -> list32.
    for n, code in ((126, 0xC0), (127, 0xC0), (128, 0xD0)):
        data = encode([ubyte(0)] * n)
        assert data[0] == code, n
        assert decode(data) == [0] * n
    # Nulls take one byte each: 254 of them give size 255, 255 give size 256.
    assert encode([None] * 254)[:3] == b"\xc0\xff\xfe"
    assert encode([None] * 255)[:9] == b"\xd0\x00\x00\x01\x03\x00\x00\x00\xff"
    # Strings: 255 bytes is str8, 256 is str32.
    assert encode("a" * 255)[:2] == b"\xa1\xff"
    assert encode("a" * 256)[:5] == b"\xb1\x00\x00\x01\x00"
    assert encode(b"a" * 256)[:5] == b"\xb0\x00\x00\x01\x00"
    assert encode(symbol("a" * 256))[:5] == b"\xb3\x00\x00\x01\x00"
    # Maps: count is twice the number of entries.
    assert encode({symbol("k"): "v" * 240})[:3] == bytes((0xC1, 246, 2))
    assert encode({symbol("k"): "v" * 250})[:9] == b"\xd1\x00\x00\x01\x03\x00\x00\x00\x02"
    # Arrays: 256 elements -> array32, even of a one-byte type.
    assert encode(Array("ubyte", [ubyte(1)] * 255))[0] == 0xF0  # size 255+1+1 = 257
    assert encode(Array("ubyte", [ubyte(1)] * 200))[0] == 0xE0
    assert encode(Array("null", [None] * 256))[0] == 0xF0
    assert encode(Array("null", [None] * 255))[0] == 0xE0


def test_array_elements_share_one_width() -> None:
    """One long string forces every element of a string array into the str32 element form."""
    arr = Array("string", ["a", "b" * 300])
    data = encode(arr)
    assert data[0] == 0xF0
    assert data[9] == 0xB1  # element constructor after code, size(4), count(4)
    assert data[10:15] == b"\x00\x00\x00\x01a"
    assert tagged(decode(data)) == tagged(arr)
    # Empty lists inside a list array take the list8 form, not list0 (which has no size to share).
    arr = Array("list", [[], [ubyte(1)], []])
    data = encode(arr)
    assert data == bytes.fromhex("e0 0a 03 c0 01 00 03 01 50 01 01 00".replace(" ", ""))
    assert tagged(decode(data)) == tagged(arr)


# ---------------------------------------------------------------------------
# golden vectors (Part 1 §1.6)
# ---------------------------------------------------------------------------

U = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")

GOLDEN: list[tuple[Any, str]] = [
    (None, "40"),
    (True, "41"),
    (False, "42"),
    (ubyte(0), "50 00"),
    (ubyte(255), "50 ff"),
    (ushort(0x1234), "60 12 34"),
    (uint(0), "43"),
    (uint(5), "52 05"),
    (uint(255), "52 ff"),
    (uint(256), "70 00 00 01 00"),
    (uint(2**32 - 1), "70 ff ff ff ff"),
    (ulong(0), "44"),
    (ulong(5), "53 05"),
    (ulong(256), "80 00 00 00 00 00 00 01 00"),
    (byte(-1), "51 ff"),
    (short(-2), "61 ff fe"),
    (int32(1), "54 01"),
    (int32(-1), "54 ff"),
    (int32(-128), "54 80"),
    (int32(128), "71 00 00 00 80"),
    (int32(-129), "71 ff ff ff 7f"),
    (1, "55 01"),
    (-1, "55 ff"),
    (127, "55 7f"),
    (128, "81 00 00 00 00 00 00 00 80"),
    (-(2**63), "81 80 00 00 00 00 00 00 00"),
    (float32(1.5), "72 3f c0 00 00"),
    (1.5, "82 3f f8 00 00 00 00 00 00"),
    (decimal32(0x22500001), "74 22 50 00 01"),
    (decimal64(1), "84 00 00 00 00 00 00 00 01"),
    (decimal128(bytes(range(16))), "94 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f"),
    (char("a"), "73 00 00 00 61"),
    (char("\U0001f600"), "73 00 01 f6 00"),
    (timestamp(1), "83 00 00 00 00 00 00 00 01"),
    (timestamp(-1), "83 ff ff ff ff ff ff ff ff"),
    (U, "98 12 34 56 78 9a bc de f0 12 34 56 78 9a bc de f0"),
    (b"", "a0 00"),
    (b"\x01\x02", "a0 02 01 02"),
    ("", "a1 00"),
    ("hi", "a1 02 68 69"),
    ("é", "a1 02 c3 a9"),
    (symbol("ab"), "a3 02 61 62"),
    ([], "45"),
    ([None], "c0 02 01 40"),
    ([True, uint(1)], "c0 04 02 41 52 01"),
    ({}, "c1 01 00"),
    ({symbol("k"): 1}, "c1 06 02 a3 01 6b 55 01"),
    (Array("symbol", [symbol("a"), symbol("bc")]), "e0 07 02 a3 01 61 02 62 63"),
    (Array("int", [int32(1), int32(-1)]), "e0 0a 02 71 00 00 00 01 ff ff ff ff"),
    (Array("boolean", [True, False]), "e0 04 02 56 01 00"),
    (Array("ubyte", []), "e0 02 00 50"),
    (
        Array("ulong", [Described(ulong(0x99), ulong(1))], descriptor=ulong(0x99)),
        "e0 0d 01 00 53 99 80 00 00 00 00 00 00 00 01",
    ),
    (Described(ulong(0x99), None), "00 53 99 40"),
    (Described(symbol("x:y"), uint(0)), "00 a3 03 78 3a 79 43"),
]


def _hex(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


@pytest.mark.parametrize(("value", "wire"), GOLDEN, ids=[w[:20] for _, w in GOLDEN])
def test_golden_encoding(value: Any, wire: str) -> None:
    assert encode(value) == _hex(wire)
    assert tagged(decode(_hex(wire))) == tagged(value)


def test_long_string_uses_str32() -> None:
    s = "x" * 300
    assert encode(s) == b"\xb1\x00\x00\x01\x2c" + s.encode()
    assert decode(b"\xb1\x00\x00\x01\x2c" + s.encode()) == s


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("70 00 00 00 05", uint(5)),  # uint in the wide form
        ("52 00", uint(0)),  # smalluint zero
        ("80 00 00 00 00 00 00 00 00", ulong(0)),
        ("53 07", ulong(7)),
        ("71 00 00 00 01", int32(1)),
        ("81 00 00 00 00 00 00 00 01", 1),
        ("56 00", False),
        ("56 01", True),
        ("b1 00 00 00 02 68 69", "hi"),  # str32 for a short string
        ("b0 00 00 00 01 ff", b"\xff"),
        ("b3 00 00 00 01 61", symbol("a")),
        ("c0 01 00", []),  # list8 for the empty list
        ("d0 00 00 00 04 00 00 00 00", []),
        ("d0 00 00 00 06 00 00 00 02 41 42", [True, False]),  # list32 of a small list
        ("d1 00 00 00 08 00 00 00 02 a1 01 6b 40", {"k": None}),
        ("f0 00 00 00 07 00 00 00 02 52 01 02", Array("uint", [uint(1), uint(2)])),  # smalluint elements
        ("e0 02 02 43", Array("uint", [uint(0), uint(0)])),  # uint0 elements take no bytes
        ("e0 02 02 41", Array("boolean", [True, True])),  # true elements take no bytes
        ("e0 04 02 54 01 ff", Array("int", [int32(1), int32(-1)])),
        ("e0 02 02 45", Array("list", [[], []])),
        ("00 80 00 00 00 00 00 00 00 99 40", Described(ulong(0x99), None)),  # wide ulong descriptor
    ],
)
def test_decode_non_canonical_forms(wire: str, expected: Any) -> None:
    assert tagged(decode(_hex(wire))) == tagged(expected)


def test_decode_accepts_buffer_types() -> None:
    data = encode([symbol("a"), {"b": 1}])
    for buf in (data, bytearray(data), memoryview(data)):
        assert tagged(decode(buf)) == tagged([symbol("a"), {"b": 1}])


def test_python_type_mapping() -> None:
    """Plain Python values encode as the AMQP types the module docs promise."""
    assert encode(2**40)[0] == 0x81  # int -> long
    assert encode(0.0)[0] == 0x82  # float -> double
    assert encode((1, 2)) == encode([1, 2])  # tuple -> list
    assert encode(bytearray(b"ab")) == encode(memoryview(b"ab")) == b"\xa0\x02ab"
    assert encode(U)[0] == 0x98
    with pytest.raises(TypeError):
        encode(object())
    with pytest.raises(TypeError):
        encode({1, 2})


# ---------------------------------------------------------------------------
# value types reject what they cannot hold
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "bad"),
    [
        (ubyte, 256),
        (ubyte, -1),
        (ushort, 2**16),
        (ushort, -1),
        (uint, -1),
        (uint, 2**32),
        (ulong, 2**64),
        (ulong, -1),
        (byte, -129),
        (byte, 128),
        (short, 2**15),
        (short, -(2**15) - 1),
        (int32, 2**31),
        (int32, -(2**31) - 1),
        (timestamp, 2**63),
        (decimal32, 2**32),
        (decimal64, -1),
    ],
)
def test_integer_types_check_bounds(cls: Any, bad: int) -> None:
    with pytest.raises(OverflowError, match=cls.__name__):
        cls(bad)


@pytest.mark.parametrize(
    ("cls", "good"),
    [(ubyte, 255), (ushort, 2**16 - 1), (uint, 2**32 - 1), (ulong, 2**64 - 1), (byte, -128), (short, -(2**15)),
     (int32, 2**31 - 1), (timestamp, -(2**63))],
)  # fmt: skip
def test_integer_types_accept_their_limits(cls: Any, good: int) -> None:
    assert cls(good) == good
    assert repr(cls(good)) == f"{cls.__name__}({good})"


def test_other_value_type_checks() -> None:
    with pytest.raises(ValueError):
        symbol("é")
    with pytest.raises(ValueError):
        char("ab")
    with pytest.raises(ValueError):
        char("")
    with pytest.raises(ValueError):
        decimal128(b"\x00" * 15)
    with pytest.raises(OverflowError):
        float32(1e39)
    with pytest.raises(ValueError):
        Array("text", [])
    assert float32(0.1) == struct.unpack(">f", struct.pack(">f", 0.1))[0]


# ---------------------------------------------------------------------------
# decode errors
# ---------------------------------------------------------------------------


def _nested_lists(depth: int) -> bytes:
    """``[[[...[]...]]]`` built bytewise (the encoder itself would hit Python's recursion limit)."""
    data = b"\x45"
    for _ in range(depth):
        data = b"\xd0" + struct.pack(">II", len(data) + 4, 1) + data
    return data


def _nested_described(depth: int) -> bytes:
    v: Any = None
    for _ in range(depth):
        v = Described(ulong(0x99), v)
    return encode(v)


def _nested_arrays(depth: int) -> bytes:
    v: Any = Array("ubyte", [ubyte(1)])
    for _ in range(depth):
        v = Array("array", [v])
    return encode(v)


def _nested_maps(depth: int) -> bytes:
    v: Any = {}
    for _ in range(depth):
        v = {symbol("k"): v}
    return encode(v)


BAD: list[tuple[str, bytes]] = [
    ("empty input", b""),
    ("truncated uint", _hex("70 00 00")),
    ("truncated ulong", _hex("80 00 00 00 00 00 00 00")),
    ("truncated ubyte", _hex("50")),
    ("truncated smallulong", _hex("53")),
    ("truncated uuid", _hex("98") + bytes(15)),
    ("truncated decimal128", _hex("94") + bytes(3)),
    ("truncated str8", _hex("a1 05 61 62")),
    ("truncated str32 header", _hex("b1 00 00")),
    ("truncated bin32", _hex("b0 00 00 00 05 61")),
    ("truncated list8", _hex("c0 05 02 40")),
    ("truncated list32", _hex("d0 00 00 00 09 00 00 00 01 40")),
    ("truncated list header", _hex("c0 02")),
    ("truncated map", _hex("c1 05 02 40")),
    ("truncated array", _hex("e0 05 02 50 01")),
    ("array without constructor", _hex("e0 01 00")),
    ("array elements run past its size", _hex("e0 03 02 50 01 02")),
    ("described without value", _hex("00 53 99")),
    ("described without descriptor", _hex("00")),
    ("invalid constructor 0x01", _hex("01")),
    ("invalid constructor 0xff", _hex("ff")),
    ("invalid constructor 0x57", _hex("57 00")),
    ("invalid constructor 0xa2", _hex("a2 00")),
    ("invalid constructor inside a list", _hex("c0 02 01 01")),
    ("trailing bytes", _hex("40 40")),
    ("trailing bytes after list", _hex("45 00")),
    ("list count exceeds its bytes", _hex("c0 02 05 40")),
    ("list32 count exceeds its bytes", _hex("d0 00 00 00 05 00 00 00 03 40")),
    ("list with bytes beyond its count", _hex("c0 03 01 40 40")),
    ("list size zero", _hex("c0 00 00")),
    ("list32 size smaller than count field", _hex("d0 00 00 00 02 00 00")),
    ("list item runs past the list", _hex("c0 03 01 52 05 ff")),
    ("map with odd count", _hex("c1 02 01 40")),
    ("map with unhashable key", _hex("c1 03 02 45 40")),
    ("array with bytes beyond its count", _hex("e0 04 01 50 01 02")),
    ("array with invalid element constructor", _hex("e0 03 01 01 00")),
    ("array with described element constructor but no type", _hex("e0 04 01 00 53 99")),
    ("array with unhashable descriptor", _hex("e0 05 01 00 45 50 07")),
    ("described with unhashable descriptor", _hex("00 45 40")),
    ("boolean byte 0x02", _hex("56 02")),
    ("invalid UTF-8", _hex("a1 02 c3 28")),
    ("non-ASCII symbol", _hex("a3 01 e9")),
    ("char beyond U+10FFFF", _hex("73 00 11 00 00")),
    ("lists nested too deeply", _nested_lists(codec.MAX_NESTING + 5)),
    ("maps nested too deeply", _nested_maps(codec.MAX_NESTING + 5)),
    ("described nested too deeply", _nested_described(codec.MAX_NESTING + 5)),
    ("arrays nested too deeply", _nested_arrays(codec.MAX_NESTING + 5)),
    ("very deep lists", _nested_lists(5000)),
    ("a long chain of descriptors", b"\x00" * 5000 + b"\x40"),
]


@pytest.mark.parametrize("data", [b for _, b in BAD], ids=[name for name, _ in BAD])
def test_decode_errors(data: bytes) -> None:
    with pytest.raises(AMQPDecodeError) as info:
        decode(data)
    assert str(info.value)
    assert info.value.condition == symbol("amqp:decode-error")


def test_nesting_just_inside_the_limit_decodes() -> None:
    assert decode(_nested_lists(codec.MAX_NESTING - 1)) is not None
    assert decode(_nested_described(codec.MAX_NESTING - 1)) is not None


def test_decode_at_past_the_end() -> None:
    with pytest.raises(AMQPDecodeError):
        decode_at(b"\x40", 1)


@pytest.mark.parametrize(
    "data",
    [b"", _hex("70 00"), _hex("a1 05 61"), _hex("b1 00 00 00 09 61"), _hex("c0 05 01"), _hex("01"),
     _hex("a2 00"), _hex("00 53"), b"\x00" * 5000 + b"\x40" + b"\x00" * 10],
)  # fmt: skip
def test_skip_at_errors(data: bytes) -> None:
    with pytest.raises(AMQPDecodeError):
        codec.skip_at(data, 0)


@pytest.mark.parametrize("descriptor", [b"\x50\x24", b"\x60\x00\x24", b"\x70\x00\x00\x00\x24", b"\x43"])
def test_only_a_ulong_or_symbol_descriptor_names_a_composite(descriptor: bytes) -> None:
    """Part 1 §1.5: other descriptor values are reserved; one equal to accepted's code (0x24) stays plain."""
    value = decode(b"\x00" + descriptor + b"\xc0\x01\x00")
    assert type(value) is Described and value.value == []
    assert type(decode(b"\x00\x53\x24\xc0\x01\x00")).__name__ == "Accepted"
    constructor = b"\x00" + descriptor + b"\x45"  # two empty lists described alike
    array = decode(bytes([0xE0, 1 + len(constructor), 2]) + constructor)
    assert [type(element) for element in array.elements] == [Described, Described]


@settings(max_examples=200)
@given(st.binary(max_size=64))
def test_decoding_garbage_raises_only_decode_errors(data: bytes) -> None:
    """Arbitrary bytes either decode or raise AMQPDecodeError, never anything else."""
    try:
        value = decode(data)
    except AMQPDecodeError as exc:
        assert str(exc)
    else:
        assert codec.skip_at(data, 0) == len(data)
        tagged(value)
