"""Per-test cost of the ``amqp_broker`` fixture, measured inside one pytest run.

Run by ``python -m bench`` (group ``fixture``) as ``python bench/fixture_bench.py N OUT.json
[pytest options]``: a generated test file holds N tests that take the fixture and N that do
not, interleaved; a hook times each test's setup + call + teardown (wall clock, and CPU time of
the whole process, broker thread included); the medians go to OUT.json.
The first test with the fixture (it starts the broker) is left out of its median.

``python bench/fixture_bench.py runs N`` instead runs whole pytest processes of N trivial
tests with the fixture and N without, alternating, and reports the CPU time per test they
differ by (the broker's start and the imports included).
"""

from __future__ import annotations

import json
import os
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

CONFTEST = textwrap.dedent(
    """
    import json
    import os
    import time
    import pytest

    TIMES = {"with": [], "without": [], "with_cpu": [], "without_cpu": []}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        kind = item.callspec.params["kind"]
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return (yield)
        finally:
            TIMES[kind].append(time.perf_counter() - t0)
            TIMES[kind + "_cpu"].append(time.process_time() - c0)  # every thread: the broker's too

    def pytest_sessionfinish(session):
        with open(os.environ["MINIBROKER_BENCH_OUT"], "w") as out:
            json.dump(TIMES, out)
    """
)


def measure(tests: int, *pytest_args: str, timeout: float = 120.0) -> dict[str, Any]:
    """Run the generated suite once; per-test medians in ms with and without the fixture."""
    with tempfile.TemporaryDirectory(prefix="minibroker-fixture-bench-") as tmp:
        root = Path(tmp)
        (root / "test_fixture_cost.py").write_text(TESTS)
        (root / "conftest.py").write_text(CONFTEST)
        out = root / "times.json"
        env = dict(os.environ, MINIBROKER_BENCH_TESTS=str(tests), MINIBROKER_BENCH_OUT=str(out))
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *pytest_args],
            cwd=root, env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"fixture bench run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        times = json.loads(out.read_text())
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
    else:
        @pytest.mark.parametrize("n", range(N))
        def test_case(n):
            assert n >= 0
    """
)


def _run_cpu_s(root: Path, tests: int, kind: str, timeout: float) -> float:
    """CPU seconds (user + system, every thread) of one whole ``pytest`` process."""
    env = dict(os.environ, MINIBROKER_BENCH_TESTS=str(tests), MINIBROKER_BENCH_KIND=kind)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "test_run_cost.py"],
        cwd=root, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"fixture bench run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure_runs(tests: int, rounds: int = 3, timeout: float = 120.0) -> dict[str, Any]:
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


if __name__ == "__main__":
    if sys.argv[1] == "runs":
        print(json.dumps(measure_runs(int(sys.argv[2]))))
    else:
        print(json.dumps(measure(int(sys.argv[1]), *sys.argv[2:])))
