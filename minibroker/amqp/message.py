"""The AMQP message format (OASIS AMQP 1.0 Part 3, §3.2).

:class:`Message` is the decoded, user-facing form.  :func:`split_sections`
finds section boundaries without decoding, so the broker can keep the bare
message (properties, application-properties, body) byte for byte, as §3.2
requires of intermediaries, and decode only what it needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal, NamedTuple

from ..records import record
from . import codec
from .composite import generated_from_list
from .errors import AMQPDecodeError
from .messaging import (
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

__all__ = [
    "Message", "Sections", "decode_message", "decode_message_checked", "encode_bodies", "encode_message",
    "split_sections",
]  # fmt: skip

BodyKind = Literal["value", "data", "sequence"]

# Section descriptor codes, in the order §3.2 requires them.
HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES = 0x70, 0x71, 0x72, 0x73
APPLICATION_PROPERTIES, DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = 0x74, 0x75, 0x76, 0x77, 0x78
_RANK = {
    HEADER: 0, DELIVERY_ANNOTATIONS: 1, MESSAGE_ANNOTATIONS: 2, PROPERTIES: 3,
    APPLICATION_PROPERTIES: 4, DATA: 5, AMQP_SEQUENCE: 5, AMQP_VALUE: 5, FOOTER: 6,
}  # fmt: skip
_SECTION_NAMES = {
    HEADER: "header", DELIVERY_ANNOTATIONS: "delivery-annotations",
    MESSAGE_ANNOTATIONS: "message-annotations", PROPERTIES: "properties",
    APPLICATION_PROPERTIES: "application-properties", DATA: "data",
    AMQP_SEQUENCE: "amqp-sequence", AMQP_VALUE: "amqp-value", FOOTER: "footer",
}  # fmt: skip


@record(slots=True)
class Message:
    """A decoded AMQP message.

    ``body`` holds the body's Python value: for ``body_kind="value"`` the
    amqp-value's value, for ``"data"`` the bytes of the data section (a list of
    bytes when there are several sections), for ``"sequence"`` the list of an
    amqp-sequence (a list of lists when there are several).
    """

    body: Any = None
    body_kind: BodyKind = "value"
    header: Header | None = None
    delivery_annotations: dict[Any, Any] | None = None
    message_annotations: dict[Any, Any] | None = None
    properties: Properties | None = None
    application_properties: dict[str, Any] | None = None
    footer: dict[Any, Any] | None = None

    def encode(self) -> bytes:
        """The message's wire encoding, sections in §3.2 order."""
        return encode_message(self)


def _body_sections(message: Message) -> list[Any]:
    kind = message.body_kind
    if kind == "value":
        return [AmqpValue(message.body)]
    if kind == "data":
        body = message.body
        if isinstance(body, (bytes, bytearray, memoryview)):
            return [Data(bytes(body))]
        if isinstance(body, list) and body and all(isinstance(b, (bytes, bytearray)) for b in body):
            return [Data(bytes(b)) for b in body]
        raise TypeError(f"a data body must be bytes or a non-empty list of bytes, got {type(body).__name__}")
    if kind == "sequence":
        body = message.body
        if not isinstance(body, list):
            raise TypeError(f"a sequence body must be a list, got {type(body).__name__}")
        if body and all(isinstance(b, list) for b in body):
            return [AmqpSequence(b) for b in body]
        return [AmqpSequence(body)]
    raise ValueError(f"body_kind must be 'value', 'data' or 'sequence', got {kind!r}")


def _encode_head(message: Message, out: bytearray) -> None:
    """The sections before the body, in §3.2 order."""
    if message.header is not None:
        message.header.encode_into(out)
    if message.delivery_annotations is not None:
        DeliveryAnnotations(message.delivery_annotations).encode_into(out)
    if message.message_annotations is not None:
        MessageAnnotations(message.message_annotations).encode_into(out)
    if message.properties is not None:
        message.properties.encode_into(out)
    if message.application_properties is not None:
        ApplicationProperties(message.application_properties).encode_into(out)


def encode_message(message: Message) -> bytes:
    """Encode a message as its sections in the order §3.2 requires."""
    out = bytearray()
    _encode_head(message, out)
    for section in _body_sections(message):
        section.encode_into(out)
    if message.footer is not None:
        Footer(message.footer).encode_into(out)
    return bytes(out)


def encode_bodies(template: Message, bodies: Iterable[Any]) -> list[bytes]:
    """Messages that differ from ``template`` only in their body: the other sections are encoded once."""
    head = bytearray()
    _encode_head(template, head)
    tail = bytearray()
    if template.footer is not None:
        Footer(template.footer).encode_into(tail)
    one = Message(body_kind=template.body_kind)
    encoded = []
    for body in bodies:
        out = bytearray(head)
        one.body = body
        for section in _body_sections(one):
            section.encode_into(out)
        out += tail
        encoded.append(bytes(out))
    return encoded


class Sections(NamedTuple):
    """Byte offsets of a message's parts; a missing section is an empty range."""

    header: tuple[int, int]
    delivery_annotations: tuple[int, int]
    message_annotations: tuple[int, int]
    bare: tuple[int, int]
    footer: tuple[int, int]


def _section_code(buf: bytes | memoryview, pos: int) -> int:
    """The descriptor code of the section at ``pos`` (0x00 0x53 code, or a symbol)."""
    if buf[pos] != 0x00:
        raise AMQPDecodeError(f"expected a described section at offset {pos}, got {buf[pos]:#04x}")
    descriptor, _ = codec.decode_at(buf, pos + 1)
    try:
        code = _SECTION_CODES.get(descriptor)
    except TypeError:  # an unhashable descriptor, e.g. a list
        code = None
    if code is None:
        raise AMQPDecodeError(f"unknown message section descriptor {descriptor!r} at offset {pos}")
    return code


# Each section's ulong and symbol descriptor -> its code (composites register a
# builder function, not the class, in codec.DESCRIBED_TYPES, so look them up here).
_SECTION_CODES = {
    key: int(cls.DESCRIPTOR)
    for cls in (Header, DeliveryAnnotations, MessageAnnotations, Properties, ApplicationProperties, Data,
                AmqpSequence, AmqpValue, Footer)
    for key in (cls.DESCRIPTOR, cls.DESCRIPTOR_NAME)
}  # fmt: skip


#: Rank given to delivery-annotations that come last: nothing may follow them.
_TRAILING = 7


def split_sections(buf: bytes | memoryview) -> Sections:
    """Find each section's byte range, checking their order (§3.2), without decoding them.

    One deviation from §3.2 is tolerated: delivery-annotations as the very last
    section, after the body and footer.  azure-servicebus' and azure-eventhub's
    AMQP stack encodes them there (Event Hubs ignores them elsewhere) and the
    real services accept it, so a broker standing in for them must too.  Their
    range then lies after the footer's.
    """
    pos = 0
    end = len(buf)
    spans: dict[int, tuple[int, int]] = {}
    last_rank = -1
    body_code = None
    bare_start = bare_end = None
    while pos < end:
        # Fast path for the common `00 53 xx` form; anything else goes through the decoder.
        if buf[pos] == 0x00 and pos + 2 < end and buf[pos + 1] == 0x53:
            code = buf[pos + 2]
            if code not in _RANK:
                code = _section_code(buf, pos)
        else:
            code = _section_code(buf, pos)
        rank = _RANK[code]
        if code == DELIVERY_ANNOTATIONS and body_code is not None and 1 not in spans:
            rank = _TRAILING  # the trailing form (see above): accepted once, as the last section
        if rank < last_rank or (rank == last_rank and rank != 5):
            raise AMQPDecodeError(
                f"message section {_SECTION_NAMES[code]} at offset {pos} is out of order (Part 3 §3.2)"
            )
        if rank == 5:
            if body_code is None:
                body_code = code
            elif code != body_code or code == AMQP_VALUE:
                raise AMQPDecodeError(
                    f"body section {_SECTION_NAMES[code]} at offset {pos} follows a "
                    f"{_SECTION_NAMES[body_code]} section; a body is one amqp-value, or data "
                    "sections, or amqp-sequence sections (Part 3 §3.2)"
                )
        last_rank = rank
        start = pos
        if buf[pos + 1] == 0x53:
            pos = codec.skip_at(buf, pos + 3)  # 00 53 code: skip just the section's value
        else:
            pos = codec.skip_at(buf, pos)
        if rank >= 3 and rank <= 5:
            if bare_start is None:
                bare_start = start
            bare_end = pos
        else:
            spans[1 if rank == _TRAILING else rank] = (start, pos)
    if bare_start is None or bare_end is None:
        bare_start = bare_end = spans.get(2, spans.get(1, spans.get(0, (0, 0))))[1]
    empty = (bare_start, bare_start)
    return Sections(
        spans.get(0, (0, 0)),
        spans.get(1, empty),
        spans.get(2, empty),
        (bare_start, bare_end),
        spans.get(6, (bare_end, bare_end)),
    )


def decode_message(data: bytes | memoryview) -> Message:
    """Decode a whole message, checking section order (§3.2).

    Messages as nearly every client sends them (sections with small-ulong descriptors, in
    §3.2's order, one body section) are decoded in one pass; any other message, and any
    message that pass refuses, is decoded by :func:`decode_message_checked`, so the result
    or error is always the one that function gives.
    """
    try:
        message = _decode_usual(data)
    except AMQPDecodeError:
        message = None
    return message if message is not None else decode_message_checked(data)


def _on_first_use(cls: type, global_name: str) -> Callable[[Any], Any]:
    """A stand-in for ``cls``'s generated builder that puts the real one in this module's global."""

    def first(values: Any) -> Any:
        build = generated_from_list(cls)
        globals()[global_name] = build  # later messages call the generated builder directly
        return build(values)

    return first


_DECODERS = codec._DECODERS
_BUILD_HEADER: Callable[[Any], Header] = _on_first_use(Header, "_BUILD_HEADER")
_BUILD_PROPERTIES: Callable[[Any], Properties] = _on_first_use(Properties, "_BUILD_PROPERTIES")


def _decode_usual(data: bytes | memoryview) -> Message | None:
    """One pass over sections ``00 53 code`` in strictly rising §3.2 rank; None for anything else."""
    message = Message()
    pos = 0
    end = len(data)
    last = -1
    decoders, ranks = _DECODERS, _RANK
    while pos < end:
        if pos + 3 >= end or data[pos] != 0x00 or data[pos + 1] != 0x53:
            return None
        code = data[pos + 2]
        rank = ranks.get(code, -1)
        if rank <= last:
            return None  # out of order, a second body section, trailing delivery-annotations ...
        last = rank
        # What codec.decode_at does for `00 53 code`: the value's decoder at nesting depth 1.
        value, pos = decoders[data[pos + 3]](data, pos + 4, 1)
        if code == DATA:
            if type(value) is not bytes:
                return None
            message.body, message.body_kind = value, "data"
        elif code == PROPERTIES:
            message.properties = _BUILD_PROPERTIES(value)
        elif code == APPLICATION_PROPERTIES:
            message.application_properties = value
        elif code == MESSAGE_ANNOTATIONS:
            message.message_annotations = value
        elif code == HEADER:
            message.header = _BUILD_HEADER(value)
        elif code == AMQP_VALUE:
            message.body = value
        elif code == AMQP_SEQUENCE:
            if type(value) is not list:
                return None
            message.body, message.body_kind = value, "sequence"
        elif code == DELIVERY_ANNOTATIONS:
            message.delivery_annotations = value
        else:
            message.footer = value
    return message


def decode_message_checked(data: bytes | memoryview) -> Message:
    """Decode a whole message section by section after :func:`split_sections` checked their order:
    every form §3.2 allows (symbolic descriptors, several body sections) and the trailing
    delivery-annotations it tolerates."""
    split_sections(data)  # validates order
    message = Message()
    pos = 0
    bodies: list[Any] = []
    kind: BodyKind = "value"
    while pos < len(data):
        section, pos = codec.decode_at(data, pos)
        if isinstance(section, Header):
            message.header = section
        elif isinstance(section, DeliveryAnnotations):
            message.delivery_annotations = section.value
        elif isinstance(section, MessageAnnotations):
            message.message_annotations = section.value
        elif isinstance(section, Properties):
            message.properties = section
        elif isinstance(section, ApplicationProperties):
            message.application_properties = section.value
        elif isinstance(section, Data):
            if not isinstance(section.value, bytes):
                raise AMQPDecodeError(f"a data section holds binary, got {type(section.value).__name__} (§3.2.6)")
            kind = "data"
            bodies.append(section.value)
        elif isinstance(section, AmqpSequence):
            if not isinstance(section.value, list):
                raise AMQPDecodeError(f"an amqp-sequence section holds a list, got {type(section.value).__name__} (§3.2.7)")
            kind = "sequence"
            bodies.append(section.value)
        elif isinstance(section, AmqpValue):
            bodies.append(section.value)
        elif isinstance(section, Footer):
            message.footer = section.value
    message.body_kind = kind
    message.body = bodies[0] if len(bodies) == 1 else (bodies if bodies else None)
    return message
