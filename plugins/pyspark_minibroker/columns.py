"""Rows of READ_SCHEMA made straight from the bytes of received messages (an executor's hot path).

:func:`.rows.row_from_delivery` decodes a whole :class:`~minibroker.amqp.message.Message`
and reads the row off it.  :class:`Rows` gives the same values with one walk over the
message's sections (Part 3 §3.2) that builds no message:

* the body is sliced out of a ``data`` section (§3.2.6) or a string or binary
  ``amqp-value`` (§3.2.8) without decoding it to a Python value first;
* the ``x-stream-offset`` annotation (RabbitMQ 4 streams) is read from the usual
  single-entry message-annotations map (§3.2.3) by its bytes; a message of that annotation
  and one body section alone is read at once, without the section loop, and kept as its body
  (no row tuple; the batch's other columns are constants) until a message of another kind comes;
* a header (§3.2.1) or application-properties (§3.2.5) section whose bytes were seen
  before reuses the values decoded then: a producer sends the same ones again and again;
* properties (§3.2.4) and any other header or application-properties are decoded by the
  codec's own decoders and builders, as :func:`~minibroker.amqp.message.decode_message` does.

Anything else (symbolic descriptors, several body sections, a footer, a section that is
not the usual list or map, a value the walk does not slice) goes through
``decode_message`` and the reference row, so every message gets exactly the row and
the error it gets there; tests compare both on generated messages.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from typing import Any

from minibroker.amqp import codec
from minibroker.amqp.composite import generated_from_list
from minibroker.amqp.errors import AMQPDecodeError
from minibroker.amqp.message import decode_message
from minibroker.amqp.messaging import Header, Properties
from minibroker.client import stream_offset

from .rows import (
    CREATED,
    READ_FIELDS,
    app_values,
    datetime_of,
    header_values,
    message_values,
    property_values,
)

__all__ = ["Rows"]

#: Section descriptor codes (§3.2) as the walk reads them: ``00 53 code``.
_HEADER, _DELIVERY_ANNOTATIONS, _MESSAGE_ANNOTATIONS, _PROPERTIES = 0x70, 0x71, 0x72, 0x73
_APPLICATION_PROPERTIES, _DATA, _AMQP_VALUE = 0x74, 0x75, 0x77
#: The order §3.2 requires: each section's rank must rise (one body section, before a footer).
_RANK = {0x70: 0, 0x71: 1, 0x72: 2, 0x73: 3, 0x74: 4, 0x75: 5, 0x76: 5, 0x77: 5, 0x78: 6}
#: Constructors whose size follows in one byte (vbin8, str8, sym8, list8, map8) or four.
_SIZE8 = frozenset((0xA0, 0xA1, 0xA3, 0xC0, 0xC1))
_SIZE32 = frozenset((0xB0, 0xB1, 0xB3, 0xD0, 0xD1))
_LISTS = frozenset((0x45, 0xC0, 0xD0))
_MAPS = frozenset((0xC1, 0xD1))
#: A message-annotations section holding only ``x-stream-offset``, up to the offset's constructor:
#: as a smalllong (one signed byte follows) or a long (eight).
_OFFSET_SMALL = b"\x00\x53\x72\xc1\x14\x02\xa3\x0fx-stream-offset\x55"
_OFFSET_LONG = b"\x00\x53\x72\xc1\x1b\x02\xa3\x0fx-stream-offset\x81"
#: Decoded sections kept by their bytes, per :class:`Rows`: at most this many (past it the cache
#: starts again), each at most this long (a larger one is decoded every time), so a task holds at
#: most 256 KiB of them whatever the messages.
_CACHED = 256
_LARGEST_CACHED = 1024

_DECODERS = codec._DECODERS
_NO_PROPERTIES = property_values(Properties())
_NO_HEADER = header_values(Header())
#: The rest of the row of a message with a body alone (no properties, header or application-properties).
_BODY_ALONE = (*_NO_PROPERTIES, *_NO_HEADER, None, None)
#: The constructors of a body's value the walk slices (binary; strings, in an amqp-value).
_BINARY = frozenset((0xA0, 0xB0))
_STRING = frozenset((0xA1, 0xB1))


_MISSING = object()


class _Unusual(Exception):
    """The walk met something it leaves to ``decode_message``."""


class Rows:
    """READ_SCHEMA rows of messages added one at a time; :meth:`arrow` hands them to Spark."""

    #: What a stream reader filling these rows asks the broker for in its attach (none: only the
    #: position columns need more, :class:`.positions.PositionRows`).
    DESIRED_CAPABILITIES: tuple[str, ...] = ()

    __slots__ = (
        "_bodies", "_rows", "next", "taken_bytes", "_end", "_address", "_sections", "_build_header",
        "_build_properties",
    )  # fmt: skip

    def __init__(self) -> None:
        # The rows in order: first those of messages with a body alone, as that body (nearly every
        # row of a stream; no tuple each), then one tuple per message once any other came.
        self._bodies: list[bytes] = []
        self._rows: list[tuple[Any, ...]] = []
        #: Reading a stream range (:meth:`read_stream`, :meth:`take`): the offset reading goes on
        #: from, the bytes of the messages taken, the range's end and the stream's address.
        self.next = self.taken_bytes = self._end = 0
        self._address = ""
        self._sections: dict[bytes, Any] = {}
        self._build_header = generated_from_list(Header)
        self._build_properties = generated_from_list(Properties)

    def __len__(self) -> int:
        return len(self._bodies) + len(self._rows)

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        """One tuple per message: the row, with ``creation_time`` in milliseconds since the epoch."""
        return [(body, *_BODY_ALONE) for body in self._bodies] + self._rows

    def clear(self) -> None:
        """Forget the rows (the decoded sections stay, for the next messages)."""
        self._bodies = []
        self._rows = []

    def _add_body(self, body: bytes) -> None:
        """Add the row of a message with a body alone: as its body while no other row came."""
        if self._rows:
            self._rows.append((body, *_BODY_ALONE))
        else:
            self._bodies.append(body)

    def add(self, payload: bytes) -> int | None:
        """Add the row of the message ``payload`` and return its ``x-stream-offset`` (None without one).

        Raises what ``decode_message`` raises for a message it refuses.
        """
        alone = _body_alone(payload)
        if alone is not None:
            self._add_body(alone[1])
            return alone[0]
        try:
            offset, row = self._walk(payload)
        except _LEFT_TO_DECODE:
            offset, row = _reference_row(payload)
        self._rows.append(row)
        return offset

    def read_stream(self, address: str, position: int, end: int) -> None:
        """Take the messages of the stream ``address`` from ``position`` on, up to the first at
        ``end`` or past it (a range's end), with :meth:`take`; :attr:`next` is then where reading
        goes on from: after the last message added, or that first one past the range, and
        :attr:`taken_bytes` counts the bytes of the messages taken."""
        self._address, self.next, self._end = address, position, end
        self.taken_bytes = 0

    def take(self, delivery_id: int, settled: bool, payload: bytes) -> None:
        """Add the row of a message of the stream :meth:`read_stream` named, unless it is at the
        range's end or past it (a ``DeliverySink`` for ``Receiver.fetch_into``: messages in offset
        order, no :class:`~minibroker.client.Delivery` made for them).

        What :meth:`add` does.  A message without ``x-stream-offset`` raises ``ValueError`` (the
        address is no stream); one ``decode_message`` refuses raises its error.
        """
        end = self._end
        self.taken_bytes += len(payload)
        if self.next >= end:
            return  # one at the end or past it came: the rest are past it too
        alone = _body_alone(payload)
        if alone is not None:  # the usual stream message, read in place (_add_body inlined: the hot path)
            at, body = alone
            if at >= end:
                self.next = at
            elif self._rows:
                self._rows.append((body, *_BODY_ALONE))
                self.next = at + 1
            else:
                self._bodies.append(body)
                self.next = at + 1
            return
        try:
            offset, row = self._walk(payload)
        except _LEFT_TO_DECODE:
            offset, row = _reference_row(payload)
        if offset is None:
            raise ValueError(f"{self._address!r} sent a message without x-stream-offset: is it a stream?")
        if offset >= end:
            self.next = offset
            return
        self._rows.append(row)
        self.next = offset + 1

    def arrow(self, schema: Any, columns: tuple[int, ...] | None = None) -> Any:
        """The rows as one ``pyarrow.RecordBatch`` of ``schema``: READ_SCHEMA's columns, or those at
        ``columns`` (:func:`.rows.projection`) for a schema of some of them.

        ``schema`` is the Arrow form of the read schema as Spark makes it
        (``pyspark.sql.pandas.types.to_arrow_schema(schema, timezone="UTC")``).  The values are
        those of :func:`.rows.row_from_delivery` after Spark's own conversion of a row for Arrow
        (``LocalDataToArrowConversion``: a timestamp as UTC, a map as its items), so the batch is
        the one Spark would build from the rows, without a Python call per value to get there.
        """
        if self._rows:
            return _record_batch(self.rows, schema, columns)
        return _bodies_batch(self._bodies, schema, columns)

    def _remembered(self, p: bytes, pos: int, stop: int, convert: Callable[[Any], Any]) -> Any:
        """``convert`` of the section at ``p[pos:stop]``'s value, kept by the section's bytes when it
        is small (see :data:`_CACHED`)."""
        if stop - pos > _LARGEST_CACHED:
            return convert(_section_value(p, pos, stop))
        sections = self._sections
        key = p[pos:stop]
        found = sections.get(key, _MISSING)
        if found is _MISSING:
            if len(sections) >= _CACHED:
                sections.clear()
            found = sections[key] = convert(_section_value(p, pos, stop))
        return found

    def _header_values(self, value: Any) -> tuple[int, bool, int]:
        return header_values(self._build_header(value))

    def _walk(self, p: bytes) -> tuple[int | None, tuple[Any, ...]]:
        """One pass over ``00 53 code`` sections in rising §3.2 rank (see the module docstring;
        the callers take a message of the stream's annotation and a body alone first)."""
        end = len(p)
        pos = 0
        last = -1
        header, properties, created = _NO_HEADER, _NO_PROPERTIES, None
        app: dict[str, Any] | None = None
        body: bytes | None = None
        offset: int | None = None
        while pos < end:
            if last < 2 and p.startswith(_OFFSET_LONG, pos) and end - pos >= 32:
                # The annotations a stream sends with nearly every message (the offset as a long),
                # recognised whole before the general reading of a section.
                offset = int.from_bytes(p[pos + 24 : pos + 32], signed=True)
                last = 2
                pos += 32
                continue
            if pos + 4 >= end or p[pos] or p[pos + 1] != 0x53:
                raise _Unusual
            code = p[pos + 2]
            rank = _RANK.get(code, 7)
            if rank <= last or rank > 5:
                raise _Unusual  # out of order, a second body, a footer, an unknown descriptor
            last = rank
            constructor = p[pos + 3]
            if constructor in _SIZE8:
                start = pos + 5
                stop = start + p[pos + 4]
            elif constructor in _SIZE32:
                start = pos + 8
                stop = start + int.from_bytes(p[pos + 4 : start])
            elif constructor == 0x45:
                start = stop = pos + 4
            else:
                raise _Unusual
            if stop > end:
                raise _Unusual
            if code == _MESSAGE_ANNOTATIONS:
                if stop - pos == 25 and p.startswith(_OFFSET_SMALL, pos):
                    offset = p[pos + 24]
                    if offset > 127:
                        offset -= 256
                elif stop - pos == 32 and p.startswith(_OFFSET_LONG, pos):
                    offset = int.from_bytes(p[pos + 24 : stop], signed=True)
                else:
                    offset = self._annotated_offset(p, pos, constructor, stop)
            elif code == _DATA or code == _AMQP_VALUE:
                body = p[start:stop]
                if constructor == 0xA1 or constructor == 0xB1:
                    if code == _DATA:
                        raise _Unusual  # a data section holds binary: decode_message says what is wrong
                    if not body.isascii():  # ASCII is UTF-8 (checked without making the string)
                        body.decode()  # a string body's row is its UTF-8; invalid UTF-8 is decode_message's to refuse
                elif constructor != 0xA0 and constructor != 0xB0:
                    raise _Unusual
            elif code == _PROPERTIES:
                if constructor not in _LISTS:
                    raise _Unusual
                try:
                    properties, created = _properties_row(p, start, stop, constructor)
                except (_Unusual, ValueError, IndexError):  # another encoding: the codec's reading
                    built = self._build_properties(_section_value(p, pos, stop))
                    properties = property_values(built)
                    created = None if built.creation_time is None else int(built.creation_time)
            elif code == _HEADER:
                if constructor not in _LISTS:
                    raise _Unusual
                header = self._remembered(p, pos, stop, self._header_values)
            elif code == _APPLICATION_PROPERTIES:
                if constructor not in _MAPS:
                    raise _Unusual
                app = self._remembered(p, pos, stop, app_values)
            elif code == _DELIVERY_ANNOTATIONS:
                _section_value(p, pos, stop)  # decoded as decode_message would, then not part of a row
            else:
                raise _Unusual  # an amqp-sequence body
            pos = stop
        return offset, (body, *properties, *header, created, app)

    @staticmethod
    def _annotated_offset(p: bytes, pos: int, constructor: int, stop: int) -> int | None:
        if constructor not in _MAPS:
            raise _Unusual
        value = _section_value(p, pos, stop).get("x-stream-offset")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def _body_alone(p: bytes) -> tuple[int, bytes] | None:
    """The offset and body of a message ``p`` of the stream's annotation (the offset as a long,
    :data:`_OFFSET_LONG`) followed by one data or string/binary amqp-value section and nothing
    else; None for any other message, and for a string that is not UTF-8 (the walk then leaves it
    to ``decode_message``, whose error it gets).  Nearly every message of a stream: read with one
    ``unpack`` of the offset and the section's first bytes."""
    end = len(p)
    if end <= 37 or not p.startswith(_OFFSET_LONG):
        return None
    offset, described, code, constructor = _ALONE.unpack_from(p, 24)
    if described != 0x0053:  # 00 53: a section's descriptor
        return None
    if constructor == 0xB1 or constructor == 0xB0:  # str32, vbin32
        start = 40
        if end < start or start + _UINT32.unpack_from(p, 36)[0] != end:
            return None
    elif constructor == 0xA1 or constructor == 0xA0:  # str8, vbin8
        start = 37
        if start + p[36] != end:
            return None
    else:
        return None
    body = p[start:]
    if constructor & 1:  # a string: only an amqp-value holds one
        if code != _AMQP_VALUE:
            return None
        if not body.isascii():  # ASCII is UTF-8 (checked without making the string)
            try:
                body.decode()
            except UnicodeDecodeError:
                return None
    elif code != _DATA and code != _AMQP_VALUE:
        return None
    return offset, body


#: What follows the annotation's key in :data:`_OFFSET_LONG`: the offset, then a section's
#: descriptor (``00 53``), its code and its value's constructor.
_ALONE = struct.Struct(">qHBB")
_UINT32 = struct.Struct(">I")
_SYMBOL = frozenset((0xA3, 0xB3))
_TIMESTAMP = 0x83
_ANY_TEXT = _STRING | _SYMBOL | _BINARY
#: The encodings read here for each properties field (§3.2.4), by the field's type: ``*`` (the
#: ids and addresses) as string, symbol or binary; string, symbol, binary and timestamp fields
#: as themselves; group-sequence (a uint) never.  Anything else is the codec's to read or refuse.
_PROPERTY_ENCODINGS: tuple[frozenset[int], ...] = (
    _ANY_TEXT, _BINARY, _ANY_TEXT, _STRING, _ANY_TEXT, _ANY_TEXT, _SYMBOL, _SYMBOL,
    frozenset((_TIMESTAMP,)), frozenset((_TIMESTAMP,)), _STRING, frozenset(), _STRING,
)  # fmt: skip
_CREATION_TIME = 9


def _properties_row(p: bytes, start: int, stop: int, constructor: int) -> tuple[tuple[Any, ...], int | None]:
    """:func:`.rows.property_values` and the creation-time (ms) of the properties list whose body
    is ``p[start:stop]``, read field by field where each is null or in the encoding
    :data:`_PROPERTY_ENCODINGS` allows it.  Anything else (another encoding, more fields than
    §3.2.4 has, a list that does not end at ``stop``) raises ``_Unusual``, bad UTF-8 or ASCII
    ``ValueError``: the caller then decodes the section with the codec, which gives the same
    values or says what is wrong."""
    if constructor == 0x45:
        return _NO_PROPERTIES, None
    if constructor == 0xC0:
        count, at = p[start], start + 1
    else:  # list32
        count, at = int.from_bytes(p[start : start + 4]), start + 4
    if count > len(_PROPERTY_ENCODINGS):
        raise _Unusual
    values: list[Any] = [None] * len(_PROPERTY_ENCODINGS)
    created: int | None = None
    for field in range(count):
        code = p[at]
        if code == 0x40:  # null
            at += 1
            continue
        if code not in _PROPERTY_ENCODINGS[field]:
            raise _Unusual
        if code == _TIMESTAMP:  # milliseconds since the epoch, signed
            if field == _CREATION_TIME:
                created = int.from_bytes(p[at + 1 : at + 9], signed=True)
            at += 9
            continue
        if code < 0xB0:
            first = at + 2
            after = first + p[at + 1]
        else:
            first = at + 5
            after = first + int.from_bytes(p[at + 1 : first])
        raw = p[first:after]  # past stop when the size runs on: then at != stop below
        if code in _BINARY:
            values[field] = raw.hex()  # the ids and addresses as text (user-id's is not in the row)
        else:
            values[field] = raw.decode("utf-8" if code in _STRING else "ascii")
        at = after
    if at != stop:
        raise _Unusual
    return (values[0], values[5], values[3], values[2], values[4], values[6], values[10]), created


#: What the walk raises for a message it leaves to ``decode_message`` (which then gives the row or the error).
_LEFT_TO_DECODE = (_Unusual, AMQPDecodeError, IndexError, ValueError, TypeError)


def _reference_row(payload: bytes) -> tuple[int | None, tuple[Any, ...]]:
    """The offset and row of the decoded message (raises what ``decode_message`` raises)."""
    message = decode_message(payload)
    return stream_offset(message), message_values(message)


def _section_value(p: bytes, pos: int, stop: int) -> Any:
    """The value of the section at ``p[pos:stop]``, decoded as decode_message decodes it."""
    value, after = _DECODERS[p[pos + 3]](p, pos + 4, 1)
    if after != stop:
        raise _Unusual
    return value


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# Microseconds since the epoch of datetime.min and datetime.max (UTC): a creation-time outside
# them is no datetime, and is refused as row_from_delivery refuses it.
_MIN_US = (dt.datetime.min.replace(tzinfo=dt.UTC) - _EPOCH) // dt.timedelta(microseconds=1)
_MAX_US = (dt.datetime.max.replace(tzinfo=dt.UTC) - _EPOCH) // dt.timedelta(microseconds=1)


def _record_batch(rows: list[tuple[Any, ...]], schema: Any, picked: tuple[int, ...] | None) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]  # no stubs

    if not rows:
        return pa.RecordBatch.from_pylist([], schema=schema)
    columns = list(zip(*rows, strict=True))
    arrays: list[Any] = []
    count = len(rows)
    for at in range(len(columns)) if picked is None else picked:
        column: Any = columns[at]
        first = column[0]
        if column.count(first) == count and (first is None or at < CREATED):
            # One value all along (a column of a section no message had, or the same header):
            # one Arrow value repeated, not a conversion per row.
            kind = schema.field(len(arrays)).type
            arrays.append(pa.nulls(count, kind) if first is None else pa.repeat(pa.scalar(first, kind), count))
            continue
        if at == CREATED:
            column = [None if ms is None else _microseconds(ms) for ms in column]
        elif at == _APPLICATION_PROPERTIES_COLUMN:
            column = [None if app is None else list(app.items()) for app in column]
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _bodies_batch(bodies: list[bytes], schema: Any, picked: tuple[int, ...] | None) -> Any:
    """What :func:`_record_batch` makes of rows of a body alone each (every other column the
    value :data:`_BODY_ALONE` gives it), without the rows."""
    import pyarrow as pa

    arrays: list[Any] = []
    count = len(bodies)
    for at in range(len(READ_FIELDS)) if picked is None else picked:
        kind = schema.field(len(arrays)).type
        value = _BODY_ALONE[at - 1] if at else None
        if at == 0:
            arrays.append(bodies)
        else:
            arrays.append(pa.nulls(count, kind) if value is None else pa.repeat(pa.scalar(value, kind), count))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _microseconds(ms: int) -> int:
    us = ms * 1000
    if not _MIN_US <= us <= _MAX_US:
        datetime_of(ms)  # raises the OverflowError the row would
    return us


#: Where application_properties is in a row (the last column).
_APPLICATION_PROPERTIES_COLUMN = CREATED + 1
