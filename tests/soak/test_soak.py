"""The soak's short form: proton clients under random faults and restarts lose nothing (see soak.py)."""

from __future__ import annotations

import pytest
from soak import run_soak

pytestmark = pytest.mark.interop


def test_no_accepted_message_is_lost_none_is_invented_and_the_queue_ends_empty() -> None:
    report = run_soak(messages=40, producers=3, consumers=2, seconds=90, fault_interval=0.05, restart_every=8, seed=1)
    print(report.summary())
    assert not report.timed_out, report.summary()
    assert report.accepted == report.sent  # every message was eventually accepted ...
    assert report.lost == set(), report.summary()  # ... and delivered at least once
    assert report.invented == set(), report.summary()
    assert report.final_depth == 0
    assert report.broker_errors == []
    assert report.faults_fired > 0 and report.restarts > 0  # the faults really happened
