"""The kombu shipping consumer against faults: a happy path, a plain fault test, and a search.

The search draws plans of AMQP 0-9-1 faults (``fault_plans(kinds=AMQP091_KINDS)``: requeued
deliveries, dropped and closed connections and channels, nacked publishes, cancelled consumers,
refused declares, the memory alarm), runs the consumer under each against one broker (reset
between examples) and checks its promise: every order shipped exactly once, with its notice.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from shipping import Handle, Shipments, consume, forgetful, idempotent

import minibroker
from minibroker.testing import AMQP091_KINDS, FaultPlan, fault_plans, faults

ORDERS = ["o1", "o2", "o3"]


def queue_orders(broker: minibroker.ThreadedBroker) -> None:
    """The orders as a kombu producer sends them: JSON bodies (kombu's default serializer)."""
    for order in ORDERS:
        broker.publish("orders", json.dumps({"order": order, "items": 1}).encode(), content_type="application/json")


def run_scenario(broker: minibroker.ThreadedBroker, handle: Handle, plan: FaultPlan | None = None) -> Shipments:
    """Fresh broker state, the orders queued, the plan's faults declared, the consumer run to the end."""
    broker.reset()
    queue_orders(broker)
    if plan is not None:
        plan.install(broker.faults)
    shipments = Shipments()
    consume(broker.amqp091_url, handle, shipments, until=lambda: broker.queue("orders").depth == 0)
    return shipments


def assert_shipped_once(broker: minibroker.ThreadedBroker, shipments: Shipments) -> None:
    notices = {json.loads(body)["shipped"] for body in broker.queue("shipped").bodies}
    assert notices == set(ORDERS), f"orders without a notice: {sorted(set(ORDERS) - notices)}"
    assert sorted(shipments.rows) == ORDERS, f"shipments are {shipments.rows}"


# ------------------------------------------------------------------ plain tests


@pytest.mark.parametrize("handle", [forgetful, idempotent])
def test_happy_path(amqp_broker: minibroker.ThreadedBroker, handle: Handle) -> None:
    """Both consumers pass when nothing goes wrong: the forgetful one's bug stays hidden."""
    assert_shipped_once(amqp_broker, run_scenario(amqp_broker, handle))


@pytest.mark.amqp_broker(faults=[faults.release(address="orders", must_fire=True)])  # pasted from the search's report
def test_a_redelivered_order_is_shipped_once(amqp_broker: minibroker.ThreadedBroker) -> None:
    """The search's shrunk plan as a plain regression test: the first order comes twice, the second time redelivered."""
    queue_orders(amqp_broker)
    shipments = Shipments()
    consume(amqp_broker.amqp091_url, idempotent, shipments, until=lambda: amqp_broker.queue("orders").depth == 0)
    assert_shipped_once(amqp_broker, shipments)


def test_the_idempotent_consumer_survives_a_cancel_and_a_nack(amqp_broker: minibroker.ThreadedBroker) -> None:
    queue_orders(amqp_broker)
    cancel = amqp_broker.faults.cancel_consumer(address="orders", must_fire=True)  # basic.cancel on the first delivery
    nack = amqp_broker.faults.reject_publish(address="shipped", after=1, must_fire=True)  # the second notice nacked
    shipments = Shipments()
    reconnects = consume(
        amqp_broker.amqp091_url, idempotent, shipments, until=lambda: amqp_broker.queue("orders").depth == 0
    )
    assert_shipped_once(amqp_broker, shipments)
    assert (cancel.fired, nack.fired, reconnects) == (1, 1, 2)


# ------------------------------------------------------------------ the search

SEARCH = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,  # the same examples on every run: CI stays reproducible
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
PLANS = fault_plans(addresses=["orders", "shipped"], kinds=AMQP091_KINDS, max_faults=2)


@SEARCH
@given(plan=PLANS)
def test_the_idempotent_consumer_ships_once_under_any_plan(amqp_broker: minibroker.ThreadedBroker, plan: FaultPlan) -> None:
    assert_shipped_once(amqp_broker, run_scenario(amqp_broker, idempotent, plan))


def test_the_search_finds_the_forgetful_consumers_bug_and_shrinks_it(amqp_broker: minibroker.ThreadedBroker) -> None:
    broker = amqp_broker
    failing: list[FaultPlan] = []

    @SEARCH
    @given(plan=PLANS)
    def search(plan: FaultPlan) -> None:
        try:
            assert_shipped_once(broker, run_scenario(broker, forgetful, plan))
        except AssertionError:
            failing.append(plan)
            raise

    with pytest.raises(AssertionError) as found:
        search()
    # One bug: the first order, requeued once, is shipped twice.
    assert str(found.value).splitlines()[0] == "shipments are ['o1', 'o1', 'o2', 'o3']"
    # Hypothesis replays the smallest failing plan last: one requeue of the first order.
    assert repr(failing[-1]) == "[faults.release(address='orders')]"
