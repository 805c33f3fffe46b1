"""The AMQP 1.0 type system's binary encoding (OASIS AMQP 1.0 Part 1, §1.2-§1.6).

``encode(value)`` and ``decode(data)`` work on one value; ``encode_into`` and
``decode_at`` are the streaming forms the protocol engine uses.  Decoding is a
table lookup on the constructor byte (§1.2); described values whose descriptor
names a declared composite (see :mod:`minibroker.amqp.composite`) come back as
that class, any other as :class:`~minibroker.amqp.types.Described`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from .errors import AMQPDecodeError
from .types import (
    Array,
    Described,
    byte,
    char,
    decimal32,
    decimal64,
    decimal128,
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

__all__ = ["decode", "decode_at", "encode", "encode_into", "skip_at", "DESCRIBED_TYPES"]

#: descriptor (``ulong`` code or ``symbol`` name) -> callable building the value
#: from its decoded body; filled in by :mod:`minibroker.amqp.composite`.
DESCRIBED_TYPES: dict[object, Callable[[Any], object]] = {}

#: The same builders for descriptor codes below 256, keyed by the plain int code.
SMALL_CODES: dict[int, Callable[[Any], object]] = {}

#: Nesting deeper than this is refused rather than risking Python's recursion limit.
MAX_NESTING = 100
#: An array may claim at most ARRAY_FREE_ELEMENTS plus this many elements per byte of its body,
#: which bounds arrays of zero-width elements (null, true, uint0, list0) without limiting others.
ARRAY_ELEMENTS_PER_BYTE = 8
ARRAY_FREE_ELEMENTS = 256

_B = struct.Struct(">B")
_H = struct.Struct(">H")
_I = struct.Struct(">I")
_Q = struct.Struct(">Q")
_b = struct.Struct(">b")
_h = struct.Struct(">h")
_i = struct.Struct(">i")
_q = struct.Struct(">q")
_f = struct.Struct(">f")
_d = struct.Struct(">d")
_BB = struct.Struct(">BB")
_II = struct.Struct(">II")

Out = bytearray

# ---------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------


def _enc_null(v: object, out: Out) -> None:
    out.append(0x40)


def _enc_bool(v: bool, out: Out) -> None:
    out.append(0x41 if v else 0x42)


def enc_ubyte(v: int, out: Out) -> None:
    out += b"\x50" + _B.pack(v)


def enc_ushort(v: int, out: Out) -> None:
    out += b"\x60" + _H.pack(v)


def enc_uint(v: int, out: Out) -> None:
    if v == 0:
        out.append(0x43)
    elif v < 256:
        out += _BB.pack(0x52, v)
    else:
        out += b"\x70" + _I.pack(v)


def enc_ulong(v: int, out: Out) -> None:
    if v == 0:
        out.append(0x44)
    elif v < 256:
        out += _BB.pack(0x53, v)
    else:
        out += b"\x80" + _Q.pack(v)


def _enc_byte(v: int, out: Out) -> None:
    out += b"\x51" + _b.pack(v)


def _enc_short(v: int, out: Out) -> None:
    out += b"\x61" + _h.pack(v)


def enc_int(v: int, out: Out) -> None:
    if -128 <= v <= 127:
        out += b"\x54" + _b.pack(v)
    else:
        out += b"\x71" + _i.pack(v)


def enc_long(v: int, out: Out) -> None:
    if -128 <= v <= 127:
        out += b"\x55" + _b.pack(v)
    elif -(2**63) <= v < 2**63:
        out += b"\x81" + _q.pack(v)
    else:
        raise OverflowError(f"{v} does not fit an AMQP long (64-bit signed); use ulong({v}) if it is unsigned")


def _enc_float(v: float, out: Out) -> None:
    out += b"\x72" + _f.pack(v)


def _enc_double(v: float, out: Out) -> None:
    out += b"\x82" + _d.pack(v)


def _enc_decimal32(v: int, out: Out) -> None:
    out += b"\x74" + _I.pack(v)


def _enc_decimal64(v: int, out: Out) -> None:
    out += b"\x84" + _Q.pack(v)


def _enc_decimal128(v: bytes, out: Out) -> None:
    out += b"\x94" + v


def _enc_char(v: str, out: Out) -> None:
    out += b"\x73" + _I.pack(ord(v))


def enc_timestamp(v: int, out: Out) -> None:
    out += b"\x83" + _q.pack(v)


def _enc_uuid(v: uuid.UUID, out: Out) -> None:
    out += b"\x98" + v.bytes


def enc_binary(v: bytes, out: Out) -> None:
    n = len(v)
    if n < 256:
        out += _BB.pack(0xA0, n)
    else:
        out += b"\xb0" + _I.pack(n)
    out += v


def enc_string(v: str, out: Out) -> None:
    data = v.encode("utf-8")
    n = len(data)
    if n < 256:
        out += _BB.pack(0xA1, n)
    else:
        out += b"\xb1" + _I.pack(n)
    out += data


def enc_symbol(v: str, out: Out) -> None:
    data = v.encode("ascii")
    n = len(data)
    if n < 256:
        out += _BB.pack(0xA3, n)
    else:
        out += b"\xb3" + _I.pack(n)
    out += data


def _compound(code8: int, code32: int, count: int, body: bytes | bytearray, out: Out) -> None:
    """Write a list/map: size and count are 8-bit when they fit (Part 1 §1.6.22)."""
    size = len(body) + 1
    if size < 256 and count < 256:
        out += bytes((code8, size, count))
    else:
        out += bytes((code32,)) + _II.pack(size + 3, count)
    out += body


def enc_list(v: list[Any] | tuple[Any, ...], out: Out) -> None:
    if not v:
        out.append(0x45)
        return
    body = bytearray()
    for item in v:
        encode_into(item, body)
    _compound(0xC0, 0xD0, len(v), body, out)


def enc_map(v: dict[Any, Any], out: Out) -> None:
    body = bytearray()
    for key, item in v.items():
        encode_into(key, body)
        encode_into(item, body)
    _compound(0xC1, 0xD1, 2 * len(v), body, out)


def enc_symbol_map(v: dict[Any, Any], out: Out) -> None:
    """A map whose ``str`` keys are written as symbols (``fields``, annotations)."""
    body = bytearray()
    for key, item in v.items():
        if type(key) is str:
            enc_symbol(key, body)
        else:
            encode_into(key, body)
        encode_into(item, body)
    _compound(0xC1, 0xD1, 2 * len(v), body, out)


def _enc_described(v: Described, out: Out) -> None:
    out.append(0x00)
    encode_into(v.descriptor, out)
    encode_into(v.value, out)


# Array element encodings: (fixed constructor or None, element writer without constructor)
def _fixed(fmt: struct.Struct) -> Callable[[Any, Out], None]:
    pack = fmt.pack

    def write(v: Any, out: Out) -> None:
        out += pack(v)

    return write


def _write_nothing(v: Any, out: Out) -> None:
    pass


def _write_bool(v: Any, out: Out) -> None:
    out.append(1 if v else 0)


def _write_u128(v: Any, out: Out) -> None:
    out += bytes(v)


def _write_uuid(v: Any, out: Out) -> None:
    out += v.bytes


def _write_char(v: Any, out: Out) -> None:
    out += _I.pack(ord(v))


_ARRAY_FIXED: dict[str, tuple[int, Callable[[Any, Out], None]]] = {
    "null": (0x40, _write_nothing),
    "boolean": (0x56, _write_bool),
    "ubyte": (0x50, _fixed(_B)),
    "ushort": (0x60, _fixed(_H)),
    "uint": (0x70, _fixed(_I)),
    "ulong": (0x80, _fixed(_Q)),
    "byte": (0x51, _fixed(_b)),
    "short": (0x61, _fixed(_h)),
    "int": (0x71, _fixed(_i)),
    "long": (0x81, _fixed(_q)),
    "float": (0x72, _fixed(_f)),
    "double": (0x82, _fixed(_d)),
    "decimal32": (0x74, _fixed(_I)),
    "decimal64": (0x84, _fixed(_Q)),
    "decimal128": (0x94, _write_u128),
    "char": (0x73, _write_char),
    "timestamp": (0x83, _fixed(_q)),
    "uuid": (0x98, _write_uuid),
}
# Variable-width element types: (8-bit code, 32-bit code, encoder of one complete value)
_ARRAY_VARIABLE: dict[str, tuple[int, int, Callable[[Any, Out], None]]] = {
    "binary": (0xA0, 0xB0, enc_binary),
    "string": (0xA1, 0xB1, enc_string),
    "symbol": (0xA3, 0xB3, enc_symbol),
    "list": (0xC0, 0xD0, enc_list),
    "map": (0xC1, 0xD1, enc_map),
    "array": (0xE0, 0xF0, lambda v, out: enc_array(v, out)),
}


def _array_parts(arr: Array) -> tuple[bytes, bytes]:
    """Return (element constructor, concatenated element bodies) for an array (Part 1 §1.6.24)."""
    constructor = bytearray()
    elements = arr.elements
    if arr.descriptor is not None:
        constructor.append(0x00)
        encode_into(arr.descriptor, constructor)
        elements = [_undescribed(element) for element in elements]
    body = bytearray()
    fixed = _ARRAY_FIXED.get(arr.type)
    if fixed is not None:
        code, write = fixed
        constructor.append(code)
        for element in elements:
            write(element, body)
        return bytes(constructor), bytes(body)
    code8, code32, encode_one = _ARRAY_VARIABLE[arr.type]
    encoded = []
    for element in elements:
        one = bytearray()
        encode_one(element, one)
        if one == b"\x45":  # list0 has no width; inside an array it takes the shared one
            one = bytearray(b"\xc0\x01\x00")
        encoded.append(one)
    # Every element shares one constructor, so all use the wide form if any needs it.
    wide = any(one[0] == code32 for one in encoded)
    constructor.append(code32 if wide else code8)
    for one in encoded:
        if wide and one[0] == code8:
            one = _widen(one, code32)
        body += one[1:]
    return bytes(constructor), bytes(body)


def _undescribed(element: Any) -> Any:
    """The body of one element of a described array."""
    if isinstance(element, Described):
        return element.value
    body = getattr(element, "described_body", None)
    return body() if body is not None else element


def _widen(one: bytearray, code32: int) -> bytearray:
    """Re-encode an 8-bit-width value in its 32-bit form."""
    if one[0] in (0xA0, 0xA1, 0xA3):
        return bytearray((code32,)) + _I.pack(one[1]) + one[2:]
    size, count = one[1], one[2]
    return bytearray((code32,)) + _II.pack(size + 3, count) + one[3:]


def enc_array(arr: Array, out: Out) -> None:
    constructor, body = _array_parts(arr)
    count = len(arr.elements)
    size = len(constructor) + len(body) + 1
    if size < 256 and count < 256:
        out += bytes((0xE0, size, count))
    else:
        out += b"\xf0" + _II.pack(size + 3, count)
    out += constructor
    out += body


def enc_symbol_array(v: Any, out: Out) -> None:
    """A ``symbol`` field with multiple=true: one symbol, or an array of them (Part 1 §1.3)."""
    if isinstance(v, str):
        enc_symbol(v, out)
    else:
        enc_array(Array("symbol", v), out)


_ENCODERS: dict[type, Callable[[Any, Out], None]] = {
    type(None): _enc_null,
    bool: _enc_bool,
    int: enc_long,
    float: _enc_double,
    str: enc_string,
    bytes: enc_binary,
    bytearray: enc_binary,
    memoryview: lambda v, out: enc_binary(bytes(v), out),
    list: enc_list,
    tuple: enc_list,
    dict: enc_map,
    uuid.UUID: _enc_uuid,
    symbol: enc_symbol,
    ubyte: enc_ubyte,
    ushort: enc_ushort,
    uint: enc_uint,
    ulong: enc_ulong,
    byte: _enc_byte,
    short: _enc_short,
    int32: enc_int,
    float32: _enc_float,
    decimal32: _enc_decimal32,
    decimal64: _enc_decimal64,
    decimal128: _enc_decimal128,
    char: _enc_char,
    timestamp: enc_timestamp,
    Described: _enc_described,
    Array: enc_array,
}


def encode_into(value: object, out: Out) -> None:
    """Append the encoding of ``value`` to ``out``."""
    try:
        encoder = _ENCODERS[type(value)]
    except KeyError:
        encoder = _encoder_for(type(value))
    encoder(value, out)


def _encoder_for(cls: type) -> Callable[[Any, Out], None]:
    """Find (and cache) the encoder for a subclass, or a composite's own ``encode_into``."""
    method = getattr(cls, "encode_into", None)
    if method is not None:
        encoder: Callable[[Any, Out], None] = lambda v, out: v.encode_into(out)  # noqa: E731
    else:
        for base in cls.__mro__[1:]:
            if base in _ENCODERS:
                encoder = _ENCODERS[base]
                break
        else:
            raise TypeError(
                f"cannot encode a {cls.__name__} as AMQP: use None, bool, int, float, str, bytes, "
                "list, dict, uuid.UUID, a minibroker.amqp value type, Described or Array"
            )
    _ENCODERS[cls] = encoder
    return encoder


def encode(value: object) -> bytes:
    """Encode one value; e.g. ``encode(symbol("a")) == b"\\xa3\\x01a"``."""
    out = bytearray()
    encode_into(value, out)
    return bytes(out)


# ---------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------

Buf = bytes | bytearray | memoryview
_Decoder = Callable[[Buf, int, int], tuple[Any, int]]


def _need(buf: Buf, pos: int, n: int) -> None:
    if pos + n > len(buf):
        raise AMQPDecodeError(f"truncated value: needed {n} bytes at offset {pos}, have {len(buf) - pos}")


def _const(value: object) -> _Decoder:
    def dec(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
        return value, pos

    return dec


def _unpacker(fmt: struct.Struct, wrap: Callable[[Any], Any] | None) -> _Decoder:
    size = fmt.size
    unpack_from = fmt.unpack_from

    if wrap is None:

        def plain(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
            end = pos + size
            if end > len(buf):
                _need(buf, pos, size)
            return unpack_from(buf, pos)[0], end

        return plain

    def dec(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
        end = pos + size
        if end > len(buf):
            _need(buf, pos, size)
        return wrap(unpack_from(buf, pos)[0]), end

    return dec


def _dec_boolean(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
    _need(buf, pos, 1)
    b = buf[pos]
    if b > 1:
        raise AMQPDecodeError(f"boolean byte must be 0x00 or 0x01, got {b:#04x}")
    return b == 1, pos + 1


def _dec_char(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
    _need(buf, pos, 4)
    code = _I.unpack_from(buf, pos)[0]
    try:
        return char(chr(code)), pos + 4
    except (ValueError, OverflowError):
        raise AMQPDecodeError(f"char {code:#x} is not a Unicode code point") from None


def _dec_uuid(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
    _need(buf, pos, 16)
    return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16


def _dec_decimal128(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
    _need(buf, pos, 16)
    return decimal128(bytes(buf[pos : pos + 16])), pos + 16


def _variable(width: int, convert: Callable[[bytes], Any]) -> _Decoder:
    size_fmt = _B if width == 1 else _I

    def dec(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
        _need(buf, pos, width)
        n = size_fmt.unpack_from(buf, pos)[0]
        start = pos + width
        end = start + n
        if end > len(buf):
            _need(buf, start, n)
        return convert(bytes(buf[start:end])), end

    return dec


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AMQPDecodeError(f"string is not valid UTF-8: {exc}") from None


def _ascii_symbol(data: bytes) -> symbol:
    try:
        return symbol(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise AMQPDecodeError(f"symbol is not ASCII: {data[:40]!r}") from None


def _header(buf: Buf, pos: int, width: int) -> tuple[int, int, int]:
    """Read a compound's size and count; return (count, body start, end)."""
    if width == 1:
        _need(buf, pos, 2)
        size, count = buf[pos], buf[pos + 1]
        start = pos + 2
        end = pos + 1 + size
    else:
        _need(buf, pos, 8)
        size, count = _II.unpack_from(buf, pos)
        start = pos + 8
        end = pos + 4 + size
    if end > len(buf) or end < start:
        raise AMQPDecodeError(
            f"compound value at offset {pos} declares size {size} but only {len(buf) - pos} bytes remain"
        )
    return count, start, end


def _items(buf: Buf, p: int, end: int, count: int, depth: int, pos: int) -> tuple[list[Any], int]:
    """The ``count`` values of a list or map body from ``buf[p]`` to ``end``, and where they end.

    Each value is one call to its constructor's decoder, except the encodings nearly every
    performative and message section is made of (null, true, false, the zero and one-byte
    integers, binary/string/symbol with 8-bit sizes), which are read here without a call or
    a tuple per value.  Anything those inline reads would have to refuse (a size past the
    data, bad UTF-8 or ASCII) goes to the decoder too, so results and errors are the
    decoder's own.
    """
    items: list[Any] = []
    append = items.append
    size = len(buf)
    kinds, consts, wraps, signed = _KIND, _CONSTS, _WRAPS, _SIGNED_SMALL
    for _ in range(count):
        if p >= end:
            raise AMQPDecodeError(f"list at offset {pos} holds fewer than its count of {count}")
        code = buf[p]
        kind = kinds[code]
        if kind == 1:  # _K_CONST (literals: a global per value read costs more than the read)
            append(consts[code])
            p += 1
            continue
        if kind == 2:  # _K_VARIABLE8
            if p + 1 < size:
                start = p + 2
                stop = start + buf[p + 1]
                if stop <= size:
                    try:
                        if code == 0xA1:
                            append(str(buf[start:stop], "utf-8"))
                        elif code == 0xA3:
                            append(_new_str(symbol, str(buf[start:stop], "ascii")))
                        else:
                            append(bytes(buf[start:stop]))
                        p = stop
                        continue
                    except UnicodeDecodeError:
                        pass  # the decoder raises the error that says so
        elif kind == 3:  # _K_SMALL
            if p + 1 < size:
                value = buf[p + 1]
                if value > 127 and code in signed:
                    value -= 256
                append(wraps[code](value))
                p += 2
                continue
        item, p = _DECODERS[code](buf, p + 1, depth + 1)
        append(item)
    return items, p


def _list(width: int) -> _Decoder:
    def dec(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
        if width == 1 and pos + 1 < len(buf):
            # The header of a list8 read here (the common width); _header does the rest and says what is wrong.
            count, p, end = buf[pos + 1], pos + 2, pos + 1 + buf[pos]
            if end > len(buf) or end < p:
                count, p, end = _header(buf, pos, width)
        else:
            count, p, end = _header(buf, pos, width)
        if depth > MAX_NESTING:
            raise AMQPDecodeError(f"values nested deeper than {MAX_NESTING} levels")
        items, p = _items(buf, p, end, count, depth, pos)
        if p != end:
            raise AMQPDecodeError(f"list at offset {pos} does not end where its size says ({p} != {end})")
        return items, end

    return dec


def _map(width: int) -> _Decoder:
    list_decoder = _list(width)

    def dec(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
        items, end = list_decoder(buf, pos, depth)
        if len(items) % 2:
            raise AMQPDecodeError(f"map at offset {pos} has an odd count {len(items)}")
        pairs = iter(items)
        try:
            return dict(zip(pairs, pairs, strict=False)), end  # pairs: the count is even
        except TypeError:
            pass  # find the key to name below
        for key in items[::2]:
            try:
                hash(key)
            except TypeError:
                raise AMQPDecodeError(f"map key {key!r} is not hashable") from None
        raise AssertionError("unreachable: dict() refused hashable keys")  # pragma: no cover

    return dec


_ARRAY_ELEMENT_TYPES = {
    0x40: "null", 0x56: "boolean", 0x50: "ubyte", 0x60: "ushort", 0x70: "uint", 0x52: "uint",
    0x43: "uint", 0x80: "ulong", 0x53: "ulong", 0x44: "ulong", 0x51: "byte", 0x61: "short",
    0x71: "int", 0x54: "int", 0x81: "long", 0x55: "long", 0x72: "float", 0x82: "double",
    0x74: "decimal32", 0x84: "decimal64", 0x94: "decimal128", 0x73: "char", 0x83: "timestamp",
    0x98: "uuid", 0xA0: "binary", 0xB0: "binary", 0xA1: "string", 0xB1: "string",
    0xA3: "symbol", 0xB3: "symbol", 0xC0: "list", 0xD0: "list", 0x45: "list", 0xC1: "map",
    0xD1: "map", 0xE0: "array", 0xF0: "array", 0x41: "boolean", 0x42: "boolean",
}  # fmt: skip


def _array(width: int) -> _Decoder:
    def dec(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
        count, p, end = _header(buf, pos, width)
        if depth > MAX_NESTING:
            raise AMQPDecodeError(f"values nested deeper than {MAX_NESTING} levels")
        if count > ARRAY_ELEMENTS_PER_BYTE * (end - p) + ARRAY_FREE_ELEMENTS:
            # Zero-width elements (null, uint0, list0 ...) would let a few bytes claim
            # billions of elements; bound the claim by the array's size.
            raise AMQPDecodeError(
                f"array at offset {pos} claims {count} elements in {end - p} bytes (at most "
                f"{ARRAY_FREE_ELEMENTS} plus {ARRAY_ELEMENTS_PER_BYTE} per byte are accepted)"
            )
        descriptor = None
        if p >= end:
            raise AMQPDecodeError(f"array at offset {pos} has no element constructor")
        if buf[p] == 0x00:
            descriptor, p = decode_at(buf, p + 1, depth + 1)
            if p >= end:
                raise AMQPDecodeError(f"array at offset {pos} has no element constructor")
        code = buf[p]
        p += 1
        element_type = _ARRAY_ELEMENT_TYPES.get(code)
        if element_type is None:
            raise AMQPDecodeError(f"array at offset {pos} has invalid element constructor {code:#04x}")
        decoder = _DECODERS[code]
        elements = []
        for _ in range(count):
            element, p = decoder(buf, p, depth + 1)
            elements.append(element)
        if p != end:
            raise AMQPDecodeError(f"array at offset {pos} has {end - p} bytes beyond its {count} items")
        if descriptor is not None:
            try:
                build = _composite_for(descriptor)
            except TypeError:
                raise AMQPDecodeError(f"array descriptor {descriptor!r} is not a ulong or symbol") from None
            if build is not None:
                elements = [build(element) for element in elements]
            else:
                elements = [Described(descriptor, element) for element in elements]
        return Array(element_type, elements, descriptor), end

    return dec


def _composite_for(descriptor: Any) -> Callable[[Any], Any] | None:
    """The composite a descriptor names, if any; TypeError for an unhashable one.

    Only a ulong code or a symbol names a composite (Part 1 §1.5); other descriptor values
    are reserved, not invalid, so they stay a plain :class:`Described` even when they equal a
    composite's code (a ubyte 0x24 is not ``accepted``).
    """
    build = DESCRIBED_TYPES.get(descriptor)
    return build if build is not None and type(descriptor) in (ulong, symbol) else None


def _dec_described(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
    if depth > MAX_NESTING:
        raise AMQPDecodeError(f"values nested deeper than {MAX_NESTING} levels")
    if pos + 2 < len(buf) and buf[pos] == 0x53:
        # The usual form, a small ulong code (00 53 xx): skip building the descriptor.
        build = SMALL_CODES.get(buf[pos + 1])
        if build is not None:
            value, pos = _DECODERS[buf[pos + 2]](buf, pos + 3, depth + 1)
            return build(value), pos
    descriptor, pos = decode_at(buf, pos, depth + 1)
    value, pos = decode_at(buf, pos, depth + 1)
    try:
        build = _composite_for(descriptor)
    except TypeError:
        raise AMQPDecodeError(f"descriptor {descriptor!r} is neither a ulong nor a symbol") from None
    if build is None:
        return Described(descriptor, value), pos
    return build(value), pos


def _invalid(code: int) -> _Decoder:
    def dec(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
        raise AMQPDecodeError(f"invalid constructor byte {code:#04x} at offset {pos - 1}")

    return dec


def _small(wrap: Callable[[int], Any], signed: bool) -> _Decoder:
    def dec(buf: Buf, pos: int, depth: int) -> tuple[Any, int]:
        if pos >= len(buf):
            _need(buf, pos, 1)
        b = buf[pos]
        if signed and b > 127:
            b -= 256
        return wrap(b), pos + 1

    return dec


_DECODERS: list[_Decoder] = [_invalid(code) for code in range(256)]
_DECODERS[0x00] = _dec_described
_DECODERS[0x40] = _const(None)
_DECODERS[0x41] = _const(True)
_DECODERS[0x42] = _const(False)
_DECODERS[0x56] = _dec_boolean


def _unchecked(cls: type[int]) -> Callable[[int], Any]:
    """Build a bounded int from the wire without the bounds check: its width already bounds it."""
    new = int.__new__

    def build(value: int) -> Any:
        return new(cls, value)

    return build


_DECODERS[0x50] = _unpacker(_B, _unchecked(ubyte))
_DECODERS[0x60] = _unpacker(_H, _unchecked(ushort))
_DECODERS[0x70] = _unpacker(_I, _unchecked(uint))
_DECODERS[0x52] = _small(_unchecked(uint), False)
_DECODERS[0x43] = _const(uint(0))
_DECODERS[0x80] = _unpacker(_Q, _unchecked(ulong))
_DECODERS[0x53] = _small(_unchecked(ulong), False)
_DECODERS[0x44] = _const(ulong(0))
_DECODERS[0x51] = _unpacker(_b, _unchecked(byte))
_DECODERS[0x61] = _unpacker(_h, _unchecked(short))
_DECODERS[0x71] = _unpacker(_i, _unchecked(int32))
_DECODERS[0x54] = _small(_unchecked(int32), True)
_DECODERS[0x81] = _unpacker(_q, None)
_DECODERS[0x55] = _small(int, True)
_DECODERS[0x72] = _unpacker(_f, float32)
_DECODERS[0x82] = _unpacker(_d, None)
_DECODERS[0x74] = _unpacker(_I, decimal32)
_DECODERS[0x84] = _unpacker(_Q, decimal64)
_DECODERS[0x94] = _dec_decimal128
_DECODERS[0x73] = _dec_char
_DECODERS[0x83] = _unpacker(_q, timestamp)
_DECODERS[0x98] = _dec_uuid
_DECODERS[0xA0] = _variable(1, bytes)
_DECODERS[0xB0] = _variable(4, bytes)
_DECODERS[0xA1] = _variable(1, _utf8)
_DECODERS[0xB1] = _variable(4, _utf8)
_DECODERS[0xA3] = _variable(1, _ascii_symbol)
_DECODERS[0xB3] = _variable(4, _ascii_symbol)
_DECODERS[0x45] = lambda buf, pos, depth: ([], pos)
_DECODERS[0xC0] = _list(1)
_DECODERS[0xD0] = _list(4)
_DECODERS[0xC1] = _map(1)
_DECODERS[0xD1] = _map(4)
_DECODERS[0xE0] = _array(1)
_DECODERS[0xF0] = _array(4)

# The inline reads of _items: a kind per constructor byte, and what each kind needs.
_K_OTHER, _K_CONST, _K_VARIABLE8, _K_SMALL = 0, 1, 2, 3
_KIND = [_K_OTHER] * 256
#: Constructors with no data: the value (shared, as their decoders share it).
_CONSTS: list[Any] = [None] * 256
for _code in (0x40, 0x41, 0x42, 0x43, 0x44):
    _KIND[_code] = _K_CONST
    _CONSTS[_code] = _DECODERS[_code](b"", 0, 0)[0]
for _code in (0xA0, 0xA1, 0xA3):
    _KIND[_code] = _K_VARIABLE8
#: One-byte integers: the type each is built as (without the bounds check its width makes moot).
_WRAPS: list[Callable[[int], Any]] = [int] * 256
for _code, _cls in ((0x50, ubyte), (0x51, byte), (0x52, uint), (0x53, ulong), (0x54, int32), (0x55, int)):
    _KIND[_code] = _K_SMALL
    _WRAPS[_code] = _unchecked(_cls) if _cls is not int else int
_SIGNED_SMALL = frozenset((0x51, 0x54, 0x55))
_new_str = str.__new__


def decode_at(buf: Buf, pos: int = 0, depth: int = 0) -> tuple[Any, int]:
    """Decode the value starting at ``buf[pos]``; return it and the offset after it."""
    if pos >= len(buf):
        raise AMQPDecodeError(f"expected a value at offset {pos} but the data ends there")
    return _DECODERS[buf[pos]](buf, pos + 1, depth)


def decode(data: Buf) -> Any:
    """Decode exactly one value; trailing bytes are an error."""
    value, end = decode_at(data, 0)
    if end != len(data):
        raise AMQPDecodeError(f"{len(data) - end} bytes remain after the value")
    return value


_FIXED_WIDTH = {
    0x40: 0, 0x41: 0, 0x42: 0, 0x43: 0, 0x44: 0, 0x45: 0,
    0x50: 1, 0x51: 1, 0x52: 1, 0x53: 1, 0x54: 1, 0x55: 1, 0x56: 1,
    0x60: 2, 0x61: 2,
    0x70: 4, 0x71: 4, 0x72: 4, 0x73: 4, 0x74: 4,
    0x80: 8, 0x81: 8, 0x82: 8, 0x83: 8, 0x84: 8,
    0x94: 16, 0x98: 16,
}  # fmt: skip


def skip_at(buf: Buf, pos: int, depth: int = 0) -> int:
    """Return the offset just past the value at ``buf[pos]`` without decoding it.

    Used to split a message into sections while keeping the bare message's
    bytes untouched (Part 3 §3.2).
    """
    if pos >= len(buf):
        _need(buf, pos, 1)
    code = buf[pos]
    pos += 1
    kind = _SKIP[code]
    if kind >= 0:
        end = pos + kind
    elif kind == _SIZE8:
        if pos >= len(buf):
            _need(buf, pos, 1)
        end = pos + 1 + buf[pos]
    elif kind == _SIZE32:
        _need(buf, pos, 4)
        end = pos + 4 + _I.unpack_from(buf, pos)[0]
    elif kind == _DESCRIBED:
        if depth > MAX_NESTING:  # a chain of 0x00 bytes must not exhaust Python's stack
            raise AMQPDecodeError(f"values nested deeper than {MAX_NESTING} levels")
        return skip_at(buf, skip_at(buf, pos, depth + 1), depth + 1)
    else:
        raise AMQPDecodeError(f"invalid constructor byte {code:#04x} at offset {pos - 1}")
    if end > len(buf):
        raise AMQPDecodeError(f"value at offset {pos - 1} runs past the end of the data")
    return end


_SIZE8, _SIZE32, _DESCRIBED, _INVALID = -1, -4, -2, -3
_SKIP = [_INVALID] * 256
for _code, _width in _FIXED_WIDTH.items():
    _SKIP[_code] = _width
for _code in (0xA0, 0xA1, 0xA3, 0xC0, 0xC1, 0xE0):
    _SKIP[_code] = _SIZE8
for _code in (0xB0, 0xB1, 0xB3, 0xD0, 0xD1, 0xF0):
    _SKIP[_code] = _SIZE32
_SKIP[0x00] = _DESCRIBED
