"""The broker engine's CPU per message on real client traffic, replayed in-process (no sockets, no trio).

Two steps::

    python bench/replay_bench.py record /tmp/conc.pkl      # a broker that records what it reads
    # ... run any clients against the port it prints, then: kill -USR1 <its pid>
    python bench/replay_bench.py run /tmp/conc.pkl --messages 20000 --repeats 12

``record`` serves like ``minibroker serve --port 0`` and keeps every chunk of bytes each
connection handed to the engine, in order; SIGUSR1 writes them (pickle) and exits.
``run`` feeds the chunks, in the recorded order, to the connections of a fresh ``Broker``
(collecting every connection's output after each chunk, as the server does) and prints the
median CPU time per message over ``--repeats`` replays, each on a fresh broker.  The work is
the engine's alone and the same every time, so two trees compare on one recording.

``--callgrind K`` replays once to warm up and then K times inside ``functools.reduce``, so
``valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce`` counts
only the replays: instructions per message, repeatable on a loaded machine::

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce \\
        python bench/replay_bench.py run /tmp/conc.pkl --messages 4000 --callgrind 2
    # instructions per message = "Collected" / (2 * 4000)
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import pickle
import signal
import statistics
import sys
import time
from typing import Any

from minibroker import Broker, BrokerConfig
from minibroker.broker.client_connection import BrokerConnection

#: Frames a connection handles per pass, as the server's FRAMES_PER_PASS.
FRAMES_PER_PASS = 1024


def record(out: str) -> int:
    """Serve on a free port, keeping every chunk handed to a connection; SIGUSR1 writes them and exits."""
    from minibroker import cli

    log: list[tuple[int, bytes]] = []
    ids: dict[int, int] = {}
    receive = BrokerConnection.receive_data

    def recording(self: BrokerConnection, data: bytes, max_frames: int | None = None) -> None:
        log.append((ids.setdefault(id(self), len(ids)), bytes(data)))
        receive(self, data, max_frames)

    def dump(signum: int, frame: Any) -> None:
        with open(out, "wb") as f:
            pickle.dump(log, f)
        os._exit(0)

    BrokerConnection.receive_data = recording  # type: ignore[method-assign]
    signal.signal(signal.SIGUSR1, dump)
    return cli.main(["serve", "--port", "0"])


def replay(log: list[tuple[int, bytes]]) -> Broker:
    """Feed the recorded chunks to a fresh broker's connections, collecting all output after each."""
    broker = Broker(BrokerConfig())
    connections: dict[int, BrokerConnection] = {}
    for key, data in log:
        connection = connections.get(key)
        if connection is None:
            connection = connections[key] = broker.connect(lambda: None, f"recorded-{key}")
            connection.transport_backlog = 0
        connection.receive_data(data, FRAMES_PER_PASS)
        while True:
            for other in connections.values():
                other.data_to_send()
            if not connection.protocol.backlogged:
                break
            connection.receive_data(b"", FRAMES_PER_PASS)
    if broker.errors:
        raise RuntimeError(f"the replay raised inside the broker: {broker.errors!r}")
    return broker


def run(path: str, messages: int, repeats: int, callgrind: int) -> int:
    with open(path, "rb") as f:
        log = pickle.load(f)
    replay(log)  # warm up
    gc.collect()
    if callgrind:
        functools.reduce(lambda _a, _b: replay(log), range(callgrind + 1))
        return 0
    results = []
    for _ in range(repeats):
        gc.collect()
        start = time.process_time()
        replay(log)
        results.append((time.process_time() - start) / messages * 1e6)
    print(
        f"CPU per message: median {statistics.median(results):.2f} us, "
        f"min {min(results):.2f}, max {max(results):.2f} ({repeats} replays of {messages} messages)"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="serve and record what every connection reads")
    rec.add_argument("out")
    play = commands.add_parser("run", help="replay a recording in-process")
    play.add_argument("log")
    play.add_argument("--messages", type=int, required=True, help="messages the recording moved (the divisor)")
    play.add_argument("--repeats", type=int, default=12)
    play.add_argument("--callgrind", type=int, default=0, metavar="K", help="replay K times inside functools.reduce")
    args = parser.parse_args()
    if args.command == "record":
        return record(args.out)
    return run(args.log, args.messages, args.repeats, args.callgrind)


if __name__ == "__main__":
    sys.exit(main())
