"""Transactions x queue limits with python-qpid-proton as the client (transactions.py, limits.py).

A transaction can no longer push a queue past ``max_depth``: each
transactional transfer that would not fit, counting what the transaction
already holds for the queue, is settled at once with a transactional-state
carrying ``rejected``; room that goes before the discharge makes the commit
fail with ``amqp:transaction:rollback``, publishing nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from proton import Message
from proton_tx_helpers import ProtonClient  # tests/interop is on sys.path (rootdir-relative import)

import minibroker

pytestmark = pytest.mark.interop

#: Proton's number for ``transactional-state`` (0x34).
TRANSACTIONAL_STATE = 0x34


@pytest.fixture
def client(broker: minibroker.ThreadedBroker) -> Iterator[ProtonClient]:
    with ProtonClient(broker.url) as running:
        yield running


def test_a_transaction_of_three_leaves_a_max_depth_one_queue_at_one(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    broker.declare_queue("bounded", max_depth=1, overflow="reject-publish")
    sender = client.sender("bounded")
    txn = client.declare()
    deliveries = client.tx_send(txn, sender, [Message(body=f"m{n}") for n in range(3)])
    # (wait's predicate runs on the container thread: it reads the deliveries directly)
    client.wait(lambda: all(d.remote_state == TRANSACTIONAL_STATE for d in deliveries), "three answers")
    # The first is provisionally accepted (unsettled until discharge); the other two are refused now.
    client.wait(lambda: [bool(d.settled) for d in deliveries] == [False, True, True], "two refusals settled")

    assert client.commit(txn).result == "committed"
    queue = broker.queue("bounded")
    assert (queue.depth, queue.bodies) == (1, ["m0"])
    assert broker.transactions() == []


def test_a_commit_whose_room_has_gone_fails_with_rollback_and_publishes_nothing(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    broker.declare_queue("bounded", max_depth=2, overflow="reject-publish")
    broker.declare_queue("elsewhere")
    txn = client.declare()
    client.tx_send(txn, client.sender("bounded"), [Message(body="in-txn")])
    client.tx_send(txn, client.sender("elsewhere"), [Message(body="also-in-txn")])
    broker.wait_for(lambda b: len(b.transactions()) == 1 and len(b.transactions()[0].publishes) == 2)
    plain = client.sender("bounded")
    sent = [client.send(plain, Message(body=f"plain-{n}")) for n in range(2)]
    client.wait(lambda: all(d.settled for d in sent), "the plain sends settled")
    assert broker.queue("bounded").bodies == ["plain-0", "plain-1"]

    failed = client.commit(txn)
    assert (failed.result, failed.condition) == ("commit_failed", "amqp:transaction:rollback")
    assert failed.description and "no longer fits" in failed.description
    assert broker.queue("bounded").bodies == ["plain-0", "plain-1"]
    assert broker.queue("elsewhere").depth == 0
    assert broker.transactions() == []
