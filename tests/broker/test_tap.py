"""The broker's observation point (``broker.tap``): every frame in and out, every inbound event.

An observer sees each frame of a whole conversation (SASL, open, begin,
attach, flow, transfer, disposition, detach, end, close) in order, and the
bytes the client receives are the same with and without it: observing never
switches the transfer encoder.  Observers may also withhold or delay an
outgoing frame and swallow an inbound event.
"""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.amqp import errors as conditions
from minibroker.amqp.messaging import Accepted
from minibroker.amqp.performatives import (
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    End,
    Flow,
    Open,
    Transfer,
    amqp_error,
)
from minibroker.amqp.sasl_frames import SaslInit, SaslMechanisms, SaslOutcome
from minibroker.api import build_message
from minibroker.broker.clock import ManualClock
from minibroker.broker.engine import Broker, BrokerConnection
from minibroker.broker.tap import Observer, Tap, TapConnection
from minibroker.protocol import deliveries as deliveries_module
from minibroker.protocol import events as ev
from minibroker.testing import Peer, ProtocolHeader, connect, parse_frames

T0 = 1_700_000_000.0


class Recorder(Observer):
    """Keeps every frame and event it sees, and the exact bytes of every frame out."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, int, Any]] = []
        self.out_bytes: list[bytes] = []
        self.events: list[ev.Event] = []
        self.addresses: list[tuple[str, str | None]] = []

    def frame_in(self, connection: TapConnection, channel: int, performative: Any) -> None:
        self.frames.append(("in", channel, performative))

    def event_in(self, connection: TapConnection, event: ev.Event) -> ev.Event | None:
        self.events.append(event)
        return event

    def frame_out(self, connection: TapConnection, channel: int, performative: Any, frame: bytes) -> bytes:
        self.frames.append(("out", channel, performative))
        self.out_bytes.append(frame)
        self.addresses.append((type(performative).__name__, Tap.address_of(connection, channel, performative)))
        return frame


class Recording:
    """Wraps a broker connection and keeps every byte it writes."""

    def __init__(self, target: BrokerConnection) -> None:
        self.target = target
        self.written = b""

    def receive_data(self, data: bytes) -> None:
        self.target.receive_data(data)

    def data_to_send(self) -> bytes:
        data = self.target.data_to_send()
        self.written += data
        return data

    @property
    def finished(self) -> bool:
        return self.target.finished


def conversation(observer: Observer | None, install_after_open: bool = False) -> tuple[bytes, bytes]:
    """A client's whole life on a fresh broker: what it sent, and every byte the broker wrote back."""
    broker = Broker(clock=ManualClock(T0))
    if observer is not None and not install_after_open:
        broker.tap.install(observer)
    broker.publish("q", build_message("waiting"))
    peer = Peer("client")
    recording = Recording(broker.connect(lambda: None, "127.0.0.1:1"))
    pump = connect(recording, peer)  # type: ignore[arg-type]
    sent = [peer.start(sasl=True)]
    for data in sent:
        pump.send(data)
    if observer is not None and install_after_open:
        broker.tap.install(observer)
    steps = [
        peer.attach_sender("out", "q", handle=0),
        peer.transfer(0, 0, b"t0", build_message("sent").encode()),
        peer.attach_receiver("in", "q", handle=1) + peer.flow(1, credit=10),
    ]
    for data in steps:
        sent.append(data)
        pump.send(data)
    received = pump.frames.of(Transfer)
    first, last = (transfer.delivery_id for transfer in received)
    assert first is not None and last is not None
    for data in [
        peer.disposition(first, last, state=Accepted()),
        peer.detach(0) + peer.detach(1),
        peer.end(),
        peer.close(),
    ]:
        sent.append(data)
        pump.send(data)
    assert pump.finished
    return b"".join(sent), recording.written


def test_an_observer_sees_every_frame_of_a_conversation_both_ways() -> None:
    recorder = Recorder()
    sent, written = conversation(recorder)

    frames_in = [(c, p) for d, c, p in recorder.frames if d == "in"]
    frames_out = [(c, p) for d, c, p in recorder.frames if d == "out"]
    # In: every frame the client sent, as it sent them.
    assert frames_in == [(f.channel, f.performative) for f in parse_frames(sent) if not isinstance(f.performative, ProtocolHeader)]
    # Out: every frame the client received, as it received them, and exactly their bytes.
    assert frames_out == [
        (f.channel, f.performative) for f in parse_frames(written) if not isinstance(f.performative, ProtocolHeader)
    ]
    headers = [f for f in parse_frames(written) if isinstance(f.performative, ProtocolHeader)]
    assert b"".join(recorder.out_bytes) == written.replace(bytes(headers[0].performative), b"", 1).replace(
        bytes(headers[1].performative), b"", 1
    )
    kinds = [type(p) for _c, p in frames_out]
    assert kinds == [
        SaslMechanisms, SaslOutcome, Open, Begin, Attach, Flow, Disposition, Attach, Transfer, Transfer,
        Detach, Detach, End, Close,
    ]  # fmt: skip
    assert [type(p) for _c, p in frames_in][:2] == [SaslInit, Open]
    # Events: each one the broker handled, in order.
    assert [type(e) for e in recorder.events] == [
        ev.ConnectionOpened, ev.SessionBegun, ev.LinkAttached, ev.MessageReceived, ev.LinkAttached,
        ev.CreditChanged, ev.DeliveryUpdated, ev.DeliveryUpdated, ev.LinkDetached, ev.LinkDetached,
        ev.SessionEnded, ev.ConnectionClosed,
    ]  # fmt: skip
    # Frames of a link name its address.
    assert ("Transfer", "q") in recorder.addresses and ("Open", None) in recorder.addresses


def test_observing_does_not_change_a_single_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_path: list[int] = []
    build = deliveries_module.transfer_frame

    def counted(*args: Any) -> bytes:
        fast_path.append(1)
        return build(*args)

    monkeypatch.setattr(deliveries_module, "transfer_frame", counted)
    sent_plain, written_plain = conversation(None)
    plain_fast = len(fast_path)
    sent_seen, written_seen = conversation(Recorder())
    sent_late, written_late = conversation(Recorder(), install_after_open=True)
    # Both transfers of each conversation took the single-frame fast path, observed or not.
    assert plain_fast == 2 and len(fast_path) == 3 * plain_fast
    assert sent_plain == sent_seen == sent_late
    assert written_seen == written_plain
    assert written_late == written_plain
    # The transfers, single-frame ones from the fast path, are the same bytes.
    assert [f for f in parse_frames(written_seen) if isinstance(f.performative, Transfer)] == [
        f for f in parse_frames(written_plain) if isinstance(f.performative, Transfer)
    ]


def test_no_observer_means_no_engine_hook_and_removing_the_last_one_takes_it_away() -> None:
    broker = Broker(clock=ManualClock(T0))
    connection = broker.connect(lambda: None, "p")
    assert not broker.tap.active and connection.engine.hook is None
    recorder = broker.tap.install(Recorder())
    assert broker.tap.active and connection.engine.hook is connection
    assert broker.connect(lambda: None, "q").engine.hook is not None
    broker.tap.remove(recorder)
    assert not broker.tap.active and connection.engine.hook is None
    with pytest.raises(ValueError, match="not installed"):
        broker.tap.remove(recorder)


class HoldTransfers(Observer):
    """Withholds every transfer, to send it later (a delay)."""

    def __init__(self) -> None:
        self.held: list[tuple[TapConnection, bytes]] = []

    def frame_out(self, connection: TapConnection, channel: int, performative: Any, frame: bytes) -> bytes:
        if isinstance(performative, Transfer):
            self.held.append((connection, frame))
            return b""
        return frame


def test_an_observer_can_withhold_an_outgoing_frame_and_send_it_later() -> None:
    broker = Broker(clock=ManualClock(T0))
    hold = broker.tap.install(HoldTransfers())
    woken: list[bool] = []
    broker.publish("q", build_message("late"))
    peer = Peer("client")
    pump = connect(broker.connect(lambda: woken.append(True), "p"), peer)
    pump.send(peer.start())
    frames = pump.send(peer.attach_receiver("in", "q", handle=0) + peer.flow(0, credit=1))
    assert frames.of(Transfer) == [] and len(hold.held) == 1
    connection, frame = hold.held.pop()
    connection.write(frame)
    assert woken  # the connection's writer was told there is output
    [transfer] = pump.read().of(Transfer)
    assert transfer.delivery_id == 0


class RefuseAttach(Observer):
    """Swallows attaches to one address and refuses them itself."""

    def __init__(self, address: str) -> None:
        self.address = address

    def event_in(self, connection: TapConnection, event: ev.Event) -> ev.Event | None:
        if isinstance(event, ev.LinkAttached) and event.link.address == self.address:
            connection.engine.refuse_link(event.link, amqp_error(conditions.UNAUTHORIZED_ACCESS, "refused by a test"))
            return None
        return event


def test_an_observer_can_swallow_an_inbound_event_and_act_on_it() -> None:
    broker = Broker(clock=ManualClock(T0))
    broker.tap.install(RefuseAttach("blocked"))
    peer = Peer("client")
    pump = connect(broker, peer)
    pump.send(peer.start())
    refused = pump.send(peer.attach_sender("s", "blocked", handle=0))
    error = refused.one(Detach).error
    assert error is not None and error.condition == conditions.UNAUTHORIZED_ACCESS
    assert "blocked" not in broker.queues  # the broker never saw the attach
    accepted = pump.send(peer.attach_sender("t", "open", handle=1))
    assert accepted.one(Attach).target.address == "open" and "open" in broker.queues
