"""Composite types (Part 1 §1.4): performatives, sections, outcomes, termini, coordinator, SASL, messages."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.amqp import (
    AMQPDecodeError,
    Array,
    Described,
    Message,
    codec,
    decode,
    decode_message,
    encode,
    messaging,
    performatives,
    sasl_frames,
    symbol,
    timestamp,
    transactions,
    ubyte,
    uint,
    ulong,
    ushort,
)
from minibroker.amqp.composite import Composite, DescribedValue
from minibroker.amqp.message import split_sections
from minibroker.amqp.messaging import (
    Accepted,
    AmqpSequence,
    AmqpValue,
    ApplicationProperties,
    Data,
    DeleteOnClose,
    DeleteOnNoLinks,
    DeleteOnNoLinksOrMessages,
    DeleteOnNoMessages,
    DeliveryAnnotations,
    Footer,
    Header,
    MessageAnnotations,
    Modified,
    Properties,
    Received,
    Rejected,
    Released,
    Source,
    Target,
)
from minibroker.amqp.performatives import (
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    End,
    Error,
    Flow,
    Open,
    Transfer,
)
from minibroker.amqp.sasl_frames import SaslChallenge, SaslInit, SaslMechanisms, SaslOutcome, SaslResponse
from minibroker.amqp.transactions import Coordinator, Declare, Declared, Discharge, TransactionalState


def _hex(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


ERR = Error(condition=symbol("amqp:not-found"), description="no such node", info={"node": "q1", "n": 3})
TXN = b"\x00\x00\x00\x07"

#: For every declared type: a minimal and a fully populated instance (non-default in every field).
EXAMPLES: list[Any] = [
    # performatives (Part 2 §2.7)
    Open(container_id="c1"),
    Open(
        container_id="c1", hostname="example.com", max_frame_size=uint(65536), channel_max=ushort(7),
        idle_time_out=uint(30000), outgoing_locales=["en-US"], incoming_locales=["en-US", "de-DE"],
        offered_capabilities=["ANONYMOUS-RELAY"], desired_capabilities=["DELAYED_DELIVERY", "SHARED-SUBS"],
        properties={"product": "minibroker", symbol("version"): "0.1"},
    ),
    Begin(next_outgoing_id=uint(0), incoming_window=uint(2048), outgoing_window=uint(2048)),
    Begin(
        remote_channel=ushort(3), next_outgoing_id=uint(1), incoming_window=uint(2), outgoing_window=uint(3),
        handle_max=uint(63), offered_capabilities=["a"], desired_capabilities=["b", "c"], properties={"p": True},
    ),
    Attach(name="l", handle=uint(0), role=False),
    Attach(
        name="link-1", handle=uint(5), role=True, snd_settle_mode=ubyte(1), rcv_settle_mode=ubyte(1),
        source=Source(address="q1"), target=Target(address="q2"),
        unsettled={b"tag-1": Accepted(), b"tag-2": None}, incomplete_unsettled=True,
        initial_delivery_count=uint(0), max_message_size=ulong(2**40), offered_capabilities=["x"],
        desired_capabilities=["y"], properties={"k": Array("int", [])},
    ),
    Attach(name="txn", handle=uint(1), role=False, source=Source(), target=Coordinator(capabilities=["amqp:local-transactions"])),
    Flow(incoming_window=uint(1), next_outgoing_id=uint(2), outgoing_window=uint(3)),
    Flow(
        next_incoming_id=uint(9), incoming_window=uint(1), next_outgoing_id=uint(2), outgoing_window=uint(3),
        handle=uint(4), delivery_count=uint(5), link_credit=uint(6), available=uint(7), drain=True, echo=True,
        properties={"x": 1},
    ),
    Transfer(handle=uint(0)),
    Transfer(
        handle=uint(1), delivery_id=uint(2), delivery_tag=b"\x01", message_format=uint(0), settled=False,
        more=True, rcv_settle_mode=ubyte(1), state=TransactionalState(txn_id=TXN, outcome=Accepted()),
        resume=True, aborted=True, batchable=True,
    ),
    Disposition(role=True, first=uint(0)),
    Disposition(role=True, first=uint(1), last=uint(9), settled=True, state=Received(section_number=uint(1), section_offset=ulong(2)), batchable=True),
    Disposition(role=True, first=uint(1), state=Rejected(error=ERR)),
    Disposition(role=True, first=uint(1), state=Modified(delivery_failed=True)),
    Detach(handle=uint(0)),
    Detach(handle=uint(3), closed=True, error=ERR),
    End(),
    End(error=ERR),
    Close(),
    Close(error=Error(condition=symbol("amqp:connection:forced"))),
    ERR,
    # message sections (Part 3 §3.2)
    Header(),
    Header(durable=True, priority=ubyte(9), ttl=uint(1000), first_acquirer=True, delivery_count=uint(3)),
    DeliveryAnnotations({symbol("x-opt-a"): 1}),
    MessageAnnotations({symbol("x-opt-b"): "b", ulong(7): None}),
    Properties(),
    Properties(
        message_id=uuid.UUID(int=1), user_id=b"alice", to="q", subject="s", reply_to="r",
        correlation_id=ulong(5), content_type=symbol("text/plain"), content_encoding=symbol("gzip"),
        absolute_expiry_time=timestamp(2), creation_time=timestamp(1), group_id="g",
        group_sequence=uint(4), reply_to_group_id="rg",
    ),
    ApplicationProperties({"a": 1, "b": "two", "c": None}),
    Data(b""),
    Data(b"\x00" * 300),
    AmqpSequence([]),
    AmqpSequence([1, "x", [symbol("y")]]),
    AmqpValue(None),
    AmqpValue({"k": [1, 2]}),
    AmqpValue(Described(ulong(0x99), "custom")),
    Footer({symbol("hash"): b"\x01\x02"}),
    # delivery states and outcomes (Part 3 §3.4)
    Received(section_number=uint(0), section_offset=ulong(0)),
    Accepted(),
    Rejected(),
    Rejected(error=ERR),
    Released(),
    Modified(),
    Modified(delivery_failed=True, undeliverable_here=True, message_annotations={"x-opt-c": 1}),
    # termini and lifetime policies (Part 3 §3.5)
    Source(),
    Source(
        address="q", durable=uint(2), expiry_policy=symbol("never"), timeout=uint(5), dynamic=True,
        dynamic_node_properties={"lifetime-policy": DeleteOnClose()}, distribution_mode=symbol("copy"),
        filter={"f": Described(symbol("apache.org:selector-filter:string"), "a = 1")},
        default_outcome=Modified(delivery_failed=True), outcomes=["amqp:accepted:list", "amqp:rejected:list"],
        capabilities=["queue"],
    ),
    Target(),
    Target(
        address="t", durable=uint(1), expiry_policy=symbol("link-detach"), timeout=uint(9), dynamic=True,
        dynamic_node_properties={"lifetime-policy": DeleteOnNoLinksOrMessages()}, capabilities=["topic"],
    ),
    DeleteOnClose(),
    DeleteOnNoLinks(),
    DeleteOnNoMessages(),
    DeleteOnNoLinksOrMessages(),
    # transactions (Part 4 §4.5)
    Coordinator(),
    Coordinator(capabilities=["amqp:local-transactions", "amqp:multi-txns-per-ssn"]),
    Declare(),
    Declare(global_id=Described(ulong(0x99), b"xid")),
    Declared(txn_id=TXN),
    Discharge(txn_id=TXN),
    Discharge(txn_id=TXN, fail=True),
    TransactionalState(txn_id=TXN),
    TransactionalState(txn_id=TXN, outcome=Rejected(error=ERR)),
    # SASL (Part 5 §5.3.3)
    SaslMechanisms(sasl_server_mechanisms=["PLAIN"]),
    SaslMechanisms(sasl_server_mechanisms=["PLAIN", "ANONYMOUS", "EXTERNAL"]),
    SaslInit(mechanism=symbol("ANONYMOUS")),
    SaslInit(mechanism=symbol("PLAIN"), initial_response=b"\x00user\x00pass", hostname="example.com"),
    SaslChallenge(challenge=b"c"),
    SaslResponse(response=b"r"),
    SaslOutcome(code=ubyte(0)),
    SaslOutcome(code=ubyte(1), additional_data=b"why"),
]  # fmt: skip


def _declared_types() -> set[type]:
    found = set()
    for module in (performatives, messaging, transactions, sasl_frames):
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, (Composite, DescribedValue))
                and value not in (Composite, DescribedValue)
                and "DESCRIPTOR" in vars(value)
            ):
                found.add(value)
    return found


def test_examples_cover_every_declared_type() -> None:
    declared = _declared_types()
    assert len(declared) >= 40
    assert declared <= {type(x) for x in EXAMPLES}
    # every registered descriptor belongs to one of them, under both its code and its name
    for cls in declared:
        assert cls.DESCRIPTOR in codec.DESCRIBED_TYPES
        assert cls.DESCRIPTOR_NAME in codec.DESCRIBED_TYPES


def _ids(examples: list[Any]) -> list[str]:
    return [f"{i}-{type(x).__name__}" for i, x in enumerate(examples)]


@pytest.mark.parametrize("value", EXAMPLES, ids=_ids(EXAMPLES))
def test_roundtrip(value: Any) -> None:
    data = encode(value)
    decoded = decode(data)
    assert type(decoded) is type(value)
    assert decoded == value
    assert encode(decoded) == data  # canonical
    assert codec.skip_at(data, 0) == len(data)
    # described list (composites) or descriptor + value (restricted types), with the short ulong descriptor
    assert data[:3] == b"\x00\x53" + bytes([int(type(value).DESCRIPTOR)])


@pytest.mark.parametrize("value", EXAMPLES, ids=_ids(EXAMPLES))
def test_symbolic_and_wide_descriptors_decode_to_the_same_class(value: Any) -> None:
    """`00 a3 "amqp:open:list" ...` and `00 80 <8 bytes> ...` mean the same as `00 53 10 ...` (§1.5)."""
    body = encode(value)[3:]
    by_name = b"\x00" + encode(type(value).DESCRIPTOR_NAME) + body
    wide = b"\x00\x80" + struct.pack(">Q", int(type(value).DESCRIPTOR)) + body
    for data in (by_name, wide):
        decoded = decode(data)
        assert type(decoded) is type(value)
        assert decoded == value


def test_decoded_field_types() -> None:
    """Fields come back as the AMQP types they were written as."""
    d = decode(encode(EXAMPLES[1]))
    assert type(d.max_frame_size) is uint
    assert type(d.channel_max) is ushort
    assert all(type(s) is symbol for s in d.offered_capabilities + d.desired_capabilities)
    assert all(type(k) is symbol for k in d.properties)  # fields: string keys go out as symbols
    h = decode(encode(Header(durable=True, priority=9, ttl=1000)))
    assert (type(h.priority), type(h.ttl)) == (ubyte, uint)


# ---------------------------------------------------------------------------
# trailing defaults are omitted on encode, padded on decode (Part 1 §1.4)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (Close(), "00 53 18 45"),
        (End(), "00 53 17 45"),
        (Accepted(), "00 53 24 45"),
        (Released(), "00 53 26 45"),
        (Header(), "00 53 70 45"),
        (Header(durable=False, priority=4, delivery_count=0), "00 53 70 45"),
        (Header(durable=True), "00 53 70 c0 02 01 41"),
        (Header(ttl=5), "00 53 70 c0 06 03 42 50 04 52 05"),  # defaults before a set field are written
        (Open(container_id="c"), "00 53 10 c0 04 01 a1 01 63"),
        (Open(container_id="c", max_frame_size=2**32 - 1, channel_max=65535), "00 53 10 c0 04 01 a1 01 63"),
        (Open(container_id="c", channel_max=1), "00 53 10 c0 0d 04 a1 01 63 40 70 ff ff ff ff 60 00 01"),
        (Flow(incoming_window=1, next_outgoing_id=2, outgoing_window=3), "00 53 13 c0 08 04 40 52 01 52 02 52 03"),
        (Flow(incoming_window=1, next_outgoing_id=2, outgoing_window=3, drain=False, echo=False),
         "00 53 13 c0 08 04 40 52 01 52 02 52 03"),
        (Flow(incoming_window=1, next_outgoing_id=2, outgoing_window=3, drain=True),
         "00 53 13 c0 0d 09 40 52 01 52 02 52 03 40 40 40 40 41"),
        (Transfer(handle=0, settled=False), "00 53 14 c0 06 05 43 40 40 40 42"),
        (Disposition(role=True, first=0, settled=True), "00 53 15 c0 05 04 41 43 40 41"),
        (Source(address="q", expiry_policy=symbol("session-end")), "00 53 28 c0 04 01 a1 01 71"),
        (Modified(delivery_failed=False, undeliverable_here=False), "00 53 27 45"),
        (Discharge(txn_id=b"t", fail=False), "00 53 32 c0 04 01 a0 01 74"),
        (Data(b"ab"), "00 53 75 a0 02 61 62"),
        (AmqpValue(None), "00 53 77 40"),
        (AmqpSequence([]), "00 53 76 45"),
        (ApplicationProperties({"k": 1}), "00 53 74 c1 06 02 a1 01 6b 55 01"),  # map: keys stay strings
        (MessageAnnotations({"k": 1}), "00 53 72 c1 06 02 a3 01 6b 55 01"),  # fields: keys become symbols
    ],
)  # fmt: skip
def test_encoding(value: Any, wire: str) -> None:
    assert encode(value) == _hex(wire)


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("00 53 70 45", Header()),
        ("00 53 70 c0 01 00", Header()),  # list8 of nothing
        ("00 53 70 d0 00 00 00 04 00 00 00 00", Header()),
        ("00 53 70 c0 02 01 41", Header(durable=True, priority=4, delivery_count=0)),
        ("00 53 70 c0 03 02 40 40", Header()),  # explicit nulls take the defaults
        ("00 53 10 c0 04 01 a1 01 63", Open(container_id="c", max_frame_size=2**32 - 1, channel_max=65535)),
        (
            "00 53 13 c0 08 04 40 52 01 52 02 52 03",
            Flow(incoming_window=1, next_outgoing_id=2, outgoing_window=3),
        ),
        ("00 53 28 45", Source(durable=0, expiry_policy=symbol("session-end"), timeout=0, dynamic=False)),
        ("00 53 18 c0 03 02 40 40", Close()),  # fields from a later version of the spec are ignored
        ("00 53 24 c0 02 01 41", Accepted()),
    ],
)
def test_missing_trailing_fields_are_padded(wire: str, expected: Any) -> None:
    decoded = decode(_hex(wire))
    assert decoded == expected
    assert type(decoded) is type(expected)


def test_padded_defaults_have_their_values() -> None:
    h = decode(_hex("00 53 70 45"))
    assert (h.durable, h.priority, h.ttl, h.first_acquirer, h.delivery_count) == (False, 4, None, False, 0)
    o = decode(_hex("00 53 10 c0 04 01 a1 01 63"))
    assert (o.max_frame_size, o.channel_max, o.hostname, o.offered_capabilities) == (
        2**32 - 1,
        65535,
        None,
        None,
    )


@pytest.mark.parametrize(
    "value",
    [
        Described(ulong(0x10), []),  # open without container-id
        Described(ulong(0x10), [None, "host"]),
        Described(ulong(0x11), [None, uint(1), uint(2)]),  # begin without outgoing-window
        Described(ulong(0x12), ["l", uint(0)]),  # attach without role
        Described(ulong(0x12), ["l", None, True]),
        Described(ulong(0x13), [None, uint(1)]),  # flow missing mandatory windows
        Described(ulong(0x14), []),  # transfer without handle
        Described(ulong(0x15), [True]),  # disposition without first
        Described(ulong(0x16), [None, True]),  # detach without handle
        Described(ulong(0x1D), [None, "description"]),  # error without condition
        Described(ulong(0x23), [uint(0)]),  # received without section-offset
        Described(ulong(0x32), [None, True]),  # discharge without txn-id
        Described(ulong(0x33), []),
        Described(ulong(0x34), [None]),
        Described(ulong(0x40), []),  # sasl-mechanisms without mechanisms
        Described(ulong(0x41), [None, b"resp"]),
        Described(ulong(0x42), []),
        Described(ulong(0x43), [None]),
        Described(ulong(0x44), []),
        Described(symbol("amqp:open:list"), [None]),
    ],
)
def test_mandatory_field_null_is_a_decode_error(value: Described) -> None:
    with pytest.raises(AMQPDecodeError, match="mandatory"):
        decode(encode(value))


@pytest.mark.parametrize(
    "wire",
    [
        "00 53 10 a1 01 63",  # open body that is a string, not a list
        "00 53 18 40",  # close body null
        "00 53 24 c1 01 00",  # accepted body that is a map
        "00 53 70 e0 02 00 50",  # header body that is an array
        "00 53 10 c0 03 01 a1",  # truncated
    ],
)
def test_malformed_composites(wire: str) -> None:
    with pytest.raises(AMQPDecodeError):
        decode(_hex(wire))


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("00 53 99 45", Described(ulong(0x99), [])),
        ("00 53 99 c0 02 01 41", Described(ulong(0x99), [True])),
        ("00 80 00 00 01 37 00 00 00 01 a1 01 78", Described(ulong(0x0000_0137_0000_0001), "x")),
        ("00 a3 0c 63 6f 6d 2e 65 78 3a 74 68 69 6e 67 40", Described(symbol("com.ex:thing"), None)),
        ("00 53 1f 45", Described(ulong(0x1F), [])),  # between registered codes
    ],
)
def test_unknown_descriptors_decode_to_described(wire: str, expected: Described) -> None:
    decoded = decode(_hex(wire))
    assert type(decoded) is Described
    assert decoded == expected
    assert type(decoded.descriptor) is type(expected.descriptor)
    if not wire.startswith("00 80"):  # (re-encoding picks the compact ulong form)
        assert encode(decoded) == _hex(wire)


def test_symbol_descriptor_decodes_to_the_registered_class() -> None:
    data = encode(Described(symbol("amqp:open:list"), ["container"]))
    assert decode(data) == Open(container_id="container")
    data = encode(Described(symbol("amqp:data:binary"), b"x"))
    assert decode(data) == Data(b"x")
    data = encode(Described(symbol("amqp:sasl-outcome:list"), [ubyte(0)]))
    assert decode(data) == SaslOutcome(code=ubyte(0))


# ---------------------------------------------------------------------------
# multiple=true symbol fields (Part 1 §1.3)
# ---------------------------------------------------------------------------


def test_multiple_fields_single_symbol_decodes_to_a_list() -> None:
    fields: list[Any] = ["c", None, None, None, None, symbol("en-US"), None, symbol("cap"), None]
    decoded = decode(encode(Described(ulong(0x10), fields)))
    assert decoded.outgoing_locales == [symbol("en-US")]
    assert decoded.offered_capabilities == ["cap"]
    assert type(decoded.offered_capabilities) is list
    assert type(decoded.offered_capabilities[0]) is symbol
    assert decoded.incoming_locales is None
    decoded = decode(encode(Described(ulong(0x40), [symbol("PLAIN")])))
    assert decoded == SaslMechanisms(sasl_server_mechanisms=["PLAIN"])


def test_multiple_fields_array_decodes_to_a_list() -> None:
    arr = Array("symbol", [symbol("a"), symbol("b")])
    decoded = decode(encode(Described(ulong(0x30), [arr])))
    assert decoded == Coordinator(capabilities=["a", "b"])
    assert type(decoded.capabilities) is list
    empty = decode(encode(Described(ulong(0x30), [Array("symbol", [])])))
    assert empty.capabilities == []


def test_multiple_fields_encode_one_symbol_as_a_symbol() -> None:
    assert encode(Coordinator(capabilities="amqp:local-transactions")).endswith(
        encode(symbol("amqp:local-transactions"))
    )
    data = encode(Coordinator(capabilities=["a", "b"]))
    assert data == _hex("00 53 30 c0 09 01 e0 06 02 a3 01 61 01 62")
    assert decode(encode(Coordinator(capabilities="x"))) == Coordinator(capabilities=["x"])


def test_arrays_of_composites() -> None:
    """A described array of composites shares one descriptor; its elements decode to the class."""
    arr = Array("list", [Modified(), Modified(delivery_failed=True)], descriptor=ulong(0x27))
    decoded = decode(encode(arr))
    assert decoded.elements == [Modified(), Modified(delivery_failed=True)]
    data_array = Array("binary", [Data(b"a"), Data(b"bc")], descriptor=ulong(0x75))
    decoded = decode(encode(data_array))
    assert decoded.elements == [Data(b"a"), Data(b"bc")]
    assert decoded.descriptor == ulong(0x75)


# Hypothesis over a few composites whose fields take arbitrary values.
_uints = st.integers(0, 2**32 - 1).map(uint)
_opt_uints = st.one_of(st.none(), _uints)
_syms = st.text(st.characters(max_codepoint=127), max_size=10).map(symbol)
_sym_lists = st.one_of(st.none(), st.lists(_syms, min_size=1, max_size=3))
_fields = st.one_of(
    st.none(),
    st.dictionaries(_syms, st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=5)), max_size=3),
)


@settings(max_examples=150)
@given(
    st.one_of(
        st.builds(
            Flow, next_incoming_id=_opt_uints, incoming_window=_uints, next_outgoing_id=_uints, outgoing_window=_uints,
            handle=_opt_uints, delivery_count=_opt_uints, link_credit=_opt_uints, available=_opt_uints,
            drain=st.booleans(), echo=st.booleans(), properties=_fields,
        ),
        st.builds(
            Open, container_id=st.text(max_size=10), hostname=st.one_of(st.none(), st.text(max_size=10)),
            max_frame_size=_uints, channel_max=st.integers(0, 65535).map(ushort), idle_time_out=_opt_uints,
            outgoing_locales=_sym_lists, incoming_locales=_sym_lists, offered_capabilities=_sym_lists,
            desired_capabilities=_sym_lists, properties=_fields,
        ),
        st.builds(
            Header, durable=st.booleans(), priority=st.integers(0, 255).map(ubyte), ttl=_opt_uints,
            first_acquirer=st.booleans(), delivery_count=_uints,
        ),
        st.builds(
            Transfer, handle=_uints, delivery_id=_opt_uints, delivery_tag=st.one_of(st.none(), st.binary(max_size=8)),
            message_format=_opt_uints, settled=st.one_of(st.none(), st.booleans()), more=st.booleans(),
            rcv_settle_mode=st.one_of(st.none(), st.integers(0, 1).map(ubyte)),
            state=st.sampled_from([None, Accepted(), Released(), Rejected(error=ERR)]),
            resume=st.booleans(), aborted=st.booleans(), batchable=st.booleans(),
        ),
    )
)  # fmt: skip
def test_generated_composites_roundtrip(value: Any) -> None:
    data = encode(value)
    decoded = decode(data)
    assert decoded == value
    assert encode(decoded) == data
    # trailing defaults are never written: the last field on the wire differs from its default
    body = decode(b"\x00\x53\x99" + data[3:]).value
    if body:
        last = body[-1]
        name = [f for f in type(value).__dataclass_fields__][len(body) - 1]
        default = type(value).__dataclass_fields__[name].default
        assert last is not None and last != default


# ---------------------------------------------------------------------------
# messages: section order and split_sections (Part 3 §3.2)
# ---------------------------------------------------------------------------

HEADER = Header(durable=True, ttl=uint(100))
DA = DeliveryAnnotations({symbol("x-da"): 1})
MA = MessageAnnotations({symbol("x-opt-ma"): "m"})
PROPS = Properties(message_id="id-1", to="q", subject="s")
AP = ApplicationProperties({"colour": "red", "n": 3})
FOOTER = Footer({symbol("x-hash"): b"\x00"})


def _cat(*sections: Any) -> bytes:
    return b"".join(encode(s) for s in sections)


@pytest.mark.parametrize(
    ("name", "sections"),
    [
        ("properties before header", [PROPS, HEADER, AmqpValue(1)]),
        ("message-annotations before delivery-annotations", [MA, DA, AmqpValue(1)]),
        ("application-properties before properties", [AP, PROPS, AmqpValue(1)]),
        ("amqp-value followed by data", [AmqpValue(1), Data(b"x")]),
        ("data followed by amqp-value", [Data(b"x"), AmqpValue(1)]),
        ("two amqp-values", [AmqpValue(1), AmqpValue(2)]),
        ("data followed by amqp-sequence", [Data(b"x"), AmqpSequence([1])]),
        ("amqp-sequence followed by data", [AmqpSequence([1]), Data(b"x")]),
        ("footer before body", [HEADER, FOOTER, AmqpValue(1)]),
        ("application-properties after body", [AmqpValue(1), AP]),
        ("two headers", [HEADER, HEADER, AmqpValue(1)]),
        ("two properties", [PROPS, PROPS, AmqpValue(1)]),
        ("two footers", [AmqpValue(1), FOOTER, FOOTER]),
        ("a performative is not a section", [Close()]),
        ("an unknown descriptor is not a section", [Described(ulong(0x99), None)]),
        ("a list descriptor is not a section", [Described([], None)]),
        ("a bare value is not a section", [AmqpValue(1), 5]),
    ],
)
def test_section_order_enforced(name: str, sections: list[Any]) -> None:
    data = _cat(*sections)
    with pytest.raises(AMQPDecodeError):
        split_sections(data)
    with pytest.raises(AMQPDecodeError):
        decode_message(data)


@pytest.mark.parametrize(
    "data",
    [
        _cat(HEADER)[:-1],  # truncated section
        _cat(AmqpValue("x" * 10))[:-3],
        b"\x00",
        b"\x00\x53",
        b"\x00\x53\x77",
        b"\x00" * 5000 + b"\x40",
        b"\x00\x53\x77" + b"\x00\x53\x99" * 2000 + b"\x40",  # deeply nested described body
    ],
)
def test_malformed_messages(data: bytes) -> None:
    with pytest.raises(AMQPDecodeError):
        decode_message(data)


def test_delivery_annotations_may_come_last_as_azure_clients_send_them() -> None:
    parts = [HEADER, PROPS, AmqpValue("x"), FOOTER, DA]
    encoded = [encode(p) for p in parts]
    data = b"".join(encoded)
    s = split_sections(data)
    end_of_footer = len(data) - len(encoded[-1])
    assert s.delivery_annotations == (end_of_footer, len(data))
    assert s.footer[1] == end_of_footer
    assert data[slice(*s.bare)] == encode(PROPS) + encode(AmqpValue("x"))
    message = decode_message(data)
    assert message.delivery_annotations == DA.value
    assert message.body == "x"


@pytest.mark.parametrize(
    "sections",
    [
        [DA, AmqpValue(1), DA],  # twice
        [AmqpValue(1), DA, FOOTER],  # not last
        [AmqpValue(1), DA, MA],
        [HEADER, DA],  # no body: an ordinary (leading) section, so nothing to tolerate
    ],
)
def test_trailing_delivery_annotations_are_tolerated_only_once_and_last(sections: list[Any]) -> None:
    data = _cat(*sections)
    if sections == [HEADER, DA]:
        assert split_sections(data).delivery_annotations[1] == len(data)
        return
    with pytest.raises(AMQPDecodeError):
        split_sections(data)


def test_split_sections_offsets() -> None:
    parts = [HEADER, DA, MA, PROPS, AP, AmqpValue([1, "two"]), FOOTER]
    encoded = [encode(p) for p in parts]
    data = b"".join(encoded)
    ends = [sum(len(e) for e in encoded[: i + 1]) for i in range(len(encoded))]
    s = split_sections(data)
    assert s.header == (0, ends[0])
    assert s.delivery_annotations == (ends[0], ends[1])
    assert s.message_annotations == (ends[1], ends[2])
    assert s.bare == (ends[2], ends[5])
    assert s.footer == (ends[5], ends[6])
    assert data[slice(*s.bare)] == encode(PROPS) + encode(AP) + encode(AmqpValue([1, "two"]))
    # the same via a memoryview, and with symbolic section descriptors
    assert split_sections(memoryview(data)) == s
    symbolic = b"".join(
        b"\x00" + encode(type(p).DESCRIPTOR_NAME) + e[3:] for p, e in zip(parts, encoded, strict=True)
    )
    s2 = split_sections(symbolic)
    assert symbolic[slice(*s2.bare)] == b"".join(
        b"\x00" + encode(type(p).DESCRIPTOR_NAME) + e[3:]
        for p, e in zip(parts[3:6], encoded[3:6], strict=True)
    )
    assert decode_message(symbolic) == decode_message(data)


@pytest.mark.parametrize(
    "parts",
    [
        [AmqpValue(1)],
        [HEADER, AmqpValue(1)],
        [MA, Data(b"a"), Data(b"b")],
        [PROPS, AmqpSequence([1]), AmqpSequence([2]), FOOTER],
        [HEADER, DA, AP, Data(b"z"), FOOTER],
        [HEADER],  # no body at all
        [],
    ],
)
def test_split_sections_partial_messages(parts: list[Any]) -> None:
    data = _cat(*parts)
    s = split_sections(data)
    bare = [
        p for p in parts if isinstance(p, (Properties, ApplicationProperties, Data, AmqpSequence, AmqpValue))
    ]
    assert data[slice(*s.bare)] == _cat(*bare)
    assert data[slice(*s.header)] == _cat(*[p for p in parts if isinstance(p, Header)])
    assert data[slice(*s.delivery_annotations)] == _cat(
        *[p for p in parts if isinstance(p, DeliveryAnnotations)]
    )
    assert data[slice(*s.message_annotations)] == _cat(
        *[p for p in parts if isinstance(p, MessageAnnotations)]
    )
    assert data[slice(*s.footer)] == _cat(*[p for p in parts if isinstance(p, Footer)])


@pytest.mark.parametrize(
    "message",
    [
        Message(body="hello"),
        Message(body=None),
        Message(body=b"bytes", body_kind="data"),
        Message(body=[b"a", b"b"], body_kind="data"),
        Message(body=[1, 2], body_kind="sequence"),
        Message(body=[[1], [2, 3]], body_kind="sequence"),
        Message(
            body={"k": [1, symbol("s")]},
            header=HEADER,
            delivery_annotations={symbol("x-da"): 1},
            message_annotations={symbol("x-opt-ma"): "m"},
            properties=PROPS,
            application_properties={"colour": "red"},
            footer={symbol("x-hash"): b"\x00"},
        ),
    ],
)
def test_message_roundtrip(message: Message) -> None:
    data = message.encode()
    decoded = decode_message(data)
    assert decoded == message
    assert decoded.encode() == data


def test_message_encode_is_sections_in_order() -> None:
    message = Message(
        body=[1],
        header=HEADER,
        delivery_annotations=DA.value,
        message_annotations=MA.value,
        properties=PROPS,
        application_properties=AP.value,
        footer=FOOTER.value,
    )
    assert message.encode() == _cat(HEADER, DA, MA, PROPS, AP, AmqpValue([1]), FOOTER)


def test_int_too_large_for_long_says_how_to_encode_it() -> None:
    with pytest.raises(OverflowError, match="use ulong"):
        encode(2**63)
    with pytest.raises(OverflowError):
        encode(-(2**63) - 1)


@pytest.mark.parametrize(
    ("section", "expected"),
    [(b"\x00\x53\x75\xa1\x02hi", "data section holds binary"), (b"\x00\x53\x76\xa1\x02hi", "holds a list")],
)
def test_body_sections_must_hold_their_type(section: bytes, expected: str) -> None:
    with pytest.raises(AMQPDecodeError, match=expected):
        decode_message(section)
