"""Smoke test of bench/receive_bench.py: every part runs on a small stream and reports per-message costs.

No timing thresholds: the figures only have to exist, be positive, and count every message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_receive_bench_reports_every_part() -> None:
    pytest.importorskip("pyspark")  # the executor-task part runs Spark's own conversion
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")])}
    proc = subprocess.run(
        [sys.executable, "bench/receive_bench.py", "--messages", "300", "--repeat", "1", "--limit-s", "60"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, f"bench failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    results = {r["bench"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert set(results) == {"decode", "client", "task"}, proc.stdout
    assert results["decode"]["messages"] == results["client"]["messages"] == results["task"]["rows"] == 300
    for result in results.values():
        figures = [v for k, v in result.items() if k.endswith("_us")]
        assert figures and all(v > 0 for v in figures), result
