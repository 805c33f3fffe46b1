"""The one trio run, in its own thread, that serves every ``ThreadedBroker`` of a process.

A trio run's set-up and teardown (its I/O manager, wake-up socket pair, system nursery) and a
thread's start and join were most of what starting and stopping a ``ThreadedBroker`` cost
(docs/performance.md, "The fixture and start-up, round four"): about 3,100 Python calls per
start and stop for about 170 of the broker's own.  So the first ``ThreadedBroker`` of a process
starts this run and every later one is one task in it; a broker's ``stop()`` ends its task (its
connections and listener closed), and the run, idle in ``epoll_wait`` with no broker, stays for
the next one until the process exits.  A failing task ends only its own broker (``_serve`` in
:mod:`.threaded` keeps the error for that broker's calls).

A child made with ``fork()`` has no copy of the thread (only the forking thread survives), so
the child starts a run of its own at its first broker.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import trio

__all__ = ["BrokerThread", "shared"]

#: What the thread is called (``threading.current_thread().name`` in a broker's code).
THREAD_NAME = "minibroker"


class BrokerThread:
    """A daemon thread running one trio run whose root nursery takes broker tasks from any thread."""

    def __init__(self) -> None:
        self.token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._failure: BaseException | None = None
        up = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(up,), name=THREAD_NAME, daemon=True)
        self.thread.start()
        up.wait()
        if self._failure is not None:
            raise RuntimeError(f"minibroker failed to start its trio run: {self._failure!r}") from self._failure

    def _run(self, up: threading.Event) -> None:
        async def main() -> None:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self.token = trio.lowlevel.current_trio_token()
                up.set()
                await trio.sleep_forever()  # the root of every broker's task, for the process's life

        try:
            trio.run(main)
        except BaseException as exc:  # the run itself could not start (e.g. out of file descriptors)
            self._failure = exc
        finally:
            self.token = None
            up.set()

    @property
    def alive(self) -> bool:
        return self.token is not None and self.thread.is_alive()

    def spawn(self, afn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Start task ``afn(*args)`` in the run without waiting for it (from any thread, the run's own too).

        The task must handle its own errors: one escaping it would end every broker's run.
        """
        token, nursery = self.token, self._nursery
        assert token is not None and nursery is not None
        token.run_sync_soon(nursery.start_soon, afn, *args)


_shared: BrokerThread | None = None
_lock = threading.Lock()


def shared() -> BrokerThread:
    """The process's broker thread, started at the first call (and again in a forked child)."""
    global _shared
    with _lock:
        if _shared is None or not _shared.alive:
            _shared = BrokerThread()
        return _shared


def _forget_after_fork() -> None:
    """In a child made with ``fork()``: the parent's run did not come along, nor did the lock's holder."""
    global _shared, _lock
    _shared, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
