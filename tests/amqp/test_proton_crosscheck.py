"""Cross-check our codec against python-qpid-proton's (``proton.Data`` and ``proton.Message``).

Both directions: bytes from our encoder must decode in proton to the same value,
and bytes from proton's encoder must decode with ours to the same value.  Proton
writes the wide list32/map32/array32 forms and fixed-width array elements, so
that direction exercises our decoding of non-compact encodings; values are
compared, not bytes.
"""

from __future__ import annotations

import math
import struct
import uuid
from typing import Any

import proton
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.amqp import (
    Array,
    Described,
    Header,
    Message,
    Properties,
    byte,
    char,
    codec,
    decimal32,
    decimal64,
    decimal128,
    decode,
    decode_message,
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

PD = proton.Data

# ---------------------------------------------------------------------------
# type mapping between our values and proton's
# ---------------------------------------------------------------------------

#: our value class -> proton's class of the same AMQP type
_TO_PROTON_SCALAR: dict[type, Any] = {
    ubyte: proton.ubyte,
    ushort: proton.ushort,
    uint: proton.uint,
    ulong: proton.ulong,
    byte: proton.byte,
    short: proton.short,
    int32: proton.int32,
    timestamp: proton.timestamp,
    decimal32: proton.decimal32,
    decimal64: proton.decimal64,
    float32: proton.float32,
    char: proton.char,
    symbol: proton.symbol,
}
_FROM_PROTON_SCALAR: dict[type, Any] = {v: k for k, v in _TO_PROTON_SCALAR.items()}

#: AMQP type name (our Array.type) <-> proton.Data type code
ARRAY_CODES: dict[str, int] = {
    "null": PD.NULL, "boolean": PD.BOOL, "ubyte": PD.UBYTE, "ushort": PD.USHORT, "uint": PD.UINT,
    "ulong": PD.ULONG, "byte": PD.BYTE, "short": PD.SHORT, "int": PD.INT, "long": PD.LONG,
    "float": PD.FLOAT, "double": PD.DOUBLE, "decimal32": PD.DECIMAL32, "decimal64": PD.DECIMAL64,
    "decimal128": PD.DECIMAL128, "char": PD.CHAR, "timestamp": PD.TIMESTAMP, "uuid": PD.UUID,
    "binary": PD.BINARY, "string": PD.STRING, "symbol": PD.SYMBOL, "list": PD.LIST, "map": PD.MAP,
    "array": PD.ARRAY,
}  # fmt: skip
ARRAY_NAMES = {code: name for name, code in ARRAY_CODES.items()}


def to_proton(v: Any) -> Any:
    """Our value as the object proton's ``Data.put_object`` expects."""
    t = type(v)
    if t in _TO_PROTON_SCALAR:
        cls = _TO_PROTON_SCALAR[t]
        return cls(float(v) if t is float32 else str(v) if t in (char, symbol) else int(v))
    if t is decimal128:
        return proton.decimal128(bytes(v))
    if t is list:
        return [to_proton(x) for x in v]
    if t is dict:
        return {to_proton(k): to_proton(x) for k, x in v.items()}
    if t is Described:
        return proton.Described(to_proton(v.descriptor), to_proton(v.value))
    if t is Array:
        if v.descriptor is None:
            return proton.Array(proton.UNDESCRIBED, ARRAY_CODES[v.type], *(to_proton(x) for x in v.elements))
        # proton's described arrays hold the bare element values; ours hold Described elements.
        bare = [x.value if isinstance(x, Described) else x for x in v.elements]
        return proton.Array(to_proton(v.descriptor), ARRAY_CODES[v.type], *(to_proton(x) for x in bare))
    assert t in (type(None), bool, int, float, str, bytes, uuid.UUID), t
    return v


def from_proton(p: Any) -> Any:
    """Proton's decoded object as the value our decoder would give."""
    t = type(p)
    if t in _FROM_PROTON_SCALAR:
        return _FROM_PROTON_SCALAR[t](p)
    if t is proton.decimal128:
        return decimal128(bytes(p))
    if t is memoryview:  # proton's get_binary returns a view of its own buffer, not bytes
        return bytes(p)
    if t is list:
        return [from_proton(x) for x in p]
    if t is dict or t in (proton.AnnotationDict, proton.PropertyDict):
        return {from_proton(k): from_proton(x) for k, x in p.items()}
    if t is proton.Described:
        return Described(from_proton(p.descriptor), from_proton(p.value))
    if t is proton.Array:
        elements = [from_proton(x) for x in p.elements]
        if p.descriptor is proton.UNDESCRIBED:
            return Array(ARRAY_NAMES[p.type], elements)
        descriptor = from_proton(p.descriptor)
        return Array(ARRAY_NAMES[p.type], [Described(descriptor, x) for x in elements], descriptor=descriptor)
    assert t in (type(None), bool, int, float, str, bytes, uuid.UUID), t
    return p


_INT_TYPES = (ubyte, ushort, uint, ulong, byte, short, int32, timestamp, decimal32, decimal64)


def tagged(v: Any) -> Any:
    """A type-strict comparable form (ubyte(1) != uint(1); floats by bits, NaNs alike)."""
    t = type(v)
    if v is None or t in (bool, str, bytes, uuid.UUID):
        return (t.__name__, v)
    if t is int:
        return ("long", v)
    if t in _INT_TYPES:
        return (t.__name__, int(v))
    if t is float:
        return ("double", "nan" if math.isnan(v) else struct.pack(">d", v))
    if t is float32:
        return ("float", "nan" if math.isnan(v) else struct.pack(">f", v))
    if t in (decimal128, char, symbol):
        return (t.__name__, bytes(v) if t is decimal128 else str(v))
    if t is list:
        return ("list", tuple(tagged(x) for x in v))
    if t is dict:
        return ("map", tuple((tagged(k), tagged(x)) for k, x in v.items()))
    if t is Described:
        return ("described", tagged(v.descriptor), tagged(v.value))
    if t is Array:
        descriptor = None if v.descriptor is None else tagged(v.descriptor)
        return ("array", v.type, descriptor, tuple(tagged(x) for x in v.elements))
    raise TypeError(f"no tag for {t.__name__}: {v!r}")


def proton_decode(data: bytes) -> Any:
    """Decode one value with proton, converted (while proton's buffer is alive) to our types."""
    d = PD()
    consumed = d.decode(data)
    assert consumed == len(data)
    d.rewind()
    assert d.next() is not None
    obj = from_proton(d.get_object())
    assert d.next() is None  # exactly one value
    return obj


def proton_encode(obj: Any) -> bytes:
    d = PD()
    d.put_object(obj)
    return d.encode()


# ---------------------------------------------------------------------------
# strategies: the codec's whole domain, minus what proton itself cannot represent
# ---------------------------------------------------------------------------
#
# Restrictions, each a proton limitation rather than ours:
# * map keys are scalars only: proton.Described and proton.Array define __eq__
#   without __hash__, so get_dict() raises TypeError for a described (or array) key.
# * map keys are never binary: proton's get_binary() returns a writable memoryview
#   into its own buffer, which is unhashable ("cannot hash writable memoryview").
# * a described value's value is never itself described: inside an array (at any
#   depth) proton's decoder loses track of such a value -- the array's element
#   type comes back as 0 and the following sibling is dropped -- although it
#   decodes the same bytes correctly outside an array, as does our decoder.
# * descriptors are ulong or symbol, never themselves described: proton's
#   decoder rejects a described descriptor (DataException -6).
# * floats never NaN with a payload: only the quiet NaN is generated (proton
#   passes values through C floats, which may canonicalise payloads).
# Everything else -- arrays of arrays, arrays of lists and maps, described
# arrays of lists, chars beyond the BMP, empty arrays, null arrays -- proton
# handles in both directions, so it is generated.


def _bounded(cls: Any, lo: int, hi: int) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(sorted({lo, hi, max(lo, 0), min(hi, 255), min(hi, 256)})), st.integers(lo, hi)
    ).map(cls)


def _quiet_nan(x: float) -> float:
    return math.nan if math.isnan(x) else x


ascii_chars = st.characters(max_codepoint=127)
unicode_chars = st.characters(exclude_categories=("Cs",))
texts = st.one_of(
    st.text(unicode_chars, max_size=12), st.text(unicode_chars, min_size=1, max_size=3).map(lambda s: s * 100)
)
ascii_texts = st.one_of(
    st.text(ascii_chars, max_size=12), st.text(ascii_chars, min_size=1, max_size=3).map(lambda s: s * 100)
)

SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "ubyte": _bounded(ubyte, 0, 2**8 - 1),
    "ushort": _bounded(ushort, 0, 2**16 - 1),
    "uint": _bounded(uint, 0, 2**32 - 1),
    "ulong": _bounded(ulong, 0, 2**64 - 1),
    "byte": _bounded(byte, -(2**7), 2**7 - 1),
    "short": _bounded(short, -(2**15), 2**15 - 1),
    "int": _bounded(int32, -(2**31), 2**31 - 1),
    "long": _bounded(int, -(2**63), 2**63 - 1),
    "float": st.floats(width=32).map(_quiet_nan).map(float32),
    "double": st.floats().map(_quiet_nan),
    "decimal32": _bounded(decimal32, 0, 2**32 - 1),
    "decimal64": _bounded(decimal64, 0, 2**64 - 1),
    "decimal128": st.binary(min_size=16, max_size=16).map(decimal128),
    "char": unicode_chars.map(char),
    "timestamp": _bounded(timestamp, -(2**63), 2**63 - 1),
    "uuid": st.uuids(),
    "binary": st.one_of(st.binary(max_size=12), st.binary(min_size=1, max_size=3).map(lambda b: b * 100)),
    "string": texts,
    "symbol": ascii_texts.map(symbol),
}
scalars = st.one_of(*SCALARS.values())
map_keys = st.one_of(*(s for k, s in SCALARS.items() if k != "binary"))

_REGISTERED = {int(k) for k in codec.DESCRIBED_TYPES if isinstance(k, ulong)}
descriptors = st.one_of(
    st.integers(0, 2**64 - 1).filter(lambda n: n not in _REGISTERED).map(ulong),
    st.text(ascii_chars, max_size=20).map(lambda s: symbol("org.example:" + s)),
)


def _array_of(kind: str, elements: st.SearchStrategy[list[Any]]) -> st.SearchStrategy[Array]:
    plain = elements.map(lambda xs: Array(kind, xs))
    described = st.builds(
        lambda d, xs: Array(kind, [Described(d, x) for x in xs], descriptor=d), descriptors, elements
    )
    return st.one_of(plain, described)


scalar_arrays = st.sampled_from(sorted(SCALARS)).flatmap(
    lambda k: _array_of(k, st.lists(SCALARS[k], max_size=5))
)


def _compounds(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    lists = st.lists(children, max_size=5)
    maps = st.dictionaries(map_keys, children, max_size=4)
    list_arrays = _array_of("list", st.lists(lists, max_size=3))
    map_arrays = _array_of("map", st.lists(maps, max_size=3))
    array_arrays = _array_of("array", st.lists(st.one_of(scalar_arrays, list_arrays), max_size=3))
    not_described = children.filter(lambda x: type(x) is not Described)
    return st.one_of(
        lists, maps, st.builds(Described, descriptors, not_described), list_arrays, map_arrays, array_arrays
    )


values = st.recursive(st.one_of(scalars, scalar_arrays), _compounds, max_leaves=20)


# ---------------------------------------------------------------------------
# value cross-checks
# ---------------------------------------------------------------------------


def check_ours_to_proton(v: Any) -> None:
    assert tagged(proton_decode(encode(v))) == tagged(v)


def check_proton_to_ours(v: Any) -> None:
    data = proton_encode(to_proton(v))
    assert tagged(decode(data)) == tagged(v)
    assert codec.skip_at(data, 0) == len(data)


@pytest.mark.parametrize("kind", sorted(SCALARS))
@settings(max_examples=30)
@given(data=st.data())
def test_scalars_both_directions(kind: str, data: st.DataObject) -> None:
    v = data.draw(SCALARS[kind])
    check_ours_to_proton(v)
    check_proton_to_ours(v)


@settings(max_examples=150)
@given(scalar_arrays)
def test_scalar_arrays_both_directions(v: Array) -> None:
    check_ours_to_proton(v)
    check_proton_to_ours(v)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_ours_decoded_by_proton(v: Any) -> None:
    check_ours_to_proton(v)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_proton_decoded_by_ours(v: Any) -> None:
    check_proton_to_ours(v)


@pytest.mark.parametrize(
    "v",
    [
        [None] * 300,  # list32 by count
        ["x" * 300],  # list32 by size
        {symbol("k"): "v" * 300},  # map32
        Array("ubyte", [ubyte(7)] * 300),  # array32
        Array("string", ["a", "b" * 300]),  # str32 elements
        Array("list", [[], [None] * 300]),  # list32 elements, list0 promoted
        Array("array", [Array("null", [None] * 3), Array("symbol", [symbol("s")])]),
        Array("null", []),
        Array("map", [{}]),
        Array("map", [Described(symbol("org.example:m"), {})], descriptor=symbol("org.example:m")),
        Described(ulong(0x0000_0137_0000_0001), [Described(symbol("org.example:x"), {})]),
    ],
)
def test_wide_and_edge_forms_both_directions(v: Any) -> None:
    check_ours_to_proton(v)
    check_proton_to_ours(v)


def test_proton_uses_wide_forms_we_accept() -> None:
    """Proton writes list32 and fixed-width array elements even for tiny values."""
    data = proton_encode([proton.uint(0)])
    assert data[0] == 0xD0
    assert decode(data) == [uint(0)]
    data = proton_encode(proton.Array(proton.UNDESCRIBED, PD.UINT, proton.uint(0), proton.uint(1)))
    assert data[0] == 0xF0
    assert tagged(decode(data)) == tagged(Array("uint", [uint(0), uint(1)]))


# ---------------------------------------------------------------------------
# whole messages
# ---------------------------------------------------------------------------

message_ids = st.one_of(
    st.text(unicode_chars, min_size=1, max_size=20),
    st.uuids(),
    _bounded(ulong, 0, 2**64 - 1),
    st.binary(min_size=1, max_size=20),
)
# application-properties: string keys, simple (non-compound) values (Part 3 §3.2.5)
app_property_values = st.one_of(
    st.none(), st.booleans(), SCALARS["ubyte"], SCALARS["int"], SCALARS["long"], SCALARS["double"],
    SCALARS["string"], SCALARS["symbol"], SCALARS["timestamp"], SCALARS["uuid"], SCALARS["binary"],
)  # fmt: skip
app_properties = st.dictionaries(st.text(unicode_chars, max_size=10), app_property_values, max_size=5)
annotations = st.dictionaries(
    st.text(ascii_chars, max_size=10).map(lambda s: symbol("x-opt-" + s)),
    st.one_of(scalars, st.lists(scalars, max_size=3)),
    max_size=4,
)
bodies = st.one_of(
    values,
    st.text(unicode_chars, max_size=40),
    st.binary(max_size=40),
    st.dictionaries(st.text(max_size=5), scalars, max_size=4),
    st.lists(scalars, max_size=5),
)
# proton.Message keeps address, subject, reply_to (and content-type) as C strings: a NUL truncates them.
c_strings = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=20
)
addresses = st.one_of(st.none(), c_strings)


def message_id_from_proton(v: Any) -> Any:
    """proton.Message.id and correlation_id give a ulong id as a plain int (cproton's msgid2py)."""
    return ulong(v) if type(v) is int else from_proton(v)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    message_id=st.one_of(st.none(), message_ids),
    correlation_id=st.one_of(st.none(), message_ids),
    address=addresses,
    subject=addresses,
    reply_to=addresses,
    properties=app_properties,
    annotations=annotations,
    priority=st.integers(0, 255),
    ttl_ms=st.one_of(st.just(0), st.integers(1, 2**32 - 1)),
    durable=st.booleans(),
    body=bodies,
)
def test_proton_message_decoded_by_ours(
    message_id: Any,
    correlation_id: Any,
    address: str | None,
    subject: str | None,
    reply_to: str | None,
    properties: dict[str, Any],
    annotations: dict[Any, Any],
    priority: int,
    ttl_ms: int,
    durable: bool,
    body: Any,
) -> None:
    m = proton.Message(
        body=to_proton(body),
        id=to_proton(message_id),
        correlation_id=to_proton(correlation_id),
        address=address,
        subject=subject,
        reply_to=reply_to,
        properties={k: to_proton(x) for k, x in properties.items()},
        annotations={to_proton(k): to_proton(x) for k, x in annotations.items()},
        priority=priority,
        ttl=ttl_ms / 1000,  # proton's ttl is in seconds; the wire carries milliseconds
        durable=durable,
    )
    msg = decode_message(m.encode())

    assert msg.header is not None
    assert msg.header.durable is durable
    assert msg.header.priority == priority
    # proton keeps ttl as float seconds and truncates back to milliseconds (8001 ms -> 8000)
    assert msg.header.ttl == (int(ttl_ms / 1000 * 1000) or None)
    props = msg.properties
    assert props is not None
    assert tagged(props.message_id) == tagged(message_id)
    assert tagged(props.correlation_id) == tagged(correlation_id)
    assert props.to == address
    assert props.subject == subject
    assert props.reply_to == reply_to
    # proton omits an empty application-properties / message-annotations section
    assert tagged(msg.application_properties or {}) == tagged(properties)
    assert tagged(msg.message_annotations or {}) == tagged(annotations)
    assert msg.body_kind == "value"
    assert tagged(msg.body) == tagged(body)


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b"raw bytes", "data"),
        ([1, "two", symbol("three")], "sequence"),
        ("text", "value"),
        ({"k": 1}, "value"),
    ],
)
def test_proton_inferred_bodies_decoded_by_ours(body: Any, kind: str) -> None:
    m = proton.Message(body=to_proton(body))
    m.inferred = True  # bytes -> data section, list -> amqp-sequence section
    msg = decode_message(m.encode())
    assert msg.body_kind == kind
    assert tagged(msg.body) == tagged(body)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    message_id=st.one_of(st.none(), message_ids),
    correlation_id=st.one_of(st.none(), message_ids),
    address=addresses,
    subject=addresses,
    reply_to=addresses,
    content_type=st.one_of(st.none(), st.sampled_from(["text/plain", "application/json"])),
    properties=app_properties,
    annotations=annotations,
    delivery_annotations=st.one_of(st.none(), annotations),
    priority=st.integers(0, 255),
    ttl=st.one_of(st.none(), st.integers(1, 2**32 - 1)),
    durable=st.booleans(),
    first_acquirer=st.booleans(),
    delivery_count=st.integers(0, 2**32 - 1),
    body=bodies,
)
def test_our_message_decoded_by_proton(
    message_id: Any,
    correlation_id: Any,
    address: str | None,
    subject: str | None,
    reply_to: str | None,
    content_type: str | None,
    properties: dict[str, Any],
    annotations: dict[Any, Any],
    delivery_annotations: dict[Any, Any] | None,
    priority: int,
    ttl: int | None,
    durable: bool,
    first_acquirer: bool,
    delivery_count: int,
    body: Any,
) -> None:
    ours = Message(
        body=body,
        header=Header(
            durable=durable,
            priority=ubyte(priority),
            ttl=None if ttl is None else uint(ttl),
            first_acquirer=first_acquirer,
            delivery_count=uint(delivery_count),
        ),
        delivery_annotations=delivery_annotations,
        message_annotations=annotations,
        properties=Properties(
            message_id=message_id,
            to=address,
            subject=subject,
            reply_to=reply_to,
            correlation_id=correlation_id,
            content_type=None if content_type is None else symbol(content_type),
        ),
        application_properties=properties,
    )
    m = proton.Message()
    m.decode(ours.encode())

    assert m.durable is durable
    assert m.priority == priority
    assert m.ttl == (ttl or 0) / 1000
    assert m.first_acquirer is first_acquirer
    assert m.delivery_count == delivery_count
    assert tagged(message_id_from_proton(m.id)) == tagged(message_id)
    assert tagged(message_id_from_proton(m.correlation_id)) == tagged(correlation_id)
    assert m.address == address
    assert m.subject == subject
    assert m.reply_to == reply_to
    if content_type is not None:  # proton reports a missing content-type as symbol("None")
        assert m.content_type == content_type
    assert tagged(from_proton(m.properties or {})) == tagged(properties)
    assert tagged(from_proton(m.annotations or {})) == tagged(annotations)
    assert tagged(from_proton(m.instructions or {})) == tagged(delivery_annotations or {})
    assert tagged(from_proton(m.body)) == tagged(body)


def test_our_data_and_sequence_bodies_decoded_by_proton() -> None:
    m = proton.Message()
    m.decode(Message(body=b"\x00\x01", body_kind="data").encode())
    assert m.body == b"\x00\x01"
    assert m.inferred
    m = proton.Message()
    m.decode(Message(body=[1, "a"], body_kind="sequence").encode())
    assert m.body == [1, "a"]
    assert m.inferred


def test_proton_full_properties_section_decoded_by_ours() -> None:
    m = proton.Message(
        body="x",
        id=proton.ulong(5),
        user_id=b"alice",
        address="q",
        subject="s",
        reply_to="r",
        correlation_id=uuid.UUID(int=7),
        content_type="text/plain",
        content_encoding="utf-8",
        expiry_time=1_700_000_000.5,  # seconds
        creation_time=1_600_000_000.25,
        group_id="g",
        group_sequence=3,
        reply_to_group_id="rg",
    )
    props = decode_message(m.encode()).properties
    assert props == Properties(
        message_id=ulong(5),
        user_id=b"alice",
        to="q",
        subject="s",
        reply_to="r",
        correlation_id=uuid.UUID(int=7),
        content_type=symbol("text/plain"),
        content_encoding=symbol("utf-8"),
        absolute_expiry_time=timestamp(1_700_000_000_500),
        creation_time=timestamp(1_600_000_000_250),
        group_id="g",
        group_sequence=uint(3),
        reply_to_group_id="rg",
    )
    assert type(props.absolute_expiry_time) is timestamp
    assert type(props.content_type) is symbol
