"""The ``cclient`` group: a C client against minibroker, broker.cpp and broker.c, so the client is not the limit.

The python-qpid-proton clients of the ``throughput`` group spend 30-80 us of CPU per message,
more than the brokers do, so they cap what those rows can show.  Here the client is
``bench/cclient.c`` (ours: one sender or receiver on Qpid Proton's C proactor API, a 256-byte
binary body encoded once, unsettled, the receiver accepting without decoding), and the brokers
are minibroker (``python -m minibroker serve --port 0`` in its own process), Qpid Proton's C++
example broker (``broker.cpp``, see :mod:`bench.cpp_broker`) and its C proactor example broker
(``broker.c``: four threads, a credit window of 5 for senders, pre-settled deliveries out).

Workloads, each bounded by its message count and a time limit: ``send`` (the C sender puts N
messages on a queue and waits for every outcome), ``receive`` (the C receiver, credit window
1,000, drains the queue the send filled) and ``concurrent`` (a sender and a receiver process on
one queue at once; elapsed from the first link attached to the last message received).  Broker
CPU is the server process's CPU time over the job (``/proc/PID/task/*/schedstat``, all threads,
nanoseconds; ``/proc/PID/stat`` utime + stime, which counts to a 10 ms tick, is recorded beside
it as ``stat_cpu_s``), divided by the messages moved.  The brokers run in rounds (3 by default),
the order rotating per round; figures are medians over rounds with their spread (min-max), and
the ratios mb/c (minibroker / broker.c) and mb/cpp (minibroker / broker.cpp) are medians of
ratios taken within one round.

Nothing of Qpid's is kept in this repository; the client and broker.c are compiled once into the
bench's cache (``~/.cache/minibroker-bench``, keyed by the sources' hash).  What to install on
Debian or Ubuntu::

    apt-get install -y gcc libqpid-proton11-dev libqpid-proton11-dev-examples
    # and for broker.cpp beside them: g++ libqpid-proton-cpp12-dev
    cc -O2 -std=c99 -D_POSIX_C_SOURCE=200809L bench/cclient.c -o cclient -lqpid-proton
    cc -O2 -pthread -I/usr/share/proton/examples/c /usr/share/proton/examples/c/broker.c \\
        -o broker-c -lqpid-proton

(the last two are what :func:`locate_client` and :func:`locate_broker_c` run).  Without the
headers the group is skipped with one line saying what to install; without the examples it runs
without broker.c (``--c-broker PATH`` uses a broker.c built elsewhere, ``--no-c-broker`` leaves
it out).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import cpp_broker
from bench.harness import (
    Child,
    ChildError,
    Report,
    Settings,
    broker_url,
    fmt,
    process_cpu,
    progress,
    spawn_broker,
    spawn_cpp_broker,
    stat_cpu_seconds,
    verdict,
)

__all__ = [
    "BROKER_BUILD",
    "CLIENT_BUILD",
    "bench_cclient",
    "combine",
    "find_broker_source",
    "locate_broker_c",
    "locate_client",
    "round_ratio",
    "spread",
]

HERE = Path(__file__).resolve().parent
CLIENT_SOURCE = HERE / "cclient.c"
SOURCE_DIRS = ("/usr/share/proton/examples/c", "/usr/share/doc/*/examples/c")
CLIENT_BUILD = "{cc} -O2 -std=c99 -D_POSIX_C_SOURCE=200809L {source} -o {output} -lqpid-proton"
BROKER_BUILD = "{cc} -O2 -pthread -I{include} {source} -o {output} -lqpid-proton"
HEADERS_HINT = "apt-get install gcc libqpid-proton11-dev"
EXAMPLES_HINT = "apt-get install libqpid-proton11-dev-examples"

#: Subjects, as in the JSON lines; the ratios are minibroker's figure over the other broker's.
MB, CPP, C = "minibroker", "broker_cpp", "broker_c"
VS_CPP, VS_C = "vs_broker_cpp", "vs_broker_c"
LABELS = {MB: "minibroker", CPP: "broker.cpp", C: "broker.c"}


# ------------------------------------------------------------------------------ builds


def _compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def _build(name: str, sources: Sequence[Path], template: str, cache: Path | None) -> Path:
    """Compile ``sources[0]`` (the others are headers it includes) once; cached by the sources' and command's hash."""
    cc = _compiler()
    if cc is None:
        raise RuntimeError(f"no C compiler to build {name} ({HEADERS_HINT})")
    cache = cache or cpp_broker.cache_dir()
    digest = hashlib.sha256(template.encode())
    for source in sources:
        digest.update(source.read_bytes())
    binary = cache / f"{name}-{digest.hexdigest()[:12]}"
    if binary.is_file():
        return binary
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as work:
        workdir = Path(work)
        plain = [cpp_broker.plain_copy(s, workdir) if s.suffix == ".gz" else shutil.copy(s, workdir) for s in sources]
        output = workdir / name
        command = template.format(cc=cc, include=workdir, source=plain[0], output=output).split()
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            if "proton/" in proc.stderr and "No such file" in proc.stderr:
                raise RuntimeError(f"Qpid Proton's C headers are not installed ({HEADERS_HINT})")
            raise RuntimeError(f"building {name} failed ({' '.join(command)}): {proc.stderr.strip()[-2000:]}")
        os.replace(output, binary)  # atomic: a concurrent run sees the whole binary or none
    return binary


def locate_client(cache: Path | None = None, source: Path = CLIENT_SOURCE) -> tuple[Path | None, str]:
    """The built C client, or None and why the group is skipped."""
    try:
        return _build("cclient", [source], CLIENT_BUILD, cache), ""
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return None, str(exc).splitlines()[0]


def find_broker_source(dirs: Sequence[str] = SOURCE_DIRS) -> list[Path] | None:
    """The installed ``broker.c`` (or ``.gz``) and the ``thread.h`` it includes from beside it, if both are there."""
    for pattern in dirs:
        for directory in sorted(glob.glob(pattern)):
            found = [next((p for p in (Path(directory) / n, Path(directory) / f"{n}.gz") if p.is_file()), None)
                     for n in ("broker.c", "thread.h")]  # fmt: skip
            if all(found):
                return [p for p in found if p is not None]
    return None


def locate_broker_c(explicit: str | None = None, cache: Path | None = None,
                    dirs: Sequence[str] = SOURCE_DIRS) -> tuple[Path | None, str]:  # fmt: skip
    """The broker.c binary to run, or None and why it is left out."""
    if explicit:
        path = Path(explicit)
        return (path, "") if os.access(path, os.X_OK) else (None, f"--c-broker {explicit} is not an executable")
    sources = find_broker_source(dirs)
    if sources is None:
        return None, f"broker.c not installed ({EXAMPLES_HINT})"
    try:
        return _build("broker-c", sources, BROKER_BUILD, cache), ""
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return None, str(exc).splitlines()[0]


# ------------------------------------------------------------------------ measurement


@dataclass
class Job:
    """One workload against one broker: what the client processes reported and the broker's CPU."""

    kind: str
    subject: str
    count: int
    elapsed_s: float | None
    complete: bool
    client_cpu_s: float
    server_cpu_s: float | None
    stat_cpu_s: float | None

    @property
    def rate(self) -> float | None:
        return self.count / self.elapsed_s if self.elapsed_s and self.count else None

    @property
    def cpu_us(self) -> float | None:
        """Broker CPU per message moved (concurrent: each message went in and out)."""
        return self.server_cpu_s / self.count * 1e6 if self.server_cpu_s is not None and self.count else None

    @property
    def client_cpu_us(self) -> float | None:
        return self.client_cpu_s / self.count * 1e6 if self.count else None


def combine(results: Sequence[dict[str, Any]]) -> tuple[int, float | None, bool, float]:
    """Messages moved, elapsed seconds, complete and client CPU of one job's client processes.

    One process: its own figures.  A sender and a receiver at once: the messages the receiver
    got, from the first link attached to the last message in (both clocks are CLOCK_MONOTONIC).
    """
    if not results:
        raise ValueError("no client results to combine")
    receivers = [r for r in results if r["op"] == "receive"]
    count = int((receivers or results)[0]["count"])
    started = [r["start"] for r in results if r.get("start")]
    ended = [r["end"] for r in results if r.get("end")]
    elapsed = max(ended) - min(started) if started and ended and max(ended) > min(started) else None
    complete = all(bool(r["complete"]) for r in results)
    return count, elapsed, complete, sum(float(r.get("client_cpu_s") or 0.0) for r in results)


def parse_client_output(stdout: str) -> dict[str, Any]:
    """The JSON object the C client prints last."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    raise ValueError(f"no JSON result in the client's output {stdout[-500:]!r}")


def _stat_cpu(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return stat_cpu_seconds(f.read())
    except (OSError, ValueError, IndexError):
        return None


def run_clients(kind: str, subject: str, argvs: Sequence[list[str]], server_pid: int, limit_s: float) -> Job:
    """Start every client at once, wait for all (bounded by ``limit_s`` plus a margin), read the broker's CPU."""
    before, before_stat = process_cpu(server_pid)[0], _stat_cpu(server_pid)
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for argv in argvs]
    deadline = time.monotonic() + limit_s + 30
    outputs: list[tuple[str, str]] = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=max(0.1, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        raise ChildError(f"{kind} on {LABELS[subject]}: a C client ran past its limit of {limit_s:.0f} s") from None
    finally:
        for proc in procs:  # only if something above failed: the rest are reaped already
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    after, after_stat = process_cpu(server_pid)[0], _stat_cpu(server_pid)
    results = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        try:
            result = parse_client_output(out)
        except ValueError as exc:
            raise ChildError(f"{kind} on {LABELS[subject]}: {exc}; stderr: {err.strip()[-500:]}") from None
        if proc.returncode != 0 or result.get("error"):
            raise ChildError(f"{kind} on {LABELS[subject]} failed ({proc.returncode}): {result.get('error') or err}")
        results.append(result)
    count, elapsed, complete, client_cpu = combine(results)
    stat = after_stat - before_stat if after_stat is not None and before_stat is not None else None
    return Job(kind, subject, count, elapsed, complete, client_cpu, after - before, stat)


# --------------------------------------------------------------------------- summary


def round_ratio(mine: Sequence[float | None], theirs: Sequence[float | None]) -> float | None:
    """Median of the ratios taken within each round where both figures exist (and the divisor is not 0)."""
    ratios = [a / b for a, b in zip(mine, theirs, strict=False) if a is not None and b]
    return statistics.median(ratios) if ratios else None


def spread(values: Sequence[float | None]) -> tuple[float, float] | None:
    """(min, max) of the figures that exist."""
    present = [v for v in values if v is not None]
    return (min(present), max(present)) if present else None


def _span(values: Sequence[float | None], unit: str) -> str:
    s = spread(values)
    if s is None:
        return "n/a"
    if unit == "msg/s":
        return f"{s[0] / 1e3:.1f}-{s[1] / 1e3:.1f}k"
    return f"{s[0]:.3g}-{s[1]:.3g}"


# ------------------------------------------------------------------------------ group


@dataclass
class _Server:
    subject: str
    child: Child
    host: str
    port: str


def _listening(child: Child, timeout: float = 30) -> str:
    """broker.c and broker.cpp print ``listening on PORT`` (broker.c may print a line about SSL first)."""
    deadline = time.monotonic() + timeout
    while True:
        line = child.line(max(0.01, deadline - time.monotonic()))
        port = cpp_broker.listening_port(line)
        if port is not None:
            return str(port)


def bench_cclient(report: Report, s: Settings, cpp_binary: Path | None, cpp_why: str, c_explicit: str | None,
                  no_c: bool) -> None:  # fmt: skip
    """Send, receive and concurrent with the C client against each broker, interleaved in rounds."""
    client, why = locate_client()
    if client is None:
        line = f"cclient: skipped ({why})"
        report.notes.append(line)
        progress(line)
        return
    c_binary, c_why = (None, "--no-c-broker") if no_c else locate_broker_c(c_explicit)
    children: list[Child] = []
    servers: list[_Server] = []
    try:
        mb = spawn_broker()
        children.append(mb)
        cpp = c = None
        if cpp_binary is not None:
            cpp = spawn_cpp_broker(cpp_binary)
            children.append(cpp)
        if c_binary is not None:
            c = Child("broker.c", [str(c_binary), "127.0.0.1", "0"])
            children.append(c)
        servers.append(_Server(MB, mb, "127.0.0.1", broker_url(mb).rsplit(":", 1)[1]))
        if cpp is not None:
            servers.append(_Server(CPP, cpp, "127.0.0.1", _listening(cpp)))
        else:
            report.notes.append(f"cclient: broker.cpp skipped ({cpp_why})")
        if c is not None:
            servers.append(_Server(C, c, "127.0.0.1", _listening(c)))
            report.notes.append(f"broker.c: Qpid Proton's C proactor example broker, {c_binary}")
        else:
            report.notes.append(f"cclient: broker.c skipped ({c_why})")
            progress(f"cclient: broker.c skipped ({c_why})")
        jobs = _run_rounds(s, client, servers)
    finally:
        for child in children:
            child.close(signal.SIGTERM)
    _report(report, s, servers, jobs)


def _run_rounds(s: Settings, client: Path, servers: list[_Server]) -> dict[tuple[str, str], list[Job]]:
    n, limit = s.cclient_messages, s.cclient_limit_s
    names = ", ".join(LABELS[x.subject] for x in servers)
    progress(f"cclient: C client, {n:,} x {s.size} B, {s.rounds} round(s), interleaved: {names}")
    jobs: dict[tuple[str, str], list[Job]] = {}
    limit_ms = str(int(limit * 1000))

    def argv(x: _Server, op: str, address: str, count: int) -> list[str]:
        return [str(client), op, x.host, x.port, address, str(count), str(s.size if op == "send" else s.credit),
                limit_ms]  # fmt: skip

    def run(kind: str, x: _Server, argvs: list[list[str]]) -> Job:
        job = run_clients(kind, x.subject, argvs, x.child.pid, limit)
        jobs.setdefault((kind, x.subject), []).append(job)
        progress(f"  {kind} {LABELS[x.subject]}: {fmt(job.rate, 'msg/s')}, broker CPU {fmt(job.cpu_us, 'us')}/msg"
                 + ("" if job.complete else " (partial)"))  # fmt: skip
        return job

    for r in range(s.rounds):
        order = servers[r % len(servers) :] + servers[: r % len(servers)]  # who goes first rotates
        sent = {x.subject: run("send", x, [argv(x, "send", f"bench.c.{r}", n)]).count for x in order}
        for x in order:
            if sent[x.subject]:
                run("receive", x, [argv(x, "receive", f"bench.c.{r}", sent[x.subject])])
        for x in order:
            address = f"bench.cc.{r}"
            run("concurrent", x, [argv(x, "receive", address, n), argv(x, "send", address, n)])
    return jobs


def _report(report: Report, s: Settings, servers: list[_Server], jobs: dict[tuple[str, str], list[Job]]) -> None:
    subjects = [x.subject for x in servers]
    has_cpp, has_c = CPP in subjects, C in subjects
    group = "C client"

    def figures(kind: str, value: Callable[[Job], float | None]) -> dict[str, list[float | None]]:
        return {x: [value(j) for j in jobs.get((kind, x), [])] for x in subjects}

    def emit(kind: str, name: str, label: str, unit: str, value: Callable[[Job], float | None],
             target: tuple[str, str, Callable[[float], bool]] | None = None) -> None:  # fmt: skip
        got = figures(kind, value)
        medians = {x: statistics.median(v) if (v := [f for f in got[x] if f is not None]) else None for x in subjects}
        ratios = {VS_CPP: round_ratio(got[MB], got[CPP]) if has_cpp else None,
                  VS_C: round_ratio(got[MB], got[C]) if has_c else None}  # fmt: skip
        target_text, ok = "", None
        if target is not None:
            target_text, judged, test = target
            figure = medians.get(judged) if judged in subjects else ratios.get(judged)
            ok = test(figure) if figure is not None else None
        for subject, value_ in [*medians.items(), *ratios.items()]:
            if value_ is None:
                if subject == MB or (subject == VS_C and has_c) or (subject == VS_CPP and has_cpp):
                    report.problem(f"cclient/{name}/{subject}: no value")
                continue
            own = jobs.get((kind, subject), []) if subject in LABELS else []
            is_target = target is not None and target[1] == subject
            span = spread(got[subject]) if subject in got else None
            report.record("cclient", name, subject, value_, "x" if subject in (VS_CPP, VS_C) else unit,
                          rounds=len(own) or None, count=sum(j.count for j in own) or None,
                          complete=all(j.complete for j in own) if own else None,
                          min=span[0] if span else None, max=span[1] if span else None,
                          values=got[subject] if subject in got else None,
                          server_cpu_s=[j.server_cpu_s for j in own] if own else None,
                          stat_cpu_s=[j.stat_cpu_s for j in own] if own else None,
                          target=target_text if is_target else None,
                          status=verdict(ok) if is_target else None)  # fmt: skip
        partial = "" if all(j.complete for x in subjects for j in jobs.get((kind, x), [])) else " (partial)"
        spans = ", ".join(f"{LABELS[x]} {_span(got[x], unit)}" for x in subjects)
        report.row(group, label + partial, mb=fmt(medians[MB], unit), cpp=fmt(medians[CPP], unit) if has_cpp else "",
                   c=fmt(medians[C], unit) if has_c else "", vs_cpp=fmt(ratios[VS_CPP], "x") if ratios[VS_CPP] else "",
                   vs_c=fmt(ratios[VS_C], "x") if ratios[VS_C] else "", target=target_text, status=verdict(ok),
                   note=f"min-max {spans}")  # fmt: skip

    def rate(j: Job) -> float | None:
        return j.rate

    def cpu(j: Job) -> float | None:
        return j.cpu_us

    def client_cpu(j: Job) -> float | None:
        return j.client_cpu_us

    n = s.cclient_messages
    emit("send", "send", f"C sender, {n:,} to a queue (waits for all outcomes)", "msg/s", rate)
    emit("receive", "receive", "C receiver drains the queue (accepts)", "msg/s", rate)
    emit("concurrent", "concurrent", "C sender + C receiver at once", "msg/s", rate,
         (">= 0.6x broker.c", VS_C, lambda v: v >= 0.6) if has_c else None)  # fmt: skip
    emit("send", "server_cpu_per_message_send", "broker CPU per message, send", "us", cpu)
    emit("receive", "server_cpu_per_message_receive", "broker CPU per message, receive", "us", cpu)
    emit("concurrent", "server_cpu_per_message_concurrent", "broker CPU per message, concurrent (in + out)", "us", cpu,
         ("<= 10 us", MB, lambda v: v <= 10.0))  # fmt: skip
    for kind in ("send", "receive", "concurrent"):
        for subject, values in figures(kind, client_cpu).items():
            present = [v for v in values if v is not None]
            if present:
                report.record("cclient", f"client_cpu_per_message_{kind}", subject, statistics.median(present), "us")
