"""A Celery worker in the test process, on the fixture's broker over AMQP 0-9-1 (docs/celery.md).

Imported only by a test that asks for ``amqp_celery_worker``: the plugin does not import Celery.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any

__all__ = ["CeleryWorkers", "LOOP_TURN"]

#: The longest the worker's event loop waits for its sockets before it runs what it scheduled for
#: itself, in seconds (kombu's hub otherwise waits up to 1 s, or until the next heartbeat check).
LOOP_TURN = 0.01


class CeleryWorkers:
    """What ``amqp_celery_worker`` gives a test: call it with a Celery app to run a worker for it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._stack = ExitStack()

    def __call__(self, app: Any, *, result_backend: str | None = "rpc://", **options: Any) -> Any:
        """Point ``app`` at the broker (``broker_url``, ``broker_heartbeat=0``; ``result_backend``,
        ``rpc://`` unless given, ``None`` keeps the app's), start a worker for it in a thread (Celery's
        ``start_worker``: the solo pool, no ping task unless ``perform_ping_check=True``; other
        keywords go to it) and return the worker; it stops when the test ends."""
        from kombu import pools

        reset_kombu_pools: Callable[[], None] = pools.reset  # kombu is untyped
        # Connections an earlier test left in the app's pools were closed when the broker was reset
        # between tests; kombu would hand one out for the next publish (a chain's next task fails
        # with "channel is None ... not bound").  Drop them as Celery does in a forked child
        # (its connection and producer pools, and the rpc:// backend's consumer, start afresh),
        # kombu's process-wide pools with them: the app's producer pool is kombu's, keyed by the
        # broker URL, which the next test's broker shares (a chain's next task, published from
        # the worker, got a producer on a dropped connection once the worker ran it quickly).
        app._after_fork()
        reset_kombu_pools()
        app.conf.broker_url = self.url
        # As Celery's own test app (celery.contrib.testing.app): without heartbeats the worker's
        # event loop polls at most 1 s, so an acknowledgement kombu schedules for its next turn
        # waits no longer than that (with heartbeats, until the next heartbeat check: seconds).
        app.conf.broker_heartbeat = 0
        if result_backend is not None:
            app.conf.result_backend = result_backend
        options.setdefault("perform_ping_check", False)
        return self._stack.enter_context(_running(app, options))

    def close(self) -> None:
        self._stack.close()


def _running(app: Any, options: dict[str, Any]) -> AbstractContextManager[Any]:
    from celery.contrib.testing.worker import TestWorkController, start_worker
    from celery.worker import state

    class Worker(TestWorkController):  # type: ignore[misc]  # Celery is untyped
        """Celery's test worker, whose event loop turns at least every ``LOOP_TURN`` seconds.

        kombu's hub runs the callbacks scheduled before a turn, then polls its sockets with a
        timeout of 1 s when it has no timers (``broker_heartbeat = 0``), else until its next
        timer.  A callback scheduled by the loop's own thread during the callbacks of a turn
        (no wake-up: the loop is busy) waits for that timeout: the worker reads a task that is
        already on its socket in such a callback (the 100 ms ``_quick_drain`` as its loop
        starts, then a re-read after each delivery) and schedules its ``basic.ack`` with
        ``call_soon``, so the first task a new worker gets, and the last of a burst, was
        acknowledged a whole second after its result was sent (the same against RabbitMQ 3.10).
        A timer every ``LOOP_TURN`` bounds that poll: an idle worker wakes 100 times a second.
        """

        def on_consumer_ready(self, consumer: Any) -> None:
            # In the worker's thread, before its event loop starts (asynloop calls it once); a
            # pool without an event loop (threads, gevent) has no hub and no such wait.
            if self.hub is not None:
                self.hub.call_repeatedly(LOOP_TURN, _turn)
            super().on_consumer_ready(consumer)

    @contextmanager
    def run() -> Iterator[Any]:
        with start_worker(app, **options) as worker:
            try:
                yield worker
            finally:
                # What start_worker does on leaving, and a wake-up for the worker's event loop: it
                # would notice only at its next poll timeout (up to 10 s with broker heartbeats
                # on, start_worker's whole shutdown_timeout).
                state.should_terminate = 0
                if worker.hub is not None:
                    worker.hub.call_soon(lambda: None)

    options.setdefault("WorkController", Worker)
    return run()


def _turn() -> None:
    """Nothing: the timer entry's only use is to end the event loop's poll."""
