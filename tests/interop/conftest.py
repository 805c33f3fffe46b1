"""Fixtures for interoperability tests: a broker per test and a runner for rhea scripts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import minibroker

JS_DIR = Path(__file__).parent / "js"


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker() as running:
        yield running


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not installed; the rhea interop tests need Node.js (see .ci/run)")
    if not (JS_DIR / "node_modules" / "rhea").exists():
        raise RuntimeError(f"rhea is not installed: run `npm install` in {JS_DIR}")
    return node


@pytest.fixture
def rhea() -> Callable[..., Any]:
    """Run ``tests/interop/js/<script>.js`` with a JSON argument; return its JSON result (last stdout line)."""
    node = _node()

    def run(script: str, timeout: float = 30, **args: Any) -> Any:
        proc = subprocess.run(
            [node, str(JS_DIR / f"{script}.js"), json.dumps(args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=JS_DIR,
            env={**os.environ, "NODE_PATH": str(JS_DIR / "node_modules")},
        )
        if proc.returncode != 0:
            raise AssertionError(f"rhea script {script} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        if not lines:
            raise AssertionError(f"rhea script {script} printed nothing:\n{proc.stderr}")
        return json.loads(lines[-1])

    return run


@pytest.fixture
def rhea_process() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``tests/interop/js/<script>.js`` with a JSON argument and text pipes (stdin too), for a
    test that talks to the script while it runs; any still running at teardown is killed."""
    node = _node()
    started: list[subprocess.Popen[str]] = []

    def start(script: str, **args: Any) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [node, str(JS_DIR / f"{script}.js"), json.dumps(args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=JS_DIR,
            env={**os.environ, "NODE_PATH": str(JS_DIR / "node_modules")},
        )  # fmt: skip
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
