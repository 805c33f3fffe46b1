"""AMQP 1.0 primitive value types (OASIS AMQP 1.0 Part 1, §1.6).

Python's own types map onto AMQP types as proton maps them: ``None`` is null,
``bool`` boolean, ``int`` long, ``float`` double, ``str`` string, ``bytes``
binary, ``list`` list, ``dict`` map and ``uuid.UUID`` uuid.  Every other AMQP
type has a small value class here; integer classes check both bounds when
constructed, so ``ubyte(300)`` raises instead of wrapping on the wire.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

__all__ = [
    "Array",
    "Described",
    "byte",
    "char",
    "decimal32",
    "decimal64",
    "decimal128",
    "float32",
    "int32",
    "short",
    "symbol",
    "timestamp",
    "ubyte",
    "uint",
    "ulong",
    "ushort",
]


class _BoundedInt(int):
    """An int restricted to ``[MIN, MAX]``; the bounds are checked on construction."""

    __slots__ = ()
    MIN = 0
    MAX = 0

    def __new__(cls, value: int = 0) -> Any:
        self = super().__new__(cls, value)
        if not cls.MIN <= self <= cls.MAX:
            raise OverflowError(
                f"{cls.__name__}({int(value)}) is out of range: "
                f"an AMQP {cls.__name__} holds {cls.MIN}..{cls.MAX}"
            )
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"


class ubyte(_BoundedInt):
    """8-bit unsigned integer (Part 1 §1.6.3)."""

    __slots__ = ()
    MAX = 2**8 - 1


class ushort(_BoundedInt):
    """16-bit unsigned integer (Part 1 §1.6.4)."""

    __slots__ = ()
    MAX = 2**16 - 1


class uint(_BoundedInt):
    """32-bit unsigned integer (Part 1 §1.6.5)."""

    __slots__ = ()
    MAX = 2**32 - 1


class ulong(_BoundedInt):
    """64-bit unsigned integer (Part 1 §1.6.6)."""

    __slots__ = ()
    MAX = 2**64 - 1


class byte(_BoundedInt):
    """8-bit two's-complement integer (Part 1 §1.6.7)."""

    __slots__ = ()
    MIN = -(2**7)
    MAX = 2**7 - 1


class short(_BoundedInt):
    """16-bit two's-complement integer (Part 1 §1.6.8)."""

    __slots__ = ()
    MIN = -(2**15)
    MAX = 2**15 - 1


class int32(_BoundedInt):
    """32-bit two's-complement integer, AMQP ``int`` (Part 1 §1.6.9)."""

    __slots__ = ()
    MIN = -(2**31)
    MAX = 2**31 - 1


class timestamp(_BoundedInt):
    """Milliseconds since the Unix epoch, 64-bit signed (Part 1 §1.6.20)."""

    __slots__ = ()
    MIN = -(2**63)
    MAX = 2**63 - 1


class decimal32(_BoundedInt):
    """IEEE 754-2008 decimal32, kept as its raw 32 bits (Part 1 §1.6.13)."""

    __slots__ = ()
    MAX = 2**32 - 1


class decimal64(_BoundedInt):
    """IEEE 754-2008 decimal64, kept as its raw 64 bits (Part 1 §1.6.14)."""

    __slots__ = ()
    MAX = 2**64 - 1


class decimal128(bytes):
    """IEEE 754-2008 decimal128, kept as its 16 raw bytes (Part 1 §1.6.15)."""

    __slots__ = ()

    def __new__(cls, value: bytes) -> decimal128:
        if len(value) != 16:
            raise ValueError(f"decimal128 needs exactly 16 bytes, got {len(value)}")
        return super().__new__(cls, value)

    def __repr__(self) -> str:
        return f"decimal128({bytes(self)!r})"


_F32 = struct.Struct(">f")


class float32(float):
    """IEEE 754 binary32 (Part 1 §1.6.11); the value is rounded to the nearest float32."""

    __slots__ = ()

    def __new__(cls, value: float = 0.0) -> float32:
        try:
            rounded = _F32.unpack(_F32.pack(value))[0]
        except OverflowError:
            raise OverflowError(f"float32({value!r}) is out of range for an IEEE binary32") from None
        return super().__new__(cls, rounded)

    def __repr__(self) -> str:
        return f"float32({float(self)!r})"


class char(str):
    """A single Unicode code point, UTF-32BE on the wire (Part 1 §1.6.16)."""

    __slots__ = ()

    def __new__(cls, value: str) -> char:
        if len(value) != 1:
            raise ValueError(f"char needs exactly one code point, got {value!r}")
        return super().__new__(cls, value)

    def __repr__(self) -> str:
        return f"char({str(self)!r})"


class symbol(str):
    """Symbolic value from a constrained domain, ASCII only (Part 1 §1.6.21)."""

    __slots__ = ()

    def __new__(cls, value: str) -> symbol:
        if not value.isascii():
            raise ValueError(f"symbol must be ASCII, got {value!r}")
        return super().__new__(cls, value)

    def __repr__(self) -> str:
        return f"symbol({str(self)!r})"


class Described:
    """A described value with a descriptor this codec does not know (Part 1 §1.2)."""

    __slots__ = ("descriptor", "value")

    def __init__(self, descriptor: object, value: object) -> None:
        self.descriptor = descriptor
        self.value = value

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Described)
            and type(self.descriptor) is type(other.descriptor)
            and self.descriptor == other.descriptor
            and self.value == other.value
        )

    def __hash__(self) -> int:
        return hash((self.descriptor, repr(self.value)))

    def __repr__(self) -> str:
        return f"Described({self.descriptor!r}, {self.value!r})"


#: The AMQP type names an :class:`Array` may hold.
ARRAY_TYPES = frozenset(
    {
        "null", "boolean", "ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long",
        "float", "double", "decimal32", "decimal64", "decimal128", "char", "timestamp", "uuid",
        "binary", "string", "symbol", "list", "map", "array",
    }
)  # fmt: skip


class Array:
    """A homogeneous AMQP array (Part 1 §1.6.24).

    ``Array("symbol", ["a", "b"])`` holds symbols; ``Array("list", [...],
    descriptor=ulong(0x70))`` holds described values that share one descriptor.
    """

    __slots__ = ("type", "elements", "descriptor")

    def __init__(self, type: str, elements: Iterable[object] = (), descriptor: object = None) -> None:
        if type not in ARRAY_TYPES:
            raise ValueError(
                f"Array element type {type!r} is not an AMQP type; use one of {sorted(ARRAY_TYPES)}"
            )
        self.type = type
        self.elements = list(elements)
        self.descriptor = descriptor

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Array)
            and self.type == other.type
            and self.descriptor == other.descriptor
            and self.elements == other.elements
        )

    def __hash__(self) -> int:
        return hash((self.type, len(self.elements)))

    def __repr__(self) -> str:
        extra = f", descriptor={self.descriptor!r}" if self.descriptor is not None else ""
        return f"Array({self.type!r}, {self.elements!r}{extra})"
