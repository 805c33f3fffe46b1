"""StoredMessage places the usual message's sections directly; it must agree with split_sections (Part 3 §3.2)."""

from __future__ import annotations

import dataclasses

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
    b"\x80" + bytes(range(8)), b"\x44", b"\x98" + bytes(16), b"\x83\xff" + bytes(7), b"\x70\x00\x00\x01\x00",
    b"\x52\x07", b"\x43", b"\x80\x01", b"\x98\x01\x02", b"\x70\x01",  # the last three truncated
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


def _placed_plain(message: StoredMessage) -> bool:
    """Whether placing the sections found the properties plain (nothing for the check to decode)."""
    return message._decoded is stored._PLAIN or type(message._decoded) is stored._PlainExpiring


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
    plain = _placed_plain(message)
    assert plain == (not application and _plain_properties(payload, 0))
    if plain:
        message.check_sections()
        properties = codec.decode_at(payload, 0)[0]
        assert isinstance(properties, Properties)
        expiry = properties.absolute_expiry_time
        assert message.expiry(None, None) == (None if expiry is None else expiry / 1000)
        assert message._decoded[0] is stored._UNDECODED  # neither check nor expiry decoded them


def test_a_message_without_properties_or_with_an_empty_list_is_plain() -> None:
    for properties in (b"", b"\x00\x53\x73\x45"):
        message = StoredMessage(properties + _encoded(AmqpValue("x")), 0.0)
        assert message._decoded is stored._PLAIN and message.properties == (Properties() if properties else None)


def _properties(*fields: bytes) -> bytes:
    """A properties section as a list8 of the given encoded fields."""
    body = b"".join(fields)
    return b"\x00\x53\x73\xc0" + bytes((len(body) + 1, len(fields))) + body


_NULL = b"\x40"
_REQUEST = (_NULL, _NULL, _NULL, _NULL, b"\xa1\x05reply")  # ... and a reply-to, as proton sends a request
#: The fixed-width encodings the properties fields take (Part 3 §3.2.4), each as the fields up to
#: and including the one it fills.
_FIXED = {
    "message-id ulong": (b"\x80" + bytes(range(1, 9)),),
    "message-id smallulong": (b"\x53\x2a",),
    "message-id ulong0": (b"\x44",),
    "message-id uuid": (b"\x98" + bytes(range(16)),),
    "correlation-id ulong": (*_REQUEST, b"\x80" + bytes(range(1, 9))),
    "correlation-id smallulong": (*_REQUEST, b"\x53\x2a"),
    "correlation-id ulong0": (*_REQUEST, b"\x44"),
    "correlation-id uuid": (*_REQUEST, b"\x98" + bytes(range(16))),
    "absolute-expiry-time": (*(_NULL,) * 8, b"\x83" + (1_700_000_000_500).to_bytes(8, "big")),
    "absolute-expiry-time before 1970": (*(_NULL,) * 8, b"\x83" + (-5).to_bytes(8, "big", signed=True)),
    "creation-time": (*(_NULL,) * 9, b"\x83" + (1_700_000_000_000).to_bytes(8, "big")),
    "group-sequence uint": (*(_NULL,) * 11, b"\x70\x00\x01\x00\x00"),
    "group-sequence smalluint": (*(_NULL,) * 11, b"\x52\x09"),
    "group-sequence uint0": (*(_NULL,) * 11, b"\x43"),
}


@pytest.mark.parametrize("fields", _FIXED.values(), ids=_FIXED.keys())
def test_fixed_width_fields_are_checked_without_decoding_and_read_back_as_decoded(
    fields: tuple[bytes, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proton request (a ulong correlation-id and a reply-to), uuids, timestamps and the
    group-sequence pass the arrival check without a decode, and read back as the decoder gives
    them; the absolute-expiry-time comes from the same walk (no decode, no second walk)."""
    section = _properties(*fields)
    payload = _encoded(Header()) + section + _encoded(AmqpValue("request"))
    message = StoredMessage(payload, 0.0)
    with monkeypatch.context() as patched:
        for name in ("decode_at", "skip_at", "decode"):  # neither the check nor the expiry reads the section again
            patched.setattr(codec, name, lambda *args: pytest.fail("the properties were read again"))
        message.check_sections()
        expiry = message.expiry(None, None)
    decoded = codec.decode_at(section, 0)[0]
    assert isinstance(decoded, Properties)
    assert expiry == (None if decoded.absolute_expiry_time is None else decoded.absolute_expiry_time / 1000)
    read = message.properties
    assert read == decoded and [type(value) for value in vars_of(read)] == [type(value) for value in vars_of(decoded)]


def vars_of(properties: Properties | None) -> list[object]:
    """Each field's value, in order (their types compared too: a ulong is not an int, Part 1 §1.6)."""
    assert properties is not None
    return [getattr(properties, field.name) for field in dataclasses.fields(properties)]


#: Each fixed-width encoding where it goes wrong: cut short inside the list, or in a field whose
#: type it is not (the decoder's type check: Part 3 §3.2.4; it takes any integer in range in a
#: uint or timestamp field, which the walk leaves to it, so those are not here).
_MALFORMED = {
    "ulong cut short": (b"\x80" + bytes(4),),
    "smallulong cut short": (b"\x53",),
    "uuid cut short": (*_REQUEST, b"\x98" + bytes(15)),
    "timestamp cut short": (*(_NULL,) * 8, b"\x83" + bytes(7)),
    "uint cut short": (*(_NULL,) * 11, b"\x70\x00\x01"),
    "smalluint cut short": (*(_NULL,) * 11, b"\x52"),
    "ulong as the subject": (_NULL, _NULL, _NULL, b"\x53\x01"),
    "uuid as the user-id": (_NULL, b"\x98" + bytes(16)),
    "ulong0 as the content-type": (*(_NULL,) * 6, b"\x44"),
    "uint as the group-id": (*(_NULL,) * 10, b"\x43"),
    "timestamp as the reply-to-group-id": (*(_NULL,) * 12, b"\x83" + bytes(8)),
}


@pytest.mark.parametrize("fields", _MALFORMED.values(), ids=_MALFORMED.keys())
def test_malformed_fixed_width_fields_are_refused_as_the_decoder_refuses_them(fields: tuple[bytes, ...]) -> None:
    """What the arrival check now walks without decoding, it still refuses when wrong, with the
    decoder's own error (a cut short field reads into the body after it: the list's size is wrong)."""
    payload = _properties(*fields) + _encoded(AmqpValue("x"))
    with pytest.raises(AMQPDecodeError) as expected:
        codec.decode_at(payload, 0)
    message = StoredMessage(payload, 0.0)
    with pytest.raises(AMQPDecodeError) as refused:
        message.check_sections()
    assert str(refused.value) == str(expected.value)
