"""``ThreadedBroker``: the broker in a background thread, for synchronous and asyncio tests."""

from __future__ import annotations

import errno
import queue
import socket
import ssl
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple, Unpack, cast

import trio

from . import broker_thread
from .api import BrokerAPI, check, timed_out
from .broker.clock import Clock, ManualClock
from .broker.config import BrokerConfig
from .broker.engine import Broker
from .config import config_from_keywords
from .restartable import RestartableServer
from .server import DEFAULT_HOST, HANDLE_KEYWORDS, listen, stop
from .tls import resolve as resolve_tls

if TYPE_CHECKING:
    import outcome

__all__ = ["ThreadedBroker"]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


def _run_sync(token: trio.lowlevel.TrioToken, fn: Callable[[Unpack[Ts]], T], *args: *Ts) -> T:
    """``fn(*args)`` in the broker's trio run, from any other thread: the test's, a worker's, or
    one running a trio run of its own (a trio test)."""
    if trio.lowlevel.in_trio_run():
        _not_from_the_broker_thread(token)
        return _relayed(lambda: trio.from_thread.run_sync(fn, *args, trio_token=token))
    return trio.from_thread.run_sync(fn, *args, trio_token=token)


def _run(token: trio.lowlevel.TrioToken, afn: Callable[[Unpack[Ts]], Awaitable[T]], *args: *Ts) -> T:
    """``await afn(*args)`` in the broker's trio run, from any other thread (as :func:`_run_sync`)."""
    if trio.lowlevel.in_trio_run():
        _not_from_the_broker_thread(token)
        return _relayed(lambda: trio.from_thread.run(afn, *args, trio_token=token))
    return trio.from_thread.run(afn, *args, trio_token=token)


def _not_from_the_broker_thread(token: trio.lowlevel.TrioToken) -> None:
    """Refuse a call made by code the broker thread runs: it would wait for that thread, itself.

    Every ``ThreadedBroker`` of a process is served by one trio run in one thread
    (:mod:`.broker_thread`), so a frame hook, a fault's callback or anything else running in a
    broker cannot call a ``ThreadedBroker``'s methods, its own or another's."""
    if trio.lowlevel.in_trio_run() and trio.lowlevel.current_trio_token() is token:
        raise RuntimeError(
            "a ThreadedBroker method was called from the broker thread (from a hook, a fault's callback "
            "or other code a broker runs), which would wait for itself: every ThreadedBroker of a "
            "process is served by that one thread; call it from the test's own thread instead"
        )


def _relayed(call: Callable[[], T]) -> T:
    """``call()`` in one of trio's cached worker threads, waited for here.

    ``trio.from_thread`` refuses to be called from inside any trio run, to spare that run a
    deadlock with itself; but a trio test runs in its own run, not in the broker's, and waits
    only for the broker's thread (which never waits for the test's run).  A worker thread is in
    no run, so the call goes through it; the test's run is blocked meanwhile, as an asyncio
    test's loop is by a direct call.
    """
    done: queue.SimpleQueue[outcome.Outcome[T]] = queue.SimpleQueue()
    trio.lowlevel.start_thread_soon(call, done.put)
    return done.get().unwrap()


class _ThreadedClock:
    """The broker's clock seen from another thread: ``advance`` runs in the broker thread."""

    def __init__(self, owner: ThreadedBroker, clock: Clock) -> None:
        self._owner = owner
        self._clock = clock
        #: How to get a broker with a manual clock, as the error of ``advance()`` on any other
        #: clock says it; whoever made the broker for the caller (the pytest plugin) names its own way.
        self.manual_hint = "start the broker with ThreadedBroker(clock=minibroker.ManualClock())"

    def now(self) -> float:
        return self._clock.now()

    def _manual(self, what: str) -> ManualClock:
        if not self._clock.stepped:
            raise TypeError(
                f"{what} needs a manual clock, and this broker reads {type(self._clock).__name__}: {self.manual_hint}"
            )
        return cast(ManualClock, self._clock)  # the one stepped clock minibroker has

    def advance(self, seconds: float) -> float:
        return self._owner._call(self._manual("advance()").advance, seconds)

    def rewind(self) -> None:
        """Back to the manual clock's start time (``reset()`` leaves no expiry times behind)."""
        self._manual("rewind()").rewind()  # one float written; no timer runs, so no trip to the broker's thread


class ThreadedBroker(BrokerAPI):
    """An AMQP 1.0 broker serving on a loopback port from its own thread.

    ``ssl_context=`` (a server-side ``ssl.SSLContext``) serves ``amqps`` only; ``tls=True`` does
    so with a throwaway CA made for this broker (needs ``trustme``), kept in ``broker.tls``.

    ::

        with ThreadedBroker() as broker:
            connect_your_client(broker.url)
            assert broker.queue("orders").depth == 1
    """

    def __init__(
        self,
        *,
        host: str = DEFAULT_HOST,
        port: int = 0,
        config: BrokerConfig | None = None,
        clock: Clock | None = None,
        ssl_context: ssl.SSLContext | None = None,
        tls: bool = False,
        **config_fields: Any,
    ) -> None:
        self._config = config_from_keywords(config, config_fields, "ThreadedBroker()", HANDLE_KEYWORDS)
        self._host = host
        self._requested_port = port
        self._ssl_context, tls_files = resolve_tls(ssl_context, tls)
        #: With ``tls=True``: the throwaway CA the broker serves with (``.client_context()``,
        #: ``.ca_file`` for the client to trust; see :class:`minibroker.testing.ThrowawayTLS`).
        self.tls = tls_files
        self._given_clock = clock
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._server: RestartableServer | None = None
        self._nursery: trio.Nursery | None = None
        self._port: int | None = None
        self._failure: BaseException | None = None
        #: Set once this broker's task serves (or ended: ``_ended``): see ``_wait_up``.
        self._up = threading.Event()
        self._ended = trio.Event()
        self._changed = threading.Condition()
        self._version = 0
        #: Threads in ``wait_for``, each counted (under the lock) before it compares the version:
        #: a change takes the lock to wake them only when there are any (``_notify_change``).
        self._waiting = 0
        self._broker = Broker(self._config, clock)
        # Advancing the test's own clock object from the test's thread must still run the
        # broker's expiry in the broker's thread (a clock that is not stepped never calls either).
        self._broker.clock.unsubscribe(self._broker.run_timers)
        self._broker.clock.subscribe(self._run_timers)
        self.clock = _ThreadedClock(self, self._broker.clock)
        #: Faults to inject: ``broker.faults.detach_link(address="jobs")`` (see ``minibroker.broker.faults``).
        self.faults = self._broker.faults
        self.faults.marshal = self._marshal

    # ----------------------------------------------------------- lifecycle

    def start(self) -> ThreadedBroker:
        """Start serving; returns once the port is bound.

        The port is bound here, in the caller's thread, so a failure to listen (a port in use,
        an address this machine lacks) is raised here.  The broker is then served by a task in
        the process's broker thread (:mod:`.broker_thread`, one trio run for every
        ``ThreadedBroker``, started by the first); ``start()`` does not wait for that task, and
        a client connecting at once waits in the listen backlog until it is served.  Calls that
        need the task wait for it to be up.
        """
        if self._thread is not None:
            raise RuntimeError("this ThreadedBroker is already started; stop() it before starting again")
        try:
            listener = listen(self._host, self._requested_port, ssl_context=self._ssl_context)
        except OSError as exc:
            raise RuntimeError(_start_failure(exc, self._host, self._requested_port)) from exc
        try:
            host = broker_thread.shared()
        except BaseException:
            listener.close()
            raise
        self._port = listener.getsockname()[1]
        self._failure = self._server = self._nursery = self._cancel = None
        self._up, self._ended = threading.Event(), trio.Event()
        self._thread, self._token = host.thread, host.token
        self._broker.change_watchers.append(self._notify_change)
        host.spawn(self._serve, listener, self._up, self._ended)
        return self

    async def _serve(self, listener: socket.socket, up: threading.Event, ended: trio.Event) -> None:
        """This broker's task in the broker thread: serve until ``stop()`` cancels it; an error
        ends this broker only and is kept for its next call (see ``_stopped``)."""
        try:
            async with trio.open_nursery() as nursery:
                self._cancel = nursery.cancel_scope
                self._nursery = nursery
                self._server = RestartableServer(self._broker, self._host, self._port or 0, self._ssl_context)
                await self._server.start(nursery, listener)
                up.set()
                await trio.sleep_forever()  # keeps the nursery open for restart(); stop() cancels it
        except BaseException as exc:  # the broker thread's run is every broker's: nothing escapes
            self._failure = exc
            self._notify_change()  # wake every wait_for: it says why instead of waiting out its timeout
        finally:
            listener.close()  # (closed already by the server, unless the task ended before serving it)
            up.set()
            ended.set()

    def _wait_up(self) -> None:
        """Wait for this broker's task to be serving (or to have ended on an error); ``start()``
        returns before it is.  Called before anything that needs the task."""
        if self._thread is not None and not self._up.is_set() and threading.current_thread() is not self._thread:
            self._up.wait()

    def stop(self) -> None:
        """Close every connection and stop serving; safe to call twice.  Returns once this
        broker's task has ended (its listener and every connection's socket closed)."""
        self._wait_up()
        if self._token is not None and threading.current_thread() is self._thread:
            _not_from_the_broker_thread(self._token)  # raises, before this broker is marked stopped
        thread, self._thread = self._thread, None
        if thread is None:
            return
        token, cancel, ended = self._token, self._cancel, self._ended
        if not ended.is_set() and token is not None and cancel is not None:
            try:
                _run(token, self._shutdown, cancel, ended)
            except trio.RunFinishedError:
                pass
        self._token = None

    async def _shutdown(self, cancel: trio.CancelScope, ended: trio.Event) -> None:
        stop(self._broker, cancel)
        await ended.wait()  # the task winds down: closes flushed, sockets closed

    def restart(self, *, graceful: bool = False) -> None:
        """Restart as a real broker would: every connection dropped (sockets closed, no ``close``
        frame, as in a crash), the same port served again, durable messages kept and non-durable
        ones lost.  ``graceful=True`` sends each connection ``close`` with
        ``amqp:connection:forced`` first, as a broker shutting down in order does.

        Nodes, counters and durable subscriptions stay; unsettled deliveries went back to their
        queues first (see :mod:`minibroker.restartable`).
        """
        server, nursery, token = self._serving("restart()")
        _run(token, server.restart, nursery, graceful)

    def _serving(self, what: str) -> tuple[RestartableServer, trio.Nursery, trio.lowlevel.TrioToken]:
        self._wait_up()
        if self._thread is None or self._token is None or self._server is None or self._nursery is None:
            raise RuntimeError("the broker is not running: call start() or use `with ThreadedBroker() as broker:`")
        if threading.current_thread() is self._thread:
            raise RuntimeError(f"{what} waits for the broker's thread: call it from the test, not from a hook")
        return self._server, self._nursery, self._token

    def reset(self, *, drop_connections: bool = False) -> None:
        """Back to empty: connections closed, nodes, messages, transactions, counters, errors and
        frame log gone.  ``drop_connections=True`` drops them as :meth:`restart` does (sockets
        closed at once) instead of closing them with ``amqp:connection:forced``, so nothing of
        the old connections outlives the reset (how the pytest plugin reuses a broker)."""
        if not drop_connections:
            super().reset()
            return
        server, nursery, token = self._serving("reset(drop_connections=True)")
        if self._broker.pristine:  # a test that changed nothing: no trip to the broker's thread
            return
        if not self._broker.connection_count:  # the usual case: one synchronous call, no task to spawn
            _run_sync(token, self._locked, self._broker.reset, ())
            return

        async def renew() -> None:
            await server.stop()  # a connection accepted meanwhile is dropped too
            await server.start(nursery)
            self._locked(self._broker.reset, ())

        _run(token, renew)

    def __enter__(self) -> ThreadedBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ---------------------------------------------------------- addresses

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``stop()``."""
        return self._thread is not None and self._failure is None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the broker has no port yet: call start() or use `with ThreadedBroker() as broker:`")
        return self._port

    @property
    def host(self) -> str:
        return self._host

    @property
    def url(self) -> str:
        """``amqp://127.0.0.1:PORT``, or ``amqps://`` when serving TLS."""
        return f"{'amqp' if self._ssl_context is None else 'amqps'}://{self._host}:{self.port}"

    # -------------------------------------------------------- marshalling

    def _stopped(self) -> RuntimeError:
        """What a call on a broker whose thread stopped on an error raises (from that error)."""
        assert self._failure is not None
        cause = _root_cause(self._failure)
        error = RuntimeError(f"the broker's thread stopped on an error: {type(cause).__name__}: {cause} "
                             "(stop() this broker and start a new one)")  # fmt: skip
        error.__cause__ = cause
        return error

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        self._wait_up()
        if self._thread is None or self._token is None:
            raise RuntimeError("the broker is not running: call start() or use `with ThreadedBroker() as broker:`")
        if self._failure is not None:
            raise self._stopped()
        if threading.current_thread() is self._thread:
            return fn(*args)
        return _run_sync(self._token, self._locked, fn, args)

    def _marshal(self, fn: Callable[..., T], *args: Any) -> T:
        """Like ``_call``, and before ``start()`` (no broker thread yet) directly."""
        if self._thread is None:
            return fn(*args)
        return self._call(fn, *args)

    def _run_timers(self, now: float) -> None:
        self._wait_up()
        thread, token = self._thread, self._token
        if thread is None or token is None or threading.current_thread() is thread:
            self._broker.run_timers(now)
        else:
            _run_sync(token, self._broker.run_timers, now)

    def _read(self, fn: Callable[..., T], *args: Any) -> T:
        self._wait_up()
        if self._thread is None or self._token is None:
            raise RuntimeError("the broker is not running: call start() or use `with ThreadedBroker() as broker:`")
        if self._failure is not None:
            raise self._stopped()
        if threading.current_thread() is self._thread:
            return fn(*args)
        return _run_sync(self._token, fn, *args)

    def _inspect(self, fn: Callable[[], None]) -> None:
        self._wait_up()
        if self._thread is None or self._token is None:
            fn()  # stopped: nothing else touches the broker's state any more
        else:
            self._read(fn)

    def _locked(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        result = fn(*args)
        self._broker.flush()
        return result

    def _notify_change(self) -> None:
        # Called after every server pass: the lock and notify_all only when a wait_for waits.  A
        # waiter counts itself before it compares the version, so either it sees this version
        # or this sees it counted and wakes it (each step is atomic under the GIL).
        self._version += 1
        if self._waiting:
            with self._changed:
                self._changed.notify_all()

    def wait_for(self, predicate: Callable[[ThreadedBroker], Any], timeout: float = 5.0) -> Any:
        """Wait until ``predicate(broker)`` is truthy, re-checking after each broker change.

        ``broker.wait_for(lambda b: b.queue("out").depth == 3)``; raises
        ``TimeoutError`` naming the predicate after ``timeout`` seconds, and ``RuntimeError``
        naming the error at once if the broker's thread stopped on one meanwhile.
        """
        _refuse_in_event_loop()
        return self._wait(predicate, timeout)

    def _wait(self, predicate: Callable[[ThreadedBroker], Any], timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            # Snapshots only read, so the version moves only when the broker really changed.
            with self._changed:
                version = self._version
            result, missing = check(predicate, self)
            if result:
                return result
            with self._changed:
                self._waiting += 1  # before the version is compared: see _notify_change
                try:
                    while self._version == version:
                        if self._failure is not None:
                            raise self._stopped()
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            raise timed_out(predicate, timeout, missing)
                        self._changed.wait(remaining)
                finally:
                    self._waiting -= 1

    async def wait_for_async(self, predicate: Callable[[ThreadedBroker], Any], timeout: float = 5.0) -> Any:
        """``await broker.wait_for_async(...)`` in an asyncio or trio test: ``wait_for`` without
        blocking the event loop (so a client running in that loop keeps working meanwhile)."""
        asyncio = sys.modules.get("asyncio")
        if asyncio is not None and asyncio._get_running_loop() is not None:
            return await asyncio.to_thread(self._wait, predicate, timeout)
        return await trio.to_thread.run_sync(self._wait, predicate, timeout, abandon_on_cancel=True)


def _root_cause(exc: BaseException) -> BaseException:
    """The first exception inside trio's nursery groups: what really stopped the start."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _start_failure(cause: BaseException, host: str, port: int) -> str:
    if isinstance(cause, OSError):
        reason = cause.strerror or str(cause)
        hint = ""
        if cause.errno == errno.EADDRINUSE:
            hint = "; another process (or another broker) holds that port: pick another, or port=0 for a free one"
        elif cause.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(cause, socket.gaierror):
            hint = "; this machine has no such address: bind 127.0.0.1 (the default) or one of its own addresses"
        return f"minibroker failed to start: cannot listen on {host}:{port}: {reason}{hint}"
    return f"minibroker failed to start: {type(cause).__name__}: {cause}"


def _refuse_in_event_loop() -> None:
    """A blocking wait inside an event loop would freeze a client running in that loop."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None and asyncio._get_running_loop() is not None:
        raise RuntimeError(
            "wait_for() would block the asyncio event loop this test runs in: use "
            "`await broker.wait_for_async(predicate)` instead"
        )
    if trio.lowlevel.in_trio_run():
        raise RuntimeError(
            "wait_for() would block the trio run this test runs in: use "
            "`await broker.wait_for_async(predicate)`, or the trio-native `open_broker()`"
        )
