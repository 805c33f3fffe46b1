"""Messages as the broker keeps them: the received bytes, decoded only on demand.

The bare message (properties, application-properties, body) is kept byte for
byte (Part 3 §3.2: immutable once sent).  Only the header is decoded on
arrival, for priority, TTL and delivery-count; the header and
message-annotations are re-encoded only when the broker has changed them
(redelivery, ``modified`` annotations, dead-lettering).
"""

from __future__ import annotations

import struct
from typing import Any, Protocol

from ..amqp import codec
from ..amqp.errors import AMQPDecodeError
from ..amqp.message import Message, Sections, decode_message, split_sections
from ..amqp.messaging import Header, MessageAnnotations, Properties

__all__ = ["StoredMessage", "Origin", "OriginMessage", "Entry", "AVAILABLE", "ACQUIRED", "ARCHIVED", "MAX_HEADER_SIZE", "clear_header_cache"]

# Message states (Part 3 §3.3, figure 3.2)
AVAILABLE = 0
ACQUIRED = 1
ARCHIVED = 2

_HEADER_PREFIX = b"\x00\x53\x70"
_PROPERTIES_PREFIX = b"\x00\x53\x73"
_APPLICATION_PROPERTIES_PREFIX = b"\x00\x53\x74"
_DATA_PREFIX = b"\x00\x53\x75"
_AMQP_VALUE_PREFIX = b"\x00\x53\x77"
#: A lazily decoded section not decoded yet (None means the message has no such section).
_UNDECODED = object()
_NOTHING_DECODED = (_UNDECODED, _UNDECODED)
#: Properties not decoded yet, and no application-properties section (seen while placing the
#: sections): its property answers None without looking for the section again.
_NO_APPLICATION_PROPERTIES = (_UNDECODED, None)
#: The same, for a message whose properties are none or plain (:func:`_plain_fields`), seen
#: while placing the sections: nothing left for ``check_sections``, and no absolute-expiry-time
#: (plain properties with one are a :class:`_PlainExpiring`).  A tuple of its own: told apart by identity.
_PLAIN = (_UNDECODED, None)
#: A uint (a str32's or vbin32's size).
_U32 = struct.Struct(">I").unpack_from


#: The largest header section taken (Part 3 §3.2.1).  Its five fields are scalars (boolean,
#: ubyte, uint, boolean, uint): about 20 bytes in the usual encoding, under 64 in the widest one
#: (list32, ulong descriptor, every field at full width).  Checking the size before decoding keeps
#: a peer's "header" of megabytes of symbols from costing any decoding work.
MAX_HEADER_SIZE = 256
#: Decoded headers by their bytes: a producer's messages usually share one header
#: encoding, and Header objects are never changed once decoded.  Only headers up to
#: MAX_HEADER_SIZE are ever decoded, so the cache holds at most _HEADERS_MAX * 256 bytes of keys;
#: ``clear_header_cache`` empties it (``Broker.reset``, the server's ``stop``).
_HEADERS: dict[bytes, Header] = {}
_HEADERS_MAX = 1024


def clear_header_cache() -> None:
    """Forget every cached header (nothing refers to the cache but new messages)."""
    _HEADERS.clear()


def _header(data: bytes) -> Header:
    header = _HEADERS.get(data)
    if header is None:
        if len(data) > MAX_HEADER_SIZE:
            raise AMQPDecodeError(
                f"header section of {len(data)} bytes; its five fields take at most {MAX_HEADER_SIZE} (Part 3 §3.2.1)"
            )
        header = codec.decode(data)
        if not isinstance(header, Header):
            raise AMQPDecodeError(f"expected a header section, got {type(header).__name__}")
        if len(_HEADERS) >= _HEADERS_MAX:
            _HEADERS.clear()
        _HEADERS[data] = header
    return header


def _simple_layout(payload: bytes) -> tuple[int, bool, int | None] | None:
    """Where the header ends, whether an application-properties section follows, and whether the
    message is known to pass :meth:`StoredMessage.check_sections` with nothing to decode (no
    application-properties, and no properties or plain ones, :func:`_plain_fields`): False if
    not, else its absolute-expiry-time (None when it has none), when ``payload`` is the usual
    message; None for split_sections to judge.

    The usual message: an optional header, then the bare message of optional properties and
    application-properties and one amqp-value or data body section, and nothing after it
    (no annotations, footer or more body sections).  Each section is the ``00 53 code``
    form and is skipped as split_sections skips it, so whatever this accepts, split_sections
    accepts with the same offsets; anything else, malformed included, goes to split_sections.
    Each section's first three bytes are read as one slice (a slice and compares cost less
    than a ``startswith`` each: this runs for every message a client sends).
    """
    try:
        head = payload[:3]
        if head == _HEADER_PREFIX:
            pos = header_end = codec.skip_at(payload, 3)
            head = payload[pos : pos + 3]
        else:
            pos = header_end = 0
        fields = -1  # where the properties' list8 fields start, when they are to be walked
        plain: int | None = None  # plain, with no absolute-expiry-time, until found otherwise
        if head == _PROPERTIES_PREFIX:
            code = payload[pos + 3]
            if code == 0xC0:  # the properties' list8, read here as skip_at reads it (one call less)
                fields, pos = pos + 6, pos + 5 + payload[pos + 4]
            elif code == 0x45:  # the empty list: every field null (what the C client sends)
                pos += 4
            else:
                plain = False
                pos = codec.skip_at(payload, pos + 3)
            head = payload[pos : pos + 3]
        application = head == _APPLICATION_PROPERTIES_PREFIX
        if application:
            pos = codec.skip_at(payload, pos + 3)
            head = payload[pos : pos + 3]
        if head == _AMQP_VALUE_PREFIX or head == _DATA_PREFIX:
            # The body's one value, its size read here for the usual string and binary encodings
            # (what skip_at does with them); one that runs past the payload does not end at its end.
            code = payload[pos + 3]
            if code == 0xB1 or code == 0xB0:
                end = pos + 8 + _U32(payload, pos + 4)[0]
            elif code == 0xA1 or code == 0xA0:
                end = pos + 5 + payload[pos + 4]
            else:
                end = codec.skip_at(payload, pos + 3)
            if end == len(payload):
                if application:
                    plain = False
                elif fields >= 0:  # the list ends inside the payload: the body follows it
                    plain = _plain_fields(payload, fields, fields - 1 + payload[fields - 2], payload[fields - 1])
                return header_end, application, plain
    except (AMQPDecodeError, IndexError, struct.error):
        pass
    return None


class _Field(bytes):
    """What a properties field (Part 3 §3.2.4) takes as it is: its 8-bit-size encodings (the bytes:
    str8-utf8 0xa1 where the field is a string or any type, sym8 0xa3, ASCII, where it is a symbol,
    a string or any type, vbin8 0xa0 where it is binary or any type), and :attr:`fixed`, a table
    by code of its fixed-width ones: 1 + the value's width, 0 where it takes none (_EXPIRY: the
    absolute-expiry-time's timestamp, whose value is kept).  Null (0x40) is taken everywhere.

    A bytes, tested with ``in`` as the strings the usual client sends are, the table read only
    for the rest (the walk's cost per field stays that of a string)."""

    fixed: bytes

    @classmethod
    def of(cls, sized: bytes, **fixed: int) -> _Field:
        """The field of 8-bit-size codes ``sized`` and fixed-width codes ``fixed`` (``x80=9``)."""
        field = cls(sized)
        table = bytearray(256)
        for name, width in fixed.items():
            table[int(name[1:], 16)] = width
        field.fixed = bytes(table)
        return field


_EXPIRY = 255
#: The fields in order: the message-id and correlation-id also as a ulong (0x80, smallulong 0x53,
#: ulong0 0x44) or uuid (0x98), the times as timestamps (0x83), the group-sequence as a uint (0x70,
#: smalluint 0x52, uint0 0x43).  What :func:`_plain_fields` accepts without decoding, a field at a time.
_ANY, _STRING = b"\xa0\xa1\xa3", b"\xa1\xa3"
_PLAIN_FIELDS = (
    _Field.of(_ANY, x80=9, x53=2, x44=1, x98=17), _Field.of(b"\xa0"),  # message-id, user-id
    _Field.of(_ANY), _Field.of(_STRING), _Field.of(_ANY),  # to, subject, reply-to
    _Field.of(_ANY, x80=9, x53=2, x44=1, x98=17),  # correlation-id
    _Field.of(b"\xa3"), _Field.of(b"\xa3"),  # content-type, content-encoding
    _Field.of(b"", x83=_EXPIRY), _Field.of(b"", x83=9),  # absolute-expiry-time, creation-time
    _Field.of(_STRING), _Field.of(b"", x70=5, x52=2, x43=1), _Field.of(_STRING),  # group-id, group-sequence, reply-to-group-id
)  # fmt: skip


def _plain_properties(payload: bytes, start: int) -> bool:
    """Whether the properties section at ``payload[start]`` (its ``00 53 73`` prefix) surely decodes,
    found without decoding it: a list8 (or the empty list) whose fields are each null, an 8-bit-size
    string, symbol or binary, or a fixed-width value of a type the field takes (``_PLAIN_FIELDS``),
    valid UTF-8 or ASCII, ending where the list's size says.

    The usual client's properties (a message-id, a ``to``, a subject, a content-type as short
    strings; proton's request with a ulong correlation-id and a reply-to) pass; anything else
    (wider encodings, a type the field does not take) is False and left to the decoder, which then
    says what is wrong, if anything.  A True is what decoding would have accepted (the properties'
    builder checks only the types of the typed fields, Part 3 §3.2.4).
    """
    code = payload[start + 3] if start + 3 < len(payload) else -1
    if code == 0x45:  # list0: every field null
        return True
    if code != 0xC0 or start + 5 >= len(payload):
        return False
    end = start + 5 + payload[start + 4]
    if end > len(payload):
        return False
    return _plain_fields(payload, start + 6, end, payload[start + 5]) is not False


def _plain_fields(payload: bytes, pos: int, end: int, count: int) -> int | None:
    """:func:`_plain_properties` for the ``count`` fields of a list8 at ``payload[pos:end]``
    (``end`` within the payload): False when they are not plain, else their absolute-expiry-time
    as the decoder gives it (None when null or absent), read in the same walk."""
    if count > len(_PLAIN_FIELDS):
        return False
    expiry = None
    for field in _PLAIN_FIELDS[:count]:
        if pos >= end:
            return False
        code = payload[pos]
        if code == 0x40:  # null
            pos += 1
            continue
        if code not in field:
            width = field.fixed[code]
            if not width:
                return False  # a type or an encoding the field does not take here: decode it
            if width == _EXPIRY:  # a timestamp: signed milliseconds (Part 1 §1.6.17)
                expiry = int.from_bytes(payload[pos + 1 : pos + 9], "big", signed=True)
                width = 9
            pos += width  # any bytes are a value of a fixed width (one past ``end`` fails below)
            continue
        if pos + 1 >= end:
            return False
        stop = pos + 2 + payload[pos + 1]
        if stop > end:
            return False
        data = payload[pos + 2 : stop]
        if not data.isascii():
            if code != 0xA1:
                return False  # a symbol is ASCII; a binary's bytes are any, but rare here: decode it
            try:
                data.decode()
            except UnicodeDecodeError:
                return False
        pos = stop
    return expiry if pos == end else False


class _PlainExpiring(tuple[object, object]):
    """``_decoded`` of a message placed as plain (like ``_PLAIN``) whose properties carry an
    absolute-expiry-time: the value the walk read, so the expiry is not read again (rare: a
    subclass, so the usual message's ``_PLAIN`` stays one shared tuple)."""

    expiry: int

    @classmethod
    def of(cls, expiry: int) -> _PlainExpiring:
        marker = cls((_UNDECODED, None))
        marker.expiry = expiry
        return marker


class StoredMessage:
    """One received message; shared by every queue a topic copies it to."""

    # Kept small because one exists per queued message (docs/performance.md, memory): the
    # offsets are small ints CPython shares rather than allocates, the bare message's end is
    # kept as the footer's length (0 without a footer) for the same reason, and the two
    # lazily decoded sections share one slot.
    __slots__ = (
        "payload", "header", "arrived_at", "_decoded",
        "_header_end", "_annotations_start", "bare_start", "_footer",
    )  # fmt: skip

    def __init__(self, payload: bytes, arrived_at: float) -> None:
        self.payload = payload
        # Sections follow each other in a fixed order (§3.2), so three offsets and the
        # footer's length place them all:
        # header | delivery-annotations | message-annotations | bare message | footer.
        simple = _simple_layout(payload)
        decoded = _NOTHING_DECODED
        if simple is not None:  # the usual message: no annotations, no footer
            header_end = annotations_start = bare_start = simple[0]
            footer = 0
            if simple[2] is None:
                decoded = _PLAIN  # (a writer's usual message: plain properties, then the body)
            elif simple[2] is not False:
                decoded = _PlainExpiring.of(simple[2])  # (plain, with an absolute-expiry-time)
            elif not simple[1]:
                # Known absent: application_properties need not skip the properties again to
                # find that out.
                decoded = _NO_APPLICATION_PROPERTIES
        else:
            sections = split_sections(payload)
            header_end = sections.header[1]
            da_start, da_end = sections.delivery_annotations
            if da_start >= sections.bare[1] and da_end > da_start:
                # Trailing delivery-annotations (tolerated, see split_sections) are for this hop
                # alone, never passed on: drop them so the fixed order above holds.
                payload = self.payload = payload[:da_start]
                da_start = da_end = header_end
            annotations_start = da_end if da_end > da_start else header_end
            bare_start, bare_end = sections.bare
            footer = len(payload) - bare_end
        self._header_end = header_end
        self._annotations_start = annotations_start
        #: Where the bare message starts: 0 when nothing comes before it (no header or
        #: annotations), so the payload is the bare message (and footer) as sent.
        self.bare_start = bare_start
        self._footer = footer
        # A header always starts the message (§3.2), so it is payload[:header_end].
        self.header: Header | None = _header(payload[:header_end]) if header_end else None
        self.arrived_at = arrived_at
        # (properties, application-properties), each decoded on first use: one shared
        # tuple until then.
        self._decoded: tuple[object, object] = decoded

    @property
    def _bare_end(self) -> int:
        return len(self.payload) - self._footer

    @property
    def size(self) -> int:
        """The bytes it counts against byte limits (a queue's ``max_bytes``, a stream's retention,
        a transaction's bound): its encoding as it arrived."""
        return len(self.payload)

    @property
    def priority(self) -> int:
        return self.header.priority if self.header is not None else 4

    @property
    def sections(self) -> Sections:
        """Byte ranges of the message's sections (see :func:`~minibroker.amqp.message.split_sections`)."""
        header_end, annotations_start = self._header_end, self._annotations_start
        bare_start, bare_end = self.bare_start, self._bare_end
        return Sections(
            (0, header_end),
            (header_end, annotations_start),
            (annotations_start, bare_start),
            (bare_start, bare_end),
            (bare_end, len(self.payload)),
        )

    def unannotated_split(self) -> tuple[int, int] | None:
        """Where the header ends and the bare message starts, if the message has no
        message-annotations (what lies between is delivery-annotations, or nothing); else None.

        What a stream delivery needs to put its own annotations in, without building :attr:`sections`.
        """
        bare_start = self.bare_start
        if self._annotations_start != bare_start:
            return None
        return self._header_end, bare_start

    @property
    def has_delivery_annotations(self) -> bool:
        return self._annotations_start > self._header_end

    def check_sections(self) -> None:
        """Check that what is read later decodes: the properties (decoded and kept, unless
        :func:`_plain_properties` finds them sure to decode: then left for their first reader),
        the application-properties (decoded and kept) and the message-annotations.

        Raises :class:`AMQPDecodeError` for a section that does not decode.  The usual message
        (no properties or plain ones, e.g. a writer's message-id as a string, and no
        application-properties) costs one test here: its properties were walked while its
        sections were placed (:func:`_simple_layout`); it keeps no decoded object (nothing more
        per queued message for the garbage collector to walk).
        """
        if self._decoded is _PLAIN or type(self._decoded) is _PlainExpiring:
            return  # seen while placing the sections: the usual message, nothing to decode
        payload, start = self.payload, self.bare_start
        if payload.startswith(_PROPERTIES_PREFIX, start):
            if not _plain_properties(payload, start):
                self.properties  # noqa: B018 - decoded and kept
            if self._decoded is not _NO_APPLICATION_PROPERTIES:  # (known absent: nothing to check)
                self.application_properties  # noqa: B018 - decoded and kept
        elif payload.startswith(_APPLICATION_PROPERTIES_PREFIX, start):
            self.application_properties  # noqa: B018 - decoded and kept
        if start > self._annotations_start:
            self.message_annotations  # noqa: B018 - decoded to check it, not kept (rarely read)

    @property
    def bare(self) -> bytes:
        return self.payload[self.bare_start : self._bare_end]

    @property
    def properties(self) -> Properties | None:
        """The decoded properties section, or None (decoded on first use)."""
        properties, application_properties = self._decoded
        if properties is _UNDECODED:
            properties = None
            start = self.bare_start
            if self.payload[start : start + 3] == _PROPERTIES_PREFIX:
                properties = codec.decode_at(self.payload, start)[0]
            self._decoded = (properties, application_properties)
        return properties  # type: ignore[return-value]

    @property
    def application_properties(self) -> dict[str, Any] | None:
        """The decoded application-properties map, or None (decoded on first use)."""
        properties, application_properties = self._decoded
        if application_properties is _UNDECODED:
            application_properties = None
            pos = self.bare_start
            if self.payload[pos : pos + 3] == _PROPERTIES_PREFIX:
                pos = codec.skip_at(self.payload, pos)
            if self.payload[pos : pos + 3] == b"\x00\x53\x74":
                application_properties = codec.decode_at(self.payload, pos)[0].value
            self._decoded = (properties, application_properties)
        return application_properties  # type: ignore[return-value]

    @property
    def message_annotations(self) -> dict[Any, Any] | None:
        start, end = self._annotations_start, self.bare_start
        if end == start:
            return None
        value: MessageAnnotations = codec.decode(self.payload[start:end])
        return dict(value.value)

    def expiry(self, default_ttl: float | None, max_ttl: float | None) -> float | None:
        """When the message expires: the earlier of header ttl and absolute-expiry-time (§3.2.1, §3.2.4)."""
        header = self.header
        ttl = header.ttl if header is not None else None
        # Only a properties section can carry absolute-expiry-time (read without decoding it).
        absolute = self._absolute_expiry_time()
        if ttl is None and absolute is None and default_ttl is None and max_ttl is None:
            return None  # the usual message: it never expires
        candidates = []
        if ttl is not None:
            candidates.append(self.arrived_at + ttl / 1000)
        if absolute is not None:
            candidates.append(absolute / 1000)
        if not candidates and default_ttl is not None:
            candidates.append(self.arrived_at + default_ttl)
        if max_ttl is not None:
            candidates.append(self.arrived_at + max_ttl)
        return min(candidates) if candidates else None

    def _absolute_expiry_time(self) -> int | None:
        """Read properties field 9 (absolute-expiry-time) by skipping the fields before it, unless
        placing the sections read it already (plain properties: :func:`_plain_fields`)."""
        if self._decoded is _PLAIN:
            return None  # no properties, or plain ones with that field null
        if type(self._decoded) is _PlainExpiring:
            return self._decoded.expiry
        payload = self.payload
        start = self.bare_start
        if payload[start : start + 3] != _PROPERTIES_PREFIX:
            return None
        props = self._decoded[0]
        if props is not _UNDECODED:
            return props.absolute_expiry_time if isinstance(props, Properties) else None
        code = payload[start + 3]
        if code == 0x45:
            return None
        if code == 0xC0:
            count, pos = payload[start + 5], start + 6
        else:
            count, pos = int.from_bytes(payload[start + 8 : start + 12], "big"), start + 12
        if count < 9:
            return None
        for _ in range(8):
            pos = codec.skip_at(payload, pos)
        value = codec.decode_at(payload, pos)[0]
        return int(value) if value is not None else None

    def decode(self) -> Message:
        """The whole message, decoded (for the inspection API and selectors)."""
        return decode_message(self.payload)


class Origin(Protocol):
    """A message in the form another wire protocol delivered it (what an :class:`OriginMessage` keeps)."""

    @property
    def size(self) -> int:
        """Its encoded size as it arrived (counted against byte limits in place of the AMQP 1.0 form's)."""
        ...

    def amqp10(self) -> bytes:
        """Its AMQP 1.0 encoding (Part 3 §3.2), header first; called at most once per message."""
        ...


#: The slots :meth:`StoredMessage.__init__` sets from the AMQP 1.0 form: an :class:`OriginMessage`
#: builds that form when one of them is first read.
_PLACED = frozenset(("payload", "_header_end", "_annotations_start", "bare_start", "_footer", "_decoded"))


class OriginMessage(StoredMessage):
    """A stored message kept in the form it arrived in, made AMQP 1.0 only when something reads that.

    RabbitMQ 4 keeps each message in a *message container* (``deps/rabbit/src/mc.erl`` in
    rabbitmq-server: a record of the protocol module, that protocol's own data and the broker's
    annotations): the message stays in the protocol it arrived in (``mc_amqpl`` for AMQP 0-9-1,
    ``mc_amqp`` for 1.0), ``mc:convert/2`` returns it untouched when the reader speaks that
    protocol and converts it otherwise, and what the broker itself records (exchange, routing
    keys, deaths) lives in the annotations beside the data, not in it.

    Here :attr:`origin` is the arrival form, opaque to the broker and read only by the front end
    that made it, so a reader of the same protocol takes it as it came.  What the broker needs of
    every message is given at arrival: the AMQP 1.0 :attr:`header` (priority, ttl, durable), the
    :attr:`size` byte limits count, and no absolute-expiry-time (an origin expresses expiry as the
    header's ttl).  Everything else (:attr:`payload`, the sections, properties, annotations:
    the 1.0 form a 1.0 reader, a selector, the inspection API, a layer or a dead-lettering reads)
    is built on first use, by the origin's :meth:`Origin.amqp10`, and kept: once per message,
    however many queues share it or times it is delivered.  The slots
    :meth:`StoredMessage.__init__` sets stay unset until then; reading one comes to
    :meth:`__getattr__` (Python calls it only for an attribute not found), which sets them all at
    once, so nothing sees a half-built message, and once set they are read as on any message.
    The conversion is deterministic: a snapshot's messages decoded in a test's thread
    (``ThreadedBroker``) while the broker's thread converts the same message set each slot to the
    same value, so a reader sees a slot unset (and converts) or set to its one value.

    Safe by construction: the broker never changes a stored message (a changed one, such as a
    dead letter or a message with added annotations, is a new plain :class:`StoredMessage`), and
    what changes per queue lives on the :class:`Entry` (``annotations``, ``delivery_count``), which
    the front end checks before using :attr:`origin`.  A subclass rather than a slot on
    :class:`StoredMessage`, so an AMQP 1.0 message carries neither the slot nor the work of setting it.
    """

    __slots__ = ("origin",)

    def __init__(self, origin: Origin, header: Header | None, arrived_at: float) -> None:
        # StoredMessage.__init__ runs later, from __getattr__, with the 1.0 form.
        self.header = header
        self.arrived_at = arrived_at
        #: The message as it arrived, in the arriving front end's own type.
        self.origin = origin

    def __getattr__(self, name: str) -> Any:
        """Build the AMQP 1.0 form the first time a slot of it is read (see the class docstring)."""
        if name not in _PLACED:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        header = self.header
        StoredMessage.__init__(self, self.origin.amqp10(), self.arrived_at)
        # The header the origin announced stays the one in use (equal to the one just decoded:
        # the front end builds both from the same properties); entries read it at arrival.
        self.header = header
        return object.__getattribute__(self, name)

    @property
    def converted(self) -> bool:
        """Whether its AMQP 1.0 form has been built."""
        try:
            object.__getattribute__(self, "payload")
        except AttributeError:
            return False
        return True

    @property
    def size(self) -> int:
        return self.origin.size

    def _absolute_expiry_time(self) -> int | None:
        return None  # an origin's expiry is its header's ttl (class docstring)


class _Rare:
    """What only some entries carry: kept apart so an ordinary entry has no slots for it."""

    __slots__ = ("annotations", "undeliverable", "transaction", "acquired_before")

    def __init__(self) -> None:
        self.annotations: dict[Any, Any] | None = None
        self.undeliverable: set[int] | None = None
        self.transaction: Any = None
        self.acquired_before = False


class Entry:
    """A message's place in one queue: its state there and its delivery history."""

    # One per queued message (docs/performance.md, memory): what only modified, redirected
    # or transactional entries need lives in ``_rare``, created on first use.
    __slots__ = ("seq", "message", "level", "expires_at", "state", "delivery_count", "owner", "token", "_rare")

    def __init__(self, seq: int, message: StoredMessage, level: int, expires_at: float | None) -> None:
        self.seq = seq
        self.message = message
        self.level = level  # the effective priority level inside the queue
        self.expires_at = expires_at
        self.state = AVAILABLE
        header = message.header
        self.delivery_count: int = header.delivery_count if header is not None else 0
        self.owner: Any = None  # the consumer that acquired it
        self.token = 0  # bumped each time the entry becomes available (see Queue)
        self._rare: _Rare | None = None

    def _extra(self) -> _Rare:
        rare = self._rare
        if rare is None:
            rare = self._rare = _Rare()
        return rare

    @property
    def annotations(self) -> dict[Any, Any] | None:
        """Changed message-annotations, if any (replaced, never changed in place: ``annotate``)."""
        rare = self._rare
        return rare.annotations if rare is not None else None

    @annotations.setter
    def annotations(self, value: dict[Any, Any] | None) -> None:
        if value is not None or self._rare is not None:
            self._extra().annotations = value

    @property
    def undeliverable(self) -> set[int] | None:
        """Ids of links it must not go to again (``modified`` with undeliverable-here)."""
        rare = self._rare
        return rare.undeliverable if rare is not None else None

    @undeliverable.setter
    def undeliverable(self, value: set[int] | None) -> None:
        if value is not None or self._rare is not None:
            self._extra().undeliverable = value

    @property
    def transaction(self) -> Any:
        """A transaction that acquired or retires it."""
        rare = self._rare
        return rare.transaction if rare is not None else None

    @transaction.setter
    def transaction(self, value: Any) -> None:
        if value is not None or self._rare is not None:
            self._extra().transaction = value

    @property
    def acquired_before(self) -> bool:
        """It came back to the queue after a link acquired it (released, modified, or its link
        or connection ended): its next delivery is not to the first acquirer (Part 3 §3.2.1)."""
        rare = self._rare
        return rare is not None and rare.acquired_before

    def returned(self) -> None:
        """Note that it came back after an acquisition (see :attr:`acquired_before`)."""
        self._extra().acquired_before = True

    def detached(self) -> Entry:
        """A copy of what a consumer would receive from this entry, unaffected by its later changes."""
        copy = Entry(self.seq, self.message, self.level, self.expires_at)
        copy.state = self.state
        copy.delivery_count = self.delivery_count
        if self._rare is not None:
            copy.annotations = self._rare.annotations  # replaced, never changed in place (annotate)
            if self._rare.acquired_before:
                copy.returned()
        return copy

    def merged_annotations(self) -> dict[Any, Any] | None:
        if self.annotations is None:
            return self.message.message_annotations
        return self.annotations

    def annotate(self, extra: dict[Any, Any]) -> None:
        """Merge annotations (from ``modified`` or dead-lettering) into the message's own (§3.4.5)."""
        merged = dict(self.merged_annotations() or {})
        merged.update(extra)
        self.annotations = merged

    def payload_for_delivery(self, now: float, keep_ttl: bool = True) -> bytes:
        """The bytes to transfer: unchanged when nothing changed, else a new header/annotations + bare.

        The header's delivery-count is the number of failed attempts (a header
        is added for it if the message had none) and ttl is what remains of it
        at ``now``: "the transmitted message's header SHOULD contain a ttl that
        is computed as the difference between the current time and the
        formerly computed message expiration time" (Part 3 §3.2.1).  A message
        that came back after an acquisition goes out with first-acquirer false,
        "this message MAY have previously been acquired by another link" (§3.2.1);
        otherwise first-acquirer is the producer's.
        ``keep_ttl=False`` drops the ttl (a dead-letter copy, which no longer
        expires).
        """
        message = self.message
        header = message.header
        ttl = None
        if keep_ttl and self.expires_at is not None:
            # What is left until the expiry the broker computed (header ttl, absolute-expiry-time,
            # the queue's default or maximum ttl, whichever came first).
            ttl = max(0, int((self.expires_at - now) * 1000))
        rare = self._rare
        first_acquirer = header is not None and header.first_acquirer and (rare is None or not rare.acquired_before)
        if (rare is None or rare.annotations is None) and message._annotations_start == message._header_end:
            # No changed annotations and no delivery-annotations (the properties, inlined).
            if header is None:
                if self.delivery_count == 0 and ttl is None:
                    return message.payload
            elif (header.delivery_count == self.delivery_count and header.ttl == ttl
                  and header.first_acquirer == first_acquirer):  # fmt: skip
                return message.payload
        out = bytearray()
        Header(
            durable=header.durable if header is not None else False,
            priority=header.priority if header is not None else 4,
            ttl=ttl,
            first_acquirer=first_acquirer,
            delivery_count=self.delivery_count,
        ).encode_into(out)
        if self.annotations is not None:
            if self.annotations:
                MessageAnnotations(self.annotations).encode_into(out)
        else:
            out += message.payload[message._annotations_start : message.bare_start]
        out += message.payload[message.bare_start :]  # the bare message and the footer
        return bytes(out)
