"""The inspection and control API shared by :class:`ThreadedBroker` and the trio handle.

Every call runs in the broker's own thread (``_call``) and returns frozen
snapshots, never live objects.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .amqp.message import Message, encode_bodies
from .broker.addresses import node_name, parse_address
from .broker.clock import Clock
from .broker.engine import Broker, NodeError
from .broker.kinds import NODE_KINDS
from .broker.stored import StoredMessage
from .broker.tap import Observer
from .message_fields import build_message, data_body

# The protocol layers and the assertion helpers load when a method needs them (imports inside it):
# a test of plain queues never imports them.
if TYPE_CHECKING:
    from .broker.statistics import (  # (the snapshots' module loads with the first node, or when asked for)
        BrokerStatistics,
        FrameRecord,
        QueueSnapshot,
        StreamSnapshot,
        TopicSnapshot,
        TransactionSnapshot,
    )
    from .eventhubs.options import EventHubOptions
    from .eventhubs.snapshots import EventHubSnapshot
    from .rabbitmq.layer import RabbitMQLayer
    from .rabbitmq.snapshots import ExchangeSnapshot

__all__ = ["BrokerAPI", "build_message", "check", "timed_out"]

T = TypeVar("T")

#: RabbitMQ 4's exchange addresses, ``/exchanges/{name}/{key}`` (``minibroker.rabbitmq.addresses.EXCHANGES``,
#: spelled here so that a broker without that layer does not import it).
EXCHANGE_PREFIX = "/exchanges/"


def _check_address(address: object) -> None:
    if not isinstance(address, str) or not address:
        raise TypeError(
            f"address must be a queue, topic or stream name (or queue://NAME, topic://NAME, stream://NAME), got {address!r}"
        )


def _encoded(encode: Callable[[], T]) -> T:
    """Encode messages before the broker sees them, so a body AMQP cannot carry changes nothing."""
    try:
        return encode()
    except (TypeError, AttributeError, struct.error) as exc:
        raise TypeError(f"the message cannot be encoded as AMQP: {exc}") from exc


class BrokerAPI:
    """Methods every broker handle offers; subclasses say how to run code in the broker's thread."""

    _broker: Broker

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` in the broker's thread, then wake connections and waiters (it changes state)."""
        raise NotImplementedError

    def _read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` in the broker's thread; it only reads, so waiters are not woken."""
        raise NotImplementedError

    @property
    def url(self) -> str:
        """``amqp://HOST:PORT`` (``amqps://`` with TLS): each subclass says where it serves."""
        raise NotImplementedError

    @property
    def amqp091_url(self) -> str:
        """The URL an AMQP 0-9-1 client (Celery, kombu, pika, aio-pika) takes as it is:
        ``amqp://guest:guest@127.0.0.1:PORT/%2F`` (``amqps://`` with TLS).

        ``guest``/``guest`` logs in and ``/`` is the virtual host, as on a fresh RabbitMQ
        (docs/amqp091.md), spelled out so the URL does not rest on a client's defaults; the
        vhost ``/`` is written ``%2F``, as RabbitMQ's URI specification escapes it.
        """
        scheme, _, authority = self.url.partition("://")
        return f"{scheme}://guest:guest@{authority}/%2F"

    # ------------------------------------------------- extension surface (the pytest plugin)

    @property
    def broker_clock(self) -> Clock:
        """The broker's own clock: read it in the broker's thread (from a tap observer, say)."""
        return self._broker.clock

    @property
    def has_errors(self) -> bool:
        """Whether anything raised inside the broker since the last reset (no trip to its thread;
        :meth:`errors` copies them)."""
        return bool(self._broker.errors)

    def observe(
        self,
        observer: Observer | None,
        on_route: Callable[[str, StoredMessage], None] | None = None,
        *,
        replacing: type[Observer] | None = None,
    ) -> None:
        """Watch the broker: ``observer`` on its tap (every frame and event in, every frame and
        delivery out: :mod:`minibroker.broker.tap`) and ``on_route`` told of every message a
        node receives (:mod:`minibroker.broker.publish`).

        With ``replacing``, observers of that class installed before are removed first;
        ``observe(None, replacing=Cls)`` only removes them (and ``on_route``).  Runs in the
        broker's thread, as the observers themselves do.
        """

        def swap() -> None:
            tap = self._broker.tap
            if replacing is not None:
                for installed in tap.observers:
                    if isinstance(installed, replacing):
                        tap.remove(installed)
            if observer is not None:
                tap.install(observer)
            self._broker.router.on_route = on_route

        self._read(swap)

    def _inspect(self, fn: Callable[[], None]) -> None:
        """Run a snapshot's deferred copy in the broker's thread (or here, once the broker has stopped)."""
        self._read(fn)

    def snapshot(self, name: str) -> Any:
        """A frozen snapshot of the node ``name``, of whatever kind it is: its kind's ``SNAPSHOT``
        (:class:`QueueSnapshot`, :class:`TopicSnapshot`, :class:`StreamSnapshot`), each with
        ``.depth`` and ``.statistics``; a topic subscription's queue by its name, too.  ``kind://name``
        (``queue://orders``) asks for that kind only.  :meth:`queue`, :meth:`topic` and :meth:`stream`
        are this for one kind, typed."""
        _check_address(name)
        node, kind, explicit = parse_address(name)
        return self._read(self._snapshot, kind if explicit else None, node)

    def _snapshot(self, kind: str | None, name: str) -> Any:
        node = self._broker.router.nodes.get(name)
        if kind is not None and node is not None and node.KIND != kind:
            raise NodeError(f"{name!r} is a {node.KIND}, not a {kind}: use broker.{node.KIND}({name!r})")
        return self._broker.snapshot(name, self._inspect, kind)

    def queue(self, name: str, *, missing_ok: bool = False) -> QueueSnapshot:
        """A frozen snapshot of a queue: ``.depth`` and counters at once, at any depth;
        ``.messages`` (in delivery order) are copied when first read and decoded one by one.

        ``name`` may be written ``queue://name``.  A queue nobody has used yet raises
        :class:`NodeError`, or with ``missing_ok=True`` gives an empty snapshot (depth 0, every
        counter 0) without creating it: ``assert broker.queue("audit", missing_ok=True).depth == 0``.
        """
        return self._read(self._queue_snapshot, node_name(name, "queue"), missing_ok)

    def _queue_snapshot(self, name: str, missing_ok: bool) -> QueueSnapshot:
        node = self._broker.router.nodes.get(name)
        try:
            return cast("QueueSnapshot", self._snapshot("queue", name))
        except NodeError:
            if missing_ok and node is None:  # (a node of another kind is not a missing queue)
                from .broker.statistics import QueueSnapshot

                return QueueSnapshot.missing(name)
            raise

    def assert_queue(
        self,
        name: str,
        bodies: Sequence[Any] | None = None,
        *,
        depth: int | None = None,
        ordered: bool = True,
        missing_ok: bool = False,
    ) -> QueueSnapshot:
        """Assert a queue's bodies (in delivery order, or any order with ``ordered=False``) and/or
        depth; fails with expected vs actual and a diff. Returns the snapshot it checked.
        ``missing_ok=True``: a queue nobody has used yet counts as empty."""
        __tracebackhide__ = True
        from .testing.assertions import assert_queue

        return assert_queue(self, name, bodies, depth=depth, ordered=ordered, missing_ok=missing_ok)

    def topic(self, name: str) -> TopicSnapshot:
        """A frozen snapshot of a topic and its subscriptions; ``name`` may be written ``topic://name``."""
        return cast("TopicSnapshot", self._read(self._snapshot, "topic", node_name(name, "topic")))

    def stream(self, name: str) -> StreamSnapshot:
        """A frozen snapshot of a stream: ``first_offset``, ``last_offset``, ``count``, ``bytes``
        retained, and ``messages`` (each with its ``offset``) / ``bodies``, decoded when read.

        ``name`` may be written ``stream://name``.
        """
        return cast("StreamSnapshot", self._read(self._snapshot, "stream", node_name(name, "stream")))

    def assert_stream(
        self,
        name: str,
        bodies: Sequence[Any] | None = None,
        *,
        count: int | None = None,
        first_offset: int | None = None,
        last_offset: int | None = None,
    ) -> StreamSnapshot:
        """Assert a stream's retained bodies (oldest first), count and/or offsets; fails with
        expected vs actual and a diff. Returns the snapshot it checked."""
        __tracebackhide__ = True
        from .testing.assertions import assert_stream

        return assert_stream(self, name, bodies, count=count, first_offset=first_offset, last_offset=last_offset)

    def nodes(self, kind: str | None = None) -> list[str]:
        """Names of all nodes of ``kind`` (``"queue"``, ``"topic"``, ``"stream"``; None: every kind), sorted."""
        return self._read(lambda: sorted(self._broker.router.nodes if kind is None else self._broker.nodes(kind)))

    def queues(self) -> list[str]:
        """Names of all queues, sorted."""
        return self.nodes("queue")

    def topics(self) -> list[str]:
        """Names of all topics, sorted."""
        return self.nodes("topic")

    def streams(self) -> list[str]:
        """Names of all streams, sorted."""
        return self.nodes("stream")

    def declare(self, kind: str, name: str, **options: Any) -> None:
        """Create a node of ``kind`` (``"queue"``, ``"topic"``, ``"stream"``; ``name`` or
        ``kind://name``) with the fields of its options type (:class:`QueueOptions`,
        :class:`StreamOptions`; a topic takes none), or apply them to the existing node of that name.
        :meth:`declare_queue`, :meth:`declare_topic` and :meth:`declare_stream` are this for one kind."""
        cls = NODE_KINDS.get(kind)
        if cls is None:
            raise ValueError(f"no node kind {kind!r}; the kinds are {sorted(NODE_KINDS)}")
        if cls.OPTIONS is None:
            if options:
                raise TypeError(f"a {kind} takes no options, got {sorted(options)}")
            built = None
        else:
            known = set(cls.OPTIONS.__dataclass_fields__)
            unknown = set(options) - known
            if unknown:
                raise TypeError(f"unknown {kind} option(s) {sorted(unknown)}; use any of {sorted(known)}")
            built = cls.OPTIONS(**options) if options else None
        self._call(self._broker.declare, kind, node_name(name, kind), built)

    def declare_queue(self, name: str, **options: Any) -> None:
        """Create a queue with :class:`QueueOptions` fields (priorities, default_ttl, max_ttl,
        dead_letter_address, dead_letter_on_expiry, max_delivery_count)."""
        self.declare("queue", name, **options)

    def declare_topic(self, name: str) -> None:
        """Create a topic (``name`` or ``topic://name``)."""
        self.declare("topic", name)

    def declare_stream(
        self, name: str, max_bytes: int | None = None, max_age: float | None = None, duplicate_window: float | None = None
    ) -> None:
        """Create a stream (``name`` or ``stream://name``): an append-only log clients read from an
        offset (``rabbitmq:stream-offset-spec``) without removing anything.

        Retention drops the oldest messages beyond ``max_bytes`` (encoded bytes; the newest
        always stays) and those older than ``max_age`` seconds on the broker's clock (a
        ``ManualClock`` drives it in tests).  Declaring an existing stream with a limit sets
        its retention to the limits given.  ``duplicate_window`` (seconds): a message a client
        sends with a message-id the stream took within them is accepted and not appended.
        """
        given = (("max_bytes", max_bytes), ("max_age", max_age), ("duplicate_window", duplicate_window))
        self.declare("stream", name, **{k: v for k, v in given if v is not None})

    def delete(self, name: str) -> None:
        """Delete a queue, topic or stream (``name``, or with its ``queue://``/``topic://``/``stream://``
        prefix); its links are detached with ``amqp:resource-deleted``."""
        _check_address(name)
        self._call(self._delete, *parse_address(name))

    def _delete(self, name: str, kind: str, explicit: bool) -> None:
        if explicit and name not in self._broker.nodes(kind):
            raise NodeError(f"no {kind} named {name!r}")
        self._broker.delete_node(name)

    def publish(self, address: str, body: Any = None, *, message: Message | None = None, **fields: Any) -> None:
        """Put a message on ``address`` without a client: ``publish("orders", {"id": 1}, priority=7)``.

        With the RabbitMQ layer on, ``/exchanges/{name}/{key}`` routes through that exchange
        (a message no queue takes counts in ``exchange(name).unroutable``).

        The fields are those of :func:`build_message`; a bad one raises before the broker
        changes (no queue is created).
        """
        _check_address(address)
        if message is None:
            message = build_message(body, **fields)
        elif body is not None or fields:
            raise TypeError("pass either message=Message(...) or a body with fields, not both")
        payload = _encoded(lambda: message.encode())
        if address.startswith(EXCHANGE_PREFIX):
            self._call(self._publish_to_exchange, address, payload)
        else:
            self._call(self._broker.publish, address, payload)

    def _publish_to_exchange(self, address: str, payload: bytes) -> None:
        """Route through a RabbitMQ exchange as a client's publish would (unroutable: counted, dropped)."""
        self._rabbitmq().publish_to_exchange(address, payload)
        self._broker.flush()

    def publish_many(
        self,
        address: str,
        bodies: Iterable[Any] = (),
        *,
        messages: Iterable[Message | bytes] | None = None,
        **fields: Any,
    ) -> int:
        """Seed ``address`` with many messages at once, in order; returns how many.

        ``publish_many("orders", range(100_000), priority=7)``: one message per body, every one
        with the same ``fields`` (as :meth:`publish` takes them), encoded here and queued in one
        call into the broker.  Or ``messages=[Message(...), ...]`` for prepared messages.
        A bad field or body raises before the broker changes.
        """
        _check_address(address)
        if messages is not None:
            if bodies != () or fields:
                raise TypeError("pass either messages=[...] or bodies with fields, not both")
            payloads = _encoded(lambda: [m if isinstance(m, bytes) else m.encode() for m in messages])
        else:
            if isinstance(bodies, (str, bytes, dict)):
                raise TypeError(
                    f"bodies must be an iterable of message bodies, got one {type(bodies).__name__}; "
                    "wrap a single body in a list, or use publish()"
                )
            template = build_message(None, **fields)
            if template.body_kind == "data":
                bodies = [data_body(body) for body in bodies]
            payloads = _encoded(lambda: encode_bodies(template, bodies))
        return self._call(self._broker.publish_many, address, payloads)

    def purge(self, name: str | None = None) -> int:
        """Remove available messages from one queue (``name`` or ``queue://name``) or every message
        of a stream (``stream://name``; its offsets go on), or from all; returns how many."""
        if name is not None:
            stream = isinstance(name, str) and parse_address(name)[1] == "stream"
            name = node_name(name, "stream" if stream else "queue")
        return self._call(self._broker.purge, name)

    def block_publishers(self, reason: str = "low on memory") -> None:
        """Raise the broker's resource alarm (RabbitMQ's memory or disk alarm): AMQP 0-9-1
        publishers get ``connection.blocked`` with ``reason`` (if their client announced the
        capability) and are not read once they publish, until :meth:`unblock_publishers`.
        AMQP 1.0 clients are not affected."""
        self._call(self._broker.block_publishers, reason)

    def unblock_publishers(self) -> None:
        """Clear the alarm: blocked 0-9-1 publishers get ``connection.unblocked`` and are read again."""
        self._call(self._broker.unblock_publishers)

    def reset(self) -> None:
        """Back to empty: all connections closed, all nodes, messages and transactions gone."""
        self._call(self._broker.reset)

    def statistics(self) -> BrokerStatistics:
        """Counters per node plus connection and link counts."""
        return self._read(self._broker.statistics)

    def frames(self, last: int | None = None) -> list[FrameRecord]:
        """The last frames in and out of every connection (needs ``frame_log=N``), oldest first."""
        return self._read(self._broker.frames, last)

    def errors(self) -> list[Exception]:
        """Exceptions raised inside the broker; each closed its connection with ``amqp:internal-error``."""
        return self._read(lambda: list(self._broker.errors))

    def transactions(self) -> list[TransactionSnapshot]:
        """Open transactions with their staged work."""
        return self._read(self._broker.transaction_snapshots)

    # ------------------------------------------------- RabbitMQ exchanges

    def _rabbitmq(self) -> RabbitMQLayer:
        from .rabbitmq.layer import RabbitMQLayer

        layer = self._broker.layer("rabbitmq")
        if not isinstance(layer, RabbitMQLayer):
            raise RuntimeError(
                "exchanges belong to the RabbitMQ layer: start the broker with "
                "rabbitmq=RabbitMQOptions() (or the marker's rabbitmq=RabbitMQOptions())"
            )
        return layer

    def exchange(self, name: str) -> ExchangeSnapshot:
        """A frozen snapshot of a RabbitMQ exchange: type, bindings, messages published and unroutable."""
        return self._read(lambda: self._rabbitmq().exchange_snapshot(name))

    def exchanges(self) -> list[str]:
        """Names of all RabbitMQ exchanges (the default one is ``""``), sorted."""
        return self._read(lambda: sorted(self._rabbitmq().exchanges.exchanges))

    def declare_exchange(
        self,
        name: str,
        type: str = "direct",
        *,
        durable: bool = True,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        """Declare a RabbitMQ exchange (``direct``, ``fanout``, ``topic``, ``headers``, ``x-local-random``),
        as ``PUT /exchanges/{name}`` would; an existing one must be declared the same."""
        self._call(
            lambda: self._rabbitmq().exchanges.declare(
                name, type, durable=durable, auto_delete=auto_delete, internal=internal, arguments=arguments
            )
        )

    def bind(
        self,
        source: str,
        *,
        queue: str | None = None,
        exchange: str | None = None,
        key: str = "",
        arguments: dict[str, Any] | None = None,
    ) -> None:
        """Bind exchange ``source`` to a ``queue`` or to an ``exchange`` with a binding ``key``
        (``arguments``: a headers exchange's ``x-match`` and values)."""
        if (queue is None) == (exchange is None):
            raise TypeError("bind() takes one destination: queue=NAME or exchange=NAME")
        destination = queue if queue is not None else exchange
        assert destination is not None
        from .rabbitmq.exchanges import Binding

        binding = Binding(source, destination, "queue" if queue is not None else "exchange", key, dict(arguments or {}))
        self._call(lambda: self._rabbitmq().exchanges.bind(binding))

    # ----------------------------------------------------------- Event Hubs

    def declare_event_hub(
        self,
        name: str,
        *,
        partitions: int = 4,
        consumer_groups: Sequence[str] = (),
        retention: float | None = None,
    ) -> None:
        """Create an Azure Event Hubs event hub with ``partitions`` partitions (ids ``"0"``, ``"1"``, ...),
        the ``$Default`` consumer group plus ``consumer_groups``, and ``retention`` in seconds on the
        broker's clock (None: keep every event).  Declaring it again adds consumer groups."""
        if isinstance(consumer_groups, str):
            raise TypeError(f"consumer_groups is a list of names, got the string {consumer_groups!r}; write [{consumer_groups!r}]")
        from .eventhubs.options import EventHubOptions  # the layer's options load only when used

        options = EventHubOptions(name, partitions, tuple(consumer_groups), retention)
        self._call(self._declare_event_hub, options)

    def _declare_event_hub(self, options: EventHubOptions) -> None:
        from .eventhubs.layer import EventHubsLayer  # the layer loads only when it is used

        try:
            layer = self._broker.enable_layer("event_hubs")
        except ValueError as exc:  # a layer that cannot run beside it is on (RabbitMQ's)
            raise RuntimeError(f"{exc}: event hubs need a broker without it") from None
        assert isinstance(layer, EventHubsLayer)
        layer.declare(options)

    def event_hub(self, name: str) -> EventHubSnapshot:
        """A frozen snapshot of an event hub: ``.partition("0").bodies``, sequence numbers, receivers."""
        return self._read(self._event_hub_snapshot, name)

    def _event_hub_snapshot(self, name: str) -> EventHubSnapshot:
        from .eventhubs.layer import EventHubsLayer

        layer = self._broker.layer("event_hubs")
        if not isinstance(layer, EventHubsLayer):
            raise NodeError(f"no event hub {name!r} (event hubs: []); declare it with declare_event_hub({name!r})")
        return layer.snapshot(name)


def check(predicate: Callable[[Any], Any], broker: Any) -> tuple[Any, NodeError | None]:
    """Evaluate a ``wait_for`` predicate; a node that does not exist yet counts as "not yet"."""
    try:
        return predicate(broker), None
    except NodeError as missing:
        return False, missing


def timed_out(predicate: Callable[[Any], Any], timeout: float, missing: NodeError | None) -> TimeoutError:
    """The error ``wait_for`` raises, naming the predicate (and a node still missing)."""
    name = getattr(predicate, "__name__", predicate)
    extra = f" ({missing})" if missing is not None else ""
    return TimeoutError(f"wait_for: {name!r} still false after {timeout} s{extra}")
