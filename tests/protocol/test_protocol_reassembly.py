"""Frame reassembly: however the byte stream is cut, the engine sees the same conversation
(Part 2 §2.3: frames are self-delimiting; a transport may deliver them in any pieces).

The conversation runs in two causal steps, since a client only sends transfers
once a flow from the server gave it credit (§2.6.7): each step is fed whole,
one byte at a time, or cut at random points, and the events and the frames
written back must not change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.amqp.message import Message
from minibroker.amqp.messaging import Accepted
from minibroker.amqp.performatives import Error
from minibroker.protocol import Connection, events
from minibroker.testing import Frames, Peer, auto_accept, connect


def conversation() -> list[bytes]:
    """The peer's bytes in causal steps (each step needs the server's answers to the previous one)."""
    peer = Peer(max_frame_size=4096)
    peer.remote_max_frame_size = 4096
    big = Message(body="x" * 3000).encode()
    step1 = (
        peer.header()
        + peer.open(hostname="example.org")
        + peer.begin()
        + peer.attach_sender("snd", "q", 0)
        + peer.attach_receiver("rcv", "q", 1, distribution_mode="move")
        + peer.flow(1, credit=5)
    )
    step2 = (
        peer.transfer(0, 0, b"t0", Message(body="small").encode())
        + peer.transfer(0, 1, b"t1", big, frame_payload=1000)  # four frames with ``more``
        + peer.transfer(0, 2, b"t2", b"abandoned" * 50, frame_payload=200, aborted=True)
        + peer.transfer(0, 3, b"t3", Message(body="pre-settled").encode(), settled=True)
        + peer.empty_frame()
        + peer.disposition(0, state=Accepted())  # settles what the server sent on "rcv"
        + peer.flow(1, credit=5, echo=True)
        + peer.detach(0)
        + peer.detach(1, closed=False)
        + peer.end()
        + peer.close(Error(condition="amqp:internal-error", description="bye"))
    )
    return [step1, step2]


def summarize(event: Any) -> tuple[Any, ...]:
    """An event as plain data, without the engine objects it references."""
    if isinstance(event, events.ConnectionOpened):
        return ("opened", event.container_id, event.hostname, event.user)
    if isinstance(event, events.ConnectionClosed):
        return ("closed", event.error, event.by_peer)
    if isinstance(event, events.SessionBegun):
        return ("begun", event.session.remote_channel)
    if isinstance(event, events.SessionEnded):
        return ("ended", event.session.remote_channel, event.error)
    if isinstance(event, events.LinkAttached):
        return ("attached", event.link.name, event.link.is_sender)
    if isinstance(event, events.LinkDetached):
        return ("detached", event.link.name, event.closed, event.error)
    if isinstance(event, events.MessageReceived):
        d = event.delivery
        return ("message", event.link.name, d.delivery_id, d.tag, d.payload, d.remote_settled)
    if isinstance(event, events.DeliveryUpdated):
        return ("updated", event.link.name, event.delivery.delivery_id, event.state, event.settled)
    if isinstance(event, events.CreditChanged):
        return ("credit", event.link.name, event.drain, event.properties)
    if isinstance(event, events.SessionWindowOpened):
        return ("window", event.session.remote_channel)
    raise AssertionError(f"unknown event {event!r}")


def run(cut: Callable[[bytes], Iterable[bytes]]) -> tuple[list[tuple[Any, ...]], Frames, Connection]:
    """Play the conversation against a protocol engine acting as a small broker."""
    conn = Connection()
    accept = auto_accept(conn, credit=10)
    sent: list[bool] = []

    def react(event: Any) -> None:
        accept(event)
        if isinstance(event, events.CreditChanged) and event.link.credit > 0 and not sent:
            sent.append(True)
            conn.send_transfer(event.link, b"out-0", Message(body="to the peer").encode())

    pump = connect(conn, on_event=react)
    for step in conversation():
        for piece in cut(step):
            pump.send(piece)
    return [summarize(e) for e in pump.events], pump.frames, conn


def whole(data: bytes) -> list[bytes]:
    return [data]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


@pytest.fixture(scope="module")
def reference() -> tuple[list[tuple[Any, ...]], Frames]:
    got, frames, conn = run(whole)
    return got, frames


def test_reference_conversation_is_complete(reference: tuple[list[tuple[Any, ...]], Frames]) -> None:
    got, frames = reference
    kinds = [e[0] for e in got]
    assert kinds == [
        "opened", "begun", "attached", "attached", "credit",
        "message", "message", "message",
        "updated", "credit", "detached", "detached", "ended", "closed",
    ]  # fmt: skip
    messages = [e for e in got if e[0] == "message"]
    assert [(m[2], m[3], m[5]) for m in messages] == [(0, b"t0", False), (1, b"t1", False), (3, b"t3", True)]
    assert messages[1][4] == Message(body="x" * 3000).encode()
    assert ("updated", "rcv", 0, Accepted(), True) in got
    assert got[-1] == ("closed", Error(condition="amqp:internal-error", description="bye"), True)
    assert frames.names() == [
        "ProtocolHeader", "Open", "Begin", "Attach", "Flow", "Attach", "Transfer",
        "Flow", "Detach", "Detach", "End", "Close",
    ]  # fmt: skip


def test_one_byte_at_a_time_gives_the_same_events_and_frames(
    reference: tuple[list[tuple[Any, ...]], Frames],
) -> None:
    got, frames, conn = run(bytewise)
    assert got == reference[0]
    assert frames == reference[1]
    assert conn.finished


def test_pump_trickle_option_matches() -> None:
    conn = Connection()
    peer = Peer()
    data = peer.start() + peer.close()
    trickled = connect(conn, trickle=True)
    frames = trickled.send(data)
    reference = connect(Connection()).send(data)
    assert frames == reference and frames.names() == ["ProtocolHeader", "Open", "Begin", "Close"]
    assert [summarize(e) for e in trickled.events][-1][0] == "closed"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_cut_points_give_the_same_events_and_frames(
    data: st.DataObject, reference: tuple[list[tuple[Any, ...]], Frames]
) -> None:
    def cut(step: bytes) -> list[bytes]:
        points = sorted(data.draw(st.sets(st.integers(1, len(step) - 1), max_size=40)))
        bounds = [0, *points, len(step)]
        return [step[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]

    got, frames, _ = run(cut)
    assert got == reference[0]
    assert frames == reference[1]


@settings(max_examples=150, deadline=None)
@given(noise=st.binary(min_size=1, max_size=200), trickle=st.booleans())
def test_arbitrary_bytes_after_open_never_escape_as_exceptions(noise: bytes, trickle: bool) -> None:
    """Whatever arrives, the engine answers with protocol errors, never a Python exception."""
    conn = Connection()
    peer = Peer()
    pump = connect(conn, peer, on_event=auto_accept(conn), trickle=trickle)
    pump.send(peer.start() + peer.attach_sender("s", "q", 0))
    frames = pump.send(noise)
    if conn.finished:
        assert frames.names()[-1] == "Close"


@settings(max_examples=150, deadline=None)
@given(body=st.binary(max_size=64), channel=st.integers(0, 3))
def test_arbitrary_frame_bodies_close_or_are_handled(body: bytes, channel: int) -> None:
    conn = Connection()
    peer = Peer()
    pump = connect(conn, peer, on_event=auto_accept(conn))
    pump.send(peer.start() + peer.attach_sender("s", "q", 0))
    frames = pump.send(Peer.raw_frame(channel, body))
    if conn.finished:
        assert frames.names()[-1] == "Close"
