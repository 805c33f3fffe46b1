"""A soak under faults: proton producers and consumers, random faults and restarts, nothing lost.

Producers (threads, each with its own python-qpid-proton ``BlockingConnection``)
send durable messages with unique message-ids and resend one until the broker
settles it ``accepted`` (reconnecting after any failure); consumers receive and
accept, reconnecting likewise.  Meanwhile a seeded random sequence of faults
from ``broker.faults`` (detached links, closed and dropped connections,
spontaneous release and modify, rejected publishes) and ``broker.restart()``
(durable messages kept) hits the queue.  At the end, checked by message-id:
every message the broker accepted was delivered at least once, no message was
delivered that was never sent, and the queue is empty.

Two ways to pace the faults:

* **Planned** (``faults=N``, the short form CI runs: ``tests/soak/test_soak.py``):
  exactly N steps of chaos, every ``restart_every``-th one a restart.  The run is
  not over until all N have happened (every fault installed has fired), however
  fast or slow the machine: producers send at least ``messages`` each and keep
  sending (message-ids ``p0-40``, ``p0-41``, ...) until the plan is complete,
  because a fault only fires on traffic.  Then every message is checked.  So the
  short form proves the same thing on every run instead of depending on whether
  the clients happened to outlast the eighth fault.
* **Timed** (``faults=None``, the long form): a new fault every ``fault_interval``
  seconds for as long as the producers are sending::

    python tests/soak/soak.py --messages 2000 --producers 4 --consumers 3 --seconds 300 --seed 7

Everything is on loopback and bounded in count and time (``--seconds`` is a
hard deadline; the report says if it was hit, and a planned run that hit it
reports its plan incomplete).
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from proton import Message
from proton.utils import BlockingConnection

import minibroker

QUEUE = "soak"
#: Seconds any one client call may block.
CALL_TIMEOUT = 5.0
#: A producer sends at most this many messages beyond ``messages`` while waiting for a planned
#: fault to fire (a fault needs traffic to fire on); the deadline bounds it in time as well.
EXTRA_MESSAGES = 10_000
FAULT_KINDS = ("detach_link", "close_connection", "drop_connection", "release", "modify", "reject_publish")


@dataclass
class SoakReport:
    sent: set[str] = field(default_factory=set)
    accepted: set[str] = field(default_factory=set)
    delivered: dict[str, int] = field(default_factory=dict)
    client_errors: int = 0
    #: Steps of chaos planned (``None``: timed, as many as fit while the producers send).
    faults_planned: int | None = None
    #: Steps taken: faults installed plus restarts.
    faults_installed: int = 0
    faults_fired: int = 0
    restarts: int = 0
    final_depth: int = -1
    broker_errors: list[Exception] = field(default_factory=list)
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def plan_complete(self) -> bool:
        """Every planned step was taken and every fault installed fired (always true when timed)."""
        if self.faults_planned is None:
            return True
        return self.faults_installed == self.faults_planned and self.faults_fired == self.faults_planned - self.restarts

    @property
    def lost(self) -> set[str]:
        return self.accepted - set(self.delivered)

    @property
    def invented(self) -> set[str]:
        return set(self.delivered) - self.sent

    @property
    def duplicates(self) -> int:
        return sum(count - 1 for count in self.delivered.values())

    def summary(self) -> str:
        return (
            f"messages sent {len(self.sent)}, accepted {len(self.accepted)}, delivered {len(self.delivered)} "
            f"(+{self.duplicates} redeliveries), lost {len(self.lost)}, invented {len(self.invented)}, "
            f"final depth {self.final_depth}; faults planned {self.faults_planned or 'timed'}, "
            f"installed {self.faults_installed}, fired {self.faults_fired}, "
            f"restarts {self.restarts}; client reconnects {self.client_errors}; broker errors "
            f"{len(self.broker_errors)}; {self.seconds:.1f} s{' (deadline hit)' if self.timed_out else ''}"
        )


def _close(connection: BlockingConnection | None) -> None:
    if connection is not None:
        try:
            connection.close()
        except Exception:
            pass  # it may already be gone: that is what the faults do


class _Clients:
    """The producer and consumer threads, sharing the report under one lock."""

    def __init__(self, broker: minibroker.ThreadedBroker, report: SoakReport, deadline: float) -> None:
        self.broker = broker
        self.report = report
        self.deadline = deadline
        self.lock = threading.Lock()
        self.stop_consumers = threading.Event()
        #: Set when the fault plan is complete: producers past ``messages`` stop then.
        self.plan_done = threading.Event()

    def _failed(self) -> None:
        with self.lock:
            self.report.client_errors += 1
        time.sleep(0.02)  # a real client's reconnect back-off; also lets a restart finish

    def produce(self, name: str, count: int) -> None:
        """Send ``count`` messages, then more until the fault plan is complete."""
        connection: BlockingConnection | None = None
        sender: Any = None
        for n in range(count + EXTRA_MESSAGES):
            if n >= count and self.plan_done.is_set():
                break
            message_id = f"{name}-{n}"
            with self.lock:
                self.report.sent.add(message_id)
            while time.monotonic() < self.deadline:
                try:
                    if sender is None:
                        connection = BlockingConnection(self.broker.url, timeout=CALL_TIMEOUT)
                        sender = connection.create_sender(QUEUE)
                    sender.send(Message(id=message_id, durable=True, body=message_id), timeout=CALL_TIMEOUT)
                except Exception:  # rejected, released, detached, dropped, timed out: resend
                    _close(connection)
                    connection = sender = None
                    self._failed()
                    continue
                with self.lock:
                    self.report.accepted.add(message_id)
                break
        _close(connection)

    def consume(self) -> None:
        connection: BlockingConnection | None = None
        receiver: Any = None
        while not self.stop_consumers.is_set() and time.monotonic() < self.deadline:
            try:
                if receiver is None:
                    connection = BlockingConnection(self.broker.url, timeout=CALL_TIMEOUT)
                    receiver = connection.create_receiver(QUEUE, credit=10)
                message = receiver.receive(timeout=0.2)
            except Exception as exc:  # Timeout: nothing now; anything else: reconnect
                if type(exc).__name__ != "Timeout":
                    _close(connection)
                    connection = receiver = None
                    self._failed()
                continue
            with self.lock:
                self.report.delivered[message.id] = self.report.delivered.get(message.id, 0) + 1
            try:
                receiver.accept()
            except Exception:
                _close(connection)
                connection = receiver = None
                self._failed()
        _close(connection)


#: Faults waiting to fire at once; more would starve the clients (every transfer would hit one).
LIVE_FAULTS = 2


def _inject(
    broker: minibroker.ThreadedBroker, rng: random.Random, report: SoakReport, restart_every: int, live: list[Any]
) -> None:
    """One step of chaos: a fault on the queue (while few are pending), or now and then a restart.

    With a plan, nothing beyond ``report.faults_planned`` steps.
    """
    live[:] = [fault for fault in live if not fault.fired]
    if len(live) >= LIVE_FAULTS or report.faults_installed == report.faults_planned:
        return
    report.faults_installed += 1
    if restart_every and report.faults_installed % restart_every == 0:
        broker.restart()
        report.restarts += 1
        return
    kind = rng.choice(FAULT_KINDS)
    live.append(getattr(broker.faults, kind)(address=QUEUE, after=rng.randrange(0, 5), times=1))


def run_soak(
    *,
    messages: int = 100,
    producers: int = 3,
    consumers: int = 2,
    seconds: float = 60.0,
    faults: int | None = None,
    fault_interval: float = 0.05,
    restart_every: int = 25,
    seed: int = 0,
) -> SoakReport:
    """Run the soak; at least ``messages`` per producer, at most ``seconds`` of wall time.

    ``faults=N`` plans N steps of chaos (every ``restart_every``-th a restart) and runs until
    all have happened; ``faults=None`` installs one every ``fault_interval`` seconds while the
    producers send.  With a plan, ``fault_interval`` only spaces the steps out.
    """
    if faults is not None and faults < 0:
        raise ValueError(f"faults={faults}: pass the number of steps of chaos to plan (>= 0), or None for timed")
    report = SoakReport(faults_planned=faults)
    rng = random.Random(seed)
    started = time.monotonic()
    deadline = started + seconds
    # Faults and restarts may fail a delivery many times: the soak checks delivery, not dead-lettering.
    with minibroker.ThreadedBroker(idle_timeout=None) as broker:
        broker.declare_queue(QUEUE, max_delivery_count=1_000_000)
        clients = _Clients(broker, report, deadline)
        if faults is None:
            clients.plan_done.set()  # timed: no plan to wait for, producers stop at ``messages``
        producing = [
            threading.Thread(target=clients.produce, args=(f"p{i}", messages), daemon=True) for i in range(producers)
        ]
        consuming = [threading.Thread(target=clients.consume, daemon=True) for _ in range(consumers)]
        for thread in producing + consuming:
            thread.start()
        live: list[Any] = []
        while time.monotonic() < deadline:
            if faults is None:
                if not any(t.is_alive() for t in producing):
                    break
            elif report.faults_installed == faults and not [fault for fault in live if not fault.fired]:
                break  # the plan is complete: every step taken, every fault fired
            _inject(broker, rng, report, restart_every, live)
            time.sleep(fault_interval)
        clients.plan_done.set()
        for thread in producing:
            thread.join(max(0.0, deadline - time.monotonic()))
        report.faults_fired = len(broker.faults.history)
        broker.faults.clear()  # let what is left drain without new faults
        while time.monotonic() < deadline:
            with clients.lock:
                drained = not (report.accepted - set(report.delivered))
            if drained and broker.queue(QUEUE).depth == 0:
                break
            time.sleep(0.05)
        clients.stop_consumers.set()
        for thread in consuming:
            thread.join(CALL_TIMEOUT + 1)
        report.timed_out = time.monotonic() >= deadline
        report.final_depth = broker.queue(QUEUE).depth
        report.broker_errors = broker.errors()
    report.seconds = time.monotonic() - started
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000, help="messages per producer")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=300.0, help="hard deadline")
    parser.add_argument("--fault-interval", type=float, default=0.05, help="seconds between faults")
    parser.add_argument("--restart-every", type=int, default=50, help="every Nth fault is a restart (0: none)")
    parser.add_argument(
        "--faults", type=int, default=None, help="plan exactly this many faults and run until all happened"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    report = run_soak(
        messages=args.messages,
        producers=args.producers,
        consumers=args.consumers,
        seconds=args.seconds,
        faults=args.faults,
        fault_interval=args.fault_interval,
        restart_every=args.restart_every,
        seed=args.seed,
    )
    print(report.summary())
    failed = report.lost or report.invented or report.final_depth or report.broker_errors or report.timed_out
    if failed or not report.plan_complete:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
