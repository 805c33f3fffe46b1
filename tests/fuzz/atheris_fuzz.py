"""Coverage-guided fuzzing of the broker engine with atheris (optional; ``pip install atheris``).

The input's first byte picks a start (bare AMQP header + open + begin, or SASL
first, or nothing), the next two give a split point, and the rest is fed to a
fresh in-memory broker connection.  Each input is judged by
:func:`fuzz_harness.check`: no exception inside the broker, only spec
conditions, queues intact, a fresh client served.  Run it from the repository
root, e.g. for ten minutes::

    python tests/fuzz/atheris_fuzz.py -max_total_time=600 -print_final_stats=1

A crash stops the run and writes the input to ``crash-<sha1>``; replay it with
``python tests/fuzz/atheris_fuzz.py crash-<sha1>``.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from fuzz_harness import check, conversation, fresh_broker, run_input

PREFIXES = (
    b"".join(conversation(transfers=0, credit=0, finish=0)[:-3]),  # header, open, begin
    b"".join(conversation(sasl="anonymous", transfers=0, credit=0, finish=0)[:-3]),
    b"".join(conversation(transfers=1, credit=2, finish=0)),  # a sender and a receiver attached
    b"",
)


def one_input(data: bytes) -> None:
    if len(data) < 3:
        return
    prefix = PREFIXES[data[0] % len(PREFIXES)]
    payload = prefix + data[3:]
    cut = int.from_bytes(data[1:3], "big") % (len(payload) + 1)
    broker = fresh_broker()
    check(broker, run_input(broker, [payload[:cut], payload[cut:]]))


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
