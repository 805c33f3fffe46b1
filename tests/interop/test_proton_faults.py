"""Fault injection seen by a real client: python-qpid-proton over a loopback socket.

Each test declares a fault on ``broker.faults``, drives proton into it, and checks
what proton saw (the condition, the disposition), what the queue holds afterwards,
and that the fault really fired (``.fired``, ``broker.faults.history``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from proton import ConnectionException, Delivery, Message
from proton.utils import ConnectionClosed, LinkDetached, SendException
from proton_helpers import connect, receive  # tests/interop is on sys.path (rootdir-relative import)
from proton_tx_helpers import ProtonClient

import minibroker
from minibroker.broker.faults import FaultNotFired

pytestmark = pytest.mark.interop


@pytest.fixture
def client(broker: minibroker.ThreadedBroker) -> Iterator[ProtonClient]:
    with ProtonClient(broker.url) as running:
        yield running


def wait_settled(client: ProtonClient, delivery: Delivery) -> None:
    client.wait(lambda: delivery.settled, "the broker to settle the delivery")


# ------------------------------------------------------------------ links, connections


def test_detach_link_on_a_delivery_returns_the_message_modified(broker: minibroker.ThreadedBroker) -> None:
    broker.publish("jobs", "job-1")
    fault = broker.faults.detach_link(address="jobs")
    with connect(broker) as conn:
        with pytest.raises(LinkDetached) as detached:  # the detach follows the transfer at once
            receiver = conn.create_receiver("jobs", credit=1)
            receiver.receive(timeout=5)
            receiver.receive(timeout=5)
        assert "amqp:link:detach-forced" in str(detached.value)
        # The client never settled it: the broker counts a failed delivery (Part 3 §3.4.5).
        [queued] = broker.queue("jobs").messages
        assert (queued.message.body, queued.delivery_count, queued.acquired) == ("job-1", 1, False)
        [message] = receive(conn.create_receiver("jobs", credit=1, name="again"), 1)
        assert (message.body, message.delivery_count) == ("job-1", 1)
    assert fault.fired == 1
    [firing] = broker.faults.history
    assert (firing.kind, firing.address, firing.frame) == ("detach_link", "jobs", "transfer delivery-id=0")


def test_detach_link_on_a_publish_does_not_take_the_message(broker: minibroker.ThreadedBroker) -> None:
    fault = broker.faults.detach_link(address="orders", error="amqp:resource-deleted")
    with connect(broker) as conn:
        sender = conn.create_sender("orders")
        with pytest.raises(LinkDetached) as detached:
            sender.send(Message(body="first"))
        assert "amqp:resource-deleted" in str(detached.value)
        assert broker.queue("orders").depth == 0
        conn.create_sender("orders").send(Message(body="retried"))  # times=1: the retry goes through
    assert broker.queue("orders").bodies == ["retried"]
    assert fault.fired == 1


def test_close_connection_with_the_condition(broker: minibroker.ThreadedBroker) -> None:
    broker.publish("jobs", "job-1")
    fault = broker.faults.close_connection(address="jobs")
    with connect(broker) as conn:
        with pytest.raises(ConnectionClosed) as closed:  # the close follows the transfer at once
            receiver = conn.create_receiver("jobs", credit=1)
            receiver.receive(timeout=5)
            receiver.receive(timeout=5)
        assert "amqp:connection:forced" in str(closed.value)
    broker.wait_for(lambda b: b.statistics().connections == 0)
    [queued] = broker.queue("jobs").messages
    assert (queued.delivery_count, queued.acquired) == (1, False)
    assert fault.fired == 1


def test_drop_connection_sends_no_close_frame(broker: minibroker.ThreadedBroker) -> None:
    fault = broker.faults.drop_connection(address="orders", after=1)
    with connect(broker) as conn:
        sender = conn.create_sender("orders")
        sender.send(Message(body="kept"))
        with pytest.raises(ConnectionException) as aborted:
            sender.send(Message(body="lost in the crash"))
        # proton reports a transport that ended without a close frame as aborted
        assert "connection aborted" in str(aborted.value)
    assert broker.queue("orders").bodies == ["kept"]
    broker.wait_for(lambda b: b.statistics().connections == 0)
    assert fault.fired == 1


# ------------------------------------------------------------------ outcomes


def test_release_settles_the_delivery_and_requeues_it_unchanged(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    broker.publish("jobs", "job-1")
    fault = broker.faults.release(address="jobs")
    client.receiver("jobs", credit=2)
    first, second = client.receive(2)
    assert first.body == second.body == "job-1"
    # The client sees the broker's own disposition: released and settled (Part 3 §3.4.4).
    assert client.remote_state(first.delivery) == Delivery.RELEASED
    assert client.is_settled(first.delivery) or client.call(lambda: first.delivery.remote.settled)
    assert (first.message.delivery_count, second.message.delivery_count) == (0, 0)  # released: not counted
    client.settle(second.delivery, Delivery.ACCEPTED)
    broker.wait_for(lambda b: b.queue("jobs").depth == 0)
    assert fault.fired == 1
    assert broker.statistics().nodes["jobs"].released == 1


def test_modify_counts_a_failed_delivery_and_keeps_it_from_that_link(
    broker: minibroker.ThreadedBroker, client: ProtonClient
) -> None:
    broker.publish("jobs", "job-1")
    fault = broker.faults.modify(address="jobs", undeliverable_here=True)
    client.receiver("jobs", credit=5)
    [received] = client.receive(1)
    assert client.remote_state(received.delivery) == Delivery.MODIFIED
    # undeliverable-here: the same link does not get it again; another one does, counted once (§3.4.5).
    broker.wait_for(lambda b: b.queue("jobs").available == 1)
    client.receiver("jobs", credit=1)
    [again] = client.receive(1)
    assert (again.body, again.message.delivery_count) == ("job-1", 1)
    assert fault.fired == 1


def test_refuse_attach_with_the_error_then_let_the_retry_in(broker: minibroker.ThreadedBroker) -> None:
    broker.publish("jobs", "job-1")
    fault = broker.faults.refuse_attach(address="jobs", error="amqp:not-found")
    with connect(broker) as conn:
        with pytest.raises(LinkDetached) as refused:
            conn.create_receiver("jobs", credit=1)
        assert "amqp:not-found" in str(refused.value)
        [message] = receive(conn.create_receiver("jobs", credit=1), 1)
    assert message.body == "job-1"
    assert fault.fired == 1


def test_reject_publish_answers_rejected_and_stores_nothing(broker: minibroker.ThreadedBroker) -> None:
    fault = broker.faults.reject_publish(address="orders", times=2)
    with connect(broker) as conn:
        sender = conn.create_sender("orders")
        for body in ("a", "b"):
            with pytest.raises(SendException) as rejected:
                sender.send(Message(body=body))
            assert rejected.value.state == Delivery.REJECTED
        sender.send(Message(body="c"))
    assert broker.queue("orders").bodies == ["c"]
    assert fault.fired == 2
    assert [f.frame for f in broker.faults.history] == ["transfer delivery-id=0", "transfer delivery-id=1"]


# ------------------------------------------------------------------ timing and credit


def test_delay_holds_dispositions_until_the_clock_moves() -> None:
    clock = minibroker.ManualClock()
    with minibroker.ThreadedBroker(clock=clock) as broker, ProtonClient(broker.url) as client:
        fault = broker.faults.delay(30, address="orders", frames="disposition")
        sender = client.sender("orders")
        delivery = client.send(sender, Message(body="a"))
        broker.wait_for(lambda b: b.queue("orders").depth == 1 and fault.fired == 1)  # the broker took it ...
        assert not client.is_settled(delivery)  # ... but its answer is held
        clock.advance(29)
        time.sleep(0.1)  # a window for a wrongly released answer to arrive (it cannot make the test fail when slow)
        assert not client.is_settled(delivery)
        clock.advance(1)
        wait_settled(client, delivery)
        assert client.remote_state(delivery) == Delivery.ACCEPTED
        assert fault.fired == 1


def test_stall_credit_until_cancelled(broker: minibroker.ThreadedBroker, client: ProtonClient) -> None:
    fault = broker.faults.stall_credit(address="orders")
    sender = client.sender("orders")
    delivery = client.send(sender, Message(body="a"))
    broker.wait_for(lambda b: fault.fired == 1)  # the link's credit was withheld
    assert not client.is_settled(delivery)  # proton holds the message: it has no credit
    assert broker.queue("orders").depth == 0
    fault.cancel()
    wait_settled(client, delivery)
    assert broker.queue("orders").bodies == ["a"]
    assert fault.fired == 1


def test_fail_discharge_rolls_the_transaction_back(broker: minibroker.ThreadedBroker, client: ProtonClient) -> None:
    broker.publish("in", "job")
    fault = broker.faults.fail_discharge()
    client.receiver("in", credit=1)
    [job] = client.receive(1)
    sender = client.sender("out")
    txn = client.declare()
    client.tx_send(txn, sender, [Message(body="result")])
    client.tx_accept(txn, job.delivery)
    outcome = client.commit(txn)
    assert (outcome.result, outcome.condition) == ("commit_failed", "amqp:transaction:rollback")
    assert broker.queue("out").depth == 0  # the publish never happened
    assert broker.queue("in").depth == 1  # the job was not consumed
    assert broker.transactions() == []
    assert fault.fired == 1


# ------------------------------------------------------------------ triggers


def publish_all(broker: minibroker.ThreadedBroker, bodies: list[str]) -> list[str]:
    """Send each body on one link, re-attaching after a detach; the bodies that were refused."""
    refused = []
    with connect(broker) as conn:
        sender = conn.create_sender("orders")
        for body in bodies:
            try:
                sender.send(Message(body=body))
            except SendException:
                refused.append(body)
            except LinkDetached:
                refused.append(body)
                sender = conn.create_sender("orders")
    return refused


def test_after_and_times(broker: minibroker.ThreadedBroker) -> None:
    fault = broker.faults.reject_publish(address="orders", after=2, times=2)
    bodies = [f"m{n}" for n in range(6)]
    assert publish_all(broker, bodies) == ["m2", "m3"]
    assert fault.fired == 2 and fault.seen == 4  # seen counts until it is done
    assert broker.queue("orders").bodies == ["m0", "m1", "m4", "m5"]


def test_when_receives_the_message(broker: minibroker.ThreadedBroker) -> None:
    fault = broker.faults.detach_link(address="orders", when=lambda m: m.body == "poison", times=None)
    assert publish_all(broker, ["a", "poison", "b", "poison"]) == ["poison", "poison"]
    assert fault.fired == 2
    assert broker.queue("orders").bodies == ["a", "b"]


def test_probability_with_a_seed_is_repeatable(broker: minibroker.ThreadedBroker) -> None:
    bodies = [f"m{n}" for n in range(30)]
    runs = []
    for seed in (7, 7, 8):
        broker.reset()  # also removes the faults
        broker.faults.reject_publish(address="orders", probability=0.3, seed=seed, times=None)
        runs.append(publish_all(broker, bodies))
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]
    assert 0 < len(runs[0]) < len(bodies)


def test_must_fire_names_the_fault_that_did_not(broker: minibroker.ThreadedBroker) -> None:
    reached = broker.faults.reject_publish(address="orders", must_fire=True)
    missed = broker.faults.detach_link(address="orderz", must_fire=True)
    publish_all(broker, ["a"])
    with pytest.raises(FaultNotFired) as report:
        broker.faults.check()
    message = str(report.value)
    assert "faults.detach_link(address='orderz', must_fire=True): 0 matching event(s)" in message
    assert "reject_publish" not in message
    assert reached.fired == 1 and missed.fired == 0
    missed.cancel()
    broker.faults.clear()
    broker.faults.check()  # nothing declared: nothing to complain about


def test_cancel_stops_a_fault(broker: minibroker.ThreadedBroker) -> None:
    fault = broker.faults.reject_publish(address="orders", times=None)
    assert publish_all(broker, ["a"]) == ["a"]
    fault.cancel()
    assert publish_all(broker, ["b"]) == []
    assert (fault.fired, fault.cancelled) == (1, True)


# ------------------------------------------------------------------ restart


def test_faults_and_durable_messages_outlive_a_restart(broker: minibroker.ThreadedBroker) -> None:
    fault = broker.faults.reject_publish(address="orders", after=1)
    port = broker.port
    with connect(broker) as conn:
        conn.create_sender("orders").send(Message(body="kept", durable=True))
        conn.create_sender("scratch").send(Message(body="lost in the restart"))
    broker.restart()
    assert broker.port == port
    assert (broker.queue("orders").bodies, broker.queue("scratch").bodies) == (["kept"], [])
    with connect(broker) as conn:  # same port: the client reconnects as to a real broker
        sender = conn.create_sender("orders")
        with pytest.raises(SendException):
            sender.send(Message(body="second"))  # the fault's count went on across the restart
        sender.send(Message(body="third"))
    assert broker.queue("orders").bodies == ["kept", "third"]
    assert fault.fired == 1


def test_drop_connection_then_restart_keeps_the_unsettled_message(broker: minibroker.ThreadedBroker) -> None:
    broker.publish("jobs", "job", durable=True)
    broker.faults.drop_connection(address="jobs")
    with connect(broker) as conn, pytest.raises(ConnectionException):
        receive(conn.create_receiver("jobs", credit=1), 1)
        conn.create_receiver("jobs", credit=1, name="again")
    broker.restart()
    [queued] = broker.queue("jobs").messages
    assert (queued.message.body, queued.delivery_count) == ("job", 1)
    with connect(broker) as conn:
        [message] = receive(conn.create_receiver("jobs", credit=1), 1)
    assert (message.body, message.delivery_count) == ("job", 1)
