"""The engine's direct flow reader (protocol/flow.py ``read_flow``) agrees with the general decoder (§2.7.4).

It may decline any frame (the general path then reads it); whatever it accepts, it must read
to the same field values as ``codec.decode_at``, and a connection must answer a flow read
either way alike.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from minibroker import Broker
from minibroker.amqp import codec
from minibroker.amqp.performatives import Flow
from minibroker.amqp.types import symbol
from minibroker.api import build_message
from minibroker.protocol import runs as runs_module
from minibroker.protocol.flow import read_flow
from minibroker.testing import Peer, connect

uints = st.integers(0, 2**32 - 1)
FIELDS = (
    "next_incoming_id", "incoming_window", "next_outgoing_id", "outgoing_window", "handle", "delivery_count",
    "link_credit", "available", "drain", "echo", "properties",
)  # fmt: skip


def encoded(flow: Flow) -> bytes:
    out = bytearray()
    flow.encode_into(out)
    return bytes(out)


def fields(flow: Any) -> tuple[Any, ...]:
    return tuple(getattr(flow, name) for name in FIELDS)


@given(
    next_incoming_id=st.none() | uints,
    incoming_window=uints,
    next_outgoing_id=uints,
    outgoing_window=uints,
    handle=st.none() | uints,
    delivery_count=st.none() | uints,
    link_credit=st.none() | uints,
    available=st.none() | uints,
    drain=st.booleans(),
    echo=st.booleans(),
)
def test_what_the_codec_writes_is_read_the_same(**values: Any) -> None:
    data = encoded(Flow(**values))
    read = read_flow(data, 0, len(data))
    assert read is not None
    assert fields(read) == fields(codec.decode_at(data, 0)[0])


def test_shorter_lists_and_null_booleans_read_as_the_codec_reads_them() -> None:
    # What a client may write: the trailing fields left out, a boolean as null (its default, false).
    head = bytes.fromhex("005313c0")
    for body in ("04 40 707fffffff 43 707fffffff", "09 43 5264 43 5264 43 43 5205 40 40", "0a 43 43 43 43 43 43 43 40 41 40"):
        items = bytes.fromhex(body.replace(" ", ""))
        data = head + bytes((len(items),)) + items
        read = read_flow(data, 0, len(data))
        assert read is not None, body
        assert fields(read) == fields(codec.decode_at(data, 0)[0]), body


def test_what_it_does_not_read_is_left_to_the_codec() -> None:
    with_properties = encoded(Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1, properties={symbol("k"): 1}))
    assert read_flow(with_properties, 0, len(with_properties)) is None
    head = bytes.fromhex("005313c0")
    for body in (
        "03 40 43 43",  # a mandatory field missing: the codec refuses it
        "04 40 40 43 43",  # incoming-window null: the same
        "04 40 43 43 530a",  # a smallulong where a uint belongs: the codec judges it
        "09 43 43 43 43 43 43 43 43 5600",  # a boolean in its two-byte form
    ):
        items = bytes.fromhex(body.replace(" ", ""))
        data = head + bytes((len(items),)) + items
        assert read_flow(data, 0, len(data)) is None, body
    data = encoded(Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1))
    assert read_flow(data + b"\x40", 0, len(data) + 1) is None  # the list does not end where the frame does
    assert read_flow(data[:-1], 0, len(data) - 1) is None  # it claims more than there is


def test_a_connection_answers_a_flow_read_directly_as_it_answers_one_decoded(monkeypatch: Any) -> None:
    def conversation() -> list[tuple[str, bytes]]:
        broker = Broker()
        broker.declare_queue("q")
        for body in range(3):
            broker.publish("q", build_message(str(body)))
        peer = Peer()
        pump = connect(broker, peer)
        pump.send(peer.start())
        pump.send(peer.attach_receiver("r", "q", 0))
        reads = [pump.send(peer.flow(0, credit=2)), pump.send(peer.flow(0, credit=5, echo=True, drain=True))]
        return [(repr(frame.performative), frame.payload) for read in reads for frame in read]

    direct_reads: list[Any] = []
    monkeypatch.setattr(runs_module, "read_flow", lambda *args: direct_reads.append(read_flow(*args)) or direct_reads[-1])
    direct = conversation()
    assert len(direct_reads) == 2 and None not in direct_reads  # both flows were read directly
    read: list[int] = []
    monkeypatch.setattr(runs_module, "read_flow", lambda *args: read.append(1))  # declines: the codec reads it
    decoded = conversation()
    assert read  # the second conversation's flows went to the general decoder
    assert direct == decoded
    assert any("Transfer" in performative for performative, _payload in direct)
    assert any("Flow" in performative for performative, _payload in direct)  # the drain's answer
