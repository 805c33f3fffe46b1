"""Finding 5: transactions held unbounded memory (Part 4 §4.4.1; transactions.py).

Before the fix a message staged for a node that did not exist yet was not checked at all (one
transaction relaying 64 KiB messages to ``to="not-yet-a-queue"`` grew the broker by 711 MiB),
and a message for a bounded node was checked only against what the same transaction held for it
(856 open transactions of 15 x 64 KiB on a 1 MiB queue: +863 MiB).  Now what open transactions
stage counts against the node's bounds across all of them (a node a commit would create gets
``queue_defaults``'), a transaction holds at most ``max_transaction_bytes``, a connection has at
most ``max_transactions_per_connection`` open, and ``transaction_timeout`` (300 s) rolls back a
forgotten one.  Each attack runs over real sockets with raw frames, beside a fresh proton client.
"""

from __future__ import annotations

from typing import Any

import pytest
from hostile_peer import Attacker, good_client_round_trip  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp import Accepted, Declare, Declared, Rejected, TransactionalState
from minibroker.amqp.message import Message
from minibroker.amqp.messaging import Source
from minibroker.amqp.performatives import ROLE_SENDER, Attach, Disposition
from minibroker.amqp.transactions import Coordinator
from minibroker.amqp.types import symbol
from minibroker.api import build_message

pytestmark = pytest.mark.interop

KIB = 1024
BODY = b"t" * (64 * KIB)
FULL = "amqp:resource-limit-exceeded"


def _staged_bytes(broker: minibroker.ThreadedBroker) -> int:
    """Encoded bytes of every message open transactions hold staged."""
    def count() -> int:
        return sum(len(m.payload) for t in broker._broker.transactions.open.values() for _p, _d, m in t.publishes)

    return broker._read(count)


class TxAttacker(Attacker):
    """An attacker with a coordinator link (handle 0) and a sending link (handle 1)."""

    def begin_transactions(self, address: str | None) -> None:
        peer = self.peer
        self.start()
        self.send(
            peer.attach("ctl", 0, ROLE_SENDER, source=Source(address="ctl"),
                        target=Coordinator(capabilities=[symbol("amqp:local-transactions")]))
            + peer.attach_sender("sender", address, 1)
        )  # fmt: skip
        self.read_until(lambda frames: len(frames.of(Attach)) == 2)

    def _answer(self, delivery_id: int) -> Disposition:
        def answered(frames: Any) -> bool:
            return any(d.first <= delivery_id <= (d.last or d.first) for d in frames.of(Disposition))

        self.read_until(answered)
        return [d for d in self.frames.of(Disposition) if d.first <= delivery_id <= (d.last or d.first)][-1]

    def declare(self) -> Any:
        delivery_id = self.peer.session(0).next_delivery_id
        self.send(self.peer.transfer(0, None, None, Message(body=Declare()).encode()))
        return self._answer(delivery_id).state

    def stage(self, txn_id: bytes, count: int, **properties: Any) -> list[Any]:
        """``count`` 64 KiB transactional transfers on the sending link; the broker's answers."""
        first = self.peer.session(0).next_delivery_id
        payload = build_message(BODY, **properties).encode()
        state = TransactionalState(txn_id=txn_id)
        self.send(b"".join(self.peer.transfer(1, None, None, payload, state=state) for _ in range(count)))
        return [self._answer(first + n).state for n in range(count)]


def test_a_transaction_relaying_to_a_node_not_yet_made_holds_at_most_max_transaction_bytes() -> None:
    with minibroker.ThreadedBroker() as broker:  # defaults: max_transaction_bytes 8 MiB, no queue bounds
        attacker = TxAttacker(broker)
        attacker.begin_transactions(None)  # the anonymous relay
        declared = attacker.declare()
        assert isinstance(declared, Declared)
        states = attacker.stage(declared.txn_id, 200, to="not-yet-a-queue")  # 12.5 MiB offered
        accepted = [s for s in states if isinstance(s.outcome, Accepted)]
        refused = [s for s in states if isinstance(s.outcome, Rejected)]
        assert 100 <= len(accepted) < 128 and len(accepted) + len(refused) == 200
        assert {s.outcome.error.condition for s in refused} == {FULL}
        assert "max_transaction_bytes" in refused[0].outcome.error.description
        assert _staged_bytes(broker) <= 8 * KIB * KIB
        good_client_round_trip(broker)
        attacker.close()
        broker.wait_for(lambda b: not b.transactions())  # the connection's end rolls it back
        assert "not-yet-a-queue" not in broker.queues()


def test_many_transactions_together_stage_no_more_than_the_queue_holds() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("bounded", max_bytes=1024 * KIB)
        attackers = [TxAttacker(broker, f"attacker-{n}") for n in range(3)]
        for attacker in attackers:
            attacker.begin_transactions("bounded")
            for _ in range(16):
                declared = attacker.declare()
                assert isinstance(declared, Declared)
                attacker.stage(declared.txn_id, 15)
            # One more transaction than max_transactions_per_connection is refused (Part 4 §4.3).
            refused = attacker.declare()
            assert isinstance(refused, Rejected) and refused.error.condition == FULL
            assert "max_transactions_per_connection" in refused.error.description
        # 48 transactions offered 45 MiB: together they hold no more than the queue may.
        assert _staged_bytes(broker) <= 1024 * KIB
        good_client_round_trip(broker)
        for attacker in attackers:
            attacker.close()
        broker.wait_for(lambda b: not b.transactions())
        assert broker.queue("bounded").depth == 0


def test_a_forgotten_transaction_is_rolled_back_after_the_default_timeout() -> None:
    clock = minibroker.ManualClock()
    with minibroker.ThreadedBroker(clock=clock) as broker:  # transaction_timeout: 300 s by default
        attacker = TxAttacker(broker)
        attacker.begin_transactions("kept")
        declared = attacker.declare()
        assert isinstance(declared, Declared)
        attacker.stage(declared.txn_id, 10)
        assert _staged_bytes(broker) > 10 * 64 * KIB
        clock.advance(299)
        assert len(broker.transactions()) == 1
        clock.advance(1)
        broker.wait_for(lambda b: not b.transactions(), timeout=5)
        assert _staged_bytes(broker) == 0
        good_client_round_trip(broker)
        attacker.close()
