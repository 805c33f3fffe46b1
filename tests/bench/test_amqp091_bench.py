"""The ``amqp091`` bench group: its raw 0-9-1 client, how it skips RabbitMQ, and a quick run.

RabbitMQ is not a dependency (CI does not install it, and ``--quick`` never starts it), so the
run here checks minibroker's side and the one line saying RabbitMQ was skipped.  The raw client
is checked against a broker in this process: what it counts is what the broker holds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import minibroker
from bench import amqp091_bench
from bench.amqp091_client import first_message, run

ROOT = Path(__file__).resolve().parents[2]


def test_the_raw_client_publishes_under_confirms_and_consumes_what_the_broker_holds() -> None:
    with minibroker.ThreadedBroker() as broker:
        sent = run("raw", "publish", broker.host, broker.port, "raw.q", 3_000, 256, 30)
        assert (sent["count"], sent["complete"]) == (3_000, True)
        assert broker.queue("raw.q").depth == 3_000
        got = run("raw", "consume", broker.host, broker.port, "raw.q", 3_000, 256, 30)
        assert (got["count"], got["complete"]) == (3_000, True)
        broker.wait_for(lambda b: b.queue("raw.q").depth == 0, timeout=10)  # every delivery was acked
        rtt = run("raw", "latency", broker.host, broker.port, "raw.latency", 20, 256, 30)
        assert rtt["count"] == 20 and 0 < rtt["rtt_p50_s"] <= rtt["rtt_p90_s"]
        assert "raw.latency" not in broker.queues()  # deleted afterwards


def test_the_start_up_probe_gets_its_message_back() -> None:
    with minibroker.ThreadedBroker() as broker:
        assert first_message(broker.host, broker.port) == b"first"


def test_without_rabbitmq_server_the_group_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(amqp091_bench.shutil, "which", lambda name: None)
    monkeypatch.setattr(amqp091_bench.os.path, "exists", lambda path: False)
    binary, why = amqp091_bench.locate_rabbitmq()
    assert binary is None and "apt-get install rabbitmq-server" in why


def test_quick_run_measures_minibroker_and_skips_rabbitmq_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "bench.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "amqp091", "--messages", "300", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, f"bench failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    skipped = [line for line in proc.stdout.splitlines() if "RabbitMQ skipped" in line]
    assert len(skipped) == 1 and "quick mode" in skipped[0], proc.stdout
    assert "[AMQP 0-9-1]" in proc.stdout and ("PASS" in proc.stdout or "MISS" in proc.stdout), proc.stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {rec["group"] for rec in records} == {"amqp091"}
    assert not [rec for rec in records if rec["subject"] != "minibroker"], "RabbitMQ figures without RabbitMQ"
    by_name = {rec["name"]: rec for rec in records}
    for client in ("raw", "pika", "aiopika"):
        for name in (f"{client}_publish", f"{client}_consume", f"{client}_server_cpu_per_message"):
            assert by_name[name]["value"] > 0, by_name[name]
    for name in ("raw_confirm_latency_p50", "pika_confirm_latency_p90", "startup_in_process", "startup_in_process_cpu",
                 "startup_process", "fixture_test_with", "fixture_test_without"):  # fmt: skip
        assert by_name[name]["value"] > 0, by_name[name]
    assert by_name["startup_in_process"]["target"] == "< 10 ms"
    assert by_name["raw_publish"]["complete"] is True
