"""A Celery worker in the test process, on the fixture's broker over AMQP 0-9-1 (docs/celery.md).

Imported only by a test that asks for ``amqp_celery_worker``: the plugin does not import Celery.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any

__all__ = ["CeleryWorkers"]


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
        # Connections an earlier test left in the app's pools were closed when the broker was reset
        # between tests; kombu would hand one out for the next publish (a chain's next task fails
        # with "channel is None ... not bound").  Drop them as Celery does in a forked child
        # (its connection and producer pools, and the rpc:// backend's consumer, start afresh).
        app._after_fork()
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
    from celery.contrib.testing.worker import start_worker
    from celery.worker import state

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

    return run()
