"""AMQP 0-9-1 field values and tables (0-9-1 specification §4.2.5, with RabbitMQ's errata).

The specification's table of field types and the one every broker and client actually uses
differ: RabbitMQ's "AMQP 0-9-1 errata" (``rabbitmq.com/amqp-0-9-1-errata.html``, "Field types")
replaced the specification's ``U``/``L`` and dropped ``s`` as a short string, and pika, py-amqp,
amqplib and the Java client all follow RabbitMQ.  This module reads and writes RabbitMQ's set:

====  ======================  ===========================================
code  wire                    Python value (decoded, and encoded from)
====  ======================  ===========================================
t     boolean octet           ``bool``
b     int8                    :class:`~minibroker.amqp.types.byte`
B     uint8                   :class:`~minibroker.amqp.types.ubyte`
s     int16                   :class:`~minibroker.amqp.types.short`
u     uint16                  :class:`~minibroker.amqp.types.ushort`
I     int32                   :class:`~minibroker.amqp.types.int32`
i     uint32                  :class:`~minibroker.amqp.types.uint`
l     int64                   ``int``
L     int64 (read only)       ``int``: py-amqp writes 64-bit integers as ``L``, and RabbitMQ
                              reads it as signed 64-bit (the specification's long-long-int)
f     float32                 :class:`~minibroker.amqp.types.float32`
d     float64                 ``float``
D     scale octet + int32     :class:`decimal.Decimal`
S     long string (uint32)    ``str`` when UTF-8, else :class:`LongStr`
x     byte array (uint32)     ``bytes``
A     array (uint32 bytes)    ``list``
T     timestamp, uint64 s     aware UTC :class:`datetime.datetime`
F     nested table            ``dict``
V     void                    ``None``
====  ======================  ===========================================

The integer classes are the AMQP 1.0 ones, so a header keeps its width when a message crosses to
1.0 (RabbitMQ's "Conversions between AMQP 0-9-1 and AMQP 1.0" maps each code to the 1.0 type of
the same width) and decoding then encoding gives back the same bytes.  A plain ``int`` is written
as ``I`` when it fits and ``l`` otherwise, as pika and py-amqp do.

Bounds: a table or array is read only within the bytes its length prefix names, which the frame
around it already bounds (``frame_max``), so the work is linear in the frame; nesting deeper than
:data:`MAX_NESTING` is refused rather than risking Python's recursion limit.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from collections.abc import Callable
from typing import Any

from ..amqp.types import byte, float32, int32, short, ubyte, uint, ushort
from .errors import FrameError

__all__ = [
    "MAX_NESTING",
    "LongStr",
    "long",
    "decode_table",
    "encode_table",
    "read_longstr",
    "read_shortstr",
    "read_table",
    "write_longstr",
    "write_shortstr",
    "write_table",
]

#: Tables and arrays nested deeper than this are refused (RabbitMQ sets no depth of its own; a
#: header table of real clients nests two or three levels).
MAX_NESTING = 64

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

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
_Bi = struct.Struct(">Bi")


class long(int):  # noqa: N801 - named as the AMQP type, like minibroker.amqp.types' ints
    """A signed 64-bit integer field value (``l``): kept as ``l`` when written back, as RabbitMQ
    writes offsets such as ``x-stream-offset`` (a plain int is written in the narrowest of ``I``/``l``)."""

    __slots__ = ()


class LongStr(bytes):
    """A long string (``S``) whose bytes are not UTF-8: kept as bytes, written back as ``S``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"LongStr({bytes(self)!r})"


# ---------------------------------------------------------------------------
# strings
# ---------------------------------------------------------------------------


def read_shortstr(data: bytes | memoryview, pos: int) -> tuple[str, int]:
    """A short string (§4.2.5.3): a length octet and at most 255 bytes of UTF-8."""
    try:
        size = data[pos]
    except IndexError:
        raise FrameError("a short string runs past the end of its frame") from None
    end = pos + 1 + size
    if end > len(data):
        raise FrameError(f"a short string of {size} bytes runs past the end of its frame")
    try:
        return bytes(data[pos + 1 : end]).decode("utf-8"), end
    except UnicodeDecodeError as exc:
        raise FrameError(f"a short string is not UTF-8 ({exc.reason} at byte {exc.start})") from None


def write_shortstr(value: str, out: bytearray) -> None:
    data = value.encode("utf-8")
    if len(data) > 255:
        raise ValueError(f"a short string holds at most 255 bytes of UTF-8, got {len(data)}: shorten it")
    out.append(len(data))
    out += data


def read_longstr(data: bytes | memoryview, pos: int) -> tuple[bytes, int]:
    """A long string (§4.2.5.3): a 32-bit length and that many bytes, returned as bytes."""
    if pos + 4 > len(data):
        raise FrameError("a long string's length runs past the end of its frame")
    (size,) = _I.unpack_from(data, pos)
    end = pos + 4 + size
    if end > len(data):
        raise FrameError(f"a long string of {size} bytes runs past the end of its frame")
    return bytes(data[pos + 4 : end]), end


def write_longstr(value: bytes | str, out: bytearray) -> None:
    data = value.encode("utf-8") if isinstance(value, str) else value
    out += _I.pack(len(data))
    out += data


# ---------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------

_Reader = Callable[[memoryview, int, int], tuple[Any, int]]


def _fixed(codec: struct.Struct, make: Callable[[Any], Any]) -> _Reader:
    size = codec.size

    def read(data: memoryview, pos: int, depth: int) -> tuple[Any, int]:
        if pos + size > len(data):
            raise FrameError("a field value runs past the end of its table")
        return make(codec.unpack_from(data, pos)[0]), pos + size

    return read


def _read_bool(data: memoryview, pos: int, depth: int) -> tuple[Any, int]:
    if pos >= len(data):
        raise FrameError("a field value runs past the end of its table")
    return data[pos] != 0, pos + 1


def _read_decimal(data: memoryview, pos: int, depth: int) -> tuple[Any, int]:
    if pos + 5 > len(data):
        raise FrameError("a decimal field runs past the end of its table")
    scale, value = _Bi.unpack_from(data, pos)
    return decimal.Decimal(value).scaleb(-scale), pos + 5


def _read_longstr_value(data: memoryview, pos: int, depth: int) -> tuple[Any, int]:
    raw, end = read_longstr(data, pos)
    try:
        return raw.decode("utf-8"), end
    except UnicodeDecodeError:
        return LongStr(raw), end


def _read_bytes(data: memoryview, pos: int, depth: int) -> tuple[Any, int]:
    return read_longstr(data, pos)


def _read_timestamp(data: memoryview, pos: int, depth: int) -> tuple[Any, int]:
    if pos + 8 > len(data):
        raise FrameError("a timestamp field runs past the end of its table")
    (seconds,) = _Q.unpack_from(data, pos)
    try:
        return _EPOCH + datetime.timedelta(seconds=seconds), pos + 8
    except OverflowError:
        raise FrameError(f"timestamp {seconds} s is past what a calendar date can hold") from None


def _read_void(data: memoryview, pos: int, depth: int) -> tuple[Any, int]:
    return None, pos


def _bounded(data: memoryview, pos: int, what: str) -> tuple[int, int]:
    if pos + 4 > len(data):
        raise FrameError(f"{what}'s length runs past the end of its frame")
    (size,) = _I.unpack_from(data, pos)
    end = pos + 4 + size
    if end > len(data):
        raise FrameError(f"{what} of {size} bytes runs past the end of its frame")
    return pos + 4, end


def _read_array(data: memoryview, pos: int, depth: int) -> tuple[Any, int]:
    if depth >= MAX_NESTING:
        raise FrameError(f"field tables and arrays nest deeper than {MAX_NESTING} levels")
    pos, end = _bounded(data, pos, "an array")
    items = []
    while pos < end:
        value, pos = _read_value(data, pos, end, depth + 1)
        items.append(value)
    return items, end


def _read_table(data: memoryview, pos: int, depth: int) -> tuple[Any, int]:
    if depth >= MAX_NESTING:
        raise FrameError(f"field tables and arrays nest deeper than {MAX_NESTING} levels")
    pos, end = _bounded(data, pos, "a field table")
    table: dict[str, Any] = {}
    view = data[:end]
    while pos < end:
        name, pos = read_shortstr(view, pos)
        table[name], pos = _read_value(data, pos, end, depth + 1)
    return table, end


_READERS: dict[int, _Reader] = {
    ord("t"): _read_bool,
    ord("b"): _fixed(_b, byte),
    ord("B"): _fixed(_B, ubyte),
    ord("s"): _fixed(_h, short),
    ord("u"): _fixed(_H, ushort),
    ord("I"): _fixed(_i, int32),
    ord("i"): _fixed(_I, uint),
    ord("l"): _fixed(_q, long),
    # py-amqp writes integers past 32 bits as "L"; RabbitMQ reads it as a signed 64-bit integer too.
    ord("L"): _fixed(_q, long),
    ord("f"): _fixed(_f, float32),
    ord("d"): _fixed(_d, float),
    ord("D"): _read_decimal,
    ord("S"): _read_longstr_value,
    ord("x"): _read_bytes,
    ord("A"): _read_array,
    ord("T"): _read_timestamp,
    ord("F"): _read_table,
    ord("V"): _read_void,
}


def _read_value(data: memoryview, pos: int, end: int, depth: int) -> tuple[Any, int]:
    if pos >= end:
        raise FrameError("a field value's type code runs past the end of its table")
    code = data[pos]
    reader = _READERS.get(code)
    if reader is None:
        raise FrameError(f"unknown field value type {chr(code)!r} (0x{code:02x}); known: tbBsuIilLfdDSxATFV")
    value, after = reader(data[:end], pos + 1, depth)
    return value, after


def read_table(data: bytes | memoryview, pos: int) -> tuple[dict[str, Any], int]:
    """A field table at ``pos`` (its 32-bit size first); returns it and the position after it."""
    table, end = _read_table(memoryview(data), pos, 0)
    return table, end


def decode_table(data: bytes) -> dict[str, Any]:
    """A whole encoded table (with its size prefix), which must be all of ``data``."""
    table, end = read_table(data, 0)
    if end != len(data):
        raise FrameError(f"{len(data) - end} bytes follow the field table")
    return table


# ---------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------


def _write_value(value: Any, out: bytearray, depth: int) -> None:
    if depth >= MAX_NESTING:
        raise ValueError(f"field tables and arrays nest deeper than {MAX_NESTING} levels: flatten the value")
    # Order matters: bool before int, the width-carrying int classes before plain int, LongStr
    # before bytes.
    if value is None:
        out += b"V"
    elif isinstance(value, bool):
        out += b"t\x01" if value else b"t\x00"
    elif isinstance(value, int):
        _write_int(value, out)
    elif isinstance(value, float32):
        out += b"f" + _f.pack(value)
    elif isinstance(value, float):
        out += b"d" + _d.pack(value)
    elif isinstance(value, decimal.Decimal):
        _write_decimal(value, out)
    elif isinstance(value, str):
        out += b"S"
        write_longstr(value, out)
    elif isinstance(value, LongStr):
        out += b"S"
        write_longstr(bytes(value), out)
    elif isinstance(value, bytes | bytearray | memoryview):
        out += b"x"
        write_longstr(bytes(value), out)
    elif isinstance(value, datetime.datetime):
        out += b"T" + _Q.pack(int(_aware(value).timestamp()))
    elif isinstance(value, dict):
        out += b"F"
        _write_table(value, out, depth + 1)
    elif isinstance(value, list | tuple):
        out += b"A"
        start = len(out)
        out += b"\x00\x00\x00\x00"
        for item in value:
            _write_value(item, out, depth + 1)
        _I.pack_into(out, start, len(out) - start - 4)
    else:
        raise TypeError(
            f"{type(value).__name__} has no AMQP 0-9-1 field type: use bool, int, float, Decimal, str,"
            " bytes, datetime, dict, list or None"
        )


_INT_CODES: dict[type, tuple[bytes, struct.Struct]] = {
    byte: (b"b", _b),
    ubyte: (b"B", _B),
    short: (b"s", _h),
    ushort: (b"u", _H),
    int32: (b"I", _i),
    uint: (b"i", _I),
    long: (b"l", _q),
}


def _write_int(value: int, out: bytearray) -> None:
    typed = _INT_CODES.get(type(value))
    if typed is not None:
        out += typed[0] + typed[1].pack(value)
    elif -(2**31) <= value < 2**31:
        out += b"I" + _i.pack(value)
    elif -(2**63) <= value < 2**63:
        out += b"l" + _q.pack(value)
    else:
        raise OverflowError(f"{value} does not fit a signed 64-bit field value (the widest 0-9-1 integer)")


def _write_decimal(value: decimal.Decimal, out: bytearray) -> None:
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"{value} is not a finite decimal: a 0-9-1 decimal is a scale and an integer")
    scale = max(0, -exponent)
    unscaled = int(value.scaleb(scale))
    if scale > 255 or not -(2**31) <= unscaled < 2**31:
        raise OverflowError(f"{value} does not fit a 0-9-1 decimal (scale <= 255, 32-bit unscaled value)")
    out += b"D" + _Bi.pack(scale, unscaled)


def _aware(moment: datetime.datetime) -> datetime.datetime:
    # A naive datetime is taken as UTC, as pika and py-amqp take the ones they decode.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


def _write_table(table: dict[str, Any], out: bytearray, depth: int) -> None:
    start = len(out)
    out += b"\x00\x00\x00\x00"
    for name, value in table.items():
        if not isinstance(name, str):
            raise TypeError(f"field table keys are short strings; got {type(name).__name__} {name!r}")
        write_shortstr(name, out)
        _write_value(value, out, depth)
    _I.pack_into(out, start, len(out) - start - 4)


def write_table(table: dict[str, Any] | None, out: bytearray) -> None:
    """Append ``table`` (``None`` as the empty table) with its 32-bit size prefix."""
    if not table:
        out += b"\x00\x00\x00\x00"
        return
    _write_table(table, out, 0)


def encode_table(table: dict[str, Any] | None) -> bytes:
    out = bytearray()
    write_table(table, out)
    return bytes(out)
