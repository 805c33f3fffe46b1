"""Run aiormq's, aio-pika's and amqplib's own test suites against ``minibroker serve`` (and RabbitMQ).

A development tool, not a CI job: it downloads the suites, starts brokers and takes tens of
minutes.  See README.md beside it ("aiormq, aio-pika, amqplib") for what it excludes and why.

    python tests/client_suites/run_aio_amqplib_suites.py [--rabbitmq] [--suites aiormq,aio-pika,amqplib]
        [--amqplib-src DIR] [--work DIR]

* aiormq and aio-pika: the sdists of the versions installed in the interpreter running this
  script (``pip download``; they ship ``tests/``), run with that interpreter's pytest in a
  scratch venv with the suites' test dependencies, pointed at the broker by ``AMQP_URL``
  through ``existing_broker.py`` (their conftests otherwise start RabbitMQ in docker).
* amqplib: the npm tarball has no tests, so ``--amqplib-src`` names a checkout of its
  repository at the tag nearest the installed version; its tests connect to
  ``amqp://localhost`` (port 5672, and ``[::1]``), so each run is in a network namespace of its
  own (``unshare -n``, root) where the broker under test listens on 5672.

Prints, per suite and broker, the collected/passed/failed/skipped counts, and the tests that
passed on RabbitMQ but not on minibroker.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
AMQPLIB_PACKAGE = ROOT / "tests" / "interop" / "js" / "node_modules" / "amqplib" / "package.json"
#: The suites' test dependencies (their pyproject's test group), unpinned as they have them.
TEST_DEPS = ["aiomisc", "aiomisc-pytest", "pytest", "shortuuid", "timeout-decorator"]
#: pytest arguments per suite: what is deselected, and why, is in README.md.
PYTEST_ARGS = {
    "aiormq": ["-k", "not amqps and not ssl"],
    "aio-pika": ["--ignore=tests/test_amqps.py", "--ignore=tests/test_robust_recovery.py"],
}
#: amqplib's ``npm test`` is ``node --test --test-timeout=1000``: Node 20 applies the timeout to
#: each test file as a whole (30 s was too little for channel_api.test.js on a loaded 2-core machine), so it is raised; the files are named as Node 22 globs them.
AMQPLIB_TEST = "node --test --test-timeout=300000 test/*.test.js"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_port(port: int, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"expected a broker on port {port} within {seconds:.0f} s; none answered")


def python_suite(work: Path, name: str) -> Path:
    """The sdist of the installed ``name`` unpacked in ``work``; its directory."""
    version = importlib.metadata.version(name)
    target = work / f"{name.replace('-', '_')}-{version}"
    if not target.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", name, "-d", str(work), f"{name}=={version}"],
            check=True,
        )  # fmt: skip
        [sdist] = work.glob(f"{name.replace('-', '_')}-{version}.tar.gz")
        with tarfile.open(sdist) as archive:
            archive.extractall(work, filter="data")
    if not (target / "tests").is_dir():
        raise SystemExit(f"expected tests/ in the {name} {version} sdist at {target}; found none")
    return target


def scratch_venv(work: Path) -> Path:
    venv = work / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pins = [f"{name}=={importlib.metadata.version(name)}" for name in ("aio-pika", "aiormq", "pamqp")]
        subprocess.run([str(python), "-m", "pip", "install", "-q", *pins, *TEST_DEPS], check=True)
    return python


def run_pytest(python: Path, suite: Path, name: str, url: str, report: Path) -> dict[str, str]:
    env = {**os.environ, "AMQP_URL": url, "PYTHONPATH": str(HERE)}
    command = [str(python), "-m", "pytest", "-p", "existing_broker", "tests", "-q", "-p", "no:cacheprovider"]
    command += [*PYTEST_ARGS[name], f"--junitxml={report}"]
    subprocess.run(command, cwd=suite, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        outcome = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return outcomes


def run_amqplib(source: Path, broker: str, work: Path) -> dict[str, str]:
    """amqplib's suite in a network namespace where ``broker`` ("minibroker" or "rabbitmq") is on 5672."""
    if not (source / "node_modules" / "claire").exists():
        dev = json.loads((source / "package.json").read_text())["devDependencies"]
        subprocess.run(["npm", "install", "--no-save", "--ignore-scripts", f"claire@{dev['claire']}"], cwd=source, check=True)
    log = work / f"amqplib-{broker}.tap"
    if broker == "minibroker":
        # "::" takes IPv4 too (dual stack), as RabbitMQ listens by default: the suite dials
        # localhost and [::1]; the namespace has nothing but its own loopback.
        start = f"PYTHONPATH={ROOT}:{ROOT}/plugins {shlex.quote(sys.executable)} -m minibroker serve --host :: --port 5672"
        stop = "kill $BROKER"
    else:
        node = work / "rmq-ns"
        shutil.rmtree(node, ignore_errors=True)
        (node / "mnesia").mkdir(parents=True)
        (node / "log").mkdir()
        shutil.chown(node, "rabbitmq", "rabbitmq")
        for child in node.iterdir():
            shutil.chown(child, "rabbitmq", "rabbitmq")
        env = (
            f"RABBITMQ_NODE_PORT=5672 RABBITMQ_NODENAME=rabbitns@localhost RABBITMQ_DIST_PORT=25673 "
            f"RABBITMQ_MNESIA_BASE={node}/mnesia RABBITMQ_LOG_BASE={node}/log RABBITMQ_ENABLED_PLUGINS_FILE={node}/plugins "
            f"RABBITMQ_FEATURE_FLAGS_FILE={node}/ff HOME={node}"
        )
        start = f"cd {node} && {env} rabbitmq-server"
        stop = f"HOME={node} rabbitmqctl -n rabbitns@localhost stop"
    script = f"""
ip link set lo up
( {start} ) > {work}/{broker}-ns.log 2>&1 &
BROKER=$!
i=0; until (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; do i=$((i+1)); [ $i -gt 200 ] && break; sleep 0.3; done
sleep 2
cd {source} && {AMQPLIB_TEST} > {log} 2>&1
{stop} > /dev/null 2>&1
# End what the run left in this namespace (RabbitMQ's epmd outlives its node).
NS=$(readlink /proc/$$/ns/net)
for d in /proc/[0-9]*; do
  p=${{d#/proc/}}
  [ "$p" != "$$" ] && [ "$(readlink $d/ns/net 2>/dev/null)" = "$NS" ] && kill "$p" 2>/dev/null
done
true
"""
    subprocess.run(["unshare", "-n", "bash", "-c", script], check=True)
    outcomes: dict[str, str] = {}
    stack: list[str] = []
    for line in log.read_text().splitlines():
        subtest = re.match(r"^(\s*)# Subtest: (.*)$", line)
        if subtest:
            depth = len(subtest.group(1)) // 4
            stack[depth:] = [subtest.group(2)]
            continue
        result = re.match(r"^(\s*)(ok|not ok) \d+ - (.*?)(\s+# SKIP.*)?$", line)
        if result:
            depth = len(result.group(1)) // 4
            name = " > ".join([*stack[:depth], result.group(3)])
            if any(key.startswith(name + " > ") for key in outcomes):
                continue  # a suite: its tests are counted
            key, seen = name, 1
            while key in outcomes:  # two tests of one name
                seen += 1
                key = f"{name} #{seen}"
            outcomes[key] = "skipped" if result.group(4) else "passed" if result.group(2) == "ok" else "failed"
    return outcomes


def start_minibroker(work: Path) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT}/plugins"}
    command = [sys.executable, "-m", "minibroker", "serve", "--port", str(port)]
    process = subprocess.Popen(command, env=env, stdout=open(work / "minibroker.log", "w"), stderr=subprocess.STDOUT, text=True)
    wait_port(port)
    return process, port


def start_rabbitmq(work: Path) -> tuple[Path, int]:
    if shutil.which("rabbitmq-server") is None:
        raise SystemExit("--rabbitmq expects rabbitmq-server on PATH (Debian's rabbitmq-server); found none")
    port = free_port()
    node = work / f"rmq-{port}"
    (node / "mnesia").mkdir(parents=True)
    (node / "log").mkdir()
    for path in (node, node / "mnesia", node / "log"):
        shutil.chown(path, "rabbitmq", "rabbitmq")
    env = {
        **os.environ, "RABBITMQ_NODE_PORT": str(port), "RABBITMQ_NODENAME": f"rabbit{port}@localhost",
        "RABBITMQ_DIST_PORT": str(free_port()), "RABBITMQ_MNESIA_BASE": f"{node}/mnesia",
        "RABBITMQ_LOG_BASE": f"{node}/log", "RABBITMQ_ENABLED_PLUGINS_FILE": f"{node}/plugins",
        "RABBITMQ_FEATURE_FLAGS_FILE": f"{node}/ff", "HOME": str(node),
    }  # fmt: skip
    subprocess.Popen(["rabbitmq-server"], cwd=node, env=env, stdout=open(node / "out", "w"), stderr=subprocess.STDOUT)
    wait_port(port, 120)
    subprocess.run(["rabbitmqctl", "-n", f"rabbit{port}@localhost", "await_startup"], env=env, check=True)
    return node, port


def stop_rabbitmq(node: Path, port: int) -> None:
    env = {**os.environ, "HOME": str(node)}
    subprocess.run(["rabbitmqctl", "-n", f"rabbit{port}@localhost", "stop"], env=env, stdout=subprocess.DEVNULL)


def summary(name: str, runs: dict[str, dict[str, str]]) -> None:
    for broker, outcomes in runs.items():
        counts = {kind: sum(1 for o in outcomes.values() if o == kind) for kind in ("passed", "failed", "skipped")}
        print(f"{name:9} {broker:10} collected {len(outcomes):5}  passed {counts['passed']:5}  "
              f"failed {counts['failed']:4}  skipped {counts['skipped']:3}")  # fmt: skip
    if "rabbitmq" in runs and "minibroker" in runs:
        gaps = [t for t, o in runs["rabbitmq"].items() if o == "passed" and runs["minibroker"].get(t) != "passed"]
        print(f"{name:9} passed on RabbitMQ, not on minibroker: {len(gaps)}")
        for test in sorted(gaps):
            print(f"    {test}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rabbitmq", action="store_true", help="run each suite against a RabbitMQ node started here too")
    parser.add_argument("--suites", default="aiormq,aio-pika,amqplib")
    parser.add_argument("--amqplib-src", type=Path, help="a checkout of amqplib's repository (its tests)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/minibroker-client-suites/aio-amqplib"))
    args = parser.parse_args()
    suites = args.suites.split(",")
    if "amqplib" in suites and args.amqplib_src is None:
        version = json.loads(AMQPLIB_PACKAGE.read_text())["version"] if AMQPLIB_PACKAGE.exists() else "?"
        raise SystemExit(f"amqplib's tests are not in its npm tarball: pass --amqplib-src, a checkout of its repository "
                         f"at the tag nearest the installed {version}, or leave amqplib out of --suites")  # fmt: skip
    args.work.mkdir(parents=True, exist_ok=True)
    brokers = ["rabbitmq", "minibroker"] if args.rabbitmq else ["minibroker"]
    python_suites = [name for name in suites if name in PYTEST_ARGS]
    results: dict[str, dict[str, dict[str, str]]] = {name: {} for name in suites}
    if python_suites:
        python = scratch_venv(args.work)
        dirs = {name: python_suite(args.work, name) for name in python_suites}
        for broker in brokers:
            if broker == "rabbitmq":
                node, port = start_rabbitmq(args.work)
            else:
                process, port = start_minibroker(args.work)
            try:
                for name in python_suites:
                    report = args.work / f"{name}-{broker}.xml"
                    url = f"amqp://guest:guest@127.0.0.1:{port}//"
                    results[name][broker] = run_pytest(python, dirs[name], name, url, report)
            finally:
                if broker == "rabbitmq":
                    stop_rabbitmq(node, port)
                else:
                    process.terminate()
                    process.wait()
    if "amqplib" in suites:
        for broker in brokers:
            results["amqplib"][broker] = run_amqplib(args.amqplib_src.resolve(), broker, args.work)
    for name in suites:
        summary(name, results[name])


if __name__ == "__main__":
    main()
