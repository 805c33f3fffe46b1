"""Coverage-guided fuzzing of the AMQP 0-9-1 engine and front end with atheris (optional; ``pip install atheris``).

The input's first byte picks a start (a handshake with one, two or three channels open, or the
protocol header alone), the next two give a split point, and the rest is fed to a fresh
in-memory 0-9-1 connection after it.  Each input is judged by :func:`fuzz091_harness.check`: no
exception inside the broker, only specification reply codes, the reader never over
``frame_max``, nothing left acquired, a fresh client served.  Run it from the repository root,
e.g. for ten minutes::

    python tests/fuzz/atheris_fuzz091.py -max_total_time=600 -print_final_stats=1

A crash stops the run and writes the input to ``crash-<sha1>``; replay it with
``python tests/fuzz/atheris_fuzz091.py crash-<sha1>``.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from fuzz091_harness import check, fresh_broker, handshake, run_input

PREFIXES = (
    b"".join(handshake(channels=1)),
    b"".join(handshake(channels=2)),
    b"".join(handshake(channels=3)),
    handshake()[0],  # the protocol header: the handshake itself is fuzzed
)


def one_input(data: bytes) -> None:
    if len(data) < 3:
        return
    prefix = PREFIXES[data[0] % len(PREFIXES)]
    payload = data[3:]
    cut = int.from_bytes(data[1:3], "big") % (len(payload) + 1)
    broker = fresh_broker()
    check(broker, run_input(broker, [prefix, payload[:cut], payload[cut:]]))


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
