"""Faults without sockets: the data (``broker/faults.py``) and its application through the tap,
driven with the in-memory peer on a manual clock."""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.amqp.messaging import Accepted, Modified, Rejected, Released
from minibroker.amqp.performatives import Attach, Detach, Disposition, Flow, Transfer
from minibroker.api import build_message
from minibroker.broker.clock import ManualClock
from minibroker.broker.engine import Broker
from minibroker.broker.faults import Fault, FaultNotFired, FaultPlan, FaultSet, Site
from minibroker.testing import Peer, Pump, connect, faults
from minibroker.threaded import ThreadedBroker
from minibroker.trio_broker import open_broker

T0 = 1_700_000_000.0


def client(broker: Broker) -> tuple[Peer, Pump]:
    peer = Peer("client")
    pump = connect(broker, peer)
    pump.send(peer.start())
    return peer, pump


def consume(broker: Broker, address: str, credit: int = 10) -> tuple[Peer, Pump, Any]:
    peer, pump = client(broker)
    frames = pump.send(peer.attach_receiver("in", address, handle=0) + peer.flow(0, credit=credit))
    return peer, pump, frames


# ------------------------------------------------------------------ the data


def test_repr_is_the_code_that_declares_the_fault_again() -> None:
    made = FaultSet()
    assert repr(made.detach_link("jobs", after=2)) == "faults.detach_link(address='jobs', after=2)"
    assert repr(made.modify("jobs", undeliverable_here=True)) == "faults.modify(address='jobs', undeliverable_here=True)"
    assert repr(made.delay(1.5, "jobs", frames="flow")) == "faults.delay(1.5, address='jobs', frames='flow')"
    assert repr(made.stall_credit("jobs")) == "faults.stall_credit(address='jobs')"
    assert repr(made.reject_publish(error="amqp:not-found", probability=0.5, seed=3, times=None)) == (
        "faults.reject_publish(error='amqp:not-found', times=None, probability=0.5, seed=3)"
    )
    plan = FaultPlan((faults.release(address="jobs"), faults.fail_discharge(must_fire=True)))
    assert repr(plan) == "[faults.release(address='jobs'), faults.fail_discharge(must_fire=True)]"
    assert eval(repr(plan), {"faults": faults})[0].kind == "release"  # paste-able


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda f: f.detach_link("q", after=-1), "after=-1"),
        (lambda f: f.release("q", times=0), "times=0"),
        (lambda f: f.release("q", probability=1.5), "probability=1.5"),
        (lambda f: f.release("q", seed=1), "seed= only makes sense with probability="),
        (lambda f: f.delay(0, "q"), "positive number of seconds"),
        (lambda f: f.delay(1, "q", frames="transfers"), "frames='transfers'"),
        (lambda f: Fault("explode"), "unknown fault kind 'explode'"),
    ],
)
def test_misuse_says_what_to_do(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(FaultSet())


def test_a_plan_installs_fresh_copies() -> None:
    broker = Broker(clock=ManualClock(T0))
    plan = FaultPlan((faults.reject_publish(address="q"),))
    first = plan.install(broker.faults)
    broker.faults.clear()
    second = plan.install(broker.faults)
    assert first[0] is not second[0] and first[0] is not plan.faults[0]
    with pytest.raises(ValueError, match="already installed"):
        broker.faults.add(second[0])


def test_no_fault_means_no_observer_and_the_last_one_done_takes_it_away() -> None:
    broker = Broker(clock=ManualClock(T0))
    assert broker.injector is None and not broker.tap.active
    fault = broker.faults.reject_publish(address="q")
    assert broker.injector is not None and broker.tap.active
    peer, pump = client(broker)
    pump.send(peer.attach_sender("out", "q", handle=0))
    pump.send(peer.transfer(0, 0, b"t0", build_message("x").encode()))
    assert fault.fired == 1
    assert broker.injector is None and not broker.tap.active  # fired its one time: off again


# ------------------------------------------------------------------ through the engine


def test_release_on_delivery_sends_a_released_disposition_and_redelivers() -> None:
    broker = Broker(clock=ManualClock(T0))
    broker.publish("q", build_message("m"))
    fault = broker.faults.release(address="q")
    _peer, _pump, frames = consume(broker, "q")
    first, second = frames.of(Transfer)
    [settled] = frames.of(Disposition)
    assert (settled.first, settled.settled, settled.state) == (first.delivery_id, True, Released())
    assert second.delivery_id != first.delivery_id
    assert broker.queue_snapshot("q").messages[0].delivery_count == 0
    assert fault.fired == 1 and [f.kind for f in broker.faults.history] == ["release"]


def test_modify_counts_the_delivery_failed() -> None:
    broker = Broker(clock=ManualClock(T0))
    broker.publish("q", build_message("m"))
    broker.faults.modify(address="q")
    _peer, _pump, frames = consume(broker, "q")
    assert frames.one(Disposition).state == Modified(delivery_failed=True, undeliverable_here=False)
    assert broker.queue_snapshot("q").messages[0].delivery_count == 1


def test_a_disconnecting_fault_swallows_the_rest_of_that_read() -> None:
    broker = Broker(clock=ManualClock(T0))
    fault = broker.faults.detach_link(address="q", error="amqp:link:detach-forced")
    peer, pump = client(broker)
    pump.send(peer.attach_sender("out", "q", handle=0))
    frames = pump.send(
        peer.transfer(0, 0, b"t0", build_message("a").encode()) + peer.transfer(0, 1, b"t1", build_message("b").encode())
    )
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == "amqp:link:detach-forced"
    assert frames.of(Disposition) == []
    assert broker.queue_snapshot("q").depth == 0  # neither the first nor the one behind it was taken
    assert fault.fired == 1


def test_events_before_the_fault_in_the_same_read_are_handled_first() -> None:
    broker = Broker(clock=ManualClock(T0))
    broker.publish("jobs", build_message("job"))
    broker.faults.drop_connection(address="results")
    peer, pump = client(broker)
    frames = pump.send(peer.attach_receiver("in", "jobs", handle=0) + peer.flow(0, credit=1))
    [job] = frames.of(Transfer)
    pump.send(peer.attach_sender("out", "results", handle=1))
    # The accept of the job and the result that triggers the drop arrive in one read.
    assert job.delivery_id is not None
    pump.send(peer.disposition(job.delivery_id, state=Accepted()) + peer.transfer(1, 0, b"r", build_message("r").encode()))
    assert broker.queue_snapshot("jobs").depth == 0  # the accept counted: the job is done
    assert broker.queue_snapshot("results").depth == 0  # the result never arrived
    assert not broker.connections


def test_refuse_attach_never_reaches_the_broker() -> None:
    broker = Broker(clock=ManualClock(T0))
    broker.faults.refuse_attach(address="q", error="amqp:not-found")
    peer, pump = client(broker)
    frames = pump.send(peer.attach_sender("out", "q", handle=0))
    assert frames.one(Attach).target is None
    error = frames.one(Detach).error
    assert error is not None and error.condition == "amqp:not-found"
    assert "q" not in broker.queues


def test_reject_publish_answers_rejected() -> None:
    broker = Broker(clock=ManualClock(T0))
    broker.faults.reject_publish(address="q", when=lambda m: m.body == "bad", times=None)
    peer, pump = client(broker)
    pump.send(peer.attach_sender("out", "q", handle=0))
    frames = pump.send(
        peer.transfer(0, 0, b"t0", build_message("bad").encode()) + peer.transfer(0, 1, b"t1", build_message("ok").encode())
    )
    states = {d.first: d.state for d in frames.of(Disposition)}
    assert isinstance(states[0], Rejected) and states[0].error is not None
    assert states[0].error.condition == "amqp:resource-limit-exceeded"
    assert states[1] == Accepted()
    assert [m.message.body for m in broker.queue_snapshot("q").messages] == ["ok"]


def test_delay_holds_output_until_the_manual_clock_gets_there() -> None:
    clock = ManualClock(T0)
    broker = Broker(clock=clock)
    fault = broker.faults.delay(10, address="q", frames="disposition")
    peer, pump = client(broker)
    pump.send(peer.attach_sender("out", "q", handle=0))
    assert pump.send(peer.transfer(0, 0, b"t0", build_message("a").encode())).of(Disposition) == []
    assert broker.next_deadline() == T0 + 10
    clock.advance(9.9)
    assert pump.read().of(Disposition) == []
    clock.advance(0.1)
    assert pump.read().one(Disposition).state == Accepted()
    assert fault.fired == 1 and broker.injector is None


def test_stall_credit_withholds_the_flow_until_cancelled() -> None:
    broker = Broker(clock=ManualClock(T0))
    fault = broker.faults.stall_credit(address="q")
    peer, pump = client(broker)
    frames = pump.send(peer.attach_sender("out", "q", handle=0))
    assert frames.of(Attach) and frames.of(Flow) == []  # attached, but no credit
    fault.cancel()
    flow = pump.read().one(Flow)
    assert flow.link_credit == broker.config.link_credit


def test_probability_with_a_seed_fires_the_same_way_every_time() -> None:
    def fired_at(seed: int) -> list[int]:
        made = Fault("reject_publish", "q", probability=0.5, seed=seed, times=None)
        site = Site("c", "l", "q", "transfer")
        return [n for n in range(40) if made.consider(site, lambda: None)]

    assert fired_at(1) == fired_at(1)
    assert fired_at(1) != fired_at(2)
    assert 5 < len(fired_at(1)) < 35


def test_check_lists_must_fire_faults_that_never_fired() -> None:
    broker = Broker(clock=ManualClock(T0))
    broker.faults.release(address="q", must_fire=True, after=1)
    broker.publish("q", build_message("m"))
    consume(broker, "q", credit=1)
    with pytest.raises(FaultNotFired, match=r"faults.release\(address='q', after=1, must_fire=True\): 1 matching event\(s\), all let pass by after=1"):
        broker.faults.check()


@pytest.mark.trio
async def test_the_trio_broker_takes_faults() -> None:
    async with open_broker(clock=ManualClock(T0)) as broker:
        fault = broker.faults.reject_publish(address="q")
        assert list(broker.faults) == [fault]
        fault.cancel()
        assert fault.cancelled and broker.faults.history == ()


def test_a_threaded_broker_takes_faults_before_it_starts() -> None:
    threaded = ThreadedBroker()
    early = threaded.faults.release(address="q")  # before start(): no thread to marshal to yet
    with threaded:
        assert list(threaded.faults) == [early]
