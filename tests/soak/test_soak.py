"""The soak's short form: proton clients under planned faults and restarts lose nothing (see soak.py)."""

from __future__ import annotations

import pytest
from soak import run_soak

pytestmark = pytest.mark.interop

#: Steps of chaos, every fourth a restart: 9 faults on the queue and 3 restarts.
FAULTS, RESTART_EVERY = 12, 4


def test_no_accepted_message_is_lost_none_is_invented_and_the_queue_ends_empty() -> None:
    # The run lasts until every planned fault has fired (the producers keep sending until then),
    # so what it proves does not depend on how fast the machine is; 120 s is only a hang guard.
    report = run_soak(
        messages=40, producers=3, consumers=2, seconds=120, faults=FAULTS, restart_every=RESTART_EVERY, seed=1
    )
    print(report.summary())
    assert not report.timed_out, report.summary()
    # The faults really happened: every planned step was taken and every fault fired once.
    assert report.plan_complete, report.summary()
    assert report.restarts == FAULTS // RESTART_EVERY, report.summary()
    assert report.faults_fired == FAULTS - FAULTS // RESTART_EVERY, report.summary()
    assert len(report.sent) >= 3 * 40
    assert report.accepted == report.sent  # every message was eventually accepted ...
    assert report.lost == set(), report.summary()  # ... and delivered at least once
    assert report.invented == set(), report.summary()
    assert report.final_depth == 0
    assert report.broker_errors == []
