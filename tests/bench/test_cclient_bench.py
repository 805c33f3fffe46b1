"""The ``cclient`` bench group: what it computes, how it finds and builds its C programs, how it skips.

The C client (``bench/cclient.c``) needs Qpid Proton's C headers and broker.c needs the
distribution's examples; neither is a dependency of the project, and CI installs neither.  So
everything here runs without them: /proc parsing, the ratios and spreads, combining a sender's
and a receiver's reports, locating sources, the skip line and the table.  The last test runs the
group for real: against the brokers present when the headers are installed, and otherwise it
checks that the run says, in one line, what to install and still succeeds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import minibroker
from bench import cclient_bench
from bench.cclient_bench import (
    combine,
    find_broker_source,
    locate_broker_c,
    locate_client,
    round_ratio,
    spread,
)
from bench.harness import Report, Row, Settings, process_cpu, schedstat_seconds, stat_cpu_seconds

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- /proc


def test_stat_cpu_is_utime_plus_stime_in_ticks_after_the_last_parenthesis() -> None:
    # A command name may hold spaces and ")": fields are counted after the last ")".
    fields = ["S"] + ["0"] * 10 + ["250", "70"] + ["0"] * 30  # state, then fields 4-13, utime, stime, ...
    line = "4242 (odd) name) " + " ".join(fields)
    assert stat_cpu_seconds(line, tick=100) == pytest.approx(3.2)
    assert stat_cpu_seconds(line, tick=1000) == pytest.approx(0.32)


def test_schedstat_first_field_is_nanoseconds_on_the_cpu() -> None:
    assert schedstat_seconds("1500000000 20 7\n") == pytest.approx(1.5)


def test_stat_of_this_process_parses_and_counts_cpu_already_spent() -> None:
    with open(f"/proc/{os.getpid()}/stat") as f:
        text = f.read()
    assert stat_cpu_seconds(text) >= 0
    seconds, source = process_cpu(os.getpid())
    assert seconds > 0 and source in ("schedstat", "stat")  # importing pytest and the bench took CPU


# ------------------------------------------------------------------------- summaries


def test_round_ratio_is_the_median_of_ratios_within_rounds_not_a_ratio_of_medians() -> None:
    mine = [10.0, 30.0, 20.0]
    theirs = [5.0, 60.0, 40.0]  # per round: 2.0, 0.5, 0.5
    assert round_ratio(mine, theirs) == 0.5
    # Medians 30 and 10 would give 3.0; per round the ratios are 2.0, 0.5 and 4.0.
    assert round_ratio([10.0, 30.0, 40.0], [5.0, 60.0, 10.0]) == 2.0


def test_round_ratio_skips_rounds_without_both_figures_or_with_a_zero_divisor() -> None:
    assert round_ratio([4.0, None, 9.0], [2.0, 1.0, 0.0]) == 2.0
    assert round_ratio([None], [1.0]) is None
    assert round_ratio([], []) is None


def test_spread_is_min_and_max_of_the_figures_present() -> None:
    assert spread([3.0, None, 1.5, 2.0]) == (1.5, 3.0)
    assert spread([None]) is None


def _result(op: str, count: int, start: float, end: float, complete: bool = True, cpu: float = 0.1) -> dict[str, object]:
    return {"op": op, "count": count, "start": start, "end": end, "elapsed_s": end - start, "complete": complete,
            "client_cpu_s": cpu, "error": None}  # fmt: skip


def test_combine_one_client_keeps_its_own_figures() -> None:
    assert combine([_result("send", 40_000, 100.0, 101.25)]) == (40_000, 1.25, True, 0.1)


def test_combine_sender_and_receiver_counts_what_arrived_from_first_attach_to_last_message() -> None:
    count, elapsed, complete, cpu = combine([_result("receive", 39_000, 100.2, 102.0, complete=False),
                                             _result("send", 40_000, 100.0, 101.5, cpu=0.3)])  # fmt: skip
    assert count == 39_000
    assert elapsed == pytest.approx(2.0)
    assert complete is False
    assert cpu == pytest.approx(0.4)


def test_combine_without_results_is_an_error() -> None:
    with pytest.raises(ValueError):
        combine([])


def test_client_output_is_its_last_json_line() -> None:
    out = 'noise\n{"op": "send", "count": 1}\n{"op": "send", "count": 2}\n'
    assert cclient_bench.parse_client_output(out)["count"] == 2
    with pytest.raises(ValueError, match="no JSON result"):
        cclient_bench.parse_client_output("connection refused\n")


# ------------------------------------------------------------------ finding, building


def test_broker_c_not_installed_says_which_package(tmp_path: Path) -> None:
    binary, why = locate_broker_c(cache=tmp_path / "cache", dirs=[str(tmp_path / "nowhere")])
    assert binary is None
    assert why == "broker.c not installed (apt-get install libqpid-proton11-dev-examples)"


def test_broker_c_needs_its_thread_header_beside_it(tmp_path: Path) -> None:
    (tmp_path / "broker.c").write_text("int main(void) { return 0; }\n")
    assert find_broker_source([str(tmp_path)]) is None
    (tmp_path / "thread.h.gz").write_bytes(b"")
    assert find_broker_source([str(tmp_path)]) == [tmp_path / "broker.c", tmp_path / "thread.h.gz"]


def test_an_explicit_broker_c_must_be_executable(tmp_path: Path) -> None:
    path = tmp_path / "broker-c"
    path.write_text("")
    assert locate_broker_c(str(path)) == (None, f"--c-broker {path} is not an executable")
    path.chmod(0o755)
    assert locate_broker_c(str(path)) == (path, "")


def test_client_without_proton_headers_is_skipped_with_what_to_install(tmp_path: Path) -> None:
    # A source that includes a header nobody has stands for a machine without libqpid-proton11-dev.
    source = tmp_path / "cclient.c"
    source.write_text("#include <proton/no_such_header_anywhere.h>\nint main(void) { return 0; }\n")
    binary, why = locate_client(cache=tmp_path / "cache", source=source)
    assert binary is None
    assert why in (
        "Qpid Proton's C headers are not installed (apt-get install gcc libqpid-proton11-dev)",
        "no C compiler to build cclient (apt-get install gcc libqpid-proton11-dev)",
    )
    assert not list((tmp_path / "cache").glob("cclient-*")), "a failed build leaves no binary in the cache"


def test_group_is_skipped_with_one_line_when_the_client_cannot_be_built(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:  # fmt: skip
    monkeypatch.setattr(cclient_bench, "locate_client", lambda: (None, "Qpid Proton's C headers are not installed"))
    report = Report(Settings.for_mode(quick=True), tmp_path / "out.jsonl")
    cclient_bench.bench_cclient(report, report.settings, None, "not wanted", None, no_c=True)
    assert report.notes == ["cclient: skipped (Qpid Proton's C headers are not installed)"]
    assert report.rows == [] and report.records == []
    assert "cclient: skipped (Qpid Proton's C headers are not installed)" in report.table()


# ------------------------------------------------------- the C client itself, if built


@pytest.fixture(scope="module")
def cclient() -> Path:
    binary, why = locate_client()
    if binary is None:
        pytest.skip(f"the C client is optional and cannot be built here: {why}")
    return binary


def _client(binary: Path, *args: str) -> tuple[int, dict[str, object]]:
    proc = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60)
    return proc.returncode, cclient_bench.parse_client_output(proc.stdout)


def test_c_sender_puts_256_byte_binary_bodies_on_a_queue_and_c_receiver_takes_them(cclient: Path) -> None:
    with minibroker.ThreadedBroker() as broker:
        port = str(broker.port)
        status, sent = _client(cclient, "send", "127.0.0.1", port, "bench.c.bodies", "3", "256", "20000")
        assert status == 0 and sent["count"] == 3 and sent["not_accepted"] == 0 and sent["complete"] is True, sent
        bodies = broker.queue("bench.c.bodies").bodies
        assert [len(b) for b in bodies] == [256, 256, 256] and all(isinstance(b, bytes) for b in bodies)
        status, got = _client(cclient, "receive", "127.0.0.1", port, "bench.c.bodies", "3", "1000", "20000")
        assert status == 0 and got["count"] == 3 and got["complete"] is True, got
        assert isinstance(got["bytes"], int) and got["bytes"] > 3 * 256
        assert broker.queue("bench.c.bodies").depth == 0  # accepted, not just delivered


def test_c_receiver_stops_at_its_limit_with_what_it_got_and_says_partial(cclient: Path) -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.publish_many("bench.c.short", [b"one", b"two"])
        status, got = _client(cclient, "receive", "127.0.0.1", str(broker.port), "bench.c.short", "5", "1000", "300")
    assert status == 0 and got["count"] == 2 and got["complete"] is False and got["error"] is None, got


def test_c_client_reports_a_refused_connection_as_an_error(cclient: Path) -> None:
    with minibroker.ThreadedBroker() as broker:
        port = str(broker.port)
    status, got = _client(cclient, "send", "127.0.0.1", port, "nowhere", "1", "256", "5000")  # the broker is gone
    assert status == 1 and got["count"] == 0 and got["complete"] is False and got["error"], got


# ---------------------------------------------------------------------------- table


def test_table_leaves_out_columns_no_row_fills_and_shows_broker_c_when_filled(tmp_path: Path) -> None:
    report = Report(Settings.for_mode(quick=True), tmp_path / "out.jsonl")
    report.rows.append(Row("api", "a row", mb="1 ms"))
    header = next(line for line in report.table().splitlines() if line.startswith("measurement"))
    assert header.split() == ["measurement", "minibroker"]
    report.rows.append(Row("C client", "concurrent", mb="40,000 msg/s", c="80,000 msg/s", vs_c="0.50x",
                           target=">= 0.6x broker.c", status="MISS"))  # fmt: skip
    lines = report.table().splitlines()
    header = next(line for line in lines if line.startswith("measurement"))
    assert header.split() == ["measurement", "minibroker", "broker.c", "mb/c", "target", "result"]
    assert any("mb/c = minibroker / broker.c" in line for line in lines)
    row = next(line for line in lines if line.startswith("concurrent"))
    assert row.split()[-2:] == ["broker.c", "MISS"] and "80,000 msg/s  0.50x" in row


# ------------------------------------------------------------------------ the group


def test_quick_cclient_group_measures_every_broker_present_or_says_why_not(tmp_path: Path) -> None:
    """Against real brokers when the headers are installed; otherwise the one-line skip, and success."""
    out = tmp_path / "bench.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "cclient", "--messages", "300", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, f"bench failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    client, why = locate_client()  # built (and cached) by the run above when it could be
    if client is None:
        assert f"cclient: skipped ({why})" in proc.stdout
        assert "apt-get install" in why
        assert not out.exists() or not out.read_text().strip()
        return
    records = [json.loads(line) for line in out.read_text().splitlines()]
    names = {(r["name"], r["subject"]) for r in records}
    subjects = {"minibroker"} | {r["subject"] for r in records if r["subject"] in ("broker_cpp", "broker_c")}
    for kind in ("send", "receive", "concurrent"):
        for subject in subjects:
            assert (kind, subject) in names, f"missing {kind}/{subject}: {sorted(names)}"
            assert (f"server_cpu_per_message_{kind}", subject) in names
    by_key = {(r["name"], r["subject"]): r for r in records}
    for kind in ("send", "receive", "concurrent"):
        rec = by_key[(kind, "minibroker")]
        assert rec["value"] > 0 and rec["count"] == 300 and rec["complete"] is True and rec["rounds"] == 1, rec
    if "broker_c" in subjects:
        ratio = by_key[("concurrent", "vs_broker_c")]
        assert ratio["value"] == pytest.approx(by_key[("concurrent", "minibroker")]["value"] /
                                               by_key[("concurrent", "broker_c")]["value"])  # fmt: skip
        assert ratio["target"] == ">= 0.6x broker.c" and ratio["status"] in ("PASS", "MISS")
    else:
        assert "cclient: broker.c skipped" in proc.stdout
    assert by_key[("server_cpu_per_message_concurrent", "minibroker")]["target"] == "<= 10 us"
    assert "C sender + C receiver at once" in proc.stdout
