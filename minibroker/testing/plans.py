"""A Hypothesis strategy over fault plans: search for the faults that break a scenario, then shrink them.

::

    from hypothesis import given, settings
    from minibroker.testing import fault_plans

    @settings(max_examples=100, deadline=None)
    @given(plan=fault_plans(addresses=["jobs", "results"]))
    def test_worker_survives(plan):
        broker.reset()                  # one broker for the whole search: reset between examples
        plan.install(broker.faults)
        run_the_scenario_and_assert_its_invariants()

When the scenario breaks, Hypothesis shrinks the plan (fewer faults, earlier kinds and
addresses, smaller ``after``/``times``) and prints the smallest one as code, e.g.
``plan=[faults.release(address='jobs')]``, to paste into a plain test.

Needs Hypothesis (``pip install hypothesis``; it is in minibroker's ``test`` extra).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from ..broker.faults import FAULT_KINDS, Fault, FaultPlan

__all__ = ["PLAN_KINDS", "fault_plans"]

#: Kinds a plan draws by default, in shrinking order (``FaultKind.planned_by_default`` in faults.py):
#: those that need nothing from the test once declared.
PLAN_KINDS: tuple[str, ...] = tuple(name for name, row in FAULT_KINDS.items() if row.planned_by_default)


def _fault(kind: str, address: str, after: int, times: int) -> Fault:
    return Fault(kind, address if FAULT_KINDS[kind].addressed else None, after=after, times=times)


def fault_plans(
    addresses: str | Sequence[str],
    kinds: str | Sequence[str] = PLAN_KINDS,
    max_faults: int = 3,
    max_after: int = 3,
    max_times: int = 2,
) -> st.SearchStrategy[FaultPlan]:
    """Plans of up to ``max_faults`` faults, each of one of ``kinds`` on one of ``addresses``
    (a list of addresses, or one address as a str).

    Each fault lets ``0..max_after`` matching events pass and then fires ``1..max_times``
    times. Shrinking goes towards fewer faults, the first kind and address listed, and
    ``after=0, times=1``: list the likeliest culprits first.
    """
    # One name is one address: iterating a str would draw its characters ('o', 'r', ...), plans
    # that never fire, and a search that passes without testing anything.
    if isinstance(addresses, str):
        addresses = [addresses]
    if isinstance(kinds, str):
        kinds = [kinds]
    if not addresses or not all(isinstance(a, str) and a for a in addresses):
        raise ValueError(f"addresses={addresses!r}: give the node addresses the scenario uses, e.g. ['jobs']")
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown or not kinds:
        raise ValueError(f"kinds={list(kinds)!r}: use some of {sorted(FAULT_KINDS)}")
    excluded = [k for k in kinds if not FAULT_KINDS[k].plannable]
    if excluded:
        raise ValueError(
            f"kinds {excluded} cannot be drawn: a delay needs a time scale and a stall a cancel() from the "
            "test; declare them in the scenario itself"
        )
    if max_faults < 1 or max_after < 0 or max_times < 1:
        raise ValueError("need max_faults >= 1, max_after >= 0 and max_times >= 1")
    fault = st.builds(
        _fault,
        kind=st.sampled_from(list(kinds)),
        address=st.sampled_from(list(addresses)),
        after=st.integers(0, max_after),
        times=st.integers(1, max_times),
    )
    return st.lists(fault, max_size=max_faults).map(lambda faults: FaultPlan(tuple(faults)))
