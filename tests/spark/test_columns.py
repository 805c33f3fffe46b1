"""Rows made by one walk over a message's bytes equal the rows made from the decoded message.

:class:`pyspark_minibroker.columns.Rows` is the executor's hot path; the reference is
``decode_message`` followed by :func:`pyspark_minibroker.rows.message_values` (what
``row_from_delivery`` returns).  Both are run on generated messages, on messages with
mutated bytes, and on the shapes a stream delivery has, which must never need the reference.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark_minibroker import columns
from pyspark_minibroker.columns import Rows
from pyspark_minibroker.rows import message_values

from minibroker.amqp import encode
from minibroker.amqp.errors import AMQPDecodeError
from minibroker.amqp.message import Message, decode_message
from minibroker.amqp.messaging import (
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
from minibroker.amqp.types import symbol, timestamp, ubyte, uint, ulong
from minibroker.client import stream_offset

OFFSET = symbol("x-stream-offset")


def reference(payload: bytes) -> Any:
    """The offset and row decode_message gives, or the error it raises."""
    try:
        message = decode_message(payload)
        return ("row", stream_offset(message), message_values(message))
    except Exception as exc:  # noqa: BLE001  # any error: the walk must raise the same
        return ("error", type(exc).__name__, str(exc))


def walked(payload: bytes, rows: Rows | None = None) -> Any:
    rows = rows if rows is not None else Rows()
    try:
        offset = rows.add(payload)
        return ("row", offset, rows.rows[-1])
    except Exception as exc:  # noqa: BLE001
        return ("error", type(exc).__name__, str(exc))


texts = st.text(max_size=6)
ids = st.one_of(st.none(), texts, st.binary(max_size=4), st.integers(0, 2**64 - 1).map(ulong),
                st.builds(uuid.UUID, st.integers(0, 2**128 - 1).map(lambda n: f"{n:032x}")))  # fmt: skip
offsets = st.one_of(st.integers(-128, 127), st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**64 - 1).map(ulong),
                    st.just(True), texts)  # fmt: skip
headers = st.builds(Header, durable=st.booleans(), priority=st.integers(0, 255).map(ubyte),
                    delivery_count=st.integers(0, 2**32 - 1).map(uint))  # fmt: skip
properties = st.builds(
    Properties, message_id=ids, correlation_id=ids, to=st.one_of(st.none(), texts), subject=st.one_of(st.none(), texts),
    reply_to=st.one_of(st.none(), texts), content_type=st.one_of(st.none(), texts.map(lambda t: symbol(t.encode("ascii", "ignore").decode()))),
    group_id=st.one_of(st.none(), texts), creation_time=st.one_of(st.none(), st.integers(-(2**40), 2**40).map(timestamp)),
)  # fmt: skip
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**31), 2**31 - 1), st.floats(allow_nan=False), texts,
                    st.binary(max_size=4))  # fmt: skip
annotations = st.dictionaries(st.sampled_from([OFFSET, symbol("x-opt-other")]), offsets, max_size=2)
bodies = st.one_of(
    st.binary(max_size=300).map(Data), st.text(max_size=300).map(AmqpValue), st.binary(max_size=8).map(AmqpValue),
    scalars.map(AmqpValue), st.lists(scalars, max_size=3).map(AmqpSequence),
)  # fmt: skip
#: Sections of odd shapes, each standing in for one of the usual ones: a string in a data section,
#: a symbolic descriptor, an unknown descriptor, lists where maps belong and maps where lists do,
#: null sections, an annotations map with the offset key as a string.
ODD = [
    b"\x00\x53\x75\xa1\x01x", b"\x00\xa3\x10amqp:data:binary\xa0\x01x", b"\x00\x53\x99\x40",
    b"\x00\x53\x72\xc0\x01\x00", b"\x00\x53\x72\x40", b"\x00\x53\x74\xc0\x01\x00", b"\x00\x53\x70\xc1\x01\x00",
    b"\x00\x53\x73\x40", b"\x00\x53\x70\x45", b"\x00\x53\x77\x40", b"\x00\x53\x77\xa3\x01x",
    b"\x00\x53\x72\xc1\x14\x02\xa1\x0fx-stream-offset\x55\x05",
]


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    """Sections in §3.2 order, each present or not, sometimes a second data section, a footer,
    or an odd section in place of a usual one."""
    sections: list[Any] = []
    if draw(st.booleans()):
        sections.append(draw(headers))
    if draw(st.integers(0, 5)) == 0:
        sections.append(DeliveryAnnotations({symbol("x-da"): 1}))
    if draw(st.booleans()):
        sections.append(MessageAnnotations(draw(annotations)))
    if draw(st.booleans()):
        sections.append(draw(properties))
    if draw(st.booleans()):
        sections.append(ApplicationProperties(draw(st.dictionaries(texts, scalars, max_size=3))))
    if draw(st.integers(0, 5)):
        sections.append(draw(bodies))
    if draw(st.integers(0, 8)) == 0:
        sections.append(Data(b"second"))
    if draw(st.integers(0, 8)) == 0:
        sections.append(Footer({symbol("x-hash"): b"\x00"}))
    encoded = [encode(s) for s in sections]
    if encoded and draw(st.integers(0, 3)) == 0:
        encoded[draw(st.integers(0, len(encoded) - 1))] = draw(st.sampled_from(ODD))
    return b"".join(encoded)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(messages())
def test_the_walk_gives_the_decoded_messages_row(payload: bytes) -> None:
    assert walked(payload) == reference(payload)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(messages(), st.data())
def test_mutated_messages_give_the_reference_row_or_error(payload: bytes, data: st.DataObject) -> None:
    if not payload:
        return
    mutated = bytearray(payload)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(mutated) - 1))
        if data.draw(st.booleans()):
            mutated[at] = data.draw(st.integers(0, 255))
        else:
            del mutated[at:]
            if not mutated:
                return
    assert walked(bytes(mutated)) == reference(bytes(mutated))


@settings(max_examples=200)
@given(st.lists(messages(), min_size=2, max_size=6))
def test_sections_remembered_from_earlier_messages_give_the_same_rows(payloads: list[bytes]) -> None:
    rows = Rows()
    for payload in payloads * 2:  # the second time round, headers and application-properties are known
        assert walked(payload, rows) == reference(payload)


def stream_delivery(offset: int, body: Any, *, rich: bool) -> bytes:
    sections: list[Any] = []
    if rich:
        sections.append(Header(durable=True, priority=ubyte(7), delivery_count=uint(1)))
    sections.append(MessageAnnotations({OFFSET: offset}))
    if rich:
        sections += [
            Properties(message_id=f"m-{offset}", content_type=symbol("application/octet-stream"),
                       creation_time=timestamp(1_700_000_000_000)),
            ApplicationProperties({"source": "bench", "n": 1}),
        ]  # fmt: skip
    sections.append(body)
    return b"".join(encode(s) for s in sections)


@pytest.fixture
def no_reference(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(payload: bytes) -> Any:
        raise AssertionError(f"the walk handed {payload[:32]!r}... to decode_message")

    monkeypatch.setattr(columns, "decode_message", refuse)
    yield


@pytest.mark.parametrize("offset", [0, 5, 127, -3, 128, 2**40, -(2**40)])
@pytest.mark.parametrize("body", [Data(b"\x00" * 256), AmqpValue("x" * 300), AmqpValue("short"), AmqpValue(b"raw")],
                         ids=["data", "str32", "str8", "binary"])  # fmt: skip
@pytest.mark.parametrize("rich", [False, True], ids=["bare", "rich"])
def test_stream_deliveries_never_need_the_decoded_message(offset: int, body: Any, rich: bool, no_reference: None) -> None:
    payload = stream_delivery(offset, body, rich=rich)
    rows = Rows()
    assert rows.add(payload) == offset
    assert rows.add(payload) == offset  # again, from the remembered sections
    message = decode_message(payload)
    assert rows.rows == [message_values(message)] * 2


@pytest.mark.parametrize(
    "sections",
    [
        [Data(b"body"), MessageAnnotations({OFFSET: 2**40})],
        [MessageAnnotations({OFFSET: 2**40}), MessageAnnotations({OFFSET: 2**41}), Data(b"body")],
        [Properties(subject="s"), MessageAnnotations({OFFSET: 2**40}), Data(b"body")],
    ],
    ids=["after the body", "twice", "after properties"],
)
def test_the_stream_annotation_out_of_its_place_gets_the_reference_row_or_error(sections: list[Any]) -> None:
    payload = b"".join(encode(section) for section in sections)
    assert walked(payload) == reference(payload)


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x53\x75\xa0\x03abc",  # data, vbin8
        b"\x00\x53\x75\xb0\x00\x00\x00\x03abc",  # data, vbin32
        b"\x00\x53\x77\xa1\x03abc",  # amqp-value, str8
        b"\x00\x53\x77\xb1\x00\x00\x00\x03abc",  # amqp-value, str32
        b"\x00\x53\x77\xa1\x02\xc3\xa9",  # a string of two UTF-8 bytes
        b"\x00\x53\x77\xa1\x02\xff\xfe",  # not UTF-8
        b"\x00\x53\x75\xa1\x03abc",  # data holding a string
        b"\x00\x53\x75\xa0\x09abc",  # a size past the end
        b"\x00\x53\x77\xb1\x00\x00",  # a size cut short
        b"\x00\x53\x75\xa0\x01abc",  # bytes after the body that are no section
        b"\x00\x53\x75\xa0\x03abc" + encode(Footer({symbol("x-hash"): b"\x00"})),  # a footer after it
        b"\x00\x53\x76\xa0\x03abc",  # an amqp-sequence code with binary
        b"\x00\x80" + (0x77).to_bytes(8) + b"\xa1\x03abc",  # amqp-value with a ulong descriptor
        b"\x00\x53\x77\xa3\x03abc",  # a symbol body
        b"\x00\x52\x77\xa1\x03abc",  # a uint descriptor: no section of §3.2
        b"\x01\x53\x77\xa1\x03abc",  # no descriptor at all
    ],
)
@pytest.mark.parametrize("offset", [7, 2**40, -(2**40)])
def test_a_stream_annotation_and_a_body_alone_give_the_reference_row_or_error(body: bytes, offset: int) -> None:
    """The shape read at once (the offset as a long, then one body section ending the message)
    and its near misses give what decode_message gives, added alone or taken from a stream."""
    payload = encode(MessageAnnotations({OFFSET: offset})) + body
    assert walked(payload) == reference(payload)
    rows = Rows()
    rows.read_stream("s", -(2**41), 2**41)
    try:
        rows.take(0, True, payload)
        taken = ("row", rows.next - 1, rows.rows[-1])
    except Exception as exc:  # noqa: BLE001  # any error: the same as decode_message's
        taken = ("error", type(exc).__name__, str(exc))
    assert taken == reference(payload)


def _properties(*fields: bytes, size: int | None = None, pad: bytes = b"") -> bytes:
    """A properties section (§3.2.4) of these encoded fields, as a list8 (``pad``: bytes after them)."""
    body = bytes((len(fields),)) + b"".join(fields) + pad
    return b"\x00\x53\x73\xc0" + bytes((len(body) if size is None else size,)) + body


_NULL, _STR, _SYM, _BIN = b"\x40", b"\xa1\x01z", b"\xa3\x01z", b"\xa0\x02\x00\xff"
_TS = b"\x83" + (-5).to_bytes(8, "big", signed=True)


@pytest.mark.parametrize(
    "section",
    [
        _properties(_STR, _BIN, _SYM, _STR, _BIN, _SYM, _SYM, _SYM, _TS, _TS, _STR, _NULL, _STR),  # each as allowed
        _properties(b"\xb1\x00\x00\x00\x01z", _NULL, b"\xb3\x00\x00\x00\x01z", b"\xb1\x00\x00\x00\x02ok"),  # 32-bit sizes
        _properties(_NULL, _STR),  # user-id a string
        _properties(_NULL, _NULL, _NULL, _SYM),  # subject a symbol
        _properties(_NULL, _NULL, _NULL, _BIN),  # subject binary
        _properties(*[_NULL] * 6, _STR),  # content-type a string
        _properties(*[_NULL] * 7, _BIN),  # content-encoding binary
        _properties(*[_NULL] * 8, _STR),  # absolute-expiry-time a string
        _properties(*[_NULL] * 9, _STR),  # creation-time a string
        _properties(_TS),  # message-id a timestamp
        _properties(*[_NULL] * 10, _SYM),  # group-id a symbol
        _properties(*[_NULL] * 11, b"\x52\x07"),  # group-sequence, a uint
        _properties(*[_NULL] * 11, _STR),  # group-sequence a string
        _properties(*[_NULL] * 13, _STR),  # a 14th field (a later version's: dropped)
        _properties(b"\xa1\x02\xff\xfe"),  # message-id not UTF-8
        _properties(b"\xa3\x01\xe9"),  # message-id a symbol not ASCII
        _properties(_STR, size=3),  # the list says it ends before its field does
        _properties(_STR, pad=_NULL),  # the list says it ends after its fields do
        _properties(b"\xa1\x05z"),  # a string running past the list
        _properties(*[_NULL] * 9, b"\x83\x00\x01"),  # a timestamp cut short
        _properties(b"\xc0\x01\x00"),  # message-id a list
    ],
)
def test_properties_fields_of_each_type_give_the_reference_row_or_error(section: bytes) -> None:
    payload = encode(MessageAnnotations({OFFSET: 2**40})) + section + encode(Data(b"body"))
    assert walked(payload) == reference(payload)


def _take_all(rows: Rows, payloads: list[bytes]) -> int:
    for n, payload in enumerate(payloads):
        rows.take(n, True, payload)
    return rows.next


def test_a_stream_read_adds_rows_up_to_its_range_end() -> None:
    rows = Rows()
    payloads = [stream_delivery(n, Data(b"x"), rich=False) for n in (10, 11, 12, 13)]
    rows.read_stream("s", 10, 12)
    assert _take_all(rows, payloads) == 12  # the first past the range: reading stops there
    assert len(rows) == 2
    rows.clear()
    assert len(rows) == 0
    # Offsets skipped (dropped by retention): reading goes on after the last one added.
    rows.read_stream("s", 5, 20)
    assert _take_all(rows, [payloads[0], payloads[3]]) == 14
    assert [row[0] for row in rows.rows] == [b"x", b"x"]
    with pytest.raises(ValueError, match="'orders' sent a message without x-stream-offset: is it a stream"):
        rows.read_stream("orders", 14, 20)
        rows.take(0, True, Message(body="no offset").encode())


def test_remembered_sections_are_bounded_in_number_and_size() -> None:
    rows = Rows()
    for n in range(1000):
        rows.add(b"".join(encode(s) for s in (ApplicationProperties({"n": n}), Data(b"x"))))
    assert 0 < len(rows._sections) <= columns._CACHED
    assert rows.rows[-1][-1] == {"n": "999"}
    rows._sections.clear()
    large = b"".join(encode(s) for s in (ApplicationProperties({"big": "x" * 2000}), Data(b"x")))
    rows.add(large)
    rows.add(large)
    assert not rows._sections  # decoded each time, never kept
    assert rows.rows[-1] == rows.rows[-2] and rows.rows[-1][-1] == {"big": "x" * 2000}


def test_a_message_decode_message_refuses_raises_its_error() -> None:
    bad = b"\x00\x53\x77\xa1\x02\xff\xfe"  # an amqp-value string that is not UTF-8
    with pytest.raises(AMQPDecodeError, match="UTF-8"):
        Rows().add(bad)
