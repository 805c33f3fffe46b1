"""``faults.release`` / ``faults.modify`` against python-qpid-proton's blocking API (``proton.utils``).

What proton 0.40's ``BlockingReceiver`` does with a delivery the broker settles on its own
(``at="delivery"``, Part 3 §3.4: a sender may settle first): ``Fetcher.pop()`` (behind
``receive()``) puts a delivery on ``fetcher.unsettled`` only if it is not yet remotely settled,
but returns its message either way; ``accept()``/``reject()``/``release()`` then pop
``fetcher.unsettled`` and raise ``IndexError: pop from an empty deque``.  ``at="outcome"`` is
the variant that blocking code survives: the broker takes the fault's outcome in place of the
client's, so ``accept()`` goes through and the message comes again.
"""

from __future__ import annotations

import pytest
from proton import Delivery
from proton.utils import BlockingConnection, BlockingReceiver

import minibroker


@pytest.fixture
def logged_broker() -> minibroker.ThreadedBroker:
    with minibroker.ThreadedBroker(frame_log=100) as broker:
        yield broker  # type: ignore[misc]


def _broker_settled_it(broker: minibroker.ThreadedBroker) -> bool:
    return any(r.direction == "out" and r.name == "disposition" for r in broker.frames())


def test_proton_blocking_receiver_cannot_settle_a_delivery_the_broker_settled_first(
    logged_broker: minibroker.ThreadedBroker,
) -> None:
    """Pins proton's behaviour (reported upstream-style in the docs): if proton changes it, this says so."""
    broker = logged_broker
    broker.publish("jobs", "job 1")
    fault = broker.faults.release(address="jobs")  # at="delivery"
    conn = BlockingConnection(broker.url, timeout=5)
    try:
        receiver = conn.create_receiver("jobs", credit=1)
        # The broker sent the transfer and then its own released disposition before proton reads them.
        broker.wait_for(_broker_settled_it)
        message = receiver.receive(timeout=5)
        assert message.body == "job 1"  # returned although the broker has taken it back ...
        assert not receiver.fetcher.unsettled  # ... and not kept for settling
        with pytest.raises(IndexError, match="pop from an empty deque"):
            receiver.accept()
    finally:
        conn.close()
    assert fault.fired == 1
    assert broker.queue("jobs").bodies == ["job 1"]  # released: back in the queue, not consumed


def _work(receiver: BlockingReceiver, count: int) -> list[tuple[str, int]]:
    """Plain blocking code: receive, accept, as most users write it first."""
    seen = []
    for _ in range(count):
        message = receiver.receive(timeout=5)
        seen.append((message.body, message.delivery_count))
        receiver.accept()
    return seen


def test_release_at_outcome_brings_the_message_back_to_plain_blocking_code(broker: minibroker.ThreadedBroker) -> None:
    broker.publish_many("jobs", ["job 1", "job 2"])
    fault = broker.faults.release(address="jobs", at="outcome")
    conn = BlockingConnection(broker.url, timeout=5)
    try:
        seen = _work(conn.create_receiver("jobs", credit=1), 3)
    finally:
        conn.close()
    # The first accept was replaced by released: job 1 again, delivery-count unchanged (§3.4.4).
    # (proton grants the next credit when a message arrives, so job 2 may come before job 1 again.)
    assert sorted(seen) == [("job 1", 0), ("job 1", 0), ("job 2", 0)]
    assert fault.fired == 1 and broker.faults.history[0].kind == "release"
    # Listed where it acted: the client's first accept, which it replaced.
    assert broker.faults.history[0].frame == "disposition delivery-id=0 (the client's accepted, taken as released)"
    assert broker.queue("jobs").depth == 0
    assert broker.statistics().nodes["jobs"].released == 1


def test_modify_at_outcome_counts_the_failed_delivery(broker: minibroker.ThreadedBroker) -> None:
    broker.publish("jobs", "job 1")
    broker.faults.modify(address="jobs", at="outcome", after=1)  # the second delivery of jobs
    conn = BlockingConnection(broker.url, timeout=5)
    try:
        receiver = conn.create_receiver("jobs", credit=1)
        first = receiver.receive(timeout=5)
        receiver.release(delivered=False)  # back to the queue (delivery 1: let pass by after=1)
        assert first.body == "job 1"
        seen = _work(receiver, 2)
    finally:
        conn.close()
    assert seen == [("job 1", 0), ("job 1", 1)]  # modified(delivery-failed): counted (§3.4.5)
    assert broker.queue("jobs").depth == 0


def test_the_documented_pattern_survives_release_at_delivery(broker: minibroker.ThreadedBroker) -> None:
    """With at="delivery", blocking code settles only a delivery the broker has not settled itself."""

    def settle(receiver: BlockingReceiver, state: int = Delivery.ACCEPTED) -> bool:
        if not receiver.fetcher.unsettled:
            return False  # the broker settled it first: it comes again
        receiver.settle(state)
        return True

    broker.publish_many("jobs", ["job 1", "job 2"])
    broker.faults.release(address="jobs")
    conn = BlockingConnection(broker.url, timeout=5)
    try:
        receiver = conn.create_receiver("jobs", credit=1)
        done = []
        while len(done) < 2:
            message = receiver.receive(timeout=5)
            if settle(receiver):
                done.append(message.body)
    finally:
        conn.close()
    assert done == ["job 1", "job 2"]
    assert broker.queue("jobs").depth == 0


def test_at_is_checked_and_shown_in_the_repr() -> None:
    from minibroker.testing import faults

    assert repr(faults.release(address="jobs", at="outcome")) == "faults.release(address='jobs', at='outcome')"
    assert repr(faults.release(address="jobs")) == "faults.release(address='jobs')"
    with pytest.raises(ValueError, match="at='later': use 'delivery'"):
        faults.modify(address="jobs", at="later")


def test_an_outcome_that_never_comes_is_forgotten_with_its_link(broker: minibroker.ThreadedBroker) -> None:
    broker.publish("jobs", "job 1")
    broker.faults.release(address="jobs", at="outcome")
    conn = BlockingConnection(broker.url, timeout=5)
    conn.create_receiver("jobs", credit=1).receive(timeout=5)  # fired; the client never settles
    assert broker.faults.history[0].frame == "transfer delivery-id=0 (waiting for the client's outcome)"
    broker.reset()  # the connection is closed, its link ended and its delivery went back
    conn.close()
    assert broker._broker.injector is None  # nothing left for the injector to do: it left the tap
