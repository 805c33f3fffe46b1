"""The throughput group's request/reply round trip alone, in runs in a row: minibroker beside broker.cpp.

Issue #47's target is "round trip <= broker.cpp's in every one of 5 runs in a row"; the whole
throughput group (send, receive, concurrent first) takes minutes per run, this takes seconds::

    python bench/roundtrip_bench.py                       # 5 runs of 1,500 round trips
    python bench/roundtrip_bench.py --runs 5 --round-trips 1500 --before /tmp/old-tree

Each run is one round of ``run.run_round_trips`` (the same proton requester and responder
workers, ``bench/client.py``) against each server, the order rotating per run.  ``--before
PATH`` adds a minibroker served from another checkout (its package directory's parent), so an
old and a new tree are measured side by side, interleaved, in one sitting.  Prints one line per
run and server (median, p90, broker CPU per round trip) and the per-run ratios to broker.cpp.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import cpp_broker
from bench.harness import (
    Child,
    Report,
    Settings,
    broker_url,
    cpp_broker_url,
    spawn_broker,
    spawn_cpp_broker,
    start_worker,
    wait_ready,
)
from bench.run import CPP, Env, Outcome, Server, run_round_trips

#: Runs ``minibroker serve`` from the checkout in argv[1] (first on the path, ahead of PYTHONPATH).
SERVE_FROM = "import sys; sys.path.insert(0, sys.argv.pop(1)); from minibroker import cli; sys.exit(cli.main(sys.argv[1:]))"


def spawn_tree_broker(tree: Path) -> Child:
    return Child(f"broker ({tree})", [sys.executable, "-c", SERVE_FROM, str(tree), "serve", "--port", "0"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--round-trips", type=int, default=1500)
    parser.add_argument("--before", type=Path, help="another checkout to serve as 'before', interleaved")
    parser.add_argument("--cpp-broker", help="path of a broker.cpp binary (default: built and cached)")
    args = parser.parse_args(argv)
    settings = Settings.for_mode(quick=False)
    settings.round_trips = args.round_trips
    binary, why = cpp_broker.locate(args.cpp_broker)
    if binary is None:
        print(f"broker.cpp is needed: {why}", file=sys.stderr)
        return 2
    children: list[Child] = []
    try:
        broker = spawn_broker()
        cpp = spawn_cpp_broker(binary)
        requester, responder = start_worker("requester worker"), start_worker("responder worker")
        children += [broker, cpp, requester, responder]
        servers = [Server("minibroker", broker, broker_url(broker)), Server(CPP, cpp, cpp_broker_url(cpp))]
        if args.before is not None:
            old = spawn_tree_broker(args.before.resolve())
            children.append(old)
            servers.append(Server("before", old, broker_url(old)))
        wait_ready(requester, responder)
        env = Env(broker, servers[0].url, requester, responder)
        report = Report(settings, Path(os.devnull))
        print(f"{args.runs} runs of {args.round_trips} round trips; load average {os.getloadavg()[0]:.2f}", flush=True)
        ratios: dict[str, list[tuple[float, float]]] = {x.subject: [] for x in servers if x.subject != CPP}
        for r in range(args.runs):
            order = servers[r % len(servers) :] + servers[: r % len(servers)]
            got: dict[str, Outcome] = {x.subject: run_round_trips(report, settings, env, x) for x in order}
            cells = []
            for x in servers:
                o = got[x.subject]
                cpu = o.cpu_per_message_us(o.result.get("requests"))
                cells.append(f"{x.subject} {o.result['rtt_median_s'] * 1e3:.3f}/{o.result['rtt_p90_s'] * 1e3:.3f} ms"
                             f" cpu {cpu or 0:.0f} us")  # fmt: skip
            cpp_o = got[CPP].result
            for subject, pairs in ratios.items():
                mine = got[subject].result
                pairs.append((mine["rtt_median_s"] / cpp_o["rtt_median_s"], mine["rtt_p90_s"] / cpp_o["rtt_p90_s"]))
            line = "; ".join(f"{s}/cpp {p[-1][0]:.2f}x (p90 {p[-1][1]:.2f}x)" for s, p in ratios.items())
            print(f"run {r + 1}: {', '.join(cells)}; {line}; load {os.getloadavg()[0]:.2f}", flush=True)
        for subject, pairs in ratios.items():
            medians = [m for m, _ in pairs]
            within = sum(1 for m in medians if m <= 1.0)
            print(f"{subject}/broker.cpp median ratio per run: {', '.join(f'{m:.2f}' for m in medians)} "
                  f"(median {statistics.median(medians):.2f}x; <= 1.0 in {within} of {len(medians)}); "
                  f"p90: {', '.join(f'{p:.2f}' for _, p in pairs)}")  # fmt: skip
        for problem in report.problems:
            print(f"problem: {problem}")
    finally:
        for child in reversed(children):
            child.close(None if "worker" in child.name else signal.SIGTERM)
    return 0


if __name__ == "__main__":
    sys.exit(main())
