"""Helpers for the python-qpid-proton interop tests (``test_proton_wire.py``, ``test_proton_core.py``).

Two client styles are used against a :class:`minibroker.ThreadedBroker` over a
loopback socket:

* :func:`connect` opens a ``proton.utils.BlockingConnection`` and always
  closes it; :func:`pump_until` keeps its event loop turning (so queued
  dispositions reach the broker) until a broker-side condition holds.
* :func:`run_container` runs an event-driven ``proton.reactor.Container`` in the
  calling thread under a watchdog timer, for handlers derived from
  :class:`ContainerClient`, which close their connection when done.

Every wait is bounded.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from proton import Delivery, Message, Timeout
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton.utils import BlockingConnection, BlockingReceiver

import minibroker

#: Seconds any single client-side wait may take before the test fails.
TIMEOUT = 10.0


@contextmanager
def connect(broker: minibroker.ThreadedBroker, **kwargs: Any) -> Iterator[BlockingConnection]:
    """A blocking proton connection to the broker (``kwargs`` go to ``Container.connect``)."""
    kwargs.setdefault("timeout", TIMEOUT)
    connection = BlockingConnection(broker.url, **kwargs)
    try:
        yield connection
    finally:
        try:
            connection.close()
        except Exception:  # the test's own failure (if any) matters more than a failed close
            pass


def pump_until(connection: BlockingConnection, condition: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    """Run the connection's event loop until ``condition()`` is truthy (evaluated between turns)."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"pump_until: {getattr(condition, '__name__', condition)!r} still false after {timeout} s"
            )
        try:
            connection.wait(lambda: False, timeout=0.02)
        except Timeout:
            pass


def receive(
    receiver: BlockingReceiver, count: int, *, accept: bool = True, timeout: float = TIMEOUT
) -> list[Message]:
    """Receive ``count`` messages (accepting each unless ``accept=False``)."""
    messages = []
    for _ in range(count):
        messages.append(receiver.receive(timeout=timeout))
        if accept:
            receiver.accept()
    return messages


def settle_next(
    receiver: BlockingReceiver, state: int, *, failed: bool = False, undeliverable: bool = False
) -> None:
    """Settle the oldest unsettled delivery of a blocking receiver with ``state``.

    ``BlockingReceiver.release(delivered=True)`` sends ``modified`` with
    delivery-failed unset; this sets the flags explicitly.
    """
    delivery = receiver.fetcher.unsettled.popleft()
    if state == Delivery.MODIFIED:
        delivery.local.failed = failed
        delivery.local.undeliverable = undeliverable
    delivery.update(state)
    delivery.settle()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ----------------------------------------------------------- event-driven client


class _Watchdog:
    def __init__(self, client: ContainerClient) -> None:
        self.client = client

    def on_timer_task(self, event: Any) -> None:
        self.client.timed_out = True
        event.container.stop()


class ContainerClient(MessagingHandler):  # type: ignore[misc]
    """A ``MessagingHandler`` run by :func:`run_container`.

    Subclasses open what they need in ``on_start`` (call ``super().on_start``
    first, and :meth:`connect` for the connection) and call :meth:`done` when
    finished: it closes the connection and cancels the watchdog, so the
    container's ``run()`` returns by itself.
    """

    def __init__(self, url: str, timeout: float = 20.0, **handler_options: Any) -> None:
        super().__init__(**handler_options)
        self.url = url
        self.timeout = timeout
        self.timed_out = False
        self.finished = False
        self.connection: Any = None
        self.transport_errors: list[str] = []
        self.link_errors: list[str] = []
        self.connection_errors: list[str] = []
        self._watchdog: Any = None

    def connect(self, container: Container, **kwargs: Any) -> Any:
        kwargs.setdefault("reconnect", False)
        self.connection = container.connect(self.url, **kwargs)
        return self.connection

    def on_start(self, event: Any) -> None:
        self._watchdog = event.container.schedule(self.timeout, _Watchdog(self))

    def done(self) -> None:
        if self.finished:
            return
        self.finished = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self.connection is not None:
            self.connection.close()

    def on_transport_error(self, event: Any) -> None:
        condition = event.transport.condition
        self.transport_errors.append(
            f"{condition.name}: {condition.description}" if condition else "transport error"
        )
        self.done()

    def on_connection_error(self, event: Any) -> None:
        condition = event.connection.remote_condition
        self.connection_errors.append(f"{condition.name}: {condition.description}" if condition else "closed")
        self.done()

    def on_link_error(self, event: Any) -> None:
        condition = event.link.remote_condition
        self.link_errors.append(f"{condition.name}: {condition.description}" if condition else "detached")
        self.done()


Client = TypeVar("Client", bound="ContainerClient")


def run_container(client: Client) -> Client:
    """Run ``client`` in a fresh container in this thread; fail if its watchdog fired.

    The watchdog bounds the run (``client.timeout``); how long a run that finished took is not
    checked, since a loaded machine may take longer and still be right.
    """
    container = Container(client)
    # Container.run() with a short select timeout, so a cancelled watchdog is
    # noticed at once rather than after run()'s default 3.14 s.
    container.timeout = 0.1
    container.start()
    while container.process():
        pass
    container.stop()
    container.process()
    if client.timed_out:
        raise AssertionError(
            f"{type(client).__name__} did not finish within {client.timeout} s "
            f"(transport errors {client.transport_errors}, link errors {client.link_errors})"
        )
    return client
