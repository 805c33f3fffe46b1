"""Transactions x limits, through the in-memory client peer (no sockets, threads or sleeps).

A transactional transfer to a bounded queue is refused when it arrives if it
would not fit with what its transaction already holds for that queue; room
that goes before the discharge fails the commit with
``amqp:transaction:rollback``, publishing nothing (transactions.py, "Transactions
and limits").  The Python API, dead letters and scheduled messages are not
limited (publish.py).
"""

from __future__ import annotations

from typing import Any

from minibroker.amqp import Accepted, Rejected, TransactionalState
from minibroker.amqp.performatives import Transfer
from minibroker.amqp.transactions import Declare
from minibroker.api import build_message
from minibroker.broker.config import QueueOptions
from minibroker.broker.engine import Broker
from minibroker.broker.publish import LIMITED_SOURCES, Source
from tests.broker.test_transactions_engine import (
    Client,
    dispositions_for,
    make_broker,
    setup_controller,
    txn_accepted,
)

FULL = "amqp:resource-limit-exceeded"


def bounded(broker: Broker, name: str = "q", **options: Any) -> None:
    broker.declare_queue(name, QueueOptions(**options))


def answer(client: Client, handle: int, body: str, txn: bytes | None = None) -> Any:
    delivery_id, frames = client.publish(handle, body, txn)
    (disposition,) = dispositions_for(frames, delivery_id)
    return disposition


def test_a_transaction_cannot_push_a_queue_past_max_depth() -> None:
    """The reported bug: max_depth=1 reject-publish ended at depth 3 after a commit of 3 transfers."""
    broker = make_broker()
    bounded(broker, max_depth=1, overflow="reject-publish")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    txn = client.declare(0)
    first = answer(client, 1, "a", txn)
    assert first.settled is False and first.state == txn_accepted(txn)
    for body in ("b", "c"):
        refused = answer(client, 1, body, txn)
        assert refused.settled is True
        assert isinstance(refused.state, TransactionalState) and refused.state.txn_id == txn
        assert isinstance(refused.state.outcome, Rejected)
        assert refused.state.outcome.error.condition == FULL
        assert "1 more staged in open transactions" in refused.state.outcome.error.description
    assert isinstance(client.discharge(0, txn), Accepted)
    snapshot = broker.queue_snapshot("q")
    assert (snapshot.depth, snapshot.bodies) == (1, ["a"])


def test_without_a_transaction_the_same_sends_end_at_depth_one() -> None:
    broker = make_broker()
    bounded(broker, max_depth=1, overflow="reject-publish")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    outcomes = [answer(client, 1, body).state for body in ("a", "b", "c")]
    assert isinstance(outcomes[0], Accepted)
    assert all(isinstance(o, Rejected) and o.error.condition == FULL for o in outcomes[1:])
    assert broker.queue_snapshot("q").depth == 1


def test_max_bytes_counts_the_transactions_staged_bytes() -> None:
    broker = make_broker()
    one = len(build_message("x" * 50).encode())
    bounded(broker, max_bytes=2 * one, overflow="reject-publish")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    txn = client.declare(0)
    assert answer(client, 1, "x" * 50, txn).state == txn_accepted(txn)
    assert answer(client, 1, "x" * 50, txn).state == txn_accepted(txn)
    third = answer(client, 1, "x" * 50, txn).state
    assert isinstance(third.outcome, Rejected) and third.outcome.error.condition == FULL
    assert isinstance(client.discharge(0, txn), Accepted)
    assert broker.queue_snapshot("q").depth == 2


def test_withhold_credit_queue_refuses_what_the_transaction_cannot_fit() -> None:
    broker = make_broker()
    bounded(broker, max_depth=2, overflow="withhold-credit")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("relay", None, 1))  # the relay is not held back by credit
    txn = client.declare(0)
    states = [client.publish(1, body, txn, to="q") for body in ("a", "b", "c")]
    answers = [dispositions_for(frames, delivery_id)[0].state for delivery_id, frames in states]
    assert answers[:2] == [txn_accepted(txn)] * 2
    assert isinstance(answers[2].outcome, Rejected)
    assert isinstance(client.discharge(0, txn), Accepted)
    assert broker.queue_snapshot("q").bodies == ["a", "b"]


def test_room_gone_before_discharge_rolls_back_the_whole_commit() -> None:
    broker = make_broker()
    bounded(broker, max_depth=2, overflow="reject-publish")
    bounded(broker, "other")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1) + client.peer.attach_sender("o", "other", 2))
    txn = client.declare(0)
    assert answer(client, 1, "t1", txn).state == txn_accepted(txn)
    assert answer(client, 2, "elsewhere", txn).state == txn_accepted(txn)
    assert isinstance(answer(client, 1, "plain-1").state, Accepted)  # another producer takes the room
    assert isinstance(answer(client, 1, "plain-2").state, Accepted)
    state = client.discharge(0, txn)
    assert isinstance(state, Rejected)
    assert state.error.condition == "amqp:transaction:rollback"
    assert "no longer fits" in state.error.description
    assert broker.queue_snapshot("q").bodies == ["plain-1", "plain-2"]
    assert broker.queue_snapshot("other").depth == 0  # all or nothing
    assert broker.transaction_snapshots() == []


def test_two_transactions_cannot_together_pass_the_limit() -> None:
    broker = make_broker()
    bounded(broker, max_depth=1, overflow="reject-publish")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    first, second = client.declare(0), client.declare(0)
    assert answer(client, 1, "from-first", first).state == txn_accepted(first)
    # What the first transaction holds counts: the second's transfer is refused when it arrives.
    refused = answer(client, 1, "from-second", second).state
    assert isinstance(refused, TransactionalState) and isinstance(refused.outcome, Rejected)
    assert refused.outcome.error.condition == FULL
    assert "1 more staged in open transactions" in refused.outcome.error.description
    assert isinstance(client.discharge(0, first), Accepted)
    assert isinstance(client.discharge(0, second), Accepted)  # it holds nothing
    assert broker.queue_snapshot("q").bodies == ["from-first"]


def test_a_rolled_back_transaction_gives_its_room_back() -> None:
    broker = make_broker()
    bounded(broker, max_depth=1, overflow="reject-publish")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    first, second = client.declare(0), client.declare(0)
    assert answer(client, 1, "from-first", first).state == txn_accepted(first)
    assert isinstance(client.discharge(0, first, fail=True), Accepted)
    assert answer(client, 1, "from-second", second).state == txn_accepted(second)
    assert isinstance(client.discharge(0, second), Accepted)
    assert broker.queue_snapshot("q").bodies == ["from-second"]


def test_drop_head_makes_room_at_commit_and_dead_letters_the_oldest() -> None:
    broker = make_broker()
    bounded(broker, max_depth=2, overflow="drop-head")
    broker.publish("q", build_message("old"))
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    txn = client.declare(0)
    for body in ("a", "b"):
        assert answer(client, 1, body, txn).state == txn_accepted(txn)
    assert broker.queue_snapshot("q").bodies == ["old"]  # nothing dropped before the commit
    assert isinstance(client.discharge(0, txn), Accepted)
    assert broker.queue_snapshot("q").bodies == ["a", "b"]
    assert broker.queue_snapshot("q/$DeadLetterQueue").bodies == ["old"]


def test_drop_head_refuses_a_transaction_larger_than_the_queue() -> None:
    broker = make_broker()
    bounded(broker, max_depth=1, overflow="drop-head")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    txn = client.declare(0)
    assert answer(client, 1, "a", txn).state == txn_accepted(txn)
    second = answer(client, 1, "b", txn).state
    assert isinstance(second.outcome, Rejected) and second.outcome.error.condition == FULL
    assert isinstance(client.discharge(0, txn), Accepted)
    assert broker.queue_snapshot("q").bodies == ["a"]


def test_a_topic_counts_only_what_reaches_each_subscription() -> None:
    broker = make_broker()
    broker.declare_topic("t")
    client = setup_controller(broker)
    client.send(
        client.peer.attach_receiver("sub", "topic://t", 5)
        + client.peer.attach_sender("s", "topic://t", 1)
    )
    (subscription,) = broker.topics["t"].subscriptions.values()
    subscription.queue.options = QueueOptions(max_depth=1, overflow="reject-publish")
    txn = client.declare(0)
    assert answer(client, 1, "a", txn).state == txn_accepted(txn)
    second = answer(client, 1, "b", txn).state
    assert isinstance(second.outcome, Rejected) and second.outcome.error.condition == FULL
    assert isinstance(client.discharge(0, txn), Accepted)
    assert subscription.queue.depth == 1


def test_rollback_frees_what_the_transaction_held() -> None:
    broker = make_broker()
    bounded(broker, max_depth=1, overflow="reject-publish")
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    txn = client.declare(0)
    assert answer(client, 1, "a", txn).state == txn_accepted(txn)
    assert isinstance(client.discharge(0, txn, fail=True), Accepted)
    again = client.declare(0)
    assert answer(client, 1, "b", again).state == txn_accepted(again)
    assert isinstance(client.discharge(0, again), Accepted)
    assert broker.queue_snapshot("q").bodies == ["b"]


def test_only_client_sends_and_commits_are_limited() -> None:
    assert LIMITED_SOURCES == {Source.CLIENT, Source.COMMIT}
    broker = make_broker()
    bounded(broker, max_depth=1, overflow="reject-publish", dead_letter_address="dlq")
    bounded(broker, "dlq", max_depth=1, overflow="reject-publish")
    assert broker.publish_many("q", [build_message(body).encode() for body in "abc"]) == 3
    assert broker.queue_snapshot("q").depth == 3  # the Python API fills past the bound on purpose
    broker.purge("q")
    assert broker.queue_snapshot("q").depth == 0
    # Dead letters are not refused for room: two rejected messages both reach the bounded dlq.
    client = setup_controller(broker)
    for body in ("x", "y"):
        broker.publish("q", build_message(body))  # q holds 2 > max_depth: the API is not limited
    frames = client.send(client.peer.attach_receiver("r", "q", 1) + client.peer.flow(1, credit=10))
    transfers = frames.of(Transfer)
    assert len(transfers) == 2
    for transfer in transfers:
        client.send(client.peer.disposition(transfer.delivery_id, state=Rejected()))
    assert broker.queue_snapshot("dlq").bodies == ["x", "y"]


def test_a_node_the_commit_would_create_is_checked_against_queue_defaults() -> None:
    """Staged for a queue that does not exist yet: counted against ``queue_defaults``' bounds."""
    broker = make_broker(queue_defaults=QueueOptions(max_depth=2))
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("relay", None, 1))  # the anonymous relay: nothing created yet
    txn = client.declare(0)

    def relayed(body: str) -> Any:
        delivery_id, frames = client.publish(1, body, txn, to="not-yet")
        (disposition,) = dispositions_for(frames, delivery_id)
        return disposition.state

    for body in ("a", "b"):
        assert relayed(body) == txn_accepted(txn)
    assert "not-yet" not in broker.router.nodes
    third = relayed("c")
    assert isinstance(third.outcome, Rejected) and third.outcome.error.condition == FULL
    assert "'not-yet' is full" in third.outcome.error.description
    assert isinstance(client.discharge(0, txn), Accepted)
    assert broker.queue_snapshot("not-yet").bodies == ["a", "b"]


def test_a_transaction_holds_at_most_max_transaction_bytes() -> None:
    broker = make_broker(max_transaction_bytes=2500)
    client = setup_controller(broker)
    client.send(client.peer.attach_sender("s", "q", 1))
    txn = client.declare(0)
    body = "x" * 100  # about 110 encoded bytes, and 1 KiB of bookkeeping: two fit, not three
    assert answer(client, 1, body, txn).state == txn_accepted(txn)
    assert answer(client, 1, body, txn).state == txn_accepted(txn)
    refused = answer(client, 1, body, txn).state
    assert isinstance(refused, TransactionalState) and isinstance(refused.outcome, Rejected)
    assert refused.outcome.error.condition == FULL
    assert "max_transaction_bytes=2500" in refused.outcome.error.description
    assert isinstance(client.discharge(0, txn), Accepted)
    assert broker.queue_snapshot("q").depth == 2
    again = client.declare(0)  # a new transaction starts from nothing
    assert answer(client, 1, body, again).state == txn_accepted(again)


def test_a_connection_may_have_at_most_max_transactions_per_connection_open() -> None:
    broker = make_broker(max_transactions_per_connection=2)
    client = setup_controller(broker)
    first, _second = client.declare(0), client.declare(0)
    refused = client.control(0, Declare()).state
    assert isinstance(refused, Rejected) and refused.error.condition == FULL
    assert "max_transactions_per_connection" in refused.error.description
    other = setup_controller(broker, "other")  # another connection has its own count
    other.declare(0)
    assert isinstance(client.discharge(0, first), Accepted)
    client.declare(0)  # a discharge frees a place
