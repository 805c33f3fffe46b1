"""Local transactions (OASIS AMQP 1.0 Part 4) with python-qpid-proton as the client.

Proton's own transaction API drives every test: ``Container.declare_transaction``
opens the coordinator link and declares, ``Transaction.send`` tags transfers
with ``transactional-state``, ``Transaction.accept`` tags dispositions (and,
on abort, proton itself releases what it accepted), ``commit``/``abort``
send ``discharge``.  :class:`ProtonClient` (``proton_tx_helpers.py``) runs
the container on a thread so that the test can look at the broker between
steps; ``tx_programs/`` holds standalone batch programs run as processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import Delivery, Message
from proton_tx_helpers import ProtonClient, TxHandle  # tests/interop is on sys.path (rootdir-relative import)

import minibroker

pytestmark = pytest.mark.interop

PROGRAMS = Path(__file__).parent / "tx_programs"
#: Proton's number for ``transactional-state`` (0x34): what the broker answers a transactional transfer with.
TRANSACTIONAL_STATE = 0x34


@pytest.fixture
def client(broker: minibroker.ThreadedBroker) -> Iterator[ProtonClient]:
    with ProtonClient(broker.url) as running:
        yield running


def staged(
    broker: minibroker.ThreadedBroker, publishes: int = 0, retirements: int = 0
) -> Callable[[Any], bool]:
    """A ``wait_for`` predicate: exactly one open transaction holding this much work."""

    def check(b: minibroker.ThreadedBroker) -> bool:
        txns = b.transactions()
        return len(txns) == 1 and len(txns[0].publishes) == publishes and txns[0].retirements == retirements

    check.__name__ = f"one transaction with {publishes} publishes and {retirements} retirements"
    return check


def no_transactions(b: minibroker.ThreadedBroker) -> bool:
    return b.transactions() == []


def fill(broker: minibroker.ThreadedBroker, queue: str, bodies: list[str]) -> None:
    broker.declare_queue(queue)
    for body in bodies:
        broker.publish(queue, body)


def run_program(name: str, *args: Any, timeout: float = 25) -> tuple[int, dict[str, Any], str]:
    """Run ``tx_programs/<name>.py`` with ``args``; return (exit status, its JSON report, stderr)."""
    proc = subprocess.run(
        [sys.executable, str(PROGRAMS / f"{name}.py"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, f"{name} printed nothing (status {proc.returncode}):\n{proc.stderr}"
    return proc.returncode, json.loads(lines[-1]), proc.stderr


# ------------------------------------------------------------------ coordinator


def test_coordinator_offers_capabilities_and_declares_distinct_ids(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    first = client.declare()
    second = client.declare()  # amqp:multi-txns-per-ssn: both open on the same session
    assert set(client.coordinator_capabilities()) == {
        "amqp:local-transactions",
        "amqp:multi-txns-per-ssn",
        "amqp:multi-ssns-per-txn",
    }
    assert first.id and second.id and first.id != second.id
    assert sorted(t.txn_id for t in broker.transactions()) == sorted([first.id, second.id])
    assert client.commit(first).result == "committed"
    assert client.abort(second).result == "aborted"
    assert broker.transactions() == []


def test_discharging_an_unknown_transaction_is_rejected(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    txn = client.declare()
    assert client.commit(txn).result == "committed"
    again = client.commit(txn)  # the same id, already discharged
    assert (again.result, again.condition) == ("commit_failed", "amqp:transaction:unknown-id")
    assert again.description and txn.id.decode() in again.description

    other = client.declare()
    client.call(setattr, other.txn, "id", b"no-such-transaction")
    bogus = client.commit(other)
    assert (bogus.result, bogus.condition) == ("commit_failed", "amqp:transaction:unknown-id")
    assert len(broker.transactions()) == 1  # the real one is still open


# ------------------------------------------------------------------ publishing


def test_commit_makes_published_messages_visible_at_once(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    sender = client.sender("orders")
    txn = client.declare()
    deliveries = client.tx_send(txn, sender, [Message(body=f"order-{n}", id=n) for n in range(5)])

    broker.wait_for(staged(broker, publishes=5))
    queue = broker.queue("orders")
    assert (queue.depth, queue.bodies) == (0, [])
    [snapshot] = broker.transactions()
    assert snapshot.txn_id == txn.id
    assert [(address, m.body) for address, m in snapshot.publishes] == [
        ("orders", f"order-{n}") for n in range(5)
    ]
    # Provisionally accepted: answered with transactional-state, left unsettled until discharge.
    assert [client.remote_state(d) for d in deliveries] == [TRANSACTIONAL_STATE] * 5
    assert not any(client.is_settled(d) for d in deliveries)

    assert client.commit(txn).result == "committed"
    queue = broker.queue("orders")
    assert queue.bodies == [f"order-{n}" for n in range(5)]
    assert [m.properties.message_id for m in queue.messages] == list(range(5))
    assert broker.transactions() == []
    client.wait(
        lambda: all(d.settled for d in deliveries), "the broker to settle the transactional transfers"
    )


def test_abort_discards_published_messages(broker: minibroker.ThreadedBroker, client: ProtonClient) -> None:
    fill(broker, "orders", ["already-there"])
    sender = client.sender("orders")
    txn = client.declare()
    deliveries = client.tx_send(txn, sender, [Message(body=f"doomed-{n}") for n in range(3)])
    broker.wait_for(staged(broker, publishes=3))

    assert client.abort(txn).result == "aborted"
    queue = broker.queue("orders")
    assert (queue.depth, queue.bodies) == (1, ["already-there"])
    assert queue.statistics.enqueued == 1
    assert broker.transactions() == []
    client.wait(lambda: all(d.settled for d in deliveries), "the broker to settle the discarded transfers")

    # The link and coordinator still work: a new transaction commits normally.
    again = client.declare()
    client.tx_send(again, sender, [Message(body="kept")])
    broker.wait_for(staged(broker, publishes=1))
    assert client.commit(again).result == "committed"
    assert broker.queue("orders").bodies == ["already-there", "kept"]


def test_transaction_spanning_two_queues_and_two_sessions_commits_atomically(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    debit = client.sender("debits")

    def sender_on_own_session(address: str) -> Any:
        session = client.connection.session()
        session.open()
        link = session.sender("credits-sender")
        link.target.address = address
        link.open()
        return link

    credit = client.call(sender_on_own_session, "credits")  # amqp:multi-ssns-per-txn
    client.wait(lambda: bool(credit.state & credit.REMOTE_ACTIVE), "the second session's link to attach")

    txn = client.declare()
    for n in range(3):
        client.tx_send(txn, debit, [Message(body=f"debit-{n}")])
        client.tx_send(txn, credit, [Message(body=f"credit-{n}")])
    broker.wait_for(staged(broker, publishes=6))
    [snapshot] = broker.transactions()
    assert [address for address, _m in snapshot.publishes] == ["debits", "credits"] * 3
    assert broker.queue("debits").depth == 0 and broker.queue("credits").depth == 0

    # Meanwhile another thread samples both queues' enqueued counters; each statistics() call is
    # one step of the broker thread, so a half-applied commit would show as (3, 0) or (0, 3).
    samples: list[tuple[int, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            nodes = broker.statistics().nodes
            samples.append((nodes["debits"].enqueued, nodes["credits"].enqueued))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        # Counted samples, not sleeps: sampling has begun before the commit, and one sample was
        # taken wholly after it (the one in flight when the commit returned may be from before).
        client.wait(lambda: samples, "the first sample")
        assert client.commit(txn).result == "committed"
        taken = len(samples)
        client.wait(lambda: len(samples) > taken + 1, "a sample taken after the commit")
    finally:
        stop.set()
        sampler.join(5)
    seen = set(samples)
    assert seen <= {(0, 0), (3, 3)} and (3, 3) in seen, seen
    assert samples[-1] == (3, 3)
    assert broker.queue("debits").bodies == [f"debit-{n}" for n in range(3)]
    assert broker.queue("credits").bodies == [f"credit-{n}" for n in range(3)]


def test_transaction_spanning_two_queues_aborts_both(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    a, b = client.sender("left"), client.sender("right")
    txn = client.declare()
    client.tx_send(txn, a, [Message(body="l")])
    client.tx_send(txn, b, [Message(body="r")])
    broker.wait_for(staged(broker, publishes=2))
    assert client.abort(txn).result == "aborted"
    assert (broker.queue("left").depth, broker.queue("right").depth) == (0, 0)


# ------------------------------------------------------------------ consuming


def test_transactional_accept_takes_effect_on_commit(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    fill(broker, "work", ["w1", "w2", "w3"])
    receiver = client.receiver("work", credit=3)
    got = client.receive(3)
    assert [r.body for r in got] == ["w1", "w2", "w3"]

    txn = client.declare()
    client.tx_accept(txn, got[0].delivery)
    client.tx_accept(txn, got[1].delivery)
    broker.wait_for(staged(broker, retirements=2))
    queue = broker.queue("work")
    assert (queue.depth, queue.acquired, queue.available) == (3, 3, 0)  # nothing retired before commit

    assert client.commit(txn).result == "committed"
    queue = broker.queue("work")
    assert queue.bodies == ["w3"] and queue.acquired == 1
    assert queue.statistics.acknowledged == 2
    client.wait(
        lambda: got[0].delivery.settled and got[1].delivery.settled, "the broker to settle the accepted"
    )

    client.settle(got[2].delivery, Delivery.ACCEPTED)
    broker.wait_for(lambda b: b.queue("work").depth == 0)
    client.close_link(receiver)


def test_aborted_accept_leaves_message_acquired_by_the_receiver_that_holds_it(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    fill(broker, "work", ["first", "second"])
    client.receiver("work", credit=1)
    [held] = client.receive(1)
    txn = client.declare()
    # The bare transactional accept, kept unsettled (Transaction.update, not proton's pending list).
    client.tx_accept_unsettled(txn, held.delivery)
    broker.wait_for(staged(broker, retirements=1))

    assert client.abort(txn).result == "aborted"
    assert broker.transactions() == []
    queue = broker.queue("work")
    assert queue.depth == 2
    assert [(m.body, m.acquired) for m in queue.messages] == [("second", False), ("first", True)]
    assert not client.is_settled(held.delivery)  # the receiver still holds it

    # It is still the receiver's to settle: a plain accept now retires it.
    client.settle(held.delivery, Delivery.ACCEPTED)
    broker.wait_for(lambda b: b.queue("work").bodies == ["second"])
    assert broker.queue("work").available == 1


def test_aborted_accept_then_receiver_detach_makes_message_available(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    fill(broker, "work", ["first", "second"])
    receiver = client.receiver("work", credit=1)
    [held] = client.receive(1)
    txn = client.declare()
    client.tx_accept_unsettled(txn, held.delivery)
    broker.wait_for(staged(broker, retirements=1))
    assert client.abort(txn).result == "aborted"
    assert broker.queue("work").acquired == 1

    client.close_link(receiver)  # the holder goes away without settling
    broker.wait_for(lambda b: b.queue("work").available == 2)
    messages = broker.queue("work").messages
    assert [m.body for m in messages] == ["first", "second"]  # back in its original place
    assert messages[0].delivery_count == 1  # an unsettled delivery whose link ended counts as failed


def test_aborted_accept_is_released_by_proton_and_message_returns_in_place(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    fill(broker, "work", ["a", "b", "c"])
    client.receiver("work", credit=1)
    [first] = client.receive(1)
    assert first.body == "a"
    txn = client.declare()
    client.tx_accept(txn, first.delivery)  # proton keeps it pending; on abort proton releases and settles it
    broker.wait_for(staged(broker, retirements=1))
    assert broker.queue("work").acquired == 1

    assert client.abort(txn).result == "aborted"
    broker.wait_for(lambda b: b.queue("work").available == 3)
    messages = broker.queue("work").messages
    assert [m.body for m in messages] == ["a", "b", "c"]
    assert [m.delivery_count for m in messages] == [0, 0, 0]  # released: not a failed delivery
    assert client.call(lambda: first.delivery.local_state) == Delivery.RELEASED  # proton's own release


def test_aborted_accept_settled_before_discharge_returns_in_place(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    fill(broker, "work", ["a", "b", "c"])
    client.receiver("work", credit=2)
    got = client.receive(2)
    txn = client.declare(settle_before_discharge=True)  # the accept is settled at once
    client.tx_accept(txn, got[1].delivery)
    broker.wait_for(staged(broker, retirements=1))
    queue = broker.queue("work")
    assert (queue.acquired, queue.available) == (2, 1)

    assert client.abort(txn).result == "aborted"
    # "b" is no longer held by anyone (settled), so rollback makes it available in its place.
    queue = broker.queue("work")
    assert [(m.body, m.acquired) for m in queue.messages] == [("b", False), ("c", False), ("a", True)]
    assert queue.messages[0].delivery_count == 0

    # Committing the same pattern retires it for good.
    txn2 = client.declare(settle_before_discharge=True)
    client.tx_accept(txn2, got[0].delivery)
    broker.wait_for(staged(broker, retirements=1))
    assert client.commit(txn2).result == "committed"
    assert broker.queue("work").bodies == ["b", "c"]


def test_accept_then_detach_before_commit_still_retires_on_commit(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    fill(broker, "work", ["x", "y"])
    receiver = client.receiver("work", credit=1)
    [got] = client.receive(1)
    txn = client.declare()
    client.tx_accept_unsettled(txn, got.delivery)
    broker.wait_for(staged(broker, retirements=1))
    client.close_link(receiver)
    queue = broker.queue("work")
    assert (queue.depth, queue.acquired) == (2, 1)  # the transaction still holds "x"

    assert client.commit(txn).result == "committed"
    assert broker.queue("work").bodies == ["y"]


def test_accept_then_detach_before_abort_makes_message_available_in_place(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    fill(broker, "work", ["x", "y"])
    receiver = client.receiver("work", credit=1)
    [got] = client.receive(1)
    txn = client.declare()
    client.tx_accept_unsettled(txn, got.delivery)
    broker.wait_for(staged(broker, retirements=1))
    client.close_link(receiver)
    assert broker.queue("work").acquired == 1

    assert client.abort(txn).result == "aborted"
    messages = broker.queue("work").messages
    assert [(m.body, m.acquired) for m in messages] == [("x", False), ("y", False)]


def test_consume_and_publish_in_one_transaction(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    """Move a message from one queue to another: both halves happen together, or neither."""
    fill(broker, "inbox", ["job-1", "job-2"])
    out = client.sender("outbox")
    receiver = client.receiver("inbox", credit=1)

    def move() -> TxHandle:
        [got] = client.receive(1)
        txn = client.declare()
        client.tx_accept(txn, got.delivery)
        client.tx_send(txn, out, [Message(body=f"done:{got.body}")])
        broker.wait_for(staged(broker, publishes=1, retirements=1))
        assert broker.queue("outbox").depth == 0
        return txn

    txn = move()
    assert client.abort(txn).result == "aborted"
    broker.wait_for(lambda b: b.queue("inbox").available == 2)
    assert broker.queue("inbox").bodies == ["job-1", "job-2"]
    assert broker.queue("outbox").depth == 0

    client.flow(receiver, 1)
    txn = move()
    assert client.commit(txn).result == "committed"
    assert broker.queue("outbox").bodies == ["done:job-1"]
    assert broker.queue("inbox").bodies == ["job-2"]


# ------------------------------------------------------------- losing the controller


def _hold(broker: minibroker.ThreadedBroker, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(PROGRAMS / "tx_hold.py"), broker.url, *args, "--linger", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    proc.stderr.close()


def test_killing_the_controller_mid_transaction_rolls_back(broker: minibroker.ThreadedBroker) -> None:
    fill(broker, "jobs", ["job-1", "job-2", "job-3"])
    proc = _hold(broker, "--send", "results:4", "--accept", "jobs:2")
    try:
        broker.wait_for(staged(broker, publishes=4, retirements=2), timeout=15)
        assert broker.queue("jobs").acquired == 2
        assert broker.queue("results").depth == 0
    finally:
        _kill(proc)  # SIGKILL: the socket closes with no detach, end or close

    broker.wait_for(no_transactions, timeout=5)
    broker.wait_for(lambda b: b.queue("jobs").available == 3 and b.statistics().connections == 0, timeout=5)
    assert broker.queue("jobs").bodies == ["job-1", "job-2", "job-3"]
    assert broker.queue("results").depth == 0
    assert broker.queue("jobs").statistics.acknowledged == 0


def test_killed_controller_does_not_disturb_another_connections_transaction(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    sender = client.sender("shared")
    survivor = client.declare()
    client.tx_send(survivor, sender, [Message(body="survivor")])
    proc = _hold(broker, "--send", "shared:2")
    try:
        broker.wait_for(lambda b: sorted(len(t.publishes) for t in b.transactions()) == [1, 2], timeout=15)
    finally:
        _kill(proc)
    broker.wait_for(lambda b: [t.txn_id for t in b.transactions()] == [survivor.id], timeout=5)
    assert client.commit(survivor).result == "committed"
    assert broker.queue("shared").bodies == ["survivor"]


# ------------------------------------------------------------------ timeout


def test_transaction_left_open_too_long_is_rolled_back() -> None:
    # On the manual clock: the timeout fires when the test moves time, never because a loaded
    # machine was slow between the declare and the check that the work is staged.
    clock = minibroker.ManualClock()
    with minibroker.ThreadedBroker(transaction_timeout=30, clock=clock) as broker:
        fill(broker, "work", ["w"])
        with ProtonClient(broker.url) as client:
            sender = client.sender("orders")
            client.receiver("work", credit=1)
            [got] = client.receive(1)
            txn = client.declare()
            client.tx_send(txn, sender, [Message(body="late")])
            client.tx_accept(txn, got.delivery)
            broker.wait_for(staged(broker, publishes=1, retirements=1))
            clock.advance(29)
            assert len(broker.transactions()) == 1  # not yet

            clock.advance(1)
            broker.wait_for(no_transactions, timeout=5)
            assert broker.queue("orders").depth == 0
            # proton did not see an abort, so it still holds "w": still acquired, not retired
            assert [(m.body, m.acquired) for m in broker.queue("work").messages] == [("w", True)]

            late = client.commit(txn)
            assert (late.result, late.condition) == ("commit_failed", "amqp:transaction:timeout")
            # on commit failure proton releases what it accepted in the transaction
            broker.wait_for(lambda b: b.queue("work").available == 1)
            assert broker.queue("orders").depth == 0


# ------------------------------------------------------------------ example programs


def test_tx_send_program_commits_every_batch(broker: minibroker.ThreadedBroker) -> None:
    status, report, stderr = run_program("tx_send", broker.url, "batches", 25, 10)
    assert status == 0, (report, stderr)
    assert report == {"committed": 25, "transactions": 3, "failures": []}
    queue = broker.queue("batches")
    assert queue.bodies == [{"sequence": n} for n in range(1, 26)]
    assert [m.properties.message_id for m in queue.messages] == list(range(1, 26))
    assert broker.transactions() == []


def test_tx_recv_program_retires_only_what_it_committed(broker: minibroker.ThreadedBroker) -> None:
    fill(broker, "backlog", [])
    for n in range(1, 26):
        broker.publish("backlog", {"sequence": n})
    status, report, stderr = run_program("tx_recv", broker.url, "backlog", 20, 5)
    assert status == 0, (report, stderr)
    assert report["committed"] == [{"sequence": n} for n in range(1, 21)]
    assert report["transactions"] == 4 and report["aborted"] == [] and report["failures"] == []
    broker.wait_for(lambda b: b.queue("backlog").acquired == 0)
    queue = broker.queue("backlog")
    assert queue.bodies == [{"sequence": n} for n in range(21, 26)]
    assert queue.statistics.acknowledged == 20
    assert broker.transactions() == []


def test_tx_recv_program_aborted_batch_is_received_again(broker: minibroker.ThreadedBroker) -> None:
    for n in range(1, 13):
        broker.publish("redo", {"sequence": n})
    status, report, stderr = run_program("tx_recv", broker.url, "redo", 8, 4, "--abort-first")
    assert status == 0, (report, stderr)
    first_batch = [{"sequence": n} for n in range(1, 5)]
    assert report["aborted"] == first_batch
    assert report["received"][:8] == first_batch * 2  # released on abort, redelivered in place
    assert report["committed"] == [{"sequence": n} for n in range(1, 9)]
    broker.wait_for(lambda b: b.queue("redo").acquired == 0)
    assert broker.queue("redo").bodies == [{"sequence": n} for n in range(9, 13)]


def test_tx_send_then_tx_recv_programs_drain_the_queue(broker: minibroker.ThreadedBroker) -> None:
    status, sent, stderr = run_program("tx_send", broker.url, "pipeline", 12, 5)
    assert status == 0, (sent, stderr)
    assert broker.queue("pipeline").depth == 12
    status, got, stderr = run_program("tx_recv", broker.url, "pipeline", 12, 4)
    assert status == 0, (got, stderr)
    assert got["committed"] == [{"sequence": n} for n in range(1, 13)]
    broker.wait_for(lambda b: b.queue("pipeline").depth == 0)
    stats = broker.queue("pipeline").statistics
    assert (stats.enqueued, stats.acknowledged) == (12, 12)
