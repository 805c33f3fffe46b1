"""The ``amqp091`` group: AMQP 0-9-1 clients against minibroker and against RabbitMQ 3.10, in one sitting.

Clients (``bench/amqp091_client.py``, one process per job): a raw socket client built on
minibroker's own 0-9-1 codec (publishes encoded once and pipelined under publisher confirms, one
``basic.ack multiple=true`` per 250 deliveries: a few µs of CPU per message, so it is not the
limit), pika's ``BlockingConnection`` and aio-pika.  Servers: minibroker (``python -m minibroker
serve --port 0`` in its own process; 0-9-1 is spoken on its AMQP port) and, when
``rabbitmq-server`` is installed, a RabbitMQ node this group starts as its own process on free
ports, with its node name, Mnesia and log directories, plugins file (no plugins) and feature
flags file in a temporary directory, and stops (SIGTERM to ``beam.smp``) afterwards.  Without
``rabbitmq-server`` (or with ``--quick``, so that CI's smoke run never needs it, or
``--no-rabbitmq``) the RabbitMQ side is skipped with one line.

Measured, in rounds (the order of the servers rotating), medians over rounds and ratios
mb/rmq (minibroker's figure over RabbitMQ's) taken within each round:

* throughput per client: ``publish`` (COUNT messages, done when the broker holds them all) and
  ``consume`` (the queue the publish filled, prefetch 1,000, manual acks);
* broker CPU per message, publish + consume, from ``/proc`` (all threads of minibroker's
  process; of RabbitMQ's ``beam.smp``), over the whole job (connection set-up included);
* publish-with-confirm latency: single confirmed publishes, p50 and p90 (raw client and pika);
* start-up to the first message (a message published and fetched back with ``basic.get``):
  ``ThreadedBroker.start()`` in this process, a ``minibroker serve`` process from ``Popen``, and
  a RabbitMQ node from ``Popen`` (one start per round);
* the ``amqp_broker`` fixture for a 0-9-1 user: one pytest run of N tests that each take the
  fixture and publish and ``basic.get`` one message with pika, interleaved with N that do
  nothing and, with RabbitMQ, N that do the same against the running node; per-test medians.

Targets (issue #45): with the same client, throughput at least RabbitMQ's and broker CPU per
message at most RabbitMQ's; start-up to the first message under 10 ms (``ThreadedBroker``, what
the fixture starts).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import minibroker
from bench.amqp091_client import first_message
from bench.cclient_bench import round_ratio
from bench.fixture_bench import CONFTEST, _child_env, _pytest
from bench.harness import (
    Child,
    ChildError,
    Report,
    Settings,
    broker_url,
    child_env,
    fmt,
    process_cpu,
    progress,
    spawn_broker,
    verdict,
)

__all__ = ["RabbitNode", "bench_amqp091", "locate_rabbitmq", "measure_fixture"]

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "amqp091_client.py"
MB, RMQ, VS = "minibroker", "rabbitmq", "vs_rabbitmq"
CLIENTS = {"raw": "raw client", "pika": "pika (blocking)", "aiopika": "aio-pika"}
CLIENT_MODULES = {"raw": None, "pika": "pika", "aiopika": "aio_pika"}
LATENCY_CLIENTS = ("raw", "pika")
GROUP = "AMQP 0-9-1"


# -------------------------------------------------------------------------- RabbitMQ


def locate_rabbitmq() -> tuple[str | None, str]:
    """The ``rabbitmq-server`` to start, or None and why not."""
    found = shutil.which("rabbitmq-server") or next(
        (p for p in ("/usr/sbin/rabbitmq-server", "/usr/lib/rabbitmq/bin/rabbitmq-server") if os.path.exists(p)), None
    )
    if found is None:
        return None, "rabbitmq-server is not installed (apt-get install rabbitmq-server)"
    if os.geteuid() != 0 and os.path.exists("/usr/lib/rabbitmq/bin/rabbitmq-server"):
        # Debian's /usr/sbin wrapper runs only as root or rabbitmq; the script behind it runs as anyone.
        found = "/usr/lib/rabbitmq/bin/rabbitmq-server"
    return found, ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RabbitNode:
    """One RabbitMQ node started by the bench: its own name, ports and directories, nothing shared.

    As root, Debian's ``rabbitmq-server`` switches to the ``rabbitmq`` user, so the scratch
    directory is handed to that user.  The Erlang VM is found among the process's descendants
    (``beam.smp``): its CPU is the broker's, and SIGTERM to it stops the node cleanly.
    """

    def __init__(self, binary: str, root: Path) -> None:
        self.root = root
        self.port = free_port()
        dist = free_port()
        self.name = f"mbbench{os.getpid()}x{self.port}@localhost"
        for sub in ("mnesia", "log"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "plugins").write_text("[].\n")  # no plugins: the management plugin would add CPU
        if os.geteuid() == 0:
            os.chmod(root.parent, 0o711)  # mkdtemp makes it 0700: the rabbitmq user must reach its own directory
            shutil.chown(root, "rabbitmq", "rabbitmq")
            for path in root.rglob("*"):
                shutil.chown(path, "rabbitmq", "rabbitmq")
        env = dict(os.environ, RABBITMQ_NODE_PORT=str(self.port), RABBITMQ_NODENAME=self.name,
                   RABBITMQ_DIST_PORT=str(dist), RABBITMQ_MNESIA_BASE=str(root / "mnesia"),
                   RABBITMQ_LOG_BASE=str(root / "log"), RABBITMQ_ENABLED_PLUGINS_FILE=str(root / "plugins"),
                   RABBITMQ_FEATURE_FLAGS_FILE=str(root / "ff"), HOME=str(root))  # fmt: skip
        self.out = (root / "out").open("w")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen([binary], cwd=root, env=env, stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True)  # fmt: skip
        self._beam: int | None = None

    def first_message(self, timeout: float = 120.0) -> float:
        """Seconds from ``Popen`` to a message published and fetched back (polling every 20 ms)."""
        deadline = self.started + timeout
        while True:
            if self.proc.poll() is not None and self.beam_pid() is None:
                raise ChildError(f"rabbitmq-server exited ({self.proc.returncode}); {self.tail()}")
            try:
                first_message("127.0.0.1", self.port, timeout=10)
                return time.perf_counter() - self.started
            except (OSError, ConnectionError):
                if time.perf_counter() > deadline:
                    raise ChildError(f"RabbitMQ did not serve a message within {timeout:.0f} s; {self.tail()}") from None
                time.sleep(0.02)

    def beam_pid(self) -> int | None:
        """The Erlang VM among the descendants of the started process."""
        if self._beam is not None:
            return self._beam
        children: dict[int, list[int]] = {}
        comm: dict[int, str] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            name, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
            children.setdefault(int(rest[1]), []).append(int(entry))
            comm[int(entry)] = name
        todo = [self.proc.pid]
        while todo:
            pid = todo.pop()
            if comm.get(pid, "").startswith("beam"):
                self._beam = pid
                return pid
            todo += children.get(pid, [])
        return None

    def cpu(self) -> float:
        pid = self.beam_pid()
        if pid is None:
            raise ChildError(f"no beam.smp under rabbitmq-server (pid {self.proc.pid}); {self.tail()}")
        return process_cpu(pid)[0]

    def tail(self) -> str:
        try:
            return "its output ends: " + (self.root / "out").read_text()[-1500:]
        except OSError:
            return "no output"

    def stop(self) -> None:
        pid = self.beam_pid()
        try:
            if pid is not None:
                os.kill(pid, signal.SIGTERM)
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: only what this node started
            except OSError:
                pass
            self.proc.wait()
        finally:
            self.out.close()


# ------------------------------------------------------------------------------ jobs


@dataclass
class Job:
    client: str
    op: str
    subject: str
    count: int
    elapsed_s: float | None
    complete: bool
    client_cpu_s: float
    server_cpu_s: float
    result: dict[str, Any]

    @property
    def rate(self) -> float | None:
        return self.count / self.elapsed_s if self.elapsed_s and self.count else None


@dataclass
class Server:
    subject: str
    port: int
    cpu: Callable[[], float]


def run_client(client: str, op: str, x: Server, queue: str, count: int, size: int, limit_s: float) -> Job:
    argv = [sys.executable, str(CLIENT), client, op, "127.0.0.1", str(x.port), queue, str(count), str(size),
            str(limit_s)]  # fmt: skip
    before = x.cpu()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=limit_s + 60, env=child_env())
    except subprocess.TimeoutExpired:
        raise ChildError(f"{client} {op} on {x.subject} ran past its limit of {limit_s:.0f} s") from None
    after = x.cpu()
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {"error": proc.stderr[-1500:]}
    if proc.returncode != 0 or "error" in result:
        raise ChildError(f"{client} {op} on {x.subject} failed ({proc.returncode}): {result.get('error')}")
    return Job(client, op, x.subject, int(result["count"]), result.get("elapsed_s"), bool(result["complete"]),
               float(result["client_cpu_s"]), after - before, result)  # fmt: skip


def run_rounds(s: Settings, servers: list[Server], clients: list[str]) -> dict[tuple[str, str, str], list[Job]]:
    n, size, limit = s.amqp091_messages, s.size, s.job_limit_s
    jobs: dict[tuple[str, str, str], list[Job]] = {}

    def run(client: str, op: str, x: Server, queue: str, count: int) -> Job:
        job = run_client(client, op, x, queue, count, size, limit)
        jobs.setdefault((client, op, x.subject), []).append(job)
        extra = f", broker CPU {job.server_cpu_s / max(1, job.count) * 1e6:.3g} us/msg" if op != "latency" else ""
        progress(f"  {client} {op} {x.subject}: {fmt(job.rate, 'msg/s')}{extra}" + ("" if job.complete else " (partial)"))
        return job

    for r in range(s.rounds):
        order = servers[r % len(servers) :] + servers[: r % len(servers)]  # who goes first rotates
        for client in clients:
            queue = f"bench091.{client}.{r}"
            sent = {x.subject: run(client, "publish", x, queue, n).count for x in order}
            for x in order:
                if sent[x.subject]:
                    run(client, "consume", x, queue, sent[x.subject])
            if client in LATENCY_CLIENTS:
                for x in order:
                    run(client, "latency", x, f"bench091.latency.{client}.{r}", s.amqp091_round_trips)
    return jobs


# --------------------------------------------------------------------------- start-up


def startup_in_process(reps: int, limit_s: float) -> tuple[list[float], list[float]]:
    """Seconds from ``ThreadedBroker.start()`` to a message published and fetched back, and the
    CPU seconds this process spent meanwhile (the broker's thread and the client's: what the
    machine's load does not inflate)."""
    times: list[float] = []
    cpu: list[float] = []
    deadline = time.monotonic() + limit_s
    for _ in range(reps):
        if time.monotonic() > deadline:
            break
        broker = minibroker.ThreadedBroker()
        t0, c0 = time.perf_counter(), time.process_time()
        broker.start()
        try:
            first_message("127.0.0.1", broker.port, timeout=10)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        finally:
            broker.stop()
    return times, cpu


def startup_process(reps: int, limit_s: float) -> list[float]:
    """Seconds from ``Popen(python -m minibroker serve)`` to a message published and fetched back."""
    times: list[float] = []
    deadline = time.monotonic() + limit_s
    for _ in range(reps):
        if time.monotonic() > deadline:
            break
        t0 = time.perf_counter()
        child = spawn_broker()
        try:
            port = int(broker_url(child).rsplit(":", 1)[1])  # printed once it listens
            first_message("127.0.0.1", port, timeout=10)
            times.append(time.perf_counter() - t0)
        finally:
            child.close(signal.SIGTERM)
    return times


# ---------------------------------------------------------------------------- fixture

FIXTURE_TESTS = textwrap.dedent(
    """
    import os
    import pika
    import pytest

    N = int(os.environ["MINIBROKER_BENCH_TESTS"])
    RABBITMQ = os.environ.get("MINIBROKER_BENCH_RABBITMQ_URL")
    KINDS = ["with", "without"] + (["rabbitmq"] if RABBITMQ else [])

    def round_trip(url):
        connection = pika.BlockingConnection(pika.URLParameters(url))
        try:
            channel = connection.channel()
            queue = channel.queue_declare("", exclusive=True).method.queue
            channel.basic_publish("", queue, b"hello")
            for _ in range(1000):
                method, _properties, body = channel.basic_get(queue, auto_ack=True)
                if method is not None:
                    break
            assert body == b"hello"
        finally:
            connection.close()

    @pytest.mark.parametrize("n", range(N))
    @pytest.mark.parametrize("kind", KINDS)
    def test_case(request, kind, n):
        if kind == "with":
            round_trip(request.getfixturevalue("amqp_broker").amqp091_url)
        elif kind == "rabbitmq":
            round_trip(RABBITMQ)
    """
)

def measure_fixture(tests: int, rabbitmq_url: str | None, timeout: float = 300.0) -> dict[str, float]:
    """Per-test medians (ms) of a pika publish + get with ``amqp_broker``, with nothing, and on RabbitMQ."""
    with tempfile.TemporaryDirectory(prefix="minibroker-fixture091-bench-") as tmp:
        root = Path(tmp)
        (root / "test_fixture091_cost.py").write_text(FIXTURE_TESTS)
        (root / "conftest.py").write_text(CONFTEST)
        out = root / "times.json"
        extra = {"MINIBROKER_BENCH_TESTS": str(tests), "MINIBROKER_BENCH_OUT": str(out)}
        if rabbitmq_url:
            extra["MINIBROKER_BENCH_RABBITMQ_URL"] = rabbitmq_url
        env = _child_env(root, **extra)
        env["PYTHONPATH"] = child_env()["PYTHONPATH"]
        _pytest(root, env, ["-x", "-k", "with-0 or without-0"], timeout)  # warm-up: bytecode caches
        _pytest(root, env, [], timeout)
        times: dict[str, list[float]] = json.loads(out.read_text())
    result: dict[str, float] = {}
    for key, values in times.items():
        kept = values[1:] if key.startswith("with") and not key.startswith("without") else values  # 1st starts it
        result[key] = statistics.median(kept) * 1e3
    return result


# ------------------------------------------------------------------------------ group


def bench_amqp091(report: Report, s: Settings, no_rabbitmq: bool) -> None:
    clients = [c for c, module in CLIENT_MODULES.items() if module is None or importlib.util.find_spec(module)]
    for c in CLIENTS:
        if c not in clients:
            report.notes.append(f"amqp091: {CLIENTS[c]} skipped ({CLIENT_MODULES[c]} is not installed)")
    binary, why = (None, "--no-rabbitmq") if no_rabbitmq else locate_rabbitmq()
    if binary is not None and s.mode == "quick":
        binary, why = None, "quick mode: CI's smoke run does not start RabbitMQ"
    if binary is None:
        line = f"amqp091: RabbitMQ skipped ({why})"
        report.notes.append(line)
        progress(line)
    else:
        report.notes.append(f"amqp091: RabbitMQ {rabbitmq_version()} ({binary}), a node of its own per start")
    scratch = Path(tempfile.mkdtemp(prefix="minibroker-bench-rmq-"))
    rmq_starts: list[float] = []
    node: RabbitNode | None = None
    mb: Child | None = None
    try:
        progress(f"amqp091: start-up to first message, ThreadedBroker x{s.amqp091_startup_reps}, "
                 f"minibroker serve x{s.amqp091_process_reps}")  # fmt: skip
        in_process, in_process_cpu = startup_in_process(s.amqp091_startup_reps, s.startup_limit_s)
        process = startup_process(s.amqp091_process_reps, s.startup_limit_s)
        mb = spawn_broker()
        if binary is not None:
            progress("amqp091: starting RabbitMQ")
            node = RabbitNode(binary, scratch / "node0")
            rmq_starts.append(node.first_message())
        servers = [Server(MB, int(broker_url(mb).rsplit(":", 1)[1]), lambda pid=mb.pid: process_cpu(pid)[0])]
        if node is not None:
            servers.append(Server(RMQ, node.port, node.cpu))
        names = ", ".join(x.subject for x in servers)
        progress(f"amqp091: {s.amqp091_messages:,} x {s.size} B per job, clients {', '.join(clients)}, "
                 f"{s.rounds} round(s), interleaved: {names}")  # fmt: skip
        jobs = run_rounds(s, servers, clients)
        mb.close(signal.SIGTERM)
        mb = None
        progress(f"amqp091: fixture cost, {s.amqp091_fixture_tests} tests of each kind in one pytest run")
        rmq_url = f"amqp://guest:guest@127.0.0.1:{node.port}/%2F" if node is not None else None
        fixture = measure_fixture(s.amqp091_fixture_tests, rmq_url)
        if node is not None:
            assert binary is not None  # the node was started from it
            node.stop()
            node = None
            for i in range(1, s.rounds):
                progress(f"amqp091: RabbitMQ start-up {i + 1} of {s.rounds}")
                again = RabbitNode(binary, scratch / f"node{i}")
                try:
                    rmq_starts.append(again.first_message())
                finally:
                    again.stop()
    finally:
        if mb is not None:
            mb.close(signal.SIGTERM)
        if node is not None:
            node.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    _report(report, s, clients, jobs, [x.subject for x in servers], (in_process, in_process_cpu), process, rmq_starts,
            fixture)  # fmt: skip


def rabbitmq_version() -> str:
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"], capture_output=True, text=True,
                             timeout=10).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "(version unknown)"
    return out.strip() or "(version unknown)"


def _report(report: Report, s: Settings, clients: list[str], jobs: dict[tuple[str, str, str], list[Job]],
            subjects: list[str], in_process_times: tuple[list[float], list[float]], process: list[float],
            rmq_starts: list[float],
            fixture: dict[str, float]) -> None:  # fmt: skip
    has_rmq = RMQ in subjects

    def emit(name: str, label: str, unit: str, got: dict[str, list[float | None]], target: str = "",
             test: Callable[[float], bool] | None = None, counts: list[Job] | None = None, note: str = "",
             show: Callable[[float | None], str] | None = None) -> None:  # fmt: skip
        shown = show or (lambda v: fmt(v, unit))
        medians = {x: statistics.median(v) if (v := [f for f in got.get(x, []) if f is not None]) else None
                   for x in subjects}  # fmt: skip
        ratio = round_ratio(got.get(MB, []), got.get(RMQ, [])) if has_rmq else None
        ok = test(ratio) if test is not None and ratio is not None else None
        if test is not None and not has_rmq:
            target = ""
        complete = all(j.complete for j in counts) if counts else None
        for subject, value in [*medians.items(), (VS, ratio)]:
            if value is None:
                if subject == MB or (has_rmq and subject in (RMQ, VS)):
                    report.problem(f"amqp091/{name}/{subject}: no value")
                continue
            report.record("amqp091", name, subject, value, "x" if subject == VS else unit,
                          values=got.get(subject), complete=complete,
                          target=target if subject == VS and target else None,
                          status=verdict(ok) if subject == VS and target else None)  # fmt: skip
        partial = "" if complete in (None, True) else " (partial)"
        report.row(GROUP, label + partial, mb=shown(medians[MB]), rmq=shown(medians.get(RMQ)) if has_rmq else "",
                   vs_rmq=fmt(ratio, "x") if ratio else "", target=target, status=verdict(ok), note=note)  # fmt: skip

    def per_round(client: str, op: str, value: Callable[[Job], float | None]) -> dict[str, list[float | None]]:
        return {x: [value(j) for j in jobs.get((client, op, x), [])] for x in subjects}

    n = s.amqp091_messages
    for client in clients:
        for op, what in (("publish", f"publish {n:,}"), ("consume", "consume them (prefetch 1,000, ack multiple)")):
            own = [j for x in subjects for j in jobs.get((client, op, x), [])]
            ccpu = statistics.median([j.client_cpu_s / j.count * 1e6 for j in own if j.subject == MB and j.count] or [0])
            # How much of a CPU each broker used while it ran: below 1 for minibroker's one thread,
            # the rate was set by the CPU share the machine gave it, not by its cost per message.
            busy = {x: statistics.median([j.server_cpu_s / j.elapsed_s for j in own if j.subject == x and j.elapsed_s]
                                         or [0]) for x in subjects}  # fmt: skip
            note = f"client CPU {ccpu:.3g} us/msg; broker busy " + " / ".join(f"{busy[x]:.2f}" for x in subjects)
            emit(f"{client}_{op}", f"{CLIENTS[client]}: {what}", "msg/s", per_round(client, op, lambda j: j.rate),
                 ">= RabbitMQ", lambda r: r >= 1.0, own, note=note + " CPU")  # fmt: skip
    for client in clients:
        cpu: dict[str, list[float | None]] = {}
        for x in subjects:
            pairs = zip(jobs.get((client, "publish", x), []), jobs.get((client, "consume", x), []), strict=False)
            cpu[x] = [(p.server_cpu_s + c.server_cpu_s) / p.count * 1e6 if p.count else None for p, c in pairs]
        emit(f"{client}_server_cpu_per_message", f"broker CPU per message, publish + consume, {CLIENTS[client]}",
             "us", cpu, "<= RabbitMQ", lambda r: r <= 1.0)  # fmt: skip
    for client in (c for c in LATENCY_CLIENTS if c in clients):
        for key, q in (("rtt_p50_s", "p50"), ("rtt_p90_s", "p90")):
            got = per_round(client, "latency", lambda j, k=key: j.result[k] * 1e3 if j.result.get(k) else None)
            emit(f"{client}_confirm_latency_{q}", f"confirmed publish round trip, {q}, {CLIENTS[client]}", "ms", got,
                 counts=[j for x in subjects for j in jobs.get((client, "latency", x), [])],
                 note=f"{s.amqp091_round_trips:,} one at a time")  # fmt: skip
    # Start-up: minibroker in ms, RabbitMQ in seconds; no within-round ratio (different counts).
    in_process, in_process_cpu = in_process_times
    ok = statistics.median(in_process) * 1e3 < 10 if in_process else None
    cpu_note = ""
    if in_process_cpu:
        cpu_ms = statistics.median(in_process_cpu) * 1e3
        report.record("amqp091", "startup_in_process_cpu", MB, cpu_ms, "ms", count=len(in_process_cpu))
        cpu_note = f"; CPU {cpu_ms:.3g} ms (broker and client threads)"
    for name, label, values, target in (
        ("startup_in_process", "start-up to first message: ThreadedBroker.start() in process", in_process, "< 10 ms"),
        ("startup_process", "start-up to first message: `minibroker serve` process", process, ""),
    ):
        if not values:
            report.problem(f"amqp091/{name}: no value")
            continue
        med = statistics.median(values) * 1e3
        report.record("amqp091", name, MB, med, "ms", count=len(values), target=target or None,
                      status=verdict(ok) if target else None)  # fmt: skip
        rmq_cell = vs_cell = ""
        if name == "startup_process" and rmq_starts:
            rmq = statistics.median(rmq_starts)
            report.record("amqp091", "startup_process", RMQ, rmq, "s", count=len(rmq_starts), values=rmq_starts)
            report.record("amqp091", "startup_process", VS, med / 1e3 / rmq, "x")
            rmq_cell, vs_cell = fmt(rmq, "s"), fmt(med / 1e3 / rmq, "x")
        report.row(GROUP, label, mb=fmt(med, "ms"), rmq=rmq_cell, vs_rmq=vs_cell, target=target,
                   status=verdict(ok) if target else "",
                   note=f"median of {len(values)}" + (cpu_note if name == "startup_in_process" else "")
                   + (f"; RabbitMQ: {len(rmq_starts)} start(s) of a fresh node" if rmq_cell else ""))  # fmt: skip
    tests = s.amqp091_fixture_tests
    for key, name in (("with", "fixture_test_with"), ("without", "fixture_test_without"),
                      ("rabbitmq", "fixture_test_rabbitmq")):  # fmt: skip
        if key in fixture:
            report.record("amqp091", name, RMQ if key == "rabbitmq" else MB, fixture[key], "ms", count=tests,
                          cpu_ms=fixture.get(key + "_cpu"))  # fmt: skip
    with_ms, rmq_ms = fixture.get("with"), fixture.get("rabbitmq")
    vs = with_ms / rmq_ms if with_ms and rmq_ms else None
    if vs is not None:
        report.record("amqp091", "fixture_test_with", VS, vs, "x", count=tests)
    report.row(GROUP, "per test: amqp_broker + pika connect, publish, basic.get", mb=fmt(with_ms, "ms"),
               rmq=fmt(rmq_ms, "ms") if rmq_ms else "", vs_rmq=fmt(vs, "x") if vs else "",
               note=f"median of {tests}; RabbitMQ: the same test on its running node (no reset)")  # fmt: skip
    over = (fixture["with"] - fixture["without"]) if "with" in fixture and "without" in fixture else None
    if over is not None:
        report.record("amqp091", "fixture_overhead_per_test", MB, over, "ms", count=tests,
                      cpu_ms=fixture["with_cpu"] - fixture["without_cpu"])  # fmt: skip
        report.row(GROUP, "the same, less an empty test without the fixture (CPU)", mb=f"{over:.3g} ms ("
                   f"{fixture['with_cpu'] - fixture['without_cpu']:.3g} ms)")  # fmt: skip
