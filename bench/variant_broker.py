"""A broker process with one feature switched on, for the bench's ``features`` group.

``python bench/variant_broker.py VARIANT``: ``plain`` (nothing extra), ``trace`` (the frame log
keeps the last 10,000 frames) or ``fault`` (one fault installed for an address no workload
uses, so it is checked on every message and never fires).  Serves a ``ThreadedBroker`` on a
free loopback port, prints ``minibroker listening on amqp://127.0.0.1:PORT`` like
``minibroker serve`` and runs until SIGTERM.
"""

from __future__ import annotations

import signal
import sys
import threading

from minibroker import ThreadedBroker

VARIANTS = ("plain", "trace", "fault")


def main() -> int:
    variant = sys.argv[1]
    if variant not in VARIANTS:
        print(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    with ThreadedBroker(frame_log=10_000 if variant == "trace" else 0) as broker:
        if variant == "fault":
            broker.faults.detach_link(address="bench.never-used")
        print(f"minibroker listening on {broker.url}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
