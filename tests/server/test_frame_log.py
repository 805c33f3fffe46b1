"""The frame log: every frame in and out, kept when asked for, seen with a real client."""

from __future__ import annotations

import pytest
from proton import Message
from proton.utils import BlockingConnection

import minibroker
from minibroker.amqp import Attach, Transfer


def test_frame_log_records_a_proton_conversation_in_order() -> None:
    with minibroker.ThreadedBroker(frame_log=100) as broker:
        conn = BlockingConnection(broker.url, timeout=10)
        conn.create_sender("logged").send(Message(body="x"))
        conn.close()
        broker.wait_for(lambda b: b.frames()[-1].name == "close" and b.frames()[-1].direction == "out")

        frames = broker.frames()
        names = [(f.direction, f.name) for f in frames]
        # The SASL exchange and the AMQP opening, in order, both ways.
        assert names[:4] == [
            ("out", "sasl-mechanisms"),
            ("in", "sasl-init"),
            ("out", "sasl-outcome"),
            ("in", "open"),
        ]
        assert ("out", "open") in names and ("in", "begin") in names
        attach = next(f for f in frames if f.direction == "in" and f.name == "attach")
        assert isinstance(attach.performative, Attach) and attach.performative.target.address == "logged"
        transfers = [f for f in frames if f.name == "transfer"]
        assert len(transfers) == 1 and isinstance(transfers[0].performative, Transfer)
        assert transfers[0].direction == "in"
        assert ("out", "disposition") in names
        assert names[-2:] == [("in", "close"), ("out", "close")]
        assert "->" in str(attach) and "logged" in str(attach)
        assert len(broker.frames(last=3)) == 3


def test_frame_log_keeps_only_the_last_n_frames() -> None:
    with minibroker.ThreadedBroker(frame_log=5) as broker:
        conn = BlockingConnection(broker.url, timeout=10)
        sender = conn.create_sender("q")
        for n in range(10):
            sender.send(Message(body=n))
        conn.close()
        broker.wait_for(lambda b: b.frames()[-1].name == "close")
        assert len(broker.frames()) == 5


def test_frames_without_a_log_says_how_to_turn_it_on() -> None:
    with minibroker.ThreadedBroker() as broker, pytest.raises(RuntimeError, match="frame_log=N"):
        broker.frames()
