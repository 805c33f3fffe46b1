"""The trio server: sockets in, bytes to the broker engine, bytes out.

This is the only layer (with :mod:`.threaded` and :mod:`.trio_broker`) that
knows about trio, sockets and real time.  It binds to 127.0.0.1 by default.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import trio

from .broker.clock import ManualClock
from .broker.engine import Broker

__all__ = ["serve", "DEFAULT_HOST"]

DEFAULT_HOST = "127.0.0.1"
READ_SIZE = 256 * 1024


class _Waker:
    """A level-triggered wake-up for one task: ``set()`` from anywhere in the trio thread."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        if self._event.is_set():
            self._event = trio.Event()

    async def wait(self, deadline: float) -> None:
        with trio.move_on_at(deadline):
            await self._event.wait()
        if self._event.is_set():
            self._event = trio.Event()


async def serve(
    broker: Broker,
    host: str = DEFAULT_HOST,
    port: int = 0,
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve AMQP on ``host:port`` until cancelled; reports the bound port through ``task_status``."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        if not isinstance(broker.clock, ManualClock):
            nursery.start_soon(_run_timers, broker)
        task_status.started(bound)
        await trio.serve_listeners(partial(_serve_connection, broker), listeners, handler_nursery=nursery)


async def _run_timers(broker: Broker) -> None:
    """Wake when the next message expires (or a transaction times out) and let the broker act."""
    waker = _Waker()
    previous = broker.on_timers_changed
    broker.on_timers_changed = waker.set
    try:
        while True:
            deadline = broker.next_deadline()
            if deadline is None:
                wake_at = math.inf
            else:
                wake_at = trio.current_time() + max(0.0, deadline - broker.clock.now())
            await waker.wait(wake_at)
            if trio.current_time() >= wake_at:
                broker.run_timers()
    finally:
        broker.on_timers_changed = previous


async def _serve_connection(broker: Broker, stream: trio.SocketStream) -> None:
    """Read and write one connection.

    The reader sends the replies to what it just read itself, so a request
    costs one task wake-up, not two; the writer task sends only what other
    connections' traffic produced for this one (a message routed here) and
    runs the idle-timeout ticks.  A lock keeps their ``send_all`` calls apart.
    """
    waker = _Waker()
    try:
        host, port = stream.socket.getpeername()[:2]
        peer = f"{host}:{port}"
    except OSError:
        peer = "?"
    connection = broker.connect(waker.set, peer)
    sending = trio.StrictFIFOLock()

    async def flush() -> None:
        async with sending:
            while data := connection.data_to_send():
                await stream.send_all(data)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write, connection, flush, waker, nursery.cancel_scope)
            try:
                while not connection.finished:
                    data = await stream.receive_some(READ_SIZE)
                    if not data:
                        break
                    connection.receive_data(data)
                    await flush()
                    waker.clear()  # everything queued for this connection has been sent
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            # The peer is gone (or we closed): end its links now, so what it held goes back at
            # once rather than after the writer's grace period below.
            connection.connection_lost()
            waker.set()
            nursery.cancel_scope.deadline = trio.current_time() + 5  # let the writer flush a close
    finally:
        connection.connection_lost()
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def _write(
    connection: Any, flush: Callable[[], Awaitable[None]], waker: _Waker, scope: trio.CancelScope
) -> None:
    """Send output produced by other connections' traffic; run idle-timeout ticks."""
    try:
        while True:
            deadline = connection.tick(trio.current_time())
            await flush()
            if connection.finished:
                break
            await waker.wait(deadline if deadline is not None else math.inf)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    scope.cancel()
