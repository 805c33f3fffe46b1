"""``minibroker.testing.fault_plans`` as a user meets it: the arguments it takes, its imports."""

from __future__ import annotations

import importlib
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minibroker
import minibroker.testing
from minibroker.broker.faults import FaultPlan
from minibroker.testing import fault_plans


@settings(max_examples=50, deadline=None, database=None)
@given(plan=fault_plans(addresses="orders"))
def test_one_address_given_as_a_str_is_one_address(plan: FaultPlan) -> None:
    assert all(fault.address == "orders" for fault in plan.faults)


@settings(max_examples=30, deadline=None, database=None)
@given(plan=fault_plans(addresses=["orders"], kinds="release"))
def test_one_kind_given_as_a_str_is_one_kind(plan: FaultPlan) -> None:
    assert all(fault.kind == "release" for fault in plan.faults)


def test_a_str_address_draws_plans_that_can_fire() -> None:
    drawn = st.lists(fault_plans(addresses="orders", max_faults=1), min_size=20, max_size=20)

    @settings(max_examples=1, deadline=None, database=None)
    @given(plans=drawn)
    def check(plans: list[FaultPlan]) -> None:
        addresses = {fault.address for plan in plans for fault in plan.faults}
        assert addresses <= {"orders"}

    check()


def test_without_hypothesis_fault_plans_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hypothesis", None)  # an import of it now fails as if absent
    monkeypatch.delitem(sys.modules, "minibroker.testing.plans")
    with pytest.raises(ImportError, match=r"needs Hypothesis, which is not installed: `pip install hypothesis`"):
        minibroker.testing.fault_plans  # noqa: B018
    monkeypatch.undo()
    importlib.import_module("minibroker.testing.plans")


def test_fault_not_fired_is_public() -> None:
    from minibroker import FaultNotFired
    from minibroker.testing import FaultNotFired as FromTesting

    assert FaultNotFired is FromTesting
    with minibroker.ThreadedBroker() as broker:
        broker.faults.release(address="jobs", must_fire=True)
        with pytest.raises(FaultNotFired, match="never fired"):
            broker.faults.check()
