"""The payment worker against faults: a happy-path test, two plain fault tests, and a search.

The search draws fault plans with ``minibroker.testing.fault_plans``, runs the worker under
each against one broker (reset between examples), and checks the two promises: no charge
lost (each has a receipt) and none processed twice (each is in the ledger once).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from payment_worker import Ledger, Process, careful, naive, run_worker

import minibroker
from minibroker.testing import FaultPlan, fault_plans, faults

CHARGES = {"c1": 10.0, "c2": 25.5, "c3": 7.25}


def run_scenario(broker: minibroker.ThreadedBroker, process: Process, plan: FaultPlan | None = None) -> Ledger:
    """Fresh broker state, the charges queued, the plan's faults declared, the worker run to the end.

    One broker serves the whole search (Hypothesis runs many examples in one test): it is reset
    between examples, which also removes the previous example's faults.
    """
    broker.reset()
    for charge_id, amount in CHARGES.items():
        broker.publish("charges", {"amount": amount}, message_id=charge_id)
    if plan is not None:
        plan.install(broker.faults)
    ledger = Ledger()
    run_worker(broker.url, process, ledger, until=lambda: broker.queue("charges").depth == 0)
    return ledger


def assert_promises_kept(broker: minibroker.ThreadedBroker, ledger: Ledger) -> None:
    receipts = {m.properties.correlation_id for m in broker.queue("receipts").messages}
    assert receipts == set(CHARGES), f"charges without a receipt: {sorted(set(CHARGES) - receipts)}"
    assert sorted(ledger.rows) == sorted(CHARGES.items()), f"ledger is {ledger.rows}"


# ------------------------------------------------------------------ plain tests


@pytest.mark.parametrize("process", [naive, careful])
def test_happy_path(amqp_broker: minibroker.ThreadedBroker, process: Process) -> None:
    """Both workers pass when nothing goes wrong: the naive one's bugs stay hidden."""
    assert_promises_kept(amqp_broker, run_scenario(amqp_broker, process))


def test_careful_worker_survives_a_detach_and_a_dropped_connection(amqp_broker: minibroker.ThreadedBroker) -> None:
    for charge_id, amount in CHARGES.items():
        amqp_broker.publish("charges", {"amount": amount}, message_id=charge_id)
    # must_fire: the fixture fails the test at teardown if either never happened.
    detach = amqp_broker.faults.detach_link(address="receipts", must_fire=True)  # on the first receipt
    drop = amqp_broker.faults.drop_connection(address="charges", after=1, must_fire=True)  # on the second charge
    ledger = Ledger()
    reconnects = run_worker(amqp_broker.url, careful, ledger, until=lambda: amqp_broker.queue("charges").depth == 0)
    assert_promises_kept(amqp_broker, ledger)
    assert (detach.fired, drop.fired, reconnects) == (1, 1, 2)


@pytest.mark.amqp_broker(faults=[faults.release(address="charges")])  # pasted from the search's report
def test_redelivered_charge_is_recorded_once(amqp_broker: minibroker.ThreadedBroker) -> None:
    """The search's shrunk plan as a plain regression test (see docs/faults.md)."""
    for charge_id, amount in CHARGES.items():
        amqp_broker.publish("charges", {"amount": amount}, message_id=charge_id)
    ledger = Ledger()
    run_worker(amqp_broker.url, careful, ledger, until=lambda: amqp_broker.queue("charges").depth == 0)
    assert_promises_kept(amqp_broker, ledger)
    assert [firing.kind for firing in amqp_broker.faults.history] == ["release"]


# ------------------------------------------------------------------ the search

SEARCH = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,  # the same examples on every run: CI stays reproducible
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
PLANS = fault_plans(addresses=["charges", "receipts"], max_faults=3)


@SEARCH
@given(plan=PLANS)
def test_careful_worker_keeps_its_promises_under_any_plan(amqp_broker: minibroker.ThreadedBroker, plan: FaultPlan) -> None:
    assert_promises_kept(amqp_broker, run_scenario(amqp_broker, careful, plan))


def test_search_finds_the_naive_worker_bug_and_shrinks_it(amqp_broker: minibroker.ThreadedBroker) -> None:
    broker = amqp_broker
    failing: list[FaultPlan] = []

    @SEARCH
    @given(plan=PLANS)
    def search(plan: FaultPlan) -> None:
        try:
            assert_promises_kept(broker, run_scenario(broker, naive, plan))
        except AssertionError:
            failing.append(plan)
            raise

    # Two distinct bugs, each shrunk to its smallest plan; Hypothesis replays those last.
    with pytest.raises(ExceptionGroup) as found:
        search()
    lost, twice = sorted(str(e).splitlines()[0] for e in found.value.exceptions)
    assert lost == "charges without a receipt: ['c1']"  # acknowledged before its receipt went out
    assert twice.startswith("ledger is") and twice.count("('c1', 10.0)") == 2  # recorded twice
    assert sorted(repr(plan) for plan in failing[-2:]) == [
        "[faults.reject_publish(address='receipts')]",
        "[faults.release(address='charges')]",
    ]
