"""The trio server: sockets in, bytes to the broker engine, bytes out.

This is the only layer (with :mod:`.threaded` and :mod:`.trio_broker`) that
knows about trio, sockets and real time.  It binds to 127.0.0.1 by default.

Sockets are non-blocking stdlib sockets driven with ``trio.lowlevel``:
a read or write is tried first and the task parks on readiness only when it
would block.  Trio's high-level streams add a scheduler pass around every
successful call; for a request/reply exchange those passes, not the
protocol work, were most of the broker's CPU (see ``bench/``).

Latency: a message read on one connection and routed to a consumer on
another is written to the consumer's socket by the reading task itself,
before the reader answers its own peer (disposition, flow), through the
:class:`_Outbox`.  Waking the consumer's writer task instead costs a
scheduler pass, and answering the producer first lets the producer's
process take the CPU before the message has left.  A short read (what a client
waiting for an answer sends: its message, then the disposition of the last one it
got) has its first frame handled alone and that frame's routed output written
before the frames after it are read (``LEAD_READ``).
"""

from __future__ import annotations

import ipaddress
import math
import socket
import ssl
import warnings
from typing import Any

import trio

from . import (
    front091,  # noqa: F401 - importing it registers the AMQP 0-9-1 front end (frontends.py)
    layers,  # noqa: F401 - importing it registers the built-in protocol layers (broker/layers.py)
)
from .broker.client_connection import OUTPUT_BOUND
from .broker.engine import Broker
from .broker.frontends import HEADER_SIZE, ServedConnection
from .broker.logins import LoginGuard
from .broker.stored import clear_header_cache
from .tls import close_notify, handshake, wrap

__all__ = ["listen", "serve", "stop", "DEFAULT_HOST", "ExposedBrokerWarning", "HANDLE_KEYWORDS"]

DEFAULT_HOST = "127.0.0.1"
#: The keywords ``ThreadedBroker(...)`` and ``open_broker(...)`` take besides the ``BrokerConfig`` fields.
HANDLE_KEYWORDS = ("host", "port", "config", "clock", "ssl_context", "tls")
READ_SIZE = 256 * 1024
#: Output queued for a peer that does not read, beyond which its reader stops reading (and the
#: broker routes nothing more to it: ``ServedConnection.output_full``).
HIGH_WATER = OUTPUT_BOUND
#: How often the reader looks whether a paused connection may be read again (seconds).
PAUSED_POLL = 0.05
#: Backlog at which routing to a connection that went over ``HIGH_WATER`` resumes.
LOW_WATER = HIGH_WATER // 2
#: Chunks a reader handles back to back before it lets other tasks run.
FAIRNESS_BATCH = 16
#: Frames handled per pass: a read of 256 KiB of tiny frames (tens of thousands) is handled in
#: batches with other connections served in between.  A read of ordinary messages is one batch.
FRAMES_PER_PASS = 1024
#: A read at most this long has its first frame handled alone, and what that frame routed to other
#: connections written, before the rest: a request/reply client sends its message first and the
#: disposition of the message it got after it, so the consumer's process starts on the message
#: before the broker settles the other.  A longer read (a stream of messages) is handled in one go,
#: its routed output in one write per connection.
LEAD_READ = 4096
#: Seconds a finished connection's pending output may take to reach a slow peer.
CLOSE_GRACE = 5.0
#: Seconds to wait for the peer to close its side after we closed ours (avoids a reset).
LINGER = 0.5
#: A read that would block: plain sockets raise BlockingIOError, TLS ones SSLWantReadError.
WOULD_BLOCK_READ = (BlockingIOError, ssl.SSLWantReadError)
WOULD_BLOCK_WRITE = (BlockingIOError, ssl.SSLWantWriteError)


class ExposedBrokerWarning(UserWarning):
    """The broker listens on an address other machines can reach (it binds 127.0.0.1 by default)."""


def _numeric(host: str) -> str | bytes:
    """``host`` as ``getaddrinfo`` is given it: an IP address as the ASCII bytes that the "idna"
    codec makes of it, any other name as it is.

    ``getaddrinfo`` encodes a str host with that codec, and its first use in a process imports
    ``encodings.idna`` and ``stringprep``: 2.3 M of the 2.4 M instructions that binding the
    default 127.0.0.1 cost at a process's first ``start()`` (docs/performance.md, "Fourth pass")."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return host.encode("ascii")
    return host


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
        self.clear()


class _Sender:
    """Writes to one socket in order; whichever task finds it idle does the writing."""

    __slots__ = ("_sock", "_pending", "_busy", "_drained", "connection", "waker")

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._pending = bytearray()
        self._busy = False
        self._drained = trio.Event()
        #: Whose output this is, and its writer's waker: routing to a connection stopped at
        #: ``HIGH_WATER`` resumes (in the writer task) once its backlog is down to ``LOW_WATER``.
        self.connection: ServedConnection | None = None
        self.waker: _Waker | None = None

    def _written(self) -> None:
        connection = self.connection
        if connection is not None:
            backlog = connection.transport_backlog = len(self._pending)
            if connection.throttled and backlog <= LOW_WATER and self.waker:
                self.waker.set()

    @property
    def backlog(self) -> int:
        return len(self._pending)

    def write_nowait(self, data: bytes) -> bool:
        """Write ``data`` after what is queued, as far as the socket takes it now; False if some is
        left for a task to write (:meth:`send` with nothing new, or the writer task)."""
        pending = self._pending
        if not pending and not self._busy:
            # Nothing queued, no task writing: the usual case, written as it is.  The rest of a
            # partial write is queued; nothing is copied when the socket takes it all.
            try:
                sent = self._sock.send(data)
            except WOULD_BLOCK_WRITE:
                sent = 0
            except OSError:
                sent = 0  # queued: whoever writes next meets the error and ends the connection
            if sent < len(data):
                pending += memoryview(data)[sent:]
                self._written()
                return False
            connection = self.connection
            if connection is not None and (connection.transport_backlog or connection.throttled):
                self._written()  # its backlog is 0 now, and routing to it may resume
            return True
        pending += data
        if self.connection is not None:
            self.connection.transport_backlog = len(pending)
        if self._busy:
            return True  # the task waiting to write writes this too
        try:
            sent = self._sock.send(pending)
        except WOULD_BLOCK_WRITE:
            sent = 0
        except OSError:
            return False  # the writer task meets the error and ends the connection
        del pending[:sent]
        self._written()
        return not pending

    async def send(self, data: bytes) -> None:
        """Queue ``data``; write it now unless another task is already waiting to write."""
        self._pending += data
        if self.connection is not None:
            self.connection.transport_backlog = len(self._pending)
        if self._busy or not self._pending:
            return
        self._busy = True
        try:
            while self._pending:
                try:
                    sent = self._sock.send(self._pending)
                except WOULD_BLOCK_WRITE:
                    sent = 0
                del self._pending[:sent]
                self._written()
                if self._pending:
                    await trio.lowlevel.wait_writable(self._sock)
        finally:
            self._busy = False
            self._drained.set()
            self._drained = trio.Event()

    def discard(self) -> None:
        """The connection is over: drop what was never written."""
        self._pending = bytearray()
        self.connection = self.waker = None

    async def wait_drained(self) -> None:
        """Park until what is queued has been written (back-pressure for a peer that does not read)."""
        while len(self._pending) > HIGH_WATER:
            await self._drained.wait()


class _Outbox:
    """Connections given output by the connection being read, written before the reader answers its own peer.

    While a reader hands bytes to the broker (``reading``), a connection the broker wakes
    is queued here instead of waking its writer task; the reader then writes each one
    without blocking.  A wake-up from anywhere else (the API, timers) goes to the writer task.
    """

    __slots__ = ("reading", "ready")

    def __init__(self) -> None:
        self.reading = False
        self.ready: list[_Channel] = []

    def flush(self, reader: ServedConnection) -> None:
        """Write what the other queued connections have (their writers finish what a full socket leaves);
        the ``reader`` writes its own output itself, after these."""
        # The reader is skipped: it writes its own output right after this, so a routed
        # message reaches its consumer's socket before the producer's disposition goes out
        # (module docstring, "Latency").  Nothing here blocks: write_now sends what the socket
        # takes and leaves the rest to that connection's writer task.
        ready, self.ready = self.ready, []
        for channel in ready:
            if channel.connection is not reader:
                channel.write_now()


class _Handshakes:
    """Connections that have not completed ``open`` yet, oldest first, at most ``limit`` of them.

    They hold no ``max_connections`` slot (the broker counts a connection when its ``open``
    arrives); instead one more than ``limit`` makes the oldest go, so sockets that dawdle
    (however many) can delay a client that logs in at once by one eviction, never refuse it.
    """

    __slots__ = ("limit", "_pending")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._pending: dict[trio.CancelScope, ServedConnection] = {}

    def admit(self, scope: trio.CancelScope, connection: ServedConnection) -> None:
        pending = self._pending
        for old in [s for s, c in pending.items() if not c.handshaking]:
            del pending[old]  # done with the handshake, or gone
        while len(pending) >= self.limit:
            oldest = next(iter(pending))
            del pending[oldest]
            oldest.cancel()
        pending[scope] = connection

    def discard(self, scope: trio.CancelScope) -> None:
        self._pending.pop(scope, None)


class _Channel:
    """One connection as the server writes it: its protocol state, its ordered sender and its writer's waker."""

    __slots__ = ("connection", "sender", "waker", "outbox")

    def __init__(self, sender: _Sender, waker: _Waker, outbox: _Outbox) -> None:
        self.sender = sender
        self.waker = waker
        self.outbox = outbox
        self.connection: ServedConnection | None = None

    def notify(self) -> None:
        """The broker queued output here: write it with the reader's pass, else wake the writer."""
        if self.outbox.reading:
            self.outbox.ready.append(self)
        else:
            self.waker.set()

    def write_now(self) -> None:
        connection = self.connection
        if connection is None or not connection.open:
            # Dropped or closed by what another connection's read did (a fault, a reset): its
            # writer sends what was queued before, then ends the socket.
            self.waker.set()
            return
        output = connection.data_to_send()
        if output and not self.sender.write_nowait(output):
            self.waker.set()  # the socket is full (or failed): the writer task takes it from here


def stop(broker: Broker, scope: trio.CancelScope) -> None:
    """Stop serving: every connection gets a ``close`` (flushed while the tasks wind down), then ``scope`` is cancelled."""
    broker.close_connections()
    clear_header_cache()
    scope.cancel()


def listen(host: str = DEFAULT_HOST, port: int = 0, *, ssl_context: ssl.SSLContext | None = None) -> socket.socket:
    """A non-blocking listening socket on ``host:port`` (port 0: a free one), for :func:`serve`.

    Synchronous, so an owner in another thread can bind first and learn the port (or why
    not, as an ``OSError``) at once, while its trio run is still starting: connections made
    meanwhile wait in the listen backlog.  Warns (``ExposedBrokerWarning``) for a non-loopback host.
    """
    family, kind, proto, _name, address = socket.getaddrinfo(_numeric(host), port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(128)
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    if not _is_loopback(host):
        warnings.warn(
            f"minibroker is bound to {host!r}, reachable from other machines"
            f"{'' if ssl_context is not None else ' without TLS'}; bind 127.0.0.1 unless you mean it",
            ExposedBrokerWarning,
            stacklevel=3,  # the caller of serve() or of ThreadedBroker.start()
        )
    return listener


async def serve(
    broker: Broker,
    host: str = DEFAULT_HOST,
    port: int = 0,
    *,
    ssl_context: ssl.SSLContext | None = None,
    listener: socket.socket | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve AMQP on ``host:port`` until cancelled; reports the bound port through ``task_status``.

    With ``ssl_context`` every connection is TLS (``amqps``, see :mod:`.tls`).  ``listener``: a
    socket :func:`listen` bound already (``host`` and ``port`` are then not used); it is served
    and closed as one bound here would be.
    """
    if listener is None:
        listener = listen(host, port, ssl_context=ssl_context)
    family = listener.family
    try:
        bound = listener.getsockname()[1]
        outbox = _Outbox()
        handshakes = _Handshakes(broker.config.max_handshakes)
        async with trio.open_nursery() as nursery:
            if not broker.clock.stepped:  # a stepped clock runs the timers itself, when it is advanced
                nursery.start_soon(_run_timers, broker)
            task_status.started(bound)
            while True:
                await trio.lowlevel.wait_readable(listener)
                try:
                    sock, peer = listener.accept()
                except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                    continue
                except OSError:  # e.g. out of file descriptors: keep serving the others
                    await trio.sleep(0.05)
                    continue
                sock.setblocking(False)
                if family in (socket.AF_INET, socket.AF_INET6):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if ssl_context is not None:
                    nursery.start_soon(
                        _serve_tls, broker, ssl_context, sock, f"{peer[0]}:{peer[1]}", outbox, handshakes
                    )
                else:
                    nursery.start_soon(_serve_connection, broker, sock, f"{peer[0]}:{peer[1]}", outbox, handshakes)
    finally:
        listener.close()


async def _run_timers(broker: Broker) -> None:
    """Wake when the next message expires (or a transaction times out) and let the broker act."""
    waker = _Waker()
    broker.timer_watchers.append(waker.set)
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
        broker.timer_watchers.remove(waker.set)


async def _serve_tls(
    broker: Broker, context: ssl.SSLContext, raw: socket.socket, peer: str, outbox: _Outbox, handshakes: _Handshakes
) -> None:
    """Handshake, then serve as plain; a failed handshake only closes the socket (no broker state yet)."""
    try:
        sock = wrap(context, raw)
    except OSError:
        raw.close()
        return
    if await handshake(sock):
        await _serve_connection(broker, sock, peer, outbox, handshakes)
    else:
        sock.close()


async def _serve_connection(
    broker: Broker, sock: socket.socket, peer: str, outbox: _Outbox, handshakes: _Handshakes
) -> None:
    """Read and write one connection; until its ``open`` it counts among the ``handshakes``.

    The reader sends the replies to what it just read itself, so a request
    costs one task wake-up; the writer task sends only what other
    connections' traffic produced for this one (a message routed here) and
    runs the idle-timeout ticks.
    """
    waker = _Waker()
    sender = _Sender(sock)
    channel = _Channel(sender, waker, outbox)
    # An AMQP 1.0 connection until its protocol header says otherwise: counted, and its handshake
    # clock started, from the moment it is accepted, whatever protocol it turns out to speak.
    initial = broker.connect(channel.notify, peer)
    initial.tick(trio.current_time())
    connection: ServedConnection = initial
    with trio.CancelScope() as evicted:  # cancelled when newer handshakes push this one out
        handshakes.admit(evicted, connection)
        try:
            try:
                first = await _protocol_header(sock, broker.config.handshake_timeout)
            except BaseException:  # evicted, or the server stopping, before a header came
                initial.release()
                sock.close()
                raise
            if len(first) >= HEADER_SIZE:
                # Looked at once per connection: the header names the front end that serves it.
                connection = broker.accept(initial, first[:HEADER_SIZE])
                handshakes.admit(evicted, connection)
            channel.connection = sender.connection = connection
            connection.transport_backlog = 0
            sender.waker = waker
            await _run_connection(broker, connection, sock, sender, waker, outbox, first)
        finally:
            handshakes.discard(evicted)


async def _protocol_header(sock: socket.socket, timeout: float | None) -> bytes:
    """The first bytes of a connection, at least its 8-byte protocol header; fewer if the peer
    closed or sent no whole header within ``timeout`` seconds (the handshake time-out: the
    AMQP 1.0 connection they are then given closes at its first tick, as it would have)."""
    data = b""
    with trio.move_on_after(math.inf if timeout is None else timeout):
        while len(data) < HEADER_SIZE:
            try:
                chunk = sock.recv(READ_SIZE)
            except WOULD_BLOCK_READ:
                await trio.lowlevel.wait_readable(sock)
                continue
            except ssl.SSLWantWriteError:
                await trio.sleep(0.001)
                continue
            except OSError:
                return data
            if not chunk:
                return data
            data += chunk
    return data


async def _run_connection(
    broker: Broker,
    connection: ServedConnection,
    sock: socket.socket,
    sender: _Sender,
    waker: _Waker,
    outbox: _Outbox,
    first: bytes,
) -> None:
    peer_closed = False
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write, connection, sender, waker, nursery.cancel_scope)
            try:
                peer_closed = await _read(connection, sock, sender, waker, outbox, broker.logins, first)
            except OSError:
                peer_closed = True  # reset by the peer: handled as a lost connection below
            # The peer is gone (or we closed): end its links now, so what it held goes back at
            # once rather than after the writer's grace period below.
            connection.connection_lost()
            waker.set()
            nursery.cancel_scope.deadline = trio.current_time() + CLOSE_GRACE  # let the writer flush a close
    except* trio.Cancelled:
        peer_closed = True  # the server is stopping: no lingering
        raise
    except* Exception as group:  # a bug here must cost this connection only, never the server
        broker.errors.extend(exc for exc in group.exceptions if isinstance(exc, Exception))
    finally:
        connection.release()  # its buffers go now, not at the next collection of its reference cycles
        sender.discard()
        if not peer_closed:
            await _linger(sock)
        sock.close()


async def _linger(sock: socket.socket) -> None:
    """Half-close and drain what the peer still sends, so it reads our close rather than a reset."""
    with trio.CancelScope(shield=True), trio.move_on_after(LINGER):
        try:
            if isinstance(sock, ssl.SSLSocket):
                close_notify(sock)
            sock.shutdown(socket.SHUT_WR)
            while True:
                try:
                    if not sock.recv(READ_SIZE):
                        return
                except WOULD_BLOCK_READ:
                    await trio.lowlevel.wait_readable(sock)
        except OSError:
            return


async def _read(
    connection: ServedConnection,
    sock: socket.socket,
    sender: _Sender,
    waker: _Waker,
    outbox: _Outbox,
    logins: LoginGuard,
    first: bytes,
) -> bool:
    """Feed the connection until it is finished (False) or the peer closes its side (True).

    ``first`` is what was read before the connection was built (its protocol header and
    whatever came with it).  Output the bytes produced for other connections goes out first
    (:class:`_Outbox`), then this connection's own.
    """
    handled = 0
    drained = False
    pending = first
    # A short plain read took all the kernel had; TLS may still hold decrypted bytes, so it always reads on.
    plain = not isinstance(sock, ssl.SSLSocket)
    protocol = connection.protocol
    fd = sock.fileno()  # trio takes the number: asked once, not per wait
    # Once per connection: an address that guessed passwords has its PLAIN logins judged in turn.
    protocol.hold_logins = logins.penalised(_address(connection.peer), trio.current_time())
    while not connection.finished:
        if pending:  # the protocol header's read, handed over once
            data, pending = pending, b""
        else:
            if drained:  # the last read took all there was: wait rather than try a read that fails
                handled = 0
                await trio.lowlevel.wait_readable(fd)
            try:
                data = sock.recv(READ_SIZE)
            except WOULD_BLOCK_READ:
                drained = True
                continue
            except ssl.SSLWantWriteError:  # TLS wants to write first (e.g. a key update): rare, never plain
                await trio.sleep(0.001)
                continue
            if not data:
                return True
        drained = plain and len(data) < READ_SIZE
        if not await _handle(connection, data, sender, outbox, logins):
            return True  # cut off unanswered: closed at once, as if the peer had gone (no lingering)
        while protocol.read_paused and not connection.finished:
            # An AMQP 0-9-1 publisher blocked by the broker's alarm: not read until it clears
            # (RabbitMQ's blocked connections); the writer still sends it what it is owed.
            await trio.sleep(PAUSED_POLL)
        if protocol.login_failed:
            logins.failed(_address(connection.peer), trio.current_time())
        waker.clear()  # everything queued for this connection has been handed to the sender
        if sender.backlog > HIGH_WATER:
            await sender.wait_drained()
        handled += 1
        if handled >= FAIRNESS_BATCH:
            handled = 0
            await trio.lowlevel.checkpoint()
    return False


async def _handle(
    connection: ServedConnection, data: bytes, sender: _Sender, outbox: _Outbox, logins: LoginGuard
) -> bool:
    """Hand one read to ``connection`` in passes, writing what each pass made: the lead frame of a
    short read alone first (``LEAD_READ``), then at most ``FRAMES_PER_PASS`` frames a pass, others
    running between passes.  False if the connection was cut off while its login waited its turn."""
    protocol = connection.protocol
    frames = 1 if len(data) <= LEAD_READ else FRAMES_PER_PASS
    while True:
        outbox.reading = True
        try:
            connection.receive_data(data, frames)
        finally:
            outbox.reading = False
        if protocol.login_held:
            output = connection.data_to_send()  # sasl-mechanisms go out before the wait
            if output:
                await sender.send(output)
            if not await _wait_turn(logins, connection):
                return False
            data = b""
            continue  # its login is judged now
        if outbox.ready:
            outbox.flush(connection)
        if frames == 1:
            # The lead frame of a short read is handled and what it routed is written: the rest now.
            frames = FRAMES_PER_PASS
            if protocol.backlogged:
                data = b""
                continue
        output = connection.data_to_send()
        if output and not sender.write_nowait(output):
            await sender.send(b"")  # what the socket did not take now: written as it drains
        if not protocol.backlogged or connection.finished:
            return True
        data = b""
        await trio.lowlevel.checkpoint()  # others run between batches of this peer's frames


def _address(peer: str) -> str:
    """The host of a ``host:port`` peer name (IPv6 hosts have colons of their own)."""
    return peer.rpartition(":")[0] or peer


async def _wait_turn(logins: LoginGuard, connection: ServedConnection) -> bool:
    """A held PLAIN login (its address guessed passwords, broker/logins.py): wait its turn, then let
    the protocol judge it; False when the turn is too far away and it is to be closed unanswered."""
    wait = logins.turn(_address(connection.peer), trio.current_time())
    if wait is None:
        return False
    if wait > 0:
        await trio.sleep(wait)
    connection.protocol.hold_logins = connection.protocol.login_held = False
    return True


async def _write(connection: ServedConnection, sender: _Sender, waker: _Waker, scope: trio.CancelScope) -> None:
    """Send output produced by other connections' traffic; run idle-timeout ticks."""
    try:
        while True:
            if connection.throttled and sender.backlog <= LOW_WATER:
                connection.output_drained()  # its consumers send again, up to HIGH_WATER
            deadline = connection.tick(trio.current_time())
            output = connection.data_to_send()
            if output or sender.backlog:
                await sender.send(output)
            if connection.finished:
                if not sender.backlog:
                    break
                # A peer that stopped reading gets CLOSE_GRACE seconds to take our close.
                scope.deadline = min(scope.deadline, trio.current_time() + CLOSE_GRACE)
            await waker.wait(deadline if deadline is not None else math.inf)
    except OSError:
        pass
    scope.cancel()
