"""StoredMessage places the usual message's sections directly; it must agree with split_sections (Part 3 §3.2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibroker.amqp import codec
from minibroker.amqp.errors import AMQPDecodeError
from minibroker.amqp.message import split_sections
from minibroker.amqp.messaging import AmqpValue, ApplicationProperties, Data, Footer, Header, Properties
from minibroker.amqp.types import symbol
from minibroker.broker import stored
from minibroker.broker.stored import StoredMessage, _plain_properties


def _encoded(section: object) -> bytes:
    out = bytearray()
    section.encode_into(out)  # type: ignore[attr-defined]
    return bytes(out)


sections = st.tuples(
    st.none() | st.builds(Header, ttl=st.none() | st.integers(0, 2**32 - 1), priority=st.integers(0, 255)).map(_encoded),
    st.none() | st.builds(Properties, message_id=st.none() | st.text(max_size=8)).map(_encoded),
    st.none() | st.dictionaries(st.text(max_size=4), st.integers(0, 9), max_size=3).map(
        lambda d: _encoded(ApplicationProperties(d))
    ),
    st.none()
    | st.binary(max_size=300).map(lambda b: _encoded(Data(b)))
    | st.text(max_size=300).map(lambda t: _encoded(AmqpValue(t))),  # str8 and str32 bodies
    st.sampled_from([b"", _encoded(Data(b"second")), _encoded(Footer({})), b"\x00\x53"]),
)


@given(sections, st.integers(0, 400))
def test_offsets_are_those_of_split_sections(parts: tuple[bytes | None, ...], cut: int) -> None:
    payload = b"".join(part for part in parts if part is not None)
    payload = payload[: max(1, len(payload) - cut)] if cut % 3 == 0 else payload  # truncated, sometimes
    try:
        expected = split_sections(payload)
    except (AMQPDecodeError, IndexError) as exc:
        with pytest.raises(type(exc)):
            StoredMessage(payload, 0.0)
        return
    message = StoredMessage(payload, 0.0)
    assert message.sections == expected
    end = expected.header[1]
    assert message.header == (codec.decode(payload[:end]) if end else None)


# Properties fields (Part 3 §3.2.4) as a writer may encode them, and as no writer should: null,
# 8-bit-size strings, symbols and binaries (valid and not), a number, a timestamp, wider forms.
_FIELDS = st.sampled_from([
    b"\x40", b"\xa1\x03abc", b"\xa1\x02\xc3\xa9", b"\xa1\x02\xc3\x28", b"\xa3\x02ab", b"\xa3\x01\xff",
    b"\xa0\x02\x00\x01", b"\x53\x05", b"\x83" + bytes(8), b"\xa1\x00", b"\xa1\x09ab", b"\xb1\x00\x00\x00\x01a",
])  # fmt: skip


@given(st.lists(_FIELDS, max_size=14), st.integers(-1, 1), st.integers(-1, 1))
def test_properties_taken_without_decoding_are_properties_that_decode(
    fields: list[bytes], size_error: int, count_error: int
) -> None:
    """``_plain_properties`` lets the arrival check skip decoding the usual properties: whatever it
    accepts, the decoder accepts too (a wrong size or count, bad UTF-8 or ASCII, a type the field
    does not take, all go to the decoder, which rejects them with amqp:decode-error)."""
    body = b"".join(fields)
    size, count = len(body) + 1 + size_error, len(fields) + count_error
    if not 0 <= size <= 255 or count < 0:
        return
    section = b"\x00\x53\x73\xc0" + bytes((size, count)) + body
    if _plain_properties(section + b"\x00\x53\x77\x40", 0):
        assert isinstance(codec.decode_at(section, 0)[0], Properties)


@given(
    st.builds(
        Properties,
        message_id=st.none() | st.text(max_size=10),
        to=st.none() | st.text(max_size=10),
        subject=st.none() | st.text(max_size=10),
        content_type=st.none() | st.sampled_from([symbol("application/json"), symbol("text/plain")]),
        group_id=st.none() | st.text(max_size=10),
    )
)
def test_a_usual_clients_properties_are_taken_without_decoding(properties: Properties) -> None:
    """Short strings (and a content-type symbol) in the fields that take them: the writer's and most
    clients' properties, which the check takes as they are."""
    assert _plain_properties(_encoded(properties), 0)


@given(st.lists(_FIELDS, max_size=14), st.integers(-1, 1), st.integers(-1, 1), st.booleans())
def test_a_message_placed_as_plain_is_one_whose_check_passes(
    fields: list[bytes], size_error: int, count_error: int, application: bool
) -> None:
    """Placing the sections walks the properties (``_simple_layout``), and a message found plain
    there skips ``check_sections`` and the absolute-expiry-time: such a message's properties
    decode, with that field null, and the walk agrees with ``_plain_properties``."""
    body = b"".join(fields)
    size, count = len(body) + 1 + size_error, len(fields) + count_error
    if not 0 <= size <= 255 or count < 0:
        return
    section = b"\x00\x53\x73\xc0" + bytes((size, count)) + body
    payload = section + (_encoded(ApplicationProperties({"k": 1})) if application else b"") + _encoded(AmqpValue("x"))
    try:
        message = StoredMessage(payload, 0.0)
    except (AMQPDecodeError, IndexError):
        return
    plain = message._decoded is stored._PLAIN
    assert plain == (not application and _plain_properties(payload, 0))
    if plain:
        message.check_sections()
        properties = codec.decode_at(payload, 0)[0]
        assert isinstance(properties, Properties) and properties.absolute_expiry_time is None
        assert message.expiry(None, None) is None


def test_a_message_without_properties_or_with_an_empty_list_is_plain() -> None:
    for properties in (b"", b"\x00\x53\x73\x45"):
        message = StoredMessage(properties + _encoded(AmqpValue("x")), 0.0)
        assert message._decoded is stored._PLAIN and message.properties == (Properties() if properties else None)
