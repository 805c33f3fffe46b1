"""Smoke test of the bench's ``scale`` group: two cheap curves run and write their figures.

``python -m bench --quick --only scale --curves consumers,transactions`` (and once with
``--trace-memory``).  No timing thresholds: the figures only have to exist and be positive
(memory per item by RSS only has to exist: RSS may grow by nothing, into room a workload freed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("trace", [False, True], ids=["rss", "tracemalloc"])
def test_quick_scale_curves_write_cpu_and_memory(tmp_path: Path, trace: bool) -> None:
    out = tmp_path / "bench.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "scale", "--curves", "consumers,transactions",
         "--messages", "200", "--json", str(out), *(["--trace-memory"] if trace else [])],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, f"bench failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    records = [json.loads(line) for line in out.read_text().splitlines()]
    cpu = {(r["name"], r["size"]): r["value"] for r in records if r["name"].endswith("_cpu_per_message")}
    assert set(cpu) == {("consumers_cpu_per_message", 1), ("consumers_cpu_per_message", 100),
                        ("transactions_cpu_per_message", 1), ("transactions_cpu_per_message", 100)}, cpu
    assert all(value > 0 for value in cpu.values()), cpu
    ratios = {r["name"]: r for r in records if r["name"].endswith("_cpu_ratio")}
    assert set(ratios) == {"consumers_cpu_ratio", "transactions_cpu_ratio"}
    assert all(r["status"] in ("PASS", "MISS") and r["value"] > 0 for r in ratios.values()), ratios
    memory = {r["name"]: r["value"] for r in records if r["name"].split("_per_")[0] in ("memory", "allocated")}
    prefix = "allocated" if trace else "memory"
    assert set(memory) == {f"{prefix}_per_consumer", f"{prefix}_per_transaction"}, memory
    assert all(isinstance(value, (int, float)) for value in memory.values()), memory
    if trace:  # tracemalloc counts what attaching a link allocated: never nothing
        assert all(value > 0 for value in memory.values()), memory
