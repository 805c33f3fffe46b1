"""``serve()`` under its own cancel scope, so a broker can be restarted on the same port.

A restart is what a test of reconnection logic needs from a real broker going
down and up again: every socket goes at once (no ``close`` frame: the peer sees
the transport end), the listener comes back on the same port, and only durable
messages survive ("Durable messages MUST NOT be lost even if an intermediary is
unexpectedly terminated and restarted", AMQP 1.0 Part 3 §3.2.1).  Deliveries
that were acquired but unsettled return to their queue first (as for any lost
connection, §3.4.5), so a durable one is delivered again after the restart.
Nodes, counters and durable subscriptions stay; non-durable subscriptions and
dynamic nodes ended with their links; open transactions were rolled back.
"""

from __future__ import annotations

import socket
import ssl

import trio

from .amqp import errors as conditions
from .amqp.performatives import amqp_error
from .broker.engine import Broker
from .server import CLOSE_GRACE, serve

__all__ = ["RestartableServer"]

#: How often a graceful restart looks whether every connection has sent its close (seconds).
GRACEFUL_POLL = 0.005


class RestartableServer:
    """One ``serve()`` task at a time for ``broker``, started in a nursery the owner keeps."""

    def __init__(self, broker: Broker, host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self._scope: trio.CancelScope | None = None
        self._done = trio.Event()

    async def start(self, nursery: trio.Nursery, listener: socket.socket | None = None) -> int:
        """Bind (or take ``listener``, bound by ``server.listen``) and serve in ``nursery``; returns
        the bound port (the same one on a restart, which binds it again)."""
        self.port = await nursery.start(self._serve, listener)
        return self.port

    async def _serve(
        self, listener: socket.socket | None, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
    ) -> None:
        done = self._done = trio.Event()
        try:
            with trio.CancelScope() as self._scope:
                await serve(
                    self.broker, self.host, self.port, ssl_context=self.ssl_context, listener=listener,
                    task_status=task_status,
                )  # fmt: skip
        finally:
            done.set()

    async def stop(self) -> None:
        """Drop every connection (sockets closed, no ``close`` frame) and close the listener."""
        if self._scope is not None:
            self._scope.cancel()
            await self._done.wait()
            self._scope = None

    @property
    def url(self) -> str:
        """``amqp://HOST:PORT``, or ``amqps://`` when serving TLS."""
        return f"{'amqp' if self.ssl_context is None else 'amqps'}://{self.host}:{self.port}"

    async def restart(self, nursery: trio.Nursery, graceful: bool = False) -> None:
        """Stop, lose non-durable messages, serve again on the same port.

        ``graceful``: every connection gets ``close`` with ``amqp:connection:forced`` first, as a
        broker shutting down in order sends it (Part 2 §2.4.3, §2.8.15), instead of the crash's
        bare end of the socket.
        """
        if graceful:
            broker = self.broker
            broker.close_connections(amqp_error(conditions.CONNECTION_FORCED, "the broker is restarting; reconnect"))
            broker.flush()
            # Each connection's writer sends its close and then ends the connection; a peer that
            # does not read gets no more than the server's grace for a close.
            with trio.move_on_after(CLOSE_GRACE):
                while broker.connection_count:
                    await trio.sleep(GRACEFUL_POLL)
        await self.stop()
        self.broker.drop_transient()
        await self.start(nursery)
