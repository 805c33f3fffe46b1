"""Per-test cost of the ``amqp_broker`` fixture, measured inside one pytest run.

Run by ``python -m bench`` (group ``fixture``) as ``python bench/fixture_bench.py N OUT.json
[pytest options]``: a generated test file holds N tests that take the fixture and N that do
not, interleaved; a hook times each test's setup + call + teardown (wall clock, and CPU time of
the whole process, broker thread included); the medians go to OUT.json.
The first test with the fixture (it starts the broker) is left out of its median.

``python bench/fixture_bench.py runs N`` instead runs whole pytest processes of N trivial
tests with the fixture and N without, alternating for 15 rounds (one run's CPU time moves by
about 10 ms from the next), and reports the CPU time per test their medians differ by (the
broker's start and the imports included).  ``python bench/fixture_bench.py
imports`` reports what importing costs: ``import minibroker``, what the fixture imports
(``from minibroker import ThreadedBroker``), trio alone and the plugin, each in a fresh
interpreter (CPU time less an empty interpreter's, alternating, medians).
``--wheel`` after ``runs N`` or ``instructions N`` measures the package installed from this
checkout's wheel (into the run's temporary directory) instead of the environment's install.
``python bench/fixture_bench.py instructions N`` runs the two whole runs of ``runs`` once each
under ``valgrind --tool=callgrind`` and reports the instructions per test they differ by: slow
(half a minute a run) but the same whatever the machine's load, unlike CPU time.
``instructions N --queue``: the same, with each test of the run with the fixture declaring a
queue, publishing one message to it and reading it back through the broker's Python API (what a
test that uses the broker pays, against the trivial tests without it).

Child interpreters write and read bytecode caches in a temporary ``PYTHONPYCACHEPREFIX``
(even where ``PYTHONDONTWRITEBYTECODE`` is set) after one unmeasured warm-up run, so the
figures are those of an installed package: compiling minibroker's sources, which an
environment without bytecode caches does on every run, would add about 60 ms per process.
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

TESTS = textwrap.dedent(
    """
    import os
    import pytest

    N = int(os.environ["MINIBROKER_BENCH_TESTS"])

    @pytest.mark.parametrize("n", range(N))
    @pytest.mark.parametrize("kind", ["with", "without"])
    def test_case(request, kind, n):
        if kind == "with":
            broker = request.getfixturevalue("amqp_broker")
            assert broker.port
    """
)

#: The conftest of a measured run (also the 0-9-1 group's): each test's time by its ``kind``.
CONFTEST = textwrap.dedent(
    """
    import json
    import os
    import time
    import pytest

    TIMES = {}  # per test's ``kind`` parameter: wall times, and CPU times under ``<kind>_cpu``

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        kind = item.callspec.params["kind"]
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return (yield)
        finally:
            TIMES.setdefault(kind, []).append(time.perf_counter() - t0)
            TIMES.setdefault(kind + "_cpu", []).append(time.process_time() - c0)  # every thread: the broker's too

    def pytest_sessionfinish(session):
        with open(os.environ["MINIBROKER_BENCH_OUT"], "w") as out:
            json.dump(TIMES, out)
    """
)


def _child_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a measured interpreter: bytecode cached under ``root`` (see above); the
    package from ``root / "site"`` when :func:`install_wheel` put it there."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(root / "pycache"), **extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if (root / "site").is_dir():
        env["PYTHONPATH"] = os.pathsep.join([str(root / "site"), *filter(None, [env.get("PYTHONPATH")])])
    return env


def install_wheel(root: Path, timeout: float = 300.0) -> None:
    """Build this checkout's wheel and install it (no dependencies) into ``root / "site"``, first on
    the measured interpreters' path: the package as a user installs it, which pytest treats
    differently from an editable install (it marks a wheel's packages for assertion rewriting)."""
    checkout = Path(__file__).resolve().parent.parent
    wheels = root / "wheels"
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(checkout)],
                   check=True, timeout=timeout, capture_output=True)  # fmt: skip
    subprocess.run([*pip, "install", "--no-deps", "--target", str(root / "site"), *map(str, wheels.glob("*.whl"))],
                   check=True, timeout=timeout, capture_output=True)  # fmt: skip


def _pytest(root: Path, env: dict[str, str], args: list[str], timeout: float) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"fixture bench run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def measure(tests: int, *pytest_args: str, timeout: float = 120.0) -> dict[str, Any]:
    """Run the generated suite once; per-test medians in ms with and without the fixture."""
    with tempfile.TemporaryDirectory(prefix="minibroker-fixture-bench-") as tmp:
        root = Path(tmp)
        (root / "test_fixture_cost.py").write_text(TESTS)
        (root / "conftest.py").write_text(CONFTEST)
        out = root / "times.json"
        env = _child_env(root, MINIBROKER_BENCH_TESTS=str(tests), MINIBROKER_BENCH_OUT=str(out))
        _pytest(root, env, ["-x", "-k", "with-0 or without-0"], timeout)  # warm-up: bytecode caches
        _pytest(root, env, list(pytest_args), timeout)
        times: dict[str, list[float]] = json.loads(out.read_text())

    def median_ms(key: str) -> float:
        values = times[key][1:] if key.startswith("with") else times[key]  # the first one started the broker
        return statistics.median(values) * 1e3

    return {
        "tests": tests,
        "with_ms": median_ms("with"),
        "without_ms": median_ms("without"),
        "overhead_ms": median_ms("with") - median_ms("without"),
        "overhead_cpu_ms": median_ms("with_cpu") - median_ms("without_cpu"),
        "first_ms": times["with"][0] * 1e3,
    }


RUN_TESTS = textwrap.dedent(
    """
    import os
    import pytest

    N = int(os.environ["MINIBROKER_BENCH_TESTS"])

    if os.environ["MINIBROKER_BENCH_KIND"] == "with":
        @pytest.mark.parametrize("n", range(N))
        def test_case(amqp_broker, n):
            assert amqp_broker.port
    elif os.environ["MINIBROKER_BENCH_KIND"] == "queue":
        @pytest.mark.parametrize("n", range(N))
        def test_case(amqp_broker, n):
            amqp_broker.declare_queue("orders")
            amqp_broker.publish("orders", "hello")
            assert amqp_broker.queue("orders").messages[0].body == "hello"
    else:
        @pytest.mark.parametrize("n", range(N))
        def test_case(n):
            assert n >= 0
    """
)


def _run_cpu_s(root: Path, tests: int, kind: str, timeout: float) -> float:
    """CPU seconds (user + system, every thread) of one whole ``pytest`` process."""
    env = _child_env(root, MINIBROKER_BENCH_TESTS=str(tests), MINIBROKER_BENCH_KIND=kind)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    _pytest(root, env, ["test_run_cost.py"], timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure_runs(tests: int, rounds: int = 15, timeout: float = 120.0, *, wheel: bool = False) -> dict[str, Any]:
    """Whole pytest runs of ``tests`` trivial tests with the fixture and without, alternating.

    The difference in CPU time per test (medians over ``rounds``) is what a suite pays for
    using the fixture, the broker's start and the imports included; the per-test medians of
    :func:`measure` leave that one-time cost out.
    """
    with_s: list[float] = []
    without_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="minibroker-fixture-runs-") as tmp:
        root = Path(tmp)
        (root / "test_run_cost.py").write_text(RUN_TESTS)
        if wheel:
            install_wheel(root)
        for kind in ("with", "without"):  # warm-up: bytecode caches
            _run_cpu_s(root, tests, kind, timeout)
        for i in range(rounds):
            for kind in ("with", "without") if i % 2 == 0 else ("without", "with"):
                (with_s if kind == "with" else without_s).append(_run_cpu_s(root, tests, kind, timeout))
    with_cpu, without_cpu = statistics.median(with_s), statistics.median(without_s)
    return {
        "tests": tests,
        "rounds": rounds,
        "with_cpu_s": with_cpu,
        "without_cpu_s": without_cpu,
        "overhead_cpu_ms": (with_cpu - without_cpu) / tests * 1e3,
    }


def measure_instructions(
    tests: int, timeout: float = 600.0, used: str = "with", *, wheel: bool = False
) -> dict[str, Any]:
    """Instructions (callgrind's ``Ir``) of a whole run of ``tests`` trivial tests with the fixture
    and of one without; ``PYTHONHASHSEED`` fixed so that two runs of one tree agree closely.
    ``used="queue"``: the tests with the fixture each put a message through a queue (``RUN_TESTS``)."""
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="minibroker-fixture-instructions-") as tmp:
        root = Path(tmp)
        (root / "test_run_cost.py").write_text(RUN_TESTS)
        if wheel:
            install_wheel(root)
        for kind in (used, "without"):
            env = _child_env(root, MINIBROKER_BENCH_TESTS=str(tests), MINIBROKER_BENCH_KIND=kind, PYTHONHASHSEED="0")
            _pytest(root, env, ["test_run_cost.py"], timeout)  # warm-up: bytecode caches
            out = root / f"{kind}.callgrind"
            proc = subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m", "pytest", "-q",
                 "-p", "no:cacheprovider", "-p", "no:randomly", "test_run_cost.py"],
                cwd=root, env=env, capture_output=True, text=True, timeout=timeout,
            )  # fmt: skip
            found = re.search(r"Collected : (\d+)", proc.stderr)
            if proc.returncode != 0 or found is None:
                raise RuntimeError(f"callgrind run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
            counts[kind] = int(found.group(1))
    return {
        "tests": tests,
        "with_instructions": counts[used],
        "without_instructions": counts["without"],
        "overhead_instructions_per_test": (counts[used] - counts["without"]) / tests,
    }


#: What ``measure_imports`` times, each in a fresh interpreter, and the code its baseline runs.
IMPORTS = {
    "minibroker": ("import minibroker", "pass"),
    "fixture_imports": ("import trio; from minibroker import ThreadedBroker", "import trio"),
    "trio": ("import trio", "pass"),
    "plugin": ("import pytest; import pytest_minibroker.plugin", "import pytest"),
}


def _python_cpu_s(code: str, env: dict[str, str], timeout: float) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure_imports(rounds: int = 7, timeout: float = 60.0) -> dict[str, float]:
    """CPU ms of each import in ``IMPORTS`` less its baseline's (medians of alternated runs).

    ``fixture_imports`` is what the fixture adds in a run where trio is already loaded (as
    pytest-trio loads it); ``trio`` is what a run without pytest-trio pays on top.
    """
    codes = sorted({code for pair in IMPORTS.values() for code in pair})
    cpu: dict[str, list[float]] = {code: [] for code in codes}
    with tempfile.TemporaryDirectory(prefix="minibroker-import-bench-") as tmp:
        env = _child_env(Path(tmp))
        for code in codes:  # warm-up: bytecode caches
            _python_cpu_s(code, env, timeout)
        for i in range(rounds):
            for code in codes if i % 2 == 0 else codes[::-1]:
                cpu[code].append(_python_cpu_s(code, env, timeout))
    median = {code: statistics.median(times) for code, times in cpu.items()}
    return {name: (median[code] - median[base]) * 1e3 for name, (code, base) in IMPORTS.items()}


if __name__ == "__main__":
    installed = "--wheel" in sys.argv[3:]  # ``runs N --wheel``: the package installed from its wheel
    if sys.argv[1] == "runs":
        print(json.dumps(measure_runs(int(sys.argv[2]), wheel=installed)))
    elif sys.argv[1] == "instructions":
        used = "queue" if "--queue" in sys.argv[3:] else "with"
        print(json.dumps(measure_instructions(int(sys.argv[2]), used=used, wheel=installed)))
    elif sys.argv[1] == "imports":
        print(json.dumps(measure_imports()))
    else:
        print(json.dumps(measure(int(sys.argv[1]), *sys.argv[2:])))
