"""StoredMessage places the usual message's sections directly; it must agree with split_sections (Part 3 §3.2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibroker.amqp import codec
from minibroker.amqp.errors import AMQPDecodeError
from minibroker.amqp.message import split_sections
from minibroker.amqp.messaging import AmqpValue, ApplicationProperties, Data, Footer, Header, Properties
from minibroker.broker.stored import StoredMessage


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
    | st.text(max_size=40).map(lambda t: _encoded(AmqpValue(t))),
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
