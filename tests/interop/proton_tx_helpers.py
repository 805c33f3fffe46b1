"""Drive python-qpid-proton's event-driven API step by step from a test thread.

:class:`ProtonClient` runs a :class:`proton.reactor.Container` (one connection)
in a background thread.  The test thread asks it to do things with
:meth:`ProtonClient.call`, which hands a function to the container thread
through an :class:`proton.reactor.EventInjector` and returns its result, so
every proton object is only ever touched on the container's own thread.
Transactions use proton's own API (``Container.declare_transaction``,
``Transaction.send/accept/commit/abort``); their callbacks
(``on_transaction_declared`` ...) complete futures the test thread waits on.

Every wait is bounded by ``timeout`` seconds.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from proton import Array, Condition, Delivery, Message, Terminus
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import ApplicationEvent, Container, EventInjector, LinkOption, Transaction

__all__ = ["Discharge", "ProtonClient", "Received", "TxHandle"]

T = TypeVar("T")

#: Proton's number for the ``accepted`` outcome (``amqp:accepted:list``, 0x24).
PN_ACCEPTED = 0x24


@dataclass
class Discharge:
    """How proton reported a discharge: ``committed``, ``aborted`` or ``commit_failed``."""

    result: str
    condition: str | None = None
    description: str | None = None


@dataclass
class Received:
    """A message proton delivered, with its (container-thread-only) delivery."""

    message: Message
    delivery: Delivery
    link_name: str

    @property
    def body(self) -> Any:
        return self.message.body


class TxHandle:
    """One proton :class:`Transaction` and the futures its handler callbacks complete."""

    def __init__(self) -> None:
        self.txn: Transaction | None = None
        self.declared: Future[Transaction] = Future()
        self.discharged: Future[Discharge] = Future()

    @property
    def id(self) -> bytes:
        assert self.txn is not None and self.txn.id is not None
        return bytes(self.txn.id)


class _Handler(MessagingHandler, TransactionHandler):  # type: ignore[misc]
    def __init__(self, client: ProtonClient) -> None:
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.client = client

    # -- container-thread plumbing
    def on_start(self, event: Any) -> None:
        client = self.client
        client.container = event.container
        event.container.selectable(client.injector)
        client.connection = event.container.connect(client.url)

    def on_run_calls(self, event: Any) -> None:
        while True:
            try:
                fn, args, future = self.client.calls.get_nowait()
            except queue.Empty:
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to the test thread
                future.set_exception(exc)

    # -- endpoints
    def on_connection_opened(self, event: Any) -> None:
        _resolve(self.client.opened, True)

    def on_link_opened(self, event: Any) -> None:
        link = event.link
        # A refusal is an attach with a null terminus followed by a detach with the error
        # (Part 2 §2.6.3): wait for on_link_error then.
        terminus = link.remote_source if link.is_receiver else link.remote_target
        if terminus.type == Terminus.UNSPECIFIED:
            return
        future = self.client.links.get(link.name)
        if future is not None:
            _resolve(future, link)

    def on_link_error(self, event: Any) -> None:
        link = event.link
        condition = link.remote_condition
        self.client.link_errors.append((link.name, condition))
        future = self.client.links.get(link.name)
        if future is not None and not future.done():
            future.set_exception(
                LinkRefused(
                    link.name,
                    condition.name if condition else None,
                    condition.description if condition else None,
                )
            )
        link.close()

    def on_transport_error(self, event: Any) -> None:
        condition = event.transport.condition
        self.client.transport_errors.append(condition)
        if not self.client.opened.done():
            self.client.opened.set_exception(ConnectionError(f"proton transport error: {condition}"))

    # -- messages
    def on_message(self, event: Any) -> None:
        self.client.incoming.put(Received(event.message, event.delivery, event.link.name))

    def on_settled(self, event: Any) -> None:
        self.client.settled.append(event.delivery)

    # -- transactions
    def _handle(self, event: Any) -> TxHandle | None:
        return self.client.transactions.get(id(event.transaction))

    def on_transaction_declared(self, event: Any) -> None:
        handle = self._handle(event)
        if handle is not None:
            _resolve(handle.declared, event.transaction)

    def on_transaction_declare_failed(self, event: Any) -> None:
        handle = self._handle(event)
        if handle is not None and not handle.declared.done():
            handle.declared.set_exception(RuntimeError(f"declare failed: {event.delivery.remote.condition}"))

    def _discharged(self, event: Any, result: str) -> None:
        handle = self._handle(event)
        if handle is None:
            return
        condition = event.delivery.remote.condition
        outcome = Discharge(
            result, condition.name if condition else None, condition.description if condition else None
        )
        _resolve(handle.discharged, outcome)

    def on_transaction_committed(self, event: Any) -> None:
        self._discharged(event, "committed")

    def on_transaction_aborted(self, event: Any) -> None:
        self._discharged(event, "aborted")

    def on_transaction_commit_failed(self, event: Any) -> None:
        self._discharged(event, "commit_failed")


def _resolve(future: Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


class LinkRefused(Exception):
    """The broker answered a link attach with a detach carrying an error."""

    def __init__(self, name: str, condition: str | None, description: str | None) -> None:
        super().__init__(f"link {name!r} refused: {condition}: {description}")
        self.condition = condition
        self.description = description


class ProtonClient:
    """One proton connection on its own container thread, scripted from the test thread.

    ::

        with ProtonClient(broker.url) as client:
            sender = client.sender("q")
            txn = client.declare()
            client.send(txn, sender, ["a", "b"])
            assert client.commit(txn).result == "committed"
    """

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url
        self.timeout = timeout
        self.injector = EventInjector()
        self.calls: queue.Queue[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]]] = queue.Queue()
        self.incoming: queue.Queue[Received] = queue.Queue()
        self.opened: Future[bool] = Future()
        self.links: dict[str, Future[Any]] = {}
        self.link_errors: list[tuple[str, Any]] = []
        self.transport_errors: list[Any] = []
        self.settled: list[Delivery] = []
        self.transactions: dict[int, TxHandle] = {}
        self.container: Container | None = None
        self.connection: Any = None
        self._links = 0
        self._handler = _Handler(self)
        self._thread = threading.Thread(target=self._run, name="proton-client", daemon=True)
        self._failure: BaseException | None = None

    # ----------------------------------------------------------- lifecycle

    def _run(self) -> None:
        try:
            Container(self._handler).run()
        except BaseException as exc:  # reported by close()
            self._failure = exc
            for future in [self.opened, *self.links.values()]:
                if not future.done():
                    future.set_exception(exc)

    def __enter__(self) -> ProtonClient:
        self._thread.start()
        self.opened.result(self.timeout)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection and stop the container thread (bounded)."""
        if not self._thread.is_alive():
            return
        try:
            self.call(self._close_connection)
        except Exception:
            pass
        self.injector.close()
        self._thread.join(self.timeout)
        if self._thread.is_alive():
            raise TimeoutError("the proton container thread did not stop")
        if self._failure is not None:
            raise RuntimeError("the proton container failed") from self._failure

    def _close_connection(self) -> None:
        if self.connection is not None:
            self.connection.close()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the container thread and return its result."""
        future: Future[T] = Future()
        self.calls.put((fn, args, future))
        self.injector.trigger(ApplicationEvent("run_calls"))
        return future.result(self.timeout)

    # --------------------------------------------------------------- links

    def _next_name(self, kind: str) -> str:
        self._links += 1
        return f"{kind}-{self._links}"

    def sender(self, address: str) -> Any:
        """Attach a sending link to ``address``; returns once the broker has answered."""
        name = self._next_name("sender")
        future: Future[Any] = Future()
        self.links[name] = future
        self.call(lambda: self.container.create_sender(self.connection, address, name=name))  # type: ignore[union-attr]
        return future.result(self.timeout)

    def receiver(
        self, address: str, credit: int = 0, options: LinkOption | list[LinkOption] | None = None
    ) -> Any:
        """Attach a receiving link (no credit unless ``credit``); returns once the broker has answered."""
        name = self._next_name("receiver")
        future: Future[Any] = Future()
        self.links[name] = future

        def create() -> None:
            receiver = self.container.create_receiver(self.connection, address, name=name, options=options)  # type: ignore[union-attr]
            if credit:
                receiver.flow(credit)

        self.call(create)
        return future.result(self.timeout)

    def flow(self, receiver: Any, credit: int) -> None:
        self.call(receiver.flow, credit)

    def close_link(self, link: Any) -> None:
        """Detach (close) a link and wait until the broker has answered the detach."""
        self.call(link.close)
        self.wait(lambda: not (link.state & link.REMOTE_ACTIVE), f"detach of {link.name}")

    def wait(self, predicate: Callable[[], Any], what: str) -> None:
        """Poll ``predicate`` on the container thread until true (bounded by ``timeout``)."""
        deadline = time.monotonic() + self.timeout
        while not self.call(predicate):
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            time.sleep(0.005)

    def receive(self, count: int = 1, timeout: float | None = None) -> list[Received]:
        """The next ``count`` messages proton delivered (raises ``queue.Empty`` after ``timeout``)."""
        return [self.incoming.get(timeout=self.timeout if timeout is None else timeout) for _ in range(count)]

    def send(self, sender: Any, message: Message) -> Delivery:
        """A non-transactional send (not waited for)."""
        return self.call(sender.send, message)

    def settle(
        self,
        delivery: Delivery,
        state: int | None = None,
        condition: Condition | None = None,
        *,
        failed: bool = False,
        undeliverable: bool = False,
    ) -> None:
        """Update a received delivery to ``state`` (if any) and settle it; ``condition`` is a
        rejected outcome's error, ``failed``/``undeliverable`` a modified outcome's flags."""

        def do() -> None:
            if condition is not None:
                delivery.local.condition = condition
            delivery.local.failed = failed
            delivery.local.undeliverable = undeliverable
            if state is not None:
                delivery.update(state)
            delivery.settle()

        self.call(do)

    def is_settled(self, delivery: Delivery) -> bool:
        return self.call(lambda: bool(delivery.settled))

    def remote_state(self, delivery: Delivery) -> Any:
        return self.call(lambda: delivery.remote_state)

    # -------------------------------------------------------- transactions

    def declare(self, settle_before_discharge: bool = False) -> TxHandle:
        """``Container.declare_transaction`` and wait for ``on_transaction_declared``."""
        handle = TxHandle()

        def declare() -> None:
            txn = self.container.declare_transaction(  # type: ignore[union-attr]
                self.connection, handler=self._handler, settle_before_discharge=settle_before_discharge
            )
            handle.txn = txn
            self.transactions[id(txn)] = handle

        self.call(declare)
        handle.declared.result(self.timeout)
        return handle

    def tx_send(self, handle: TxHandle, sender: Any, messages: Iterable[Message]) -> list[Delivery]:
        """``Transaction.send`` each message on ``sender``."""
        batch = list(messages)
        return self.call(lambda: [handle.txn.send(sender, m) for m in batch])  # type: ignore[union-attr]

    def tx_accept(self, handle: TxHandle, delivery: Delivery) -> None:
        """``Transaction.accept``: transactional accepted, settled now or released on abort as proton does."""
        self.call(handle.txn.accept, delivery)  # type: ignore[union-attr]

    def tx_accept_unsettled(self, handle: TxHandle, delivery: Delivery) -> None:
        """``Transaction.update(delivery, ACCEPTED)``: the transactional accept alone, kept unsettled
        and not in proton's pending list (so an abort does not make proton release it)."""
        self.call(handle.txn.update, delivery, PN_ACCEPTED)  # type: ignore[union-attr]

    def _discharge(self, handle: TxHandle, fail: bool) -> Discharge:
        future: Future[Discharge] = Future()
        handle.discharged = future  # a fresh one: a transaction may be discharged twice
        self.call(handle.txn.abort if fail else handle.txn.commit)  # type: ignore[union-attr]
        return future.result(self.timeout)

    def commit(self, handle: TxHandle) -> Discharge:
        """``Transaction.commit`` and wait for proton's committed / commit-failed callback."""
        return self._discharge(handle, fail=False)

    def abort(self, handle: TxHandle) -> Discharge:
        """``Transaction.abort`` and wait for proton's aborted callback."""
        return self._discharge(handle, fail=True)

    def coordinator_capabilities(self) -> list[str]:
        """The capabilities the broker's coordinator terminus offered in its attach."""

        def read() -> list[str]:
            ctrl = self.connection._txn_ctrl
            data = ctrl.remote_target.capabilities
            data.rewind()
            found: list[str] = []
            while data.next():
                value = data.get_object()
                items = (
                    value.elements
                    if isinstance(value, Array)
                    else value
                    if isinstance(value, list)
                    else [value]
                )
                found.extend(str(v) for v in items)
            return found

        return self.call(read)
