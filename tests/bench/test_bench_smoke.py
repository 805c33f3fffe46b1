"""Smoke test of the benchmark suite: its cheapest parts run and write well-formed JSON lines.

Start-up x5, the test-facing API at 10,000 deep, a 200-message throughput run and the
idle cost of the frame log and of a fault that never fires (broker.cpp too when installed)
(``python -m bench --quick --only startup,api,throughput,features``).  No timing thresholds: the
numbers only have to exist and be positive.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"run_id", "mode", "group", "name", "subject", "value", "unit", "loadavg"}


def test_quick_startup_and_throughput_write_positive_measurements(tmp_path: Path) -> None:
    out = tmp_path / "bench.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "startup,api,throughput,features", "--startup-reps", "5",
         "--messages", "200", "--round-trips", "20", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, f"bench failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    assert "measurement" in proc.stdout and ("PASS" in proc.stdout or "MISS" in proc.stdout), proc.stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records, "no JSON lines written"
    for rec in records:
        assert KEYS <= rec.keys(), rec
        assert isinstance(rec["value"], (int, float)) and rec["value"] > 0, rec
        assert rec["mode"] == "quick"
        if rec.get("status"):
            assert rec["status"] in ("PASS", "MISS") and rec.get("target"), rec
    assert len({rec["run_id"] for rec in records}) == 1
    names = {(rec["group"], rec["name"], rec["subject"]) for rec in records}
    for expected in [
        ("startup", "start_to_open_median", "minibroker"),
        ("startup", "stop_median", "minibroker"),
        ("api", "publish_many_seconds", "minibroker"),
        ("api", "queue_depth_median", "minibroker"),
        ("throughput", "send", "minibroker"),
        ("throughput", "send", "baseline"),
        ("throughput", "receive", "minibroker"),
        ("throughput", "receive", "baseline"),
        ("throughput", "concurrent", "minibroker"),
        ("throughput", "concurrent", "baseline"),
        ("throughput", "concurrent", "ratio"),
        ("throughput", "round_trip_median", "ratio"),
        ("cpu", "server_cpu_per_message_concurrent", "minibroker"),
        ("features", "server_cpu_per_message_plain", "minibroker"),
        ("features", "server_cpu_per_message_trace", "ratio"),
        ("features", "server_cpu_per_message_fault", "ratio"),
    ]:
        assert expected in names, f"missing {expected}; got {sorted(names)}"
    counts = {(rec["name"], rec["subject"]): rec.get("count") for rec in records if rec["group"] == "throughput"}
    assert counts[("send", "minibroker")] == 200 and counts[("concurrent", "minibroker")] == 200, counts


def test_quick_fixture_group_measures_with_and_without_the_fixture(tmp_path: Path) -> None:
    out = tmp_path / "bench.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "fixture", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, f"bench failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    assert "fixture overhead per test (with - without)" in proc.stdout
    records = {rec["name"]: rec for rec in map(json.loads, out.read_text().splitlines())}
    assert records["test_with_fixture_median"]["value"] > 0
    assert records["test_without_fixture_median"]["subject"] == "baseline"
    overhead = records["overhead_per_test"]
    assert overhead["target"] == "< 2 ms" and overhead["status"] in ("PASS", "MISS")
    assert overhead["value"] == overhead["with_ms"] - overhead["without_ms"]
    assert {"overhead_per_test_cpu", "overhead_per_test_fresh", "first_test_with_fixture"} <= records.keys()
