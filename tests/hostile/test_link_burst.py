"""Finding 9: a burst of attaches in one write that crosses ``max_links``.

Before the fix the limit counted every link read so far, answered or not, so each attach of a
burst of 1,025 saw 1,025 links and all were refused.  Now it counts the links already answered:
the first ``max_links`` are accepted, the one after is refused (``amqp:resource-limit-exceeded``).
"""

from __future__ import annotations

import pytest
from hostile_peer import Attacker, good_client_round_trip  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp.performatives import Attach, Detach

pytestmark = pytest.mark.interop


def test_a_burst_of_attaches_crossing_max_links_accepts_exactly_max_links() -> None:
    with minibroker.ThreadedBroker() as broker:
        max_links = minibroker.BrokerConfig().max_links  # 1024 by default
        attacker = Attacker(broker)
        attacker.start()
        peer = attacker.peer
        burst = peer.begin(1)  # handle-max is 1023 per session: two sessions carry the burst
        for i in range(max_links + 1):
            channel, handle = (0, i) if i < 1000 else (1, i - 1000)
            burst += peer.attach_sender(f"l{i}", "burst", handle, channel=channel)
        attacker.send(burst)
        frames = attacker.read_until(lambda frames: len(frames.of(Attach)) == max_links + 1)
        accepted = [a for a in frames.of(Attach) if a.target is not None]
        refused = [a for a in frames.of(Attach) if a.target is None]
        assert (len(accepted), len(refused)) == (max_links, 1)
        assert refused[0].name == f"l{max_links}"
        detach = attacker.read_until(lambda frames: frames.of(Detach)).one(Detach)
        assert detach.error is not None and detach.error.condition == "amqp:resource-limit-exceeded"
        good_client_round_trip(broker)
        assert broker.statistics().links >= max_links
        attacker.close()
