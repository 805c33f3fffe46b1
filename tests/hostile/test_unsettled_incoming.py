"""Finding 4: a producer with ``rcv-settle-mode=second`` that never settles (Part 2 §2.6.12).

Before the fix the broker kept every such delivery with its payload, outside any queue limit, and
kept granting credit.  Now what the broker keeps is bounded per link: once ``link_credit``
deliveries wait for the peer to settle, the link's credit stops; it comes back as the peer settles.
The kept deliveries hold their state only, never the message bytes.
"""

from __future__ import annotations

import pytest
from hostile_peer import Attacker, good_client_round_trip  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp.performatives import RCV_SECOND, ROLE_SENDER, Disposition, Flow
from minibroker.testing import Frames

pytestmark = pytest.mark.interop

CREDIT = 100


def _kept(broker: minibroker.ThreadedBroker) -> tuple[int, int]:
    """Deliveries kept for producers, and the payload bytes they hold."""

    def count() -> tuple[int, int]:
        deliveries = [
            d
            for c in broker._broker.connections
            for s in c.engine.sessions.values()
            for d in s.incoming_unsettled.values()
        ]
        return len(deliveries), sum(len(d.payload) for d in deliveries)

    return broker._read(count)


def _credit(frames: Frames) -> int | None:
    flows = [f for f in frames.of(Flow) if f.handle is not None]
    return flows[-1].link_credit if flows else None


def test_a_producer_that_never_settles_runs_out_of_credit_and_holds_no_payloads() -> None:
    with minibroker.ThreadedBroker(link_credit=CREDIT) as broker:
        attacker = Attacker(broker)
        attacker.start()
        attacker.send(attacker.peer.attach_sender("hoard", "hoarded", 0, rcv_settle_mode=RCV_SECOND))
        attacker.read_until(lambda frames: _credit(frames) == CREDIT)
        body = b"\x00\x53\x75\xb0" + (1024).to_bytes(4, "big") + b"z" * 1024  # a 1 KiB data section
        attacker.send(b"".join(attacker.peer.transfer(0, None, None, body) for _ in range(CREDIT)))
        # Every transfer is answered (unsettled, §2.6.12) and the credit runs out instead of being renewed.
        attacker.read_until(lambda frames: len(frames.of(Disposition)) >= 1 and _credit(frames) == 0)
        attacker.read_until(lambda frames: max(d.last or d.first for d in frames.of(Disposition)) == CREDIT - 1)
        assert _credit(attacker.frames) == 0
        good_client_round_trip(broker)
        assert _kept(broker) == (CREDIT, 0)  # kept: state only, the bytes are in the queue
        assert broker.queue("hoarded").depth == CREDIT
        # Settling half brings that much credit back.
        attacker.send(attacker.peer.disposition(0, CREDIT // 2 - 1, role=ROLE_SENDER))
        attacker.read_until(lambda frames: _credit(frames) == CREDIT // 2)
        assert _kept(broker) == (CREDIT // 2, 0)
        attacker.close()
        assert broker.errors() == []
