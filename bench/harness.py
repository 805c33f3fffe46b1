"""What every benchmark group shares: settings, the report (table and JSON lines), child processes
(a broker, broker.cpp, the peer and the client workers) and their CPU and memory read from /proc.

``bench/run.py`` runs the groups; a group that lives in a module of its own (``cclient_bench.py``)
takes these from here, so no module imports the runner back.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import minibroker
from bench import cpp_broker

HERE = Path(__file__).resolve().parent
T = TypeVar("T")


# --------------------------------------------------------------------------- settings


@dataclass
class Settings:
    mode: str
    startup_reps: int
    messages: int
    round_trips: int
    size: int = 256
    credit: int = 1000
    job_limit_s: float = 30.0
    selector_limit_s: float = 10.0
    startup_limit_s: float = 30.0
    memory_messages: int = 100_000
    proton_memory_messages: int = 100_000
    depth_small: int = 1_000
    depth_large: int = 1_000_000
    depth_ops: int = 10_000
    engine_limit_s: float = 90.0
    api_messages: int = 100_000
    stream_messages: int = 100_000
    spark_stream_sizes: tuple[int, ...] = (10_000, 50_000, 200_000)
    browse_small: int = 20_000
    browse_large: int = 200_000
    api_polls: int = 200
    rounds: int = 3
    fixture_tests: int = 300
    fixture_run_tests: int = 200
    #: Rounds of the fixture's whole runs: one run's CPU time varies by about 10 ms from the next
    #: (0.05 ms a test at 200), so three rounds read anything from 0.2 to 0.5 ms (docs/performance.md).
    fixture_run_rounds: int = 15
    cclient_messages: int = 40_000
    cclient_limit_s: float = 60.0
    amqp091_messages: int = 20_000
    amqp091_round_trips: int = 1_000
    amqp091_startup_reps: int = 50
    amqp091_process_reps: int = 10
    amqp091_fixture_tests: int = 200
    #: The scale group (bench/scale_bench.py): messages per workload; a topic's fan-out sends
    #: ``scale_copies // subscriptions`` (at least ``scale_min_messages``), so the copies held stay bounded.
    scale_messages: int = 10_000
    scale_copies: int = 200_000
    scale_min_messages: int = 200
    #: Workloads per size of a scale curve (the median is its figure).  The sizes only grow, so
    #: their rounds cannot be interleaved: a burst of other work on the two cores lasting one
    #: size's rounds moved a median of three to 1.6-1.7x (docs/performance.md); of five it must
    #: last three of them.
    scale_rounds: int = 5
    #: Memory per item by tracemalloc in the broker (``--trace-memory``) rather than by RSS.
    scale_trace: bool = False

    @classmethod
    def for_mode(cls, quick: bool) -> Settings:
        if quick:
            return cls(
                mode="quick", startup_reps=20, startup_limit_s=5.0, messages=2_000, round_trips=200,
                job_limit_s=5.0, selector_limit_s=4.0, memory_messages=20_000, proton_memory_messages=5_000,
                depth_large=50_000, depth_ops=2_000, engine_limit_s=5.0, api_messages=10_000, api_polls=50, rounds=1,
                fixture_tests=60, fixture_run_rounds=1, stream_messages=10_000, browse_small=2_000, browse_large=20_000, spark_stream_sizes=(2_000,),
                cclient_messages=2_000, cclient_limit_s=10.0, amqp091_messages=1_000, amqp091_round_trips=100,
                amqp091_startup_reps=5, amqp091_process_reps=2, amqp091_fixture_tests=20,
                scale_messages=500, scale_copies=10_000, scale_min_messages=100, scale_rounds=1,
            )  # fmt: skip
        return cls(mode="full", startup_reps=200, messages=20_000, round_trips=2_000)


# ---------------------------------------------------------------------------- output


@dataclass
class Row:
    group: str
    label: str
    mb: str = ""
    base: str = ""
    ratio: str = ""
    target: str = ""
    status: str = ""
    note: str = ""
    cpp: str = ""
    cpp_ratio: str = ""
    vs_cpp: str = ""
    c: str = ""
    vs_c: str = ""
    rmq: str = ""
    vs_rmq: str = ""


TABLE_COLUMNS = (
    ("measurement", "label", False), ("minibroker", "mb", True), ("baseline", "base", True), ("ratio", "ratio", True),
    ("broker.cpp", "cpp", True), ("cpp ratio", "cpp_ratio", True), ("mb/cpp", "vs_cpp", True),
    ("broker.c", "c", True), ("mb/c", "vs_c", True), ("RabbitMQ", "rmq", True), ("mb/rmq", "vs_rmq", True), ("target", "target", False), ("result", "status", False),
    ("note", "note", False),
)  # fmt: skip


@dataclass
class Report:
    settings: Settings
    json_path: Path
    run_id: str = field(default_factory=lambda: time.strftime("%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6])
    rows: list[Row] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    max_load: float = 0.0

    def record(self, group: str, name: str, subject: str, value: float, unit: str, **extra: Any) -> dict[str, Any]:
        load = os.getloadavg()[0]
        self.max_load = max(self.max_load, load)
        rec: dict[str, Any] = {
            "run_id": self.run_id,
            "mode": self.settings.mode,
            "group": group,
            "name": name,
            "subject": subject,
            "value": value,
            "unit": unit,
            "loadavg": round(load, 2),
        }
        rec.update({k: v for k, v in extra.items() if v is not None})
        self.records.append(rec)
        with self.json_path.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        return rec

    def row(self, group: str, label: str, **cells: str) -> None:
        row = Row(group, label, **cells)
        self.rows.append(row)
        progress(f"  {label}: {row.mb or '-'}" + (f" | baseline {row.base}" if row.base else ""))

    def problem(self, text: str) -> None:
        self.problems.append(text)
        progress(f"  PROBLEM: {text}")

    def table(self) -> str:
        # (header, Row field, right-aligned); a column no row fills is left out.
        columns = [(h, f, a) for h, f, a in TABLE_COLUMNS if f == "label" or any(getattr(r, f) for r in self.rows)]
        body = [tuple(getattr(r, f) for _, f, _ in columns) for r in self.rows]
        widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, (h, _, _) in enumerate(columns)]
        lines = []
        s = self.settings
        lines.append(
            f"minibroker bench, {s.mode} mode, run {self.run_id}: {s.messages} x {s.size}-byte messages, "
            f"credit {s.credit}, {os.cpu_count()} CPUs, max load average {self.max_load:.1f}"
        )
        lines.append(
            "ratio = minibroker / no-broker baseline; cpp ratio = broker.cpp / baseline; mb/cpp = minibroker / "
            "broker.cpp (each a median of ratios taken within one round)"
        )
        if any(r.c for r in self.rows):
            lines.append(
                f"C client group: {s.cclient_messages} messages per workload; mb/c = minibroker / broker.c, likewise"
            )
        if any(r.rmq for r in self.rows):
            lines.append(
                f"AMQP 0-9-1 group: {s.amqp091_messages} messages per job; mb/rmq = minibroker / RabbitMQ, likewise"
            )
        lines += self.notes
        sep = "  "
        lines.append(sep.join(h.ljust(w) for (h, _, _), w in zip(columns, widths, strict=True)))
        lines.append(sep.join("-" * w for w in widths))
        group = None
        for r, cells in zip(self.rows, body, strict=True):
            if r.group != group:
                if group is not None:
                    lines.append("")
                lines.append(f"[{r.group}]")
                group = r.group
            lines.append(
                sep.join(
                    (c.rjust(w) if right else c.ljust(w))
                    for c, w, (_, _, right) in zip(cells, widths, columns, strict=True)
                ).rstrip()
            )
        if self.max_load > (os.cpu_count() or 1):
            lines.append("")
            lines.append(
                f"note: the load average reached {self.max_load:.1f} on {os.cpu_count()} CPUs: other work shared "
                "the machine, so wall-clock figures (msg/s, ms) are pessimistic; CPU-time figures are not affected."
            )
        for p in self.problems:
            lines.append(f"problem: {p}")
        return "\n".join(lines)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def timed(name: str, fn: Callable[..., T], *args: Any) -> T:
    t0 = time.monotonic()
    try:
        return fn(*args)
    finally:
        progress(f"  ({name}: {time.monotonic() - t0:.1f} s)")


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit in ("msg/s", "rows/s"):
        return f"{value:,.0f} {unit}"
    if unit in ("ms", "us"):
        return f"{value:.3g} {unit}" if value < 100 else f"{value:,.0f} {unit}"
    if unit == "B":
        return f"{value:,.0f} B"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:.3g} {unit}"


def verdict(ok: bool | None) -> str:
    return "" if ok is None else ("PASS" if ok else "MISS")


# ------------------------------------------------------------------------- processes


def child_env() -> dict[str, str]:
    """Children import the same minibroker as this process, whatever their working directory."""
    env = dict(os.environ)
    root = str(Path(minibroker.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class ChildError(RuntimeError):
    pass


class Child:
    """A subprocess speaking JSON lines on stdout (a reader thread queues them), commands on stdin."""

    def __init__(self, name: str, argv: list[str]) -> None:
        self.name = name
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
            bufsize=1, env=child_env(),
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True, name=f"bench-{name}").start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def line(self, timeout: float) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise ChildError(f"{self.name}: no answer within {timeout:.0f} s{self._tail()}") from None
        if line is None:
            self.lines.put(None)
            raise ChildError(f"{self.name} exited (status {self.proc.poll()}){self._tail()}")
        return line

    def message(self, timeout: float, want: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            line = self.line(max(0.01, deadline - time.monotonic()))
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(msg, dict) and want(msg):
                return msg

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(obj) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise ChildError(f"{self.name} is gone: {exc}{self._tail()}") from None

    def call(self, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.send(spec)
        return self.result(timeout)

    def result(self, timeout: float) -> dict[str, Any]:
        return self.message(timeout, lambda m: "ok" in m)

    def _tail(self) -> str:
        try:
            self.stderr.seek(0)
            text = self.stderr.read()[-2000:]
        except (OSError, ValueError):
            return ""
        return f"; its stderr ends:\n{text}" if text.strip() else ""

    def close(self, sig: int | None = None) -> int | None:
        if self.proc.poll() is None:
            try:
                if sig is not None:
                    self.proc.send_signal(sig)
                elif self.proc.stdin is not None:
                    self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
                    self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def spawn_broker(profile_to: str | None = None) -> Child:
    if profile_to:
        return Child("broker", [sys.executable, os.environ.get("MB_PROFILER", str(HERE / "profiled_broker.py")), profile_to])
    return Child("broker", [sys.executable, "-m", "minibroker", "serve", "--port", "0"])


def broker_url(child: Child) -> str:
    """Wait for ``minibroker listening on amqp://127.0.0.1:PORT``."""
    line = child.line(timeout=30)
    match = re.search(r"amqp://[\w.\[\]:]+:\d+", line)
    if not match:
        raise ChildError(f"unexpected first line from `minibroker serve`: {line!r}")
    return match.group(0)


def spawn_cpp_broker(binary: Path) -> Child:
    return Child("broker.cpp", [str(binary), "-a", "127.0.0.1:0"])


def cpp_broker_url(child: Child) -> str:
    line = child.line(timeout=30)
    port = cpp_broker.listening_port(line)
    if port is None:
        raise ChildError(f"unexpected first line from broker.cpp: {line!r}")
    return f"amqp://127.0.0.1:{port}"


def spawn_peer(settings: Settings) -> Child:
    return Child("baseline peer", [sys.executable, str(HERE / "peer.py"), "--size", str(settings.size),
                                   "--credit", str(settings.credit)])  # fmt: skip


def peer_url(child: Child) -> str:
    ready = child.message(30, lambda m: m.get("event") == "ready")
    return f"amqp://127.0.0.1:{ready['port']}"


def start_worker(name: str) -> Child:
    return Child(name, [sys.executable, str(HERE / "client.py")])


def wait_ready(*workers: Child) -> None:
    for w in workers:
        w.message(60, lambda m: m.get("event") == "ready")


# ----------------------------------------------------------------------------- CPU


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu(pid: int) -> tuple[float, str]:
    """CPU seconds of all a process's threads (schedstat, ns precision), else of the process (stat, ticks).

    All threads: broker.cpp runs one event-loop thread per CPU; minibroker runs one.
    """
    try:
        total = 0.0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += schedstat_seconds(f.read())
        return total, "schedstat"
    except (OSError, ValueError, IndexError):
        pass
    with open(f"/proc/{pid}/stat") as f:
        return stat_cpu_seconds(f.read()), "stat"


def schedstat_seconds(text: str) -> float:
    """CPU seconds in a ``/proc/PID/task/TID/schedstat`` line: its first field, nanoseconds on the CPU."""
    return int(text.split()[0]) / 1e9


def stat_cpu_seconds(text: str, tick: int = _TICK) -> float:
    """utime + stime of a ``/proc/PID/stat`` line (fields 14 and 15, in clock ticks), in seconds.

    Split after the last ``)``: the command name in parentheses may itself hold spaces and ``)``.
    Counts every thread, live or exited, but only to a tick (10 ms at 100 Hz).
    """
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick


def process_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0
