"""Finding 2: a 26-byte ``disposition`` naming ``first=0, last=2**20`` (Part 2 §2.7.6).

Before the fix the broker looked up every id in the range: a million per frame, so a few hundred
such frames stalled every other client.  Now a disposition costs the unsettled deliveries it can
name (here: none), so two thousand of them are read as fast as any frames.
"""

from __future__ import annotations

import pytest
from hostile_peer import Attacker, good_client_round_trip  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp.performatives import Flow

pytestmark = pytest.mark.interop


def test_wide_disposition_ranges_cost_nothing_when_nothing_is_unsettled() -> None:
    with minibroker.ThreadedBroker() as broker:
        attacker = Attacker(broker)
        attacker.start()
        attacker.send(attacker.peer.disposition(0, 2**20) * 2000)
        good_client_round_trip(broker)
        # The attacker's session survived and all its frames were read: the echo comes back after them.
        attacker.send(attacker.peer.flow(echo=True))
        attacker.read_until(lambda frames: frames.of(Flow))
        attacker.close()
        assert broker.errors() == []
