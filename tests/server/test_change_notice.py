"""ThreadedBroker and ``open_broker`` tell ``wait_for`` of changes at no cost per server pass while nobody waits.

Every server pass ends with the broker's change watchers; the ThreadedBroker's bumps a version and
takes its condition's lock to wake the threads in ``wait_for`` only when one is counted there.
The lock is counted (a condition that counts its acquisitions), not timed; a waiter in another
thread must still be woken by a change made over a socket.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
import trio

import minibroker
from minibroker.amqp.message import Message
from minibroker.testing import FrameReader, Peer
from minibroker.trio_broker import open_broker


class _CountingCondition(threading.Condition):
    def __init__(self) -> None:
        super().__init__()
        self.entered = 0

    def __enter__(self) -> Any:
        self.entered += 1
        return super().__enter__()


def _send_only(port: int, count: int) -> None:
    producer, reader = Peer("producer"), FrameReader()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(producer.start() + producer.attach_sender("p", "work", 0))
        names: list[str] = []
        while "Flow" not in names:
            names += reader.feed(sock.recv(65536)).names()
        for n in range(count):
            sock.sendall(producer.transfer(0, None, None, Message(body=n).encode()))
        # Half-close and read to the end: closing with the broker's answers unread would reset the
        # connection, and a reset may discard transfers the broker has not read yet.
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass


def _send(broker: minibroker.ThreadedBroker, count: int, *, wait: bool = True) -> None:
    """``count`` messages to queue ``work``, each in its own write (its own server pass); with
    ``wait``, until the queue holds them (snapshots only, which take no lock either)."""
    _send_only(broker.port, count)
    if not wait:
        return
    for _ in range(3000):
        if broker.queue("work").depth == count:
            return
        time.sleep(0.01)
    raise AssertionError(f"the queue holds {broker.queue('work').depth} of the {count} messages sent")


def test_server_passes_take_no_lock_while_nobody_waits() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("work")
        counting = broker._changed = _CountingCondition()
        _send(broker, 20)
        assert broker.queue("work").depth == 20
        assert counting.entered == 0, f"the broker took the wait_for lock {counting.entered} times with nobody waiting"


def test_a_waiting_wait_for_is_woken_by_a_change_over_a_socket() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("work")
        seen: list[int] = []
        # A wake-up lost would leave it waiting out its 600 s; 60 s is the generous bound of a good client.
        waiter = threading.Thread(
            target=lambda: seen.append(broker.wait_for(lambda b: b.queue("work").depth, 600)), daemon=True
        )
        waiter.start()
        _send(broker, 1, wait=False)
        waiter.join(60)
        assert not waiter.is_alive(), "wait_for was not woken by the message's arrival"
        assert seen == [1]


@pytest.mark.trio
async def test_trio_broker_passes_make_no_event_while_nobody_waits() -> None:
    """``open_broker``'s watcher: a pass with no ``wait_for`` waiting keeps the event (makes no new one)."""
    async with open_broker() as broker:
        broker.declare_queue("work")
        kept = broker._changed
        await trio.to_thread.run_sync(_send_only, broker.port, 5)
        for _ in range(3000):
            if broker.queue("work").depth == 5:
                break
            await trio.sleep(0.01)
        assert broker.queue("work").depth == 5
        assert broker._changed is kept, "a server pass made a new event with nobody waiting"
        # And a waiter is still woken by a pass (bounded as a good client is: 60 s).
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, _send_only, broker.port, 1)
                assert await broker.wait_for(lambda b: b.queue("work").depth == 6, 600)

