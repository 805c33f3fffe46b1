"""Every ``ThreadedBroker`` of a process is a task in one trio run (``minibroker.broker_thread``):
a start costs no thread and no run set-up, one broker's failure ends only that broker, and
``stop()`` leaves nothing of it behind (its port refuses connections at once)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import trio

from minibroker import ThreadedBroker
from minibroker.amqp import Open, decode, encode
from minibroker.protocol.framing import AMQP_HEADER, frame


def answers_open(port: int) -> bool:
    """A raw client's header and ``open`` on ``port`` get the broker's header and ``open`` back."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(AMQP_HEADER + frame(0, encode(Open(container_id="probe"))))
        data = b""
        while len(data) < 16 or len(data) < 8 + int.from_bytes(data[8:12], "big"):
            chunk = sock.recv(4096)
            if not chunk:
                return False
            data += chunk
    size, doff = int.from_bytes(data[8:12], "big"), data[12]
    return data[:8] == AMQP_HEADER and isinstance(decode(data[8 + doff * 4 : 8 + size]), Open)


def broker_threads() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name == "minibroker")


def test_brokers_share_one_thread_and_each_serves_its_own_port() -> None:
    brokers = [ThreadedBroker().start() for _ in range(3)]
    try:
        assert all(answers_open(broker.port) for broker in brokers)
        assert broker_threads() == 1
    finally:
        for broker in brokers:
            broker.stop()


def test_stop_closes_the_port_at_once_and_a_new_broker_is_served_after_it() -> None:
    broker = ThreadedBroker().start()
    port = broker.port
    assert answers_open(port)
    broker.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    with ThreadedBroker() as again:
        assert answers_open(again.port)


def test_a_broker_that_fails_ends_alone() -> None:
    failing, other = ThreadedBroker().start(), ThreadedBroker().start()
    try:

        async def crash() -> None:
            raise ValueError("a task failed")

        failing._wait_up()
        assert failing._nursery is not None and failing._token is not None
        trio.from_thread.run_sync(failing._nursery.start_soon, crash, trio_token=failing._token)
        deadline = time.monotonic() + 5
        while failing.running and time.monotonic() < deadline:
            time.sleep(0.001)
        assert not failing.running
        with pytest.raises(RuntimeError, match="ValueError: a task failed"):
            failing.queue("orders", missing_ok=True)
        assert other.running and answers_open(other.port)
        other.declare_queue("orders")
        assert other.queue("orders").depth == 0
    finally:
        failing.stop()
        other.stop()


@pytest.mark.timeout(30)
def test_stop_from_code_the_broker_thread_runs_is_refused_not_a_deadlock() -> None:
    """A hook or callback runs in the one broker thread: ``stop()`` there would wait for itself.
    It raises instead, saying where to call it from, and leaves both brokers serving."""
    first, second = ThreadedBroker().start(), ThreadedBroker().start()
    try:
        first.statistics()
        second.statistics()
        refused: list[str] = []

        def inside() -> None:
            for broker in (first, second):
                with pytest.raises(RuntimeError, match="call it from the test's own thread") as refusal:
                    broker.stop()
                refused.append(str(refusal.value))

        token = first._token  # the run both brokers are tasks in
        assert token is not None
        trio.from_thread.run_sync(inside, trio_token=token)
        assert len(refused) == 2
        assert answers_open(first.port) and answers_open(second.port)
    finally:
        first.stop()
        second.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", second.port), timeout=5).close()
