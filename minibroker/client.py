"""A small blocking AMQP 1.0 client on minibroker's own codec and plain sockets.

It speaks the transport of OASIS AMQP 1.0 Part 2 (one session, links with
credit, §2.6.7; settlement, §2.6.12) with SASL ANONYMOUS or PLAIN (Part 5
§5.3) and the delivery outcomes of Part 3 §3.4.  It needs nothing beyond the
standard library and :mod:`minibroker.amqp`, so it runs wherever minibroker
is installed (for example on Spark executors)::

    from minibroker import Client

    with Client("amqp://127.0.0.1:5672", timeout=5) as client:
        with client.sender("orders") as sender:
            sender.send({"id": 1})                 # returns once the broker accepted it
        with client.receiver("orders") as receiver:
            delivery = receiver.receive()          # waits up to the timeout
            print(delivery.message.body)
            delivery.accept()

Every call that waits takes ``timeout=`` (seconds; default: the client's) and
raises :class:`ClientTimeout` when it runs out.  A client is not thread-safe:
use one per thread.
"""

from __future__ import annotations

import datetime as dt
import selectors
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

from .amqp.message import Message, decode_message
from .amqp.messaging import Accepted, Modified, Rejected, Released
from .amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    SND_SETTLED,
    SND_UNSETTLED,
    Attach,
    Close,
    Detach,
    Disposition,
    End,
    Error,
    Flow,
    Transfer,
)
from .amqp.sasl_frames import SaslOutcome
from .amqp.types import Described, symbol, timestamp
from .message_fields import build_message
from .protocol.framing import EMPTY_FRAME
from .protocol.peer import Frame, FrameReader, Peer, PeerLink
from .protocol.transfers import DeliverySink

__all__ = [
    "Client", "ClientError", "ClientTimeout", "ConnectionFailed", "ConnectionClosed", "Delivery",
    "DeliveryFailed", "LinkDetached", "Receiver", "Sender", "parse_url", "stream_offset",
]  # fmt: skip

DEFAULT_PORT = 5672
#: The IANA port of AMQP over TLS (``amqps``, Part 5 §5.2.1).
DEFAULT_TLS_PORT = 5671
#: The source filter RabbitMQ 4 streams read from (and its value's descriptor), and the annotation
#: that carries each delivery's offset (see docs/streams.md).
STREAM_OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")
STREAM_OFFSET = symbol("x-stream-offset")
#: About how many bytes of frames :meth:`Sender.send_many` writes at a time.
SEND_BYTES = 64 * 1024


class ClientError(Exception):
    """Base class of the client's errors."""


class ConnectionFailed(ClientError):
    """The broker could not be reached, or refused the SASL handshake (Part 5 §5.3.3.6)."""


class ConnectionClosed(ClientError):
    """The broker closed the connection (§2.7.9) or the socket ended; ``condition`` names the error."""

    def __init__(self, message: str, condition: str | None = None) -> None:
        super().__init__(message)
        self.condition = condition


class LinkDetached(ClientError):
    """The broker refused or detached a link (§2.6.3, §2.7.7); ``condition`` names the error."""

    def __init__(self, message: str, condition: str | None = None) -> None:
        super().__init__(message)
        self.condition = condition


class DeliveryFailed(ClientError):
    """The broker did not accept a message: ``outcome`` is ``"rejected"``, ``"released"`` or ``"modified"``
    (Part 3 §3.4.3-§3.4.5); ``condition``/``description`` carry a rejection's error."""

    def __init__(self, outcome: str, condition: str | None, description: str | None, address: str | None) -> None:
        detail = f": {condition}" if condition else ""
        detail += f" ({description})" if description else ""
        super().__init__(f"the broker {outcome} the message sent to {address!r}{detail}")
        self.outcome = outcome
        self.condition = condition
        self.description = description


class ClientTimeout(ClientError, TimeoutError):
    """A call waited longer than its timeout."""


def parse_url(url: str) -> tuple[str, int, str | None, str | None]:
    """``amqp[s]://[user:password@]host[:port]`` as ``(host, port, user, password)``; the port
    defaults to 5672 (``amqp``) or 5671 (``amqps``, Part 5 §5.2.1)."""
    if not isinstance(url, str):
        raise TypeError(f"the broker URL must be a str like amqp://127.0.0.1:5672, got {url!r}")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("amqp", "amqps") or not parts.hostname:
        raise ValueError(f"expected a URL like amqp://127.0.0.1:5672 or amqps://127.0.0.1:5671, got {url!r}")
    user = urllib.parse.unquote(parts.username) if parts.username else None
    password = urllib.parse.unquote(parts.password) if parts.password else None
    default = DEFAULT_TLS_PORT if parts.scheme == "amqps" else DEFAULT_PORT
    return parts.hostname, parts.port or default, user, password


def as_message(value: Any) -> Message:
    """A :class:`Message` as is; ``bytes`` as a data body (§3.2.6); anything else as an amqp-value body."""
    if isinstance(value, Message):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Message(body=bytes(value), body_kind="data")
    return build_message(value)


def stream_offset(message: Message) -> int | None:
    """A message's offset in a stream (its ``x-stream-offset`` annotation, an integer), else None."""
    annotations = message.message_annotations
    value = annotations.get(STREAM_OFFSET) if annotations else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Delivery:
    """A message received on a :class:`Receiver`; settle it with :meth:`accept`, :meth:`release`,
    :meth:`reject` or :meth:`modify` (Part 3 §3.4), unless it arrived settled (browsing)."""

    __slots__ = ("_receiver", "delivery_id", "payload", "settled", "_message")

    def __init__(self, receiver: Receiver, delivery_id: int, payload: bytes, settled: bool) -> None:
        self._receiver = receiver
        self.delivery_id = delivery_id
        #: The message's encoded sections, as transferred.
        self.payload = payload
        #: True once settled by either side.
        self.settled = settled
        self._message: Message | None = None

    @property
    def message(self) -> Message:
        """The decoded message (decoded on first use)."""
        if self._message is None:
            self._message = decode_message(self.payload)
        return self._message

    def drop_payload(self) -> None:
        """Free the message's bytes (and its decoded form) while the delivery stays settleable:
        for a reader that settles many deliveries later without keeping what they carried."""
        self.payload = b""
        self._message = None

    @property
    def offset(self) -> int | None:
        """Its offset in a stream (the ``x-stream-offset`` message annotation), or None from a queue."""
        return stream_offset(self.message)

    def accept(self) -> None:
        """Settle as ``accepted`` (§3.4.2): the broker removes the message."""
        self._receiver.settle([self], Accepted())

    def release(self) -> None:
        """Settle as ``released`` (§3.4.4): the message goes back, its delivery-count unchanged."""
        self._receiver.settle([self], Released())

    def reject(self, condition: str = "amqp:internal-error", description: str | None = None) -> None:
        """Settle as ``rejected`` (§3.4.3) with an error; the broker dead-letters or drops the message."""
        self._receiver.settle([self], Rejected(error=Error(condition=symbol(condition), description=description)))

    def modify(self, delivery_failed: bool = True, undeliverable_here: bool = False) -> None:
        """Settle as ``modified`` (§3.4.5)."""
        self._receiver.settle(
            [self], Modified(delivery_failed=delivery_failed, undeliverable_here=undeliverable_here)
        )

    def __repr__(self) -> str:
        return f"<Delivery {self.delivery_id} {len(self.payload)} bytes{' settled' if self.settled else ''}>"


class _Link:
    """What senders and receivers share: attach, detach and the errors the broker sends about them."""

    def __init__(self, client: Client, address: str | None, link: PeerLink) -> None:
        self._client = client
        self.address = address
        self._link = link
        self.closed = False

    def _check(self) -> None:
        detach = self._link.remote_detach
        if detach is not None:
            error = detach.error
            raise LinkDetached(
                f"the broker detached the link on {self.address!r}"
                + (f": {error.condition} ({error.description})" if error is not None else ""),
                error.condition if error is not None else None,
            )
        if self.closed:
            raise ClientError(f"the link on {self.address!r} is closed; open a new one")

    def _attached(self, timeout: float | None) -> None:
        """Wait for the broker's attach; a refusal (no terminus, §2.6.3) waits for its detach and raises."""
        link = self._link
        self._client._wait(lambda: link.remote_attach is not None or link.remote_detach is not None,
                           timeout, f"the broker's attach of a link on {self.address!r}")
        remote = link.remote_attach
        refused = remote is None or (remote.target is None if link.is_sender else remote.source is None)
        if refused:
            self._client._wait(lambda: link.remote_detach is not None, timeout,
                               f"the broker's detach of the refused link on {self.address!r}")
            self._check()

    @property
    def properties(self) -> dict[str, Any]:
        """The link properties of the broker's attach (Part 2 §2.7.3), keys as strings; empty when
        it sent none.  minibroker answers a stream reader with the stream's offsets there
        (``x-stream-first-offset``, ``x-stream-next-offset``; docs/streams.md)."""
        remote = self._link.remote_attach
        found = remote.properties if remote is not None else None
        return {str(key): value for key, value in found.items()} if isinstance(found, dict) else {}

    def close(self, timeout: float | None = None) -> None:
        """Detach and close the link (§2.6.6); waits for the broker's detach."""
        if self.closed:
            return
        self.closed = True
        client, link = self._client, self._link
        try:
            if client._close_error is None and not client.closed:
                client._send(client._peer.detach(link.handle))  # or the answer to the broker's detach
                client._wait(lambda: link.remote_detach is not None, timeout, f"the detach of {self.address!r}")
        finally:
            client._links.pop(link.handle, None)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._client.closed:
            self.close()


class Sender(_Link):
    """A link the client sends on; each send waits for the broker's outcome (§2.6.12)."""

    def send(self, message: Any, timeout: float | None = None) -> None:
        """Send one message (see :func:`as_message`) and wait until the broker accepted it.

        Raises :class:`DeliveryFailed` if the broker rejected, released or modified it.
        """
        self.send_many([message], timeout)

    def send_many(self, messages: Iterable[Any], timeout: float | None = None) -> int:
        """Send messages as credit allows and wait for every outcome; returns how many were accepted.

        All messages are sent and settled before the first failure (in send order) is raised
        as :class:`DeliveryFailed`, so nothing is left in flight.
        """
        return self.send_encoded((as_message(value).encode() for value in messages), timeout)

    def send_encoded(self, payloads: Iterable[bytes], timeout: float | None = None) -> int:
        """:meth:`send_many` for messages already encoded: each payload is a message's sections
        (Part 3 §3.2), sent as they are (message-format 0).  For a sender that encodes its
        messages faster than building a :class:`Message` (the Spark writer's usual row)."""
        deadline = self._client._deadline(timeout)
        return self.confirm(self.post_encoded(payloads, _left(deadline)), _left(deadline))

    def post_encoded(self, payloads: Iterable[bytes], timeout: float | None = None) -> list[int]:
        """Send encoded messages (as :meth:`send_encoded`) as credit allows, without waiting for
        their outcomes: their delivery-ids, for :meth:`confirm`.  A writer that encodes its next
        messages while the broker takes these keeps one batch in flight (the Spark writer)."""
        client, link = self._client, self._link
        deadline = client._deadline(timeout)
        order: list[int] = []
        # Frames go out in writes of about SEND_BYTES (not one per message: a write and a read
        # each cost more than making the frame), and what the broker sent meanwhile (outcomes,
        # credit) is read after each write, so its answers never pile up unread.
        out = bytearray()
        for payload in payloads:
            self._check()
            if link.credit <= 0 or len(out) >= SEND_BYTES:
                if out:
                    client._send(bytes(out))
                    out.clear()
                    client._drain_input()
                client._wait(lambda: link.credit > 0 or link.remote_detach is not None, _left(deadline),
                             f"credit to send to {self.address!r}")
                self._check()
            order.append(client._peer.session().next_delivery_id)
            out += client._peer.transfer(link.handle, None, None, payload)
        if out:
            client._send(bytes(out))
        return order

    def confirm(self, delivery_ids: list[int], timeout: float | None = None) -> int:
        """Wait for the broker's outcome of each delivery :meth:`post_encoded` sent; how many were
        accepted (all of them), or :class:`DeliveryFailed` for the first that was not."""
        client = self._client
        outcomes = client._outcomes
        client._wait(lambda: all(d in outcomes for d in delivery_ids) or self._link.remote_detach is not None,
                     timeout, f"the broker's outcome for {len(delivery_ids)} message(s) sent to {self.address!r}")
        results = [outcomes.pop(d, None) for d in delivery_ids]
        self._check()
        for state in results:
            if not isinstance(state, Accepted):
                raise _failure(state, self.address)
        return len(results)


def _offset_spec(offset: str | int | dt.datetime) -> Any:
    """The ``rabbitmq:stream-offset-spec`` value for ``offset`` (as RabbitMQ's clients send it)."""
    if isinstance(offset, dt.datetime):
        if offset.tzinfo is None:
            raise ValueError(f"offset needs an aware datetime (with a tzinfo), got {offset!r}")
        return timestamp(round(offset.timestamp() * 1000))
    if isinstance(offset, bool) or not isinstance(offset, (str, int)):
        raise TypeError(f"offset is 'first', 'last', 'next', an int or an aware datetime, got {offset!r}")
    if isinstance(offset, int) and offset < 0:
        raise ValueError(f"a stream offset is >= 0, got {offset}")
    return offset


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _failure(state: Any, address: str | None) -> DeliveryFailed:
    if isinstance(state, Rejected):
        error = state.error
        return DeliveryFailed(
            "rejected", error.condition if error else None, error.description if error else None, address
        )
    if isinstance(state, Released):
        return DeliveryFailed("released", None, None, address)
    if isinstance(state, Modified):
        return DeliveryFailed("modified", None, f"delivery-failed={state.delivery_failed}", address)
    return DeliveryFailed("settled without an outcome", None, repr(state), address)


class Receiver(_Link):
    """A link the client receives on; ``credit`` messages are requested at a time (§2.6.7)."""

    def __init__(self, client: Client, address: str | None, link: PeerLink, credit: int, browse: bool) -> None:
        super().__init__(client, address, link)
        self.credit = credit
        self.browse = browse
        self._buffer: deque[Delivery] = deque()
        self._partial: bytearray | None = None
        self._partial_id = 0
        self._partial_settled = False
        self._drained = False
        #: Where deliveries go during :meth:`fetch_into` (None: the buffer), and how many went there.
        self._sink: DeliverySink | None = None
        self._handed = 0

    def _take(self, delivery_id: int, settled: bool, payload: bytes) -> None:
        """A whole delivery taken straight from the frames (``Client._intake``) into the buffer."""
        self._buffer.append(Delivery(self, delivery_id, payload, settled))

    def _arrived(self, delivery_id: int, payload: bytes, settled: bool) -> None:
        """A whole delivery from the general reader: to the sink of a :meth:`fetch_into`, else the buffer."""
        if self._sink is not None:
            self._sink(delivery_id, settled, payload)
            self._handed += 1
        else:
            self._buffer.append(Delivery(self, delivery_id, payload, settled))

    def _on_transfer(self, transfer: Transfer, payload: bytes) -> None:
        if self._partial is None and not transfer.more and not transfer.aborted:
            # A whole delivery in one frame (the usual case): its payload as it is, no reassembly copy.
            self._arrived(transfer.delivery_id or 0, payload, bool(transfer.settled))
            return
        if self._partial is None:
            self._partial = bytearray()
            self._partial_id = transfer.delivery_id or 0
            self._partial_settled = bool(transfer.settled)
        self._partial += payload
        if transfer.aborted:
            self._partial = None
        elif not transfer.more:
            partial, self._partial = self._partial, None
            self._arrived(self._partial_id, bytes(partial), self._partial_settled)

    def _flow(self, credit: int, drain: bool = False) -> None:
        client = self._client
        client._send(client._peer.flow(self._link.handle, credit, drain=drain))

    def receive(self, timeout: float | None = None) -> Delivery:
        """The next message; credit is topped up when it runs low.  Raises :class:`ClientTimeout`."""
        link, client = self._link, self._client
        if not self._buffer and link.credit <= self.credit // 2:
            self._flow(self.credit)
        client._wait(lambda: bool(self._buffer) or link.remote_detach is not None, timeout,
                     f"a message from {self.address!r}")
        if not self._buffer:
            self._check()
        return self._buffer.popleft()

    def fetch(self, limit: int, timeout: float | None = None) -> list[Delivery]:
        """Up to ``limit`` messages available now, without waiting for more (a drain, §2.6.7).

        Returns fewer (possibly none) once the broker reports it has nothing more.
        """
        if limit < 1:
            raise ValueError(f"fetch needs a limit of at least 1, got {limit}")
        out = [self._buffer.popleft() for _ in range(min(limit, len(self._buffer)))]
        if len(out) < limit:
            self._drain(limit - len(out) - len(self._buffer), timeout)
            while self._buffer and len(out) < limit:
                out.append(self._buffer.popleft())
        return out

    def fetch_into(self, limit: int, sink: DeliverySink, timeout: float | None = None) -> int:
        """What :meth:`fetch` does, but each message goes to ``sink(delivery_id, settled, payload)``
        as it arrives instead of into a :class:`Delivery`; returns how many went there.

        For a receiver whose deliveries arrive settled (``browse=True`` or ``offset=``: nothing to
        settle afterwards), reading many messages: no object is made per message, and ``payload``
        (the message's encoded sections, Part 3 §3.2) is all there is to keep.  Messages already
        received (a :meth:`prefetch`'s) go to ``sink`` first.  An exception from ``sink`` ends the
        client's use (the connection is abandoned mid-read); create a new :class:`Client` then.
        """
        if not self.browse:
            raise ClientError(
                "fetch_into is for receivers whose deliveries arrive settled (browse=True or offset=...); "
                "use fetch() here, whose Deliveries you settle"
            )
        if limit < 1:
            raise ValueError(f"fetch_into needs a limit of at least 1, got {limit}")
        buffer = self._buffer
        handed = 0
        while buffer and handed < limit:
            delivery = buffer.popleft()
            sink(delivery.delivery_id, delivery.settled, delivery.payload)
            handed += 1
        if handed == limit:
            return handed
        self._sink, self._handed = sink, 0
        try:
            self._drain(limit - handed, timeout)  # the buffer is empty now
        finally:
            self._sink = None
        return handed + self._handed

    def _drain(self, credit: int, timeout: float | None) -> None:
        """Grant ``credit`` with drain set and read until the broker says it sent what it had (§2.6.7)."""
        link = self._link
        self._drained = False
        self._flow(credit, drain=True)
        self._client._wait(lambda: self._drained or link.remote_detach is not None, timeout,
                           f"the broker to drain {self.address!r}")
        self._check()

    def prefetch(self, count: int) -> None:
        """Let the broker send up to ``count`` messages beyond those received so far, to arrive
        while you work (a flow setting the link-credit, Part 2 §2.6.7); the next :meth:`fetch` or
        :meth:`receive` takes them first, and a :meth:`fetch` counts those still on their way.
        A reader of a stream calls it before making rows of what it just fetched, so the broker
        writes the next messages meanwhile."""
        if count < 1:
            raise ValueError(f"prefetch needs a count of at least 1, got {count}")
        self._flow(count)

    @property
    def available(self) -> int | None:
        """How many messages the broker said await credit on this link, in its last flow (§2.7.4
        ``available``; minibroker and RabbitMQ 4 answer a drain, so a :meth:`fetch`, with the
        queue's messages no one has acquired).  Advisory; None when the broker left it out."""
        return self._link.available

    def settle(self, deliveries: Sequence[Delivery], outcome: Any = None) -> None:
        """Settle many deliveries with one outcome (default ``accepted``), in as few dispositions as possible."""
        state = outcome if outcome is not None else Accepted()
        ids = sorted(d.delivery_id for d in deliveries if not d.settled)
        for d in deliveries:
            d.settled = True
        if not ids:
            return
        client = self._client
        out = bytearray()
        first = last = ids[0]
        for delivery_id in ids[1:] + [None]:
            if delivery_id is not None and delivery_id == last + 1:
                last = delivery_id
                continue
            out += client._peer.disposition(first, last if last != first else None, state=state)
            if delivery_id is not None:
                first = last = delivery_id
        client._send(bytes(out))


class Client:
    """One AMQP connection with one session (Part 2 §2.4-§2.5), opened on construction.

    ``url`` is ``amqp://[user:password@]host[:port]``, or ``amqps://...`` for TLS (Part 5
    §5.2.1: TLS first, then SASL) with ``ssl_context`` (a client-side ``ssl.SSLContext``; the
    system's trusted CAs when omitted), e.g. ``broker.tls.client_context()`` of a broker started
    with ``tls=True``.  ``user``/``password`` override the URL's and select SASL PLAIN,
    otherwise SASL ANONYMOUS is used.  ``timeout`` (seconds) bounds connecting and is the
    default of every later call.
    """

    def __init__(
        self,
        url: str = f"amqp://127.0.0.1:{DEFAULT_PORT}",
        *,
        timeout: float = 10.0,
        user: str | None = None,
        password: str | None = None,
        container_id: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        host, port, url_user, url_password = parse_url(url)
        self._tls = url.startswith("amqps:")
        if ssl_context is not None and not isinstance(ssl_context, ssl.SSLContext):
            raise TypeError(f"ssl_context must be a client-side ssl.SSLContext, got {type(ssl_context).__name__}")
        if ssl_context is not None and not self._tls:
            raise ValueError(f"ssl_context= is for TLS: connect to amqps://{host}:{port} instead of {url!r}")
        self.host, self.port, self.timeout = host, port, timeout
        user = user if user is not None else url_user
        password = password if password is not None else url_password
        self._peer = Peer(container_id or f"minibroker-client-{uuid.uuid4().hex[:12]}")
        self._reader = FrameReader()
        self._links: dict[int, _Link] = {}  # by our handle
        self._remote: dict[int, _Link] = {}  # by the broker's handle
        #: The broker's channel for our session, once its begin arrived.
        self._session_channel: int | None = None
        self._outcomes: dict[int, Any] = {}
        self._write_lock = threading.Lock()
        self._last_write = time.monotonic()
        self._stop_heartbeat = threading.Event()
        self.closed = False
        self._close_error: ConnectionClosed | None = None
        try:
            raw = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ConnectionFailed(f"cannot connect to the AMQP broker at {host}:{port}: {exc}") from exc
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock: socket.socket = raw
        if self._tls:
            context = ssl_context if ssl_context is not None else ssl.create_default_context()
            try:
                self._sock = context.wrap_socket(raw, server_hostname=host)  # handshakes within `timeout`
            except (OSError, ssl.CertificateError) as exc:
                raw.close()
                raise ConnectionFailed(
                    f"TLS handshake with the AMQP broker at {host}:{port} failed: {exc} "
                    "(for a broker started with tls=True, pass ssl_context=broker.tls.client_context())"
                ) from exc
        # The socket stays blocking, with ``timeout`` bounding each write (a large message is written
        # whole or the connection is lost); reads wait on a selector, so they never change its mode.
        self._sock.settimeout(timeout)
        self._readable = selectors.DefaultSelector()
        self._readable.register(self._sock, selectors.EVENT_READ)
        try:
            self._handshake(user, password, timeout)
        except BaseException:
            self._readable.close()
            self._sock.close()
            self.closed = True
            raise

    def _handshake(self, user: str | None, password: str | None, timeout: float) -> None:
        peer = self._peer
        if user is not None:
            sasl = peer.sasl_plain(user, password or "")
        else:
            sasl = peer.sasl_anonymous()
        self._send(sasl + peer.header() + peer.open() + peer.begin())
        try:
            self._wait(lambda: peer.sasl_outcome is not None, timeout, "the broker's SASL outcome")
        except ConnectionClosed as exc:
            raise ConnectionFailed(f"the broker at {self.host}:{self.port} ended the SASL handshake: {exc}") from exc
        outcome: SaslOutcome = peer.sasl_outcome
        if outcome.code != 0:
            mechanism = "PLAIN" if user is not None else "ANONYMOUS"
            raise ConnectionFailed(
                f"the broker at {self.host}:{self.port} refused SASL {mechanism} (code {outcome.code}); "
                "check the user and password"
            )
        session = peer.session()
        self._wait(lambda: session.remote_begin is not None, timeout, "the broker's open and begin")
        self._session_channel = session.remote_channel
        idle = peer.remote_open.idle_time_out if peer.remote_open is not None else None
        if idle:
            threading.Thread(target=self._heartbeat, args=(idle / 2000,), daemon=True,
                             name=f"amqp-heartbeat-{self.host}:{self.port}").start()

    # ------------------------------------------------------------------ links

    def sender(self, address: str | None, timeout: float | None = None) -> Sender:
        """Attach a link sending to ``address`` (Part 3 §3.5.4); raises :class:`LinkDetached` if refused.

        ``None`` is the anonymous relay: each message goes to its ``to`` property.
        """
        handle = self._next_handle()
        self._send(self._peer.attach_sender(f"sender-{handle}-{address}", address, handle))
        sender = Sender(self, address, self._peer.link(handle))
        self._links[handle] = sender
        sender._attached(timeout)
        return sender

    def receiver(self, address: str, *, credit: int = 100, browse: bool = False,
                 offset: str | int | dt.datetime | None = None, timeout: float | None = None,
                 desired_capabilities: Iterable[str] = ()) -> Receiver:
        """Attach a link receiving from ``address``; ``browse=True`` reads without removing
        (distribution-mode copy, Part 3 §3.5.3; deliveries arrive settled).

        ``offset`` reads a stream (RabbitMQ 4 streams, minibroker's ``declare_stream``) from
        ``"first"``, ``"last"``, ``"next"``, an offset (int) or an aware ``datetime``: the source
        carries the ``rabbitmq:stream-offset-spec`` filter, deliveries arrive settled (reading a
        stream removes nothing) and :attr:`Delivery.offset` is each one's offset.

        ``desired_capabilities`` go in the attach (Part 2 §2.7.3): e.g. ``["x-opt-enqueued-time"]``
        asks minibroker's streams to annotate each delivery with the message's append time.

        No credit is granted until :meth:`Receiver.receive` or :meth:`Receiver.fetch`.
        """
        if credit < 1:
            raise ValueError(f"credit must be at least 1, got {credit}")
        handle = self._next_handle()
        fields: dict[str, Any] = {"distribution_mode": symbol("copy")} if browse else {}
        if offset is not None:
            fields["filter"] = {STREAM_OFFSET_SPEC: Described(STREAM_OFFSET_SPEC, _offset_spec(offset))}
        settled = browse or offset is not None
        desired = [symbol(c) for c in desired_capabilities]
        self._send(self._peer.attach_receiver(
            f"receiver-{handle}-{address}", address, handle,
            snd_settle_mode=SND_SETTLED if settled else SND_UNSETTLED,
            attach_fields={"desired_capabilities": desired} if desired else None, **fields,
        ))  # fmt: skip
        receiver = Receiver(self, address, self._peer.link(handle), credit, settled)
        self._links[handle] = receiver
        receiver._attached(timeout)
        return receiver

    def _next_handle(self) -> int:
        self._check()
        session = self._peer.session()
        return max([*session.links, *self._links], default=-1) + 1

    # ------------------------------------------------------------------ I/O

    def _check(self) -> None:
        # A client closed by its caller says so, whatever ended the connection before.
        if self.closed:
            raise ClientError("the client is closed; create a new Client")
        if self._close_error is not None:
            raise self._close_error

    def _deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (self.timeout if timeout is None else timeout)

    def _send(self, data: bytes) -> None:
        self._check()
        try:
            with self._write_lock:
                self._sock.sendall(data)
                self._last_write = time.monotonic()
        except OSError as exc:
            self._lost(f"writing to the broker at {self.host}:{self.port} failed: {exc}")
            self._check()

    def _heartbeat(self, interval: float) -> None:
        """Empty frames keep the connection alive while the caller is busy (§2.4.5)."""
        while not self._stop_heartbeat.wait(interval / 2):
            if time.monotonic() - self._last_write >= interval / 2:
                try:
                    with self._write_lock:
                        self._sock.sendall(EMPTY_FRAME)
                        self._last_write = time.monotonic()
                except OSError:
                    return

    def _lost(self, message: str, condition: str | None = None) -> None:
        if self._close_error is None:
            self._close_error = ConnectionClosed(message, condition)
        self._stop_heartbeat.set()

    def _wait(self, done: Callable[[], bool], timeout: float | None, what: str) -> None:
        """Read frames until ``done()``, at most ``timeout`` seconds (default: the client's)."""
        deadline = self._deadline(timeout)
        while not done():
            self._check()
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClientTimeout(f"timed out waiting for {what} from {self.host}:{self.port}")
            self._read(left)

    def _drain_input(self) -> None:
        """Handle whatever the broker already sent, without blocking."""
        self._read(0.0)

    def _read(self, wait: float) -> None:
        """Handle what arrives within ``wait`` seconds (0: only what is already here)."""
        try:
            if self._tls:
                data = self._read_tls(wait)
            else:
                if not self._readable.select(max(wait, 0.0)):
                    return
                data = self._sock.recv(1 << 18)
        except (BlockingIOError, TimeoutError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except OSError as exc:
            self._lost(f"reading from the broker at {self.host}:{self.port} failed: {exc}")
            return
        if not data:
            self._lost(f"the broker at {self.host}:{self.port} closed the socket")
            return
        reader = self._reader
        try:
            frames = reader.feed(data, self._intake)
        except BaseException as exc:  # a malformed frame, or a fetch_into sink that raised: no way to read on
            self._lost(f"reading from the broker at {self.host}:{self.port} stopped: {exc!r}; create a new Client")
            raise
        finally:  # what was taken is counted even when a later frame of this read is malformed
            # The transfers taken led this read: counted before the frames that followed them.
            for channel, handle, count in reader.taken:
                self._peer.count_transfers(channel, handle, count)
                receiver = self._remote.get(handle)
                if isinstance(receiver, Receiver) and receiver._sink is not None:
                    receiver._handed += count
        self._peer.observe(frames)
        for frame in frames:
            self._dispatch(frame)

    def _intake(self, channel: int, handle: int) -> DeliverySink | None:
        """Where the whole single-frame deliveries of the broker's link ``handle`` go straight from the
        bytes (``transfers.take_transfers``): its receiver's buffer, doing what :meth:`_dispatch` and
        ``Peer.observe`` do for them without a Transfer or a Frame (nearly every frame of a stream
        read).  None (the general path) for another link or a receiver amid a multi-frame delivery."""
        link = self._remote.get(handle)
        if type(link) is not Receiver or link._partial is not None or channel != self._session_channel:
            return None  # not a receiver's, or the next frame may end a multi-frame delivery
        return link._sink or link._take  # counted when the read is done (_read)

    def _read_tls(self, wait: float) -> bytes:
        """One read of decrypted bytes.  An SSL object must not be used by two threads at once
        (the heartbeat thread writes), so the wait for input happens outside the write lock and
        the read itself inside it, without blocking (a TLS record may be only partly here); bytes
        OpenSSL already decrypted (``pending()``) need no wait."""
        sock = self._sock
        assert isinstance(sock, ssl.SSLSocket)
        if not sock.pending() and not self._readable.select(max(wait, 0.0)):
            raise TimeoutError
        with self._write_lock:
            sock.settimeout(0.0)
            try:
                return sock.recv(1 << 16)  # SSLWantReadError: only part of a TLS record is here yet
            finally:
                sock.settimeout(self.timeout)

    def _dispatch(self, frame: Frame) -> None:
        performative = frame.performative
        if isinstance(performative, Transfer):
            link = self._by_remote(performative.handle)
            if isinstance(link, Receiver):
                link._on_transfer(performative, frame.payload)
        elif isinstance(performative, Disposition):
            if performative.role == ROLE_RECEIVER:  # outcomes of what we sent
                last = performative.last if performative.last is not None else performative.first
                for delivery_id in range(performative.first, last + 1):
                    self._outcomes[delivery_id] = performative.state
                if not performative.settled:
                    self._send(self._peer.disposition(performative.first, performative.last,
                                                      role=ROLE_SENDER, state=performative.state))
        elif isinstance(performative, Flow):
            link = self._by_remote(performative.handle)
            if isinstance(link, Receiver) and performative.link_credit == 0:
                link._drained = True
        elif isinstance(performative, Close):
            error = performative.error
            self._lost(
                f"the broker at {self.host}:{self.port} closed the connection"
                + (f": {error.condition} ({error.description})" if error is not None else ""),
                error.condition if error is not None else None,
            )
        elif isinstance(performative, End):
            error = performative.error
            self._lost(
                "the broker ended the session" + (f": {error.condition} ({error.description})" if error else ""),
                error.condition if error is not None else None,
            )
        elif isinstance(performative, Attach):
            for link in self._links.values():
                if link._link.name == performative.name:
                    self._remote[performative.handle] = link
        elif isinstance(performative, Detach):
            # The peer forgets a link it detached itself, so its answer is recorded here.
            link = self._remote.pop(performative.handle, None)
            if link is not None and link._link.remote_detach is None:
                link._link.remote_detach = performative

    def _by_remote(self, handle: int | None) -> _Link | None:
        return self._remote.get(handle) if handle is not None else None

    # ------------------------------------------------------------------ close

    def close(self, timeout: float | None = None) -> None:
        """Close the connection (§2.7.9), waiting for the broker's close up to ``timeout``; idempotent."""
        if self.closed:
            return
        try:
            if self._close_error is None:
                self._send(self._peer.close())
                self._wait(lambda: self._peer.remote_close is not None, timeout, "the broker's close")
        except ClientError:
            pass  # closing anyway
        finally:
            self.closed = True
            self._stop_heartbeat.set()
            self._readable.close()
            self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        scheme = "amqps" if self._tls else "amqp"
        return f"<Client {scheme}://{self.host}:{self.port}{' closed' if self.closed else ''}>"

