"""The trio-native broker: ``async with open_broker() as broker`` runs it in your trio loop."""

from __future__ import annotations

import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from .api import BrokerAPI, check, timed_out
from .broker.clock import Clock, ClockListeners
from .broker.config import BrokerConfig
from .broker.engine import Broker
from .config import config_from_keywords
from .restartable import RestartableServer
from .server import DEFAULT_HOST, HANDLE_KEYWORDS, stop
from .tls import resolve as resolve_tls

if TYPE_CHECKING:
    from .certificates import ThrowawayTLS

__all__ = ["TrioBroker", "TrioClock", "open_broker"]

T = TypeVar("T")


class TrioClock(ClockListeners):
    """The clock of the current trio run as epoch seconds, so ``trio.testing.MockClock`` drives TTL.

    ``open_broker(clock=TrioClock())`` inside a run with a mock clock (pytest-trio's
    ``autojump_clock``): ``await trio.sleep(31)`` and a 30 s ttl has passed.  ``start``
    is the epoch time it reads at the run's current time (the wall clock by default).
    """

    def __init__(self, start: float | None = None) -> None:
        super().__init__()  # never called: trio's clock (even a MockClock) moves by itself for the broker
        self._offset = (time.time() if start is None else start) - trio.current_time()

    def now(self) -> float:
        return self._offset + trio.current_time()

    def __repr__(self) -> str:
        return f"TrioClock(now={self.now()})"


class TrioBroker(BrokerAPI):
    """A broker served by the current trio run; the same inspection API as ``ThreadedBroker``."""

    def __init__(
        self, broker: Broker, server: RestartableServer, nursery: trio.Nursery, tls: ThrowawayTLS | None = None
    ) -> None:
        self._broker = broker
        #: With ``open_broker(tls=True)``: the throwaway CA it serves with (see ``ThreadedBroker.tls``).
        self.tls = tls
        self._server = server
        self._nursery = nursery
        self.host = server.host
        self.port = server.port
        self.clock = broker.clock
        self._changed = trio.Event()
        #: Tasks in ``wait_for``: a change makes a new event only when one waits (``_notify``).
        self._waiting = 0
        broker.change_watchers.append(self._notify)
        #: Faults to inject: ``broker.faults.detach_link(address="jobs")`` (see ``minibroker.broker.faults``).
        self.faults = broker.faults
        self.faults.marshal = self._call

    @property
    def url(self) -> str:
        return self._server.url

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        result = fn(*args)
        self._broker.flush()
        return result

    def _read(self, fn: Callable[..., T], *args: Any) -> T:
        return fn(*args)

    def _notify(self) -> None:
        # Called after every server pass.  A waiter takes the event and awaits it with no
        # checkpoint between (the broker runs in this trio run, so changes only at checkpoints):
        # with none counted, the event has no one to wake and is kept.
        if self._waiting:
            changed, self._changed = self._changed, trio.Event()
            changed.set()  # wakes every waiter that took this event before the change

    async def restart(self, *, graceful: bool = False) -> None:
        """Restart as a real broker would: every connection dropped (no ``close`` frame; with
        ``graceful=True`` a ``close`` with ``amqp:connection:forced`` first), the same port served
        again, durable messages kept and non-durable ones lost (see ``ThreadedBroker``)."""
        await self._server.restart(self._nursery, graceful)

    async def wait_for(self, predicate: Callable[[TrioBroker], Any], timeout: float = 5.0) -> Any:
        """Wait until ``predicate(broker)`` is truthy, re-checking after each broker change."""
        deadline = trio.current_time() + timeout
        while True:
            changed = self._changed
            result, missing = check(predicate, self)
            if result:
                return result
            self._waiting += 1
            try:
                with trio.move_on_at(deadline):
                    await changed.wait()
            finally:
                self._waiting -= 1
            if trio.current_time() >= deadline:
                result, missing = check(predicate, self)
                if result:
                    return result
                raise timed_out(predicate, timeout, missing)


@asynccontextmanager
async def open_broker(
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    config: BrokerConfig | None = None,
    clock: Clock | None = None,
    ssl_context: ssl.SSLContext | None = None,
    tls: bool = False,
    **config_fields: Any,
) -> AsyncIterator[TrioBroker]:
    """Serve a broker in the current trio run for the duration of the block (``ssl_context=`` or
    ``tls=True`` as for ``ThreadedBroker``)."""
    config = config_from_keywords(config, config_fields, "open_broker()", HANDLE_KEYWORDS)
    context, tls_files = resolve_tls(ssl_context, tls)
    broker = Broker(config, clock)
    async with trio.open_nursery() as nursery:
        server = RestartableServer(broker, host, port, context)
        await server.start(nursery)
        try:
            yield TrioBroker(broker, server, nursery, tls_files)
        finally:
            stop(broker, nursery.cancel_scope)


