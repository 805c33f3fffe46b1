"""Declaring AMQP composite and restricted described types once (Part 1 §1.4, §3.2).

``@composite(0x10, "amqp:open:list")`` turns a class whose attributes are
declared with :func:`field` into a slotted dataclass that encodes as a
described list and registers its descriptor with the decoder.  Trailing fields
that are null or hold their default are omitted on encode, and missing
trailing fields are padded with defaults on decode (Part 1 §1.4).

``@composite(..., full=True)`` encodes every field instead, the trailing ones
as they are (null where unset).  Part 1 §1.4 makes the two encodings mean the
same; the transport performatives use it because Azure's services send every
field and a widely used SDK (azure-eventhub 5.x's pyamqp) reads the fields
of ``open``, ``begin``, ``attach``, ``transfer``, ``detach``, ``end`` and ``close`` by
position without padding a shorter list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, dataclass_transform

from ..records import record
from . import codec
from .errors import AMQPDecodeError
from .types import Array, symbol, timestamp, ubyte, uint, ulong, ushort

__all__ = ["composite", "described_value", "field", "Composite", "DescribedValue"]

Encoder = Callable[[Any, bytearray], None]

#: Wire types a field can be declared with, and how a Python value is written as one.
FIELD_ENCODERS: dict[str, Encoder] = {
    "*": codec.encode_into,
    "boolean": lambda v, out: out.append(0x41 if v else 0x42),
    "ubyte": codec.enc_ubyte,
    "ushort": codec.enc_ushort,
    "uint": codec.enc_uint,
    "ulong": codec.enc_ulong,
    "timestamp": codec.enc_timestamp,
    "binary": codec.enc_binary,
    "string": codec.enc_string,
    "symbol": codec.enc_symbol,
    "symbol*": codec.enc_symbol_array,
    "fields": codec.enc_symbol_map,
    "map": codec.enc_map,
    "list": codec.enc_list,
}


#: The Python type a decoded field of each wire type must have (checked on decode).
FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "*": object,
    "boolean": bool,
    "ubyte": int,
    "ushort": int,
    "uint": int,
    "ulong": int,
    "timestamp": int,
    "binary": bytes,
    "string": str,
    "symbol": str,
    "symbol*": list,
    "fields": dict,
    "map": dict,
    "list": list,
}


#: The exact type the decoder gives a value of each wire type, where that type alone passes the
#: field's checks (an unsigned type is bounded by its own width): the common case checked first.
DECODED_TYPES: dict[str, type] = {
    "boolean": bool, "ubyte": ubyte, "ushort": ushort, "uint": uint, "ulong": ulong, "timestamp": timestamp,
    "binary": bytes, "string": str, "symbol": symbol, "fields": dict, "map": dict, "list": list,
}  # fmt: skip


#: Unsigned wire types and their largest value (a peer may send another integer encoding).
UNSIGNED_MAX: dict[str, int] = {"ubyte": 2**8 - 1, "ushort": 2**16 - 1, "uint": 2**32 - 1, "ulong": 2**64 - 1}


def field(wire_type: str, default: Any = None, *, mandatory: bool = False) -> Any:
    """Declare one field of a composite with its AMQP wire type (a key of FIELD_ENCODERS)."""
    if wire_type not in FIELD_ENCODERS:
        raise ValueError(f"unknown wire type {wire_type!r}; use one of {sorted(FIELD_ENCODERS)}")
    return dataclasses.field(default=default, metadata={"amqp": wire_type, "mandatory": mandatory})


class Composite:
    """Base of every declared composite type; see :func:`composite`."""

    __slots__ = ()
    DESCRIPTOR: ClassVar[ulong]
    DESCRIPTOR_NAME: ClassVar[symbol]

    def encode_into(self, out: bytearray) -> None:  # replaced by @composite
        raise NotImplementedError

    def described_body(self) -> list[Any]:  # replaced by @composite
        raise NotImplementedError


class DescribedValue:
    """Base of restricted types that are a descriptor plus one value (e.g. ``data``)."""

    __slots__ = ("value",)
    DESCRIPTOR: ClassVar[ulong]
    DESCRIPTOR_NAME: ClassVar[symbol]
    _PREFIX: ClassVar[bytes]
    _ENCODE: ClassVar[Encoder]

    def __init__(self, value: Any) -> None:
        self.value = value

    def encode_into(self, out: bytearray) -> None:
        out += self._PREFIX
        type(self)._ENCODE(self.value, out)

    def described_body(self) -> Any:
        return self.value

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.value == self.value

    def __hash__(self) -> int:
        return hash((type(self), repr(self.value)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"


def _prefix(code: int) -> bytes:
    out = bytearray(b"\x00")
    codec.enc_ulong(code, out)
    return bytes(out)


def _register(cls: type, code: int, name: str, build: Callable[[Any], object]) -> None:
    for key in (ulong(code), symbol(name)):
        if key in codec.DESCRIBED_TYPES:
            raise ValueError(f"descriptor {key!r} is declared twice")
        codec.DESCRIBED_TYPES[key] = build
    if code < 256:
        codec.SMALL_CODES[code] = build


def _from_list_function(cls: type, name: str, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[[Any], Any]:
    """The decoder's builder of ``cls`` from its described list (Part 1 §1.4), as straight-line code.

    Generated once per composite (as :mod:`dataclasses` generates ``__init__``) because it runs
    for every performative and message section decoded: one local per field instead of loops
    over the fields.  In order: missing trailing fields take their defaults (extra ones, from a
    later version of the spec, are dropped), a ``symbol*`` field's single symbol becomes a
    one-item list and its array the array's elements, then every mandatory field is checked,
    then each field's type (and an unsigned field's range, a ``symbol*`` field's items).
    """
    count = len(fields)
    env: dict[str, Any] = {
        "cls": cls, "AMQPDecodeError": AMQPDecodeError, "Array": Array, "PAD": [[None] * i for i in range(count + 1)],
    }  # fmt: skip
    names = [f"f{i}" for i in range(count)]
    lines = [
        "def from_list(values):",
        "    if type(values) is not list:",
        f"        raise AMQPDecodeError({name!r} + ' must be a described list, got ' + type(values).__name__)",
        "    given = len(values)",
        f"    if given < {count}:",
        f"        values = values + PAD[{count} - given]",
        f"    elif given > {count}:",
        f"        values = values[:{count}]",
    ]
    if count:
        lines.append(f"    {', '.join(names)}, = values")
    checks: list[str] = []
    for i, f in enumerate(fields):
        var, wire = names[i], f.metadata["amqp"]
        if f.default is not None:
            env[f"D{i}"] = f.default
            lines += [f"    if {var} is None:", f"        {var} = D{i}"]
        if wire == "symbol*":
            lines += [f"    {'el' if f.default is not None else ''}if {var} is not None:",
                      f"        {var} = {var}.elements if type({var}) is Array else [{var}]"]  # fmt: skip
        if f.metadata["mandatory"]:
            lines += [f"    if {var} is None:",
                      f"        raise AMQPDecodeError({f'{name}: mandatory field {f.name!r} is null or missing'!r})"]  # fmt: skip
        if wire == "*":
            continue
        env[f"T{i}"] = FIELD_TYPES[wire]
        prefix = f"{name}: field {f.name!r} must be a {wire}, got "
        exact = DECODED_TYPES.get(wire)
        if exact is not None:
            # The type the decoder gives this wire type passes every check below (its width bounds it).
            env[f"E{i}"] = exact
        checks += [
            f"    if {var} is not None{f' and type({var}) is not E{i}' if exact is not None else ''}:",
            f"        if not isinstance({var}, T{i}):",
            f"            raise AMQPDecodeError(f{prefix + '{type(' + var + ').__name__} {' + var + '!r:.40}'!r})",
        ]
        limit = UNSIGNED_MAX.get(wire)
        if limit is not None:
            checks += [
                f"        if isinstance({var}, int) and not 0 <= {var} <= {limit}:",
                f"            raise AMQPDecodeError(f{prefix + '{' + var + '}'!r})",
            ]
        if wire == "symbol*":
            checks += [
                f"        if isinstance({var}, list) and not all(isinstance(item, str) for item in {var}):",
                f"            raise AMQPDecodeError(f{f'{name}: field {f.name!r} must hold symbols, got ' + '{' + var + '!r:.60}'!r})",
            ]
    lines += checks
    lines.append(f"    return cls({', '.join(names)})")
    exec("\n".join(lines), env)  # noqa: S102 - our own declarations, not input
    function: Callable[[Any], Any] = env["from_list"]
    return function


def _first_use(cls: Any, code: int, name: str) -> Callable[[Any], Any]:
    """A stand-in ``from_list`` for ``cls`` that generates the real one when first called.

    Generating and compiling every composite's builder at import made importing the
    ``amqp`` package about a quarter dearer, and a test run decodes only a few of them
    (issue #33).  The first call installs the generated function everywhere the stand-in
    was put (the class and the decoder's registries), so later decodes call it directly.
    """

    def from_list(values: Any) -> Any:
        return generated_from_list(cls)(values)

    cls._AMQP_CODE_NAME = (code, name)
    return from_list


def generated_from_list(cls: Any) -> Callable[[Any], Any]:
    """The generated builder of composite ``cls``, generated and installed on first request.

    For modules that keep a builder in a global for their hot path (as :mod:`.message` does):
    they get the generated function itself, with no stand-in left between.
    """
    function: Callable[[Any], Any] | None = cls.__dict__.get("_AMQP_FROM_LIST")
    if function is None:
        code, name = cls._AMQP_CODE_NAME
        # Two threads may both get here: each generates an equal function, the last one stays.
        function = _from_list_function(cls, name, dataclasses.fields(cls))
        cls._AMQP_FROM_LIST = function
        cls.from_list = staticmethod(function)
        codec.DESCRIBED_TYPES[ulong(code)] = codec.DESCRIBED_TYPES[symbol(name)] = function
        if code < 256:
            codec.SMALL_CODES[code] = function
    return function


T = TypeVar("T")


@dataclass_transform(field_specifiers=(field,))
def composite(code: int, name: str, *, full: bool = False) -> Callable[[type[T]], type[T]]:
    """Class decorator: declare a composite type encoded as a described list (every field if ``full``)."""

    def wrap(cls: type[T]) -> type[T]:
        data_cls: Any = record(slots=True)(cls)
        fields = dataclasses.fields(data_cls)
        names = tuple(f.name for f in fields)
        defaults = tuple(f.default for f in fields)
        encoders = tuple(FIELD_ENCODERS[f.metadata["amqp"]] for f in fields)
        prefix = _prefix(code)
        count = len(names)

        def described_body(self: Any) -> list[Any]:
            return [getattr(self, n) for n in names]

        def encode_into(self: Any, out: bytearray) -> None:
            values = [getattr(self, n) for n in names]
            n = count
            while n and not full and (values[n - 1] is None or values[n - 1] == defaults[n - 1]):
                n -= 1
            out += prefix
            if n == 0:
                out.append(0x45)
                return
            body = bytearray()
            for i in range(n):
                value = values[i]
                if value is None:
                    body.append(0x40)
                else:
                    encoders[i](value, body)
            codec._compound(0xC0, 0xD0, n, body, out)

        from_list = _first_use(data_cls, code, name)
        data_cls.DESCRIPTOR = ulong(code)
        data_cls.DESCRIPTOR_NAME = symbol(name)
        data_cls.encode_into = encode_into
        data_cls.described_body = described_body
        data_cls.from_list = staticmethod(from_list)
        _register(data_cls, code, name, from_list)
        return data_cls  # type: ignore[no-any-return]

    return wrap


D = TypeVar("D", bound=DescribedValue)


def described_value(code: int, name: str, wire_type: str) -> Callable[[type[D]], type[D]]:
    """Class decorator: declare a restricted type that is a descriptor and one value."""

    def wrap(cls: type[D]) -> type[D]:
        encode_value = FIELD_ENCODERS[wire_type]
        cls.DESCRIPTOR = ulong(code)
        cls.DESCRIPTOR_NAME = symbol(name)
        cls._PREFIX = _prefix(code)
        cls._ENCODE = staticmethod(encode_value)
        _register(cls, code, name, cls)
        return cls

    return wrap
