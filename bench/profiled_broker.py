"""``minibroker serve --port 0`` with cProfile switched on only around the workload.

Started by ``bench/run.py --profile``: SIGUSR1 starts profiling, SIGUSR2 stops it, writes
the pstats file given as the first argument and prints ``{"event": "profile-written"}``;
SIGTERM stops the broker as usual.  cProfile's default (wall-clock) timer: a CPU-time
timer costs a system call per function call and skews the figures towards small
functions, so idle time shows up instead, as ``select.epoll.poll``.
"""

from __future__ import annotations

import cProfile
import json
import signal
import sys
from typing import Any

from minibroker import cli


def main() -> int:
    out = sys.argv[1]
    profiler = cProfile.Profile()

    def start(signum: int, frame: Any) -> None:
        profiler.enable()

    def stop(signum: int, frame: Any) -> None:
        profiler.disable()
        profiler.dump_stats(out)
        print(json.dumps({"event": "profile-written", "path": out}), flush=True)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    return cli.main(["serve", "--port", "0"])


if __name__ == "__main__":
    sys.exit(main())
