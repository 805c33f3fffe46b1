"""Run pika's, py-amqp's and kombu's OWN broker-facing test suites against ``minibroker serve``
(and against RabbitMQ, with ``--rabbitmq``), unchanged, and print the counts per client and broker.

A development tool, not part of CI (see README.md, section "pika, py-amqp, kombu"): it downloads
each client's tests at the version installed in this interpreter, so it needs the network once.

    python tests/client_suites/run_pika_amqp_kombu.py [--rabbitmq] [--clients pika,amqp,kombu]

pika's acceptance tests connect to ``127.0.0.1:5672`` (hard-coded), so every run of a suite
happens in a network namespace of its own (``unshare``), where the broker it tests listens on
5672 whatever else this machine runs; py-amqp's and kombu's tests read ``RABBITMQ_HOST`` and
``RABBITMQ_5672_TCP``, set to the same.  Each run gets a fresh broker: some of these tests
leave queues behind (kombu's ``test_publish_requeue_consume`` fails on a second run against
RabbitMQ too).
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.metadata
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tarfile
import time
import urllib.request
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[2]
PORT = 5672
TLS_PORT = 5671
#: The network namespace the script was started in, for its runs to tell their own from it.
OUTER_NAMESPACE = "MINIBROKER_SUITES_OUTER_NET"
CLIENTS = ("pika", "pika-tls", "amqp", "kombu")


class Suite(NamedTuple):
    """What runs of a client's tests: its distribution, the files that talk to a broker (the
    others are unit tests against mocks), what is left out (pytest ``--deselect`` prefixes or a
    ``-k`` expression, each with why), more pytest options, and where the suite keeps the TLS
    certificates its broker must serve on 5671 (None: no TLS)."""

    project: str
    paths: list[str]
    deselect: dict[str, str]
    keyword: tuple[str, str] | None = None
    options: tuple[str, ...] = ()
    certificates: str | None = None


PIKA_OFFLINE = {
    "tests/acceptance/io_services_tests.py::TestGetaddrinfoWWWGoogleDotComPort80": (
        "resolves www.google.com: needs the internet, not a broker"
    ),
}


SUITES = {
    # The sdist ships no tests: the tagged source from GitHub.
    "pika": Suite("pika", ["tests/acceptance"], PIKA_OFFLINE),
    # The same with its --use-tls: the asynchronous adapters' tests connect to localhost:5671 with
    # a client certificate, checking the broker's against testdata/certs (the blocking ones stay
    # on 5672).  minibroker serves that port from a second `minibroker serve` (one port each).
    "pika-tls": Suite("pika", ["tests/acceptance"], PIKA_OFFLINE, options=("--use-tls",), certificates="testdata/certs"),
    # t/integration/test_integration.py is py-amqp's own classes against mocks (it passes with no
    # broker at all): not broker-facing.
    "amqp": Suite(
        "amqp",
        ["t/integration/test_rmq.py"],
        {},
        (
            "not tls",
            "TLS: 13 need a broker whose certificate their CA (t/certs, in the git repository) signed; "
            "that one is in their CI's docker image and the CA's key is not published; 2 connect to "
            "tls-v1-2.badssl.com (the internet)",
        ),
    ),
    # The other t/integration files test the redis, mongodb, SQS... transports.
    "kombu": Suite("kombu", ["t/integration/test_py_amqp.py"], {}),
}

#: pika's adapters under test that the project's environment does not carry.
EXTRA_PACKAGES = ["tornado", "twisted", "gevent"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated, of: " + ", ".join(CLIENTS))
    parser.add_argument("--rabbitmq", action="store_true", help="also run each suite against rabbitmq-server (on PATH)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/minibroker-client-suites"))
    parser.add_argument("--pika-source", help="a pika git repository or checkout to use instead of GitHub's tarball")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds one suite run may take")
    parser.add_argument("--inner", nargs=3, metavar=("CLIENT", "BROKER", "JUNIT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        return inner(args.workdir, *args.inner)
    clients = [name for name in args.clients.split(",") if name]
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        parser.error(f"unknown client(s) {sorted(unknown)}; expected some of {CLIENTS}")
    if args.rabbitmq and shutil.which("rabbitmq-server") is None:
        parser.error("--rabbitmq: no rabbitmq-server on PATH (Debian: apt-get install rabbitmq-server)")
    args.workdir.mkdir(parents=True, exist_ok=True)
    make_venv(args.workdir)
    brokers = (["rabbitmq"] if args.rabbitmq else []) + ["minibroker"]
    results: dict[tuple[str, str], dict[str, str]] = {}
    for client in clients:
        fetch_suite(args.workdir, SUITES[client].project, args.pika_source)
        for broker in brokers:
            junit = args.workdir / f"{client}-{broker}.xml"
            junit.unlink(missing_ok=True)
            command = [*namespace_prefix(), sys.executable, __file__, "--workdir", str(args.workdir)]
            command += ["--inner", client, broker, str(junit)]
            print(f"== {client} against {broker}", flush=True)
            env = {**os.environ, OUTER_NAMESPACE: os.readlink("/proc/self/ns/net")}
            subprocess.run(command, timeout=args.timeout, check=False, env=env)
            results[client, broker] = outcomes(junit)
    report(clients, brokers, results)
    return 0


# ---------------------------------------------------------------- set-up


def make_venv(workdir: Path) -> None:
    """A scratch virtualenv that sees this interpreter's packages (the clients at their installed
    versions, minibroker) plus pika's optional adapters; the project's environment is not touched."""
    venv = workdir / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        ours = [p for p in sys.path if p.endswith("site-packages")]
        (Path(site) / "zz_minibroker_env.pth").write_text("\n".join([*ours, str(REPO), str(REPO / "plugins")]) + "\n")
        subprocess.run([str(python), "-m", "pip", "install", "-q", *EXTRA_PACKAGES], check=True)


def fetch_suite(workdir: Path, client: str, pika_source: str | None) -> Path:
    """The client's source tree with its tests, at the version installed here."""
    version = importlib.metadata.version(client)
    tree = workdir / f"{client}-{version}"
    if tree.exists():
        return tree
    if client == "pika":
        if pika_source is not None:
            subprocess.run(["git", "clone", "-q", "--branch", version, pika_source, str(tree)], check=True)
        else:
            archive = workdir / f"pika-{version}.tar.gz"
            urllib.request.urlretrieve(f"https://github.com/pika/pika/archive/refs/tags/{version}.tar.gz", archive)
            unpack(archive, workdir)
    else:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
             f"{client}=={version}", "-d", str(workdir)],
            check=True,
        )  # fmt: skip
        unpack(workdir / f"{client}-{version}.tar.gz", workdir)
    if not tree.exists():
        raise SystemExit(f"expected {tree} after unpacking {client} {version}; look in {workdir}")
    return tree


def unpack(archive: Path, into: Path) -> None:
    with tarfile.open(archive) as opened:
        opened.extractall(into, filter="data")


def namespace_prefix() -> list[str]:
    """``unshare`` into a new network namespace: root needs no user namespace (RabbitMQ's start
    script switches to its own user, which a user namespace mapping only root cannot do)."""
    if shutil.which("unshare") is None:
        raise SystemExit("needs unshare (util-linux): pika's tests connect to 127.0.0.1:5672, a namespace keeps it free")
    return ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--net", "--map-root-user"]


# ---------------------------------------------------------------- one run, inside the namespace


def inner(workdir: Path, client: str, broker: str, junit: str) -> int:
    loopback_up()
    suite = SUITES[client]
    tree = workdir / f"{suite.project}-{importlib.metadata.version(suite.project)}"
    certificates = tree / suite.certificates if suite.certificates is not None else None
    processes = start_broker(workdir, broker, certificates)
    try:
        wait_for_port(PORT)
        if certificates is not None:
            wait_for_port(TLS_PORT)
        command = [str(workdir / "venv" / "bin" / "python"), "-m", "pytest", *suite.paths, *suite.options]
        # Their own settings but the output options (pika's addopts asks for -v); no reruns.
        command += ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "-W", "ignore", "--timeout", "120"]
        command += ["--junitxml", junit, "-rfE"]
        for nodeid in suite.deselect:
            command += ["--deselect", nodeid]
        if suite.keyword is not None:
            command += ["-k", suite.keyword[0]]
        env = {**os.environ, "RABBITMQ_HOST": "127.0.0.1", "RABBITMQ_5672_TCP": str(PORT)}
        return subprocess.run(command, cwd=tree, env=env, check=False).returncode
    finally:
        stop_broker(workdir, broker, processes)


def loopback_up() -> None:
    """A new network namespace has its loopback down: bring it up (SIOCSIFFLAGS, as ``ip link set lo up``)."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = struct.unpack("16sh", fcntl.ioctl(sock, siocgifflags, struct.pack("16sh", b"lo", 0)))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sh", b"lo", flags | iff_up))


def start_broker(workdir: Path, broker: str, certificates: Path | None) -> list[subprocess.Popen[bytes]]:
    """The broker on 5672, and on 5671 over TLS with the suite's ``server_certificate.pem`` when
    ``certificates`` is given (minibroker: a second process; RabbitMQ: the suite's own
    ``rabbitmq.conf``, pika's ``testdata/rabbitmq.conf.in``)."""
    log = open(workdir / f"{broker}.log", "wb")  # noqa: SIM115 - the broker's output, open while it runs
    if broker == "minibroker":
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "plugins")])}
        serve = [sys.executable, "-m", "minibroker", "serve", "--port"]
        started = [subprocess.Popen([*serve, str(PORT)], env=env, stdout=log, stderr=subprocess.STDOUT)]
        if certificates is not None:
            tls = ["--ssl-certfile", str(certificates / "server_certificate.pem")]
            tls += ["--ssl-keyfile", str(certificates / "server_key.pem")]
            started.append(subprocess.Popen([*serve, str(TLS_PORT), *tls], env=env, stdout=log, stderr=subprocess.STDOUT))
        return started
    home = workdir / "rabbitmq"
    shutil.rmtree(home, ignore_errors=True)
    for sub in ("mnesia", "log"):
        (home / sub).mkdir(parents=True)
    env = rabbitmq_env(home)
    if certificates is not None:
        # The node reads them as its own user: a copy inside its home.
        shutil.copytree(certificates, home / "certs")
        template = (certificates.parents[0] / "rabbitmq.conf.in").read_text()
        (home / "rabbitmq.conf").write_text(template.replace("PIKA_DIR/testdata", str(home)))
        env["RABBITMQ_CONFIG_FILE"] = str(home / "rabbitmq.conf")
    if os.geteuid() == 0:
        for path in [home, *home.rglob("*")]:
            shutil.chown(path, "rabbitmq", "rabbitmq")
    return [subprocess.Popen(["rabbitmq-server"], env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT)]


def rabbitmq_env(home: Path) -> dict[str, str]:
    return {
        **os.environ, "HOME": str(home), "RABBITMQ_NODE_PORT": str(PORT), "RABBITMQ_NODENAME": "rabbit@localhost",
        "RABBITMQ_MNESIA_BASE": str(home / "mnesia"), "RABBITMQ_LOG_BASE": str(home / "log"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "plugins"), "RABBITMQ_FEATURE_FLAGS_FILE": str(home / "ff"),
    }  # fmt: skip


def wait_for_port(port: int, bound: float = 120.0) -> None:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"no broker accepted on 127.0.0.1:{port} within {bound:.0f} s; see the broker's log in the workdir")


def stop_broker(workdir: Path, broker: str, processes: list[subprocess.Popen[bytes]]) -> None:
    if broker == "rabbitmq":
        subprocess.run(["rabbitmqctl", "-n", "rabbit@localhost", "stop"], env=rabbitmq_env(workdir / "rabbitmq"), check=False)
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    end_leftovers()


def end_leftovers() -> None:
    """End what is left in this run's network namespace: epmd, which the RabbitMQ node starts
    and which outlives it (it refuses ``epmd -kill`` while the stopping node is registered).
    Everything in the namespace was started by this run; nothing is done outside one."""
    ours = os.readlink("/proc/self/ns/net")
    if ours == os.environ.get(OUTER_NAMESPACE):
        return
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if os.readlink(entry / "ns" / "net") == ours:
                os.kill(int(entry.name), signal.SIGTERM)
        except OSError:
            continue  # gone meanwhile, or not ours to read


# ---------------------------------------------------------------- counting


def outcomes(junit: Path) -> dict[str, str]:
    """Test id -> passed / failed / error / skipped, from pytest's JUnit XML."""
    if not junit.exists():
        return {}
    found: dict[str, str] = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        found[name] = next((k for k in ("error", "failure", "skipped") if k in kinds), "passed")
    return found


def report(clients: list[str], brokers: list[str], results: dict[tuple[str, str], dict[str, str]]) -> None:
    print("\nclient   version  broker      ran  passed  failed  skipped")
    for client in clients:
        for broker in brokers:
            found = results[client, broker]
            counts = {kind: sum(1 for v in found.values() if v == kind) for kind in ("passed", "skipped")}
            failed = len(found) - counts["passed"] - counts["skipped"]
            version = importlib.metadata.version(SUITES[client].project)
            print(f"{client:8} {version:8} {broker:11} {len(found):3} {counts['passed']:7} {failed:7} {counts['skipped']:8}")
        if "rabbitmq" in brokers:
            theirs, ours = results[client, "rabbitmq"], results[client, "minibroker"]
            missed = sorted(name for name, kind in theirs.items() if kind == "passed" and ours.get(name) != "passed")
            print(f"  passed on RabbitMQ, not on minibroker: {len(missed)}")
            for name in missed:
                print(f"    {name}: {ours.get(name, 'not run')}")
    print("\nleft out (pytest reports them as deselected):")
    for client in clients:
        suite = SUITES[client]
        for nodeid, why in suite.deselect.items():
            print(f"  {client}: {nodeid} -- {why}")
        if suite.keyword is not None:
            print(f"  {client}: -k '{suite.keyword[0]}' -- {suite.keyword[1]}")


if __name__ == "__main__":
    sys.exit(main())
