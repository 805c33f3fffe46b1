"""The fault-kind table (faults.FAULT_KINDS): one row per kind, everything else derived from it."""

from __future__ import annotations

import pytest

from minibroker.broker.faults import DEFAULT_PARAMS, FAULT_KINDS, KINDS, Fault, FaultSet, fault_kind
from minibroker.broker.injection import ACTIONS
from minibroker.front091 import faults as faults091
from minibroker.testing.plans import PLAN_KINDS, fault_plans


def test_every_kind_is_declared_by_the_faultset_method_of_its_name() -> None:
    faults = FaultSet()
    for name, row in FAULT_KINDS.items():
        assert row.name == name
        assert callable(getattr(faults, name)), f"FaultSet has no method {name}()"


def test_every_action_in_the_table_is_one_the_injector_takes() -> None:
    # The AMQP 1.0 injector's, or the 0-9-1 front end's (kinds with 0-9-1 points).
    assert {row.action for row in FAULT_KINDS.values()} <= ACTIONS | faults091.ACTIONS


def test_points_and_defaults_are_derived_from_the_table() -> None:
    assert KINDS == {name: row.point for name, row in FAULT_KINDS.items()}
    assert DEFAULT_PARAMS["modify"] == {"delivery_failed": True, "undeliverable_here": False, "at": "delivery"}
    assert "drop_connection" not in DEFAULT_PARAMS  # no defaults, no entry


def test_plans_draw_by_default_what_the_table_says_in_its_order() -> None:
    assert PLAN_KINDS == (
        "release", "modify", "reject_publish", "detach_link", "close_connection", "drop_connection", "refuse_attach",
    )  # fmt: skip


@pytest.mark.parametrize("kind", [name for name, row in FAULT_KINDS.items() if not row.plannable])
def test_a_kind_the_table_marks_unplannable_is_refused_by_fault_plans(kind: str) -> None:
    with pytest.raises(ValueError, match="cannot be drawn"):
        fault_plans(["q"], kinds=[kind])


def test_an_unknown_kind_raises_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown fault kind 'explode'; use one of \['block_publishers', 'cancel_consumer'"):
        Fault("explode", "q")
    with pytest.raises(ValueError, match="unknown fault kind"):
        fault_kind("explode")
