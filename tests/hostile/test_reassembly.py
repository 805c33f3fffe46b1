"""Finding 1: one delivery split into many tiny (or empty) continuation frames (Part 2 §2.6.14).

Before the fix every frame re-added the sizes of all earlier fragments (quadratic work) and empty
fragments grew the fragment list forever.  Now a delivery is one growing buffer with a frame count:
past ``MAX_FRAGMENTS`` frames its link is detached with ``amqp:resource-limit-exceeded``.
"""

from __future__ import annotations

import pytest
from hostile_peer import Attacker, good_client_round_trip  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp import codec
from minibroker.amqp.performatives import Detach, Transfer
from minibroker.protocol.connection import MAX_FRAGMENTS
from minibroker.testing import Peer

pytestmark = pytest.mark.interop


def test_empty_continuation_frames_are_counted_and_the_link_is_detached() -> None:
    with minibroker.ThreadedBroker() as broker:
        attacker = Attacker(broker)
        attacker.start()
        attacker.send(attacker.peer.attach_sender("flood", "victim", 0))
        attacker.read_until(lambda frames: frames.of(Transfer) or any(f.name == "Flow" for f in frames))
        attacker.send(attacker.peer.transfer(0, None, None, b"x", more=True))
        empty = Peer.raw_frame(0, codec.encode(Transfer(handle=0, more=True)))
        batch = empty * 4096
        for _ in range(MAX_FRAGMENTS // 4096 + 1):
            attacker.send(batch)
        # Served while the attacker's connection is open and its frames are being read.
        good_client_round_trip(broker)
        frames = attacker.read_until(lambda frames: frames.of(Detach))
        detach = frames.one(Detach)
        assert detach.error is not None and detach.error.condition == "amqp:resource-limit-exceeded"
        assert str(MAX_FRAGMENTS) in detach.error.description
        assert broker.queue("victim", missing_ok=True).depth == 0
        attacker.close()
        assert broker.errors() == []
