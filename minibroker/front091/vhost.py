"""What AMQP 0-9-1 clients of one broker share: exchanges, queue declarations, exclusive owners.

Queues are the broker's own nodes (a queue declared here is the queue an AMQP 1.0 client reads
by its name).  Exchanges and bindings are the RabbitMQ layer's implementation
(:class:`minibroker.rabbitmq.exchanges.Exchanges`), one per broker: the layer's own when the
RabbitMQ 4 layer is on (so both protocols route through the same bindings), else one kept here,
which needs nothing else of the layer.  Queue arguments are mapped onto ``QueueOptions`` by the
layer's :func:`~minibroker.rabbitmq.arguments.queue_spec`.

Reply codes and texts are RabbitMQ 3.10's, checked against it (0-9-1 specification §1.2 leaves
the texts to the server; clients and tests match on RabbitMQ's).
"""

from __future__ import annotations

import base64
import dataclasses
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from ..amqp091 import errors as codes
from ..amqp091.errors import AMQP091Error
from ..broker.config import QueueOptions
from ..broker.publish import Source
from ..broker.queue import Queue
from ..broker.stored import Entry, OriginMessage, StoredMessage
from ..broker.stream import Stream
from ..rabbitmq.arguments import QueueSpec, dead_letter_target, queue_spec
from ..rabbitmq.exchanges import DEFAULT_EXCHANGES, Binding, ExchangeError, Exchanges, RoutingRefused
from ..rabbitmq.expiry import QueueExpiry
from ..rabbitmq.options import RabbitMQOptions
from .consumers import Ranking
from .conversion import X_DEATH, X_EXCHANGE, X_ROUTING_KEY, Arrived, header_of, record_death
from .deadletter import dead_letter, is_cycle
from .replyto import ReplyTargets
from .selected import BCC, routing_keys, without_bcc

if TYPE_CHECKING:
    from ..broker.engine import Broker
    from .consumers import AnyConsumer

__all__ = ["VirtualHost", "vhost_of"]

#: The node kinds a 0-9-1 client sees as queues.
QUEUE_KINDS = ("queue", "stream")
#: RabbitMQ's codes for the management statuses ``Exchanges`` raises with.
_STATUS_CODES = {
    400: codes.PRECONDITION_FAILED,
    403: codes.ACCESS_REFUSED,
    404: codes.NOT_FOUND,
    409: codes.PRECONDITION_FAILED,
}
#: The methods a stream refuses, as RabbitMQ names them in its 540 reply.
_STREAM_REFUSED = {(60, 70): "basic.get", (50, 30): "queue.purge"}
_HOSTS: weakref.WeakKeyDictionary[Broker, VirtualHost] = weakref.WeakKeyDictionary()


def vhost_of(broker: Broker) -> VirtualHost:
    """The one :class:`VirtualHost` of ``broker`` (made on its first 0-9-1 connection)."""
    host = _HOSTS.get(broker)
    if host is None:
        host = _HOSTS[broker] = VirtualHost(broker)
    return host


def _given(name: str, spec: QueueSpec) -> dict[str, Any]:
    """The queue options a declaration's x-arguments set: those its options differ in from a
    declaration with the same flags and no arguments."""
    plain = queue_spec(name, {"durable": spec.durable, "exclusive": spec.exclusive, "auto_delete": spec.auto_delete,
                              "arguments": {}}, QueueOptions()).options  # fmt: skip
    return {
        field.name: getattr(spec.options, field.name)
        for field in dataclasses.fields(QueueOptions)
        if getattr(spec.options, field.name) != getattr(plain, field.name)
    }


def not_found(kind: str, name: str, class_id: int = 0, method_id: int = 0) -> AMQP091Error:
    return AMQP091Error(codes.NOT_FOUND, f"no {kind} '{name}' in vhost '/'", class_id, method_id)


def _error(exc: ExchangeError, class_id: int, method_id: int) -> AMQP091Error:
    """An ``Exchanges`` refusal as the channel error RabbitMQ answers with (its text without the code name)."""
    text = str(exc)
    name, sep, rest = text.partition(" - ")
    if sep and name.isupper():
        text = rest
    return AMQP091Error(_STATUS_CODES.get(exc.status, codes.PRECONDITION_FAILED), text, class_id, method_id)


class VirtualHost:
    """Exchanges, declarations and exclusive queues of the 0-9-1 clients of one broker (vhost ``/``)."""

    def __init__(self, broker: Broker) -> None:
        # Weakly: ``_HOSTS`` keys this by its broker weakly, and a value holding its key strongly
        # would keep every broker that had a 0-9-1 client, with all its messages, for ever.
        self.broker = cast("Broker", weakref.proxy(broker))
        # The RabbitMQ layer's declaration bounds apply to 0-9-1 clients too (docs/limits-and-security.md).
        self.options = broker.config.layers.get("rabbitmq") or RabbitMQOptions()
        options = self.options
        self._shared: Exchanges | None = None
        self._own = Exchanges(self.is_queue, options.max_exchanges, options.max_bindings, options.max_topic_visits)
        #: Queues declared over 0-9-1: how, for redeclarations (RabbitMQ's equivalence check).
        self.specs: dict[str, QueueSpec] = {}
        #: Queues declared with ``x-dead-letter-exchange``: their dead letters are this host's to route.
        self._dead_lettered: weakref.WeakSet[Queue] = weakref.WeakSet()
        broker.router.dead_letter_handlers.append(self._dead_letter)
        #: Exclusive queues by the connection that declared them (deleted when it closes).
        self.owners: dict[str, object] = {}
        #: The 0-9-1 consumers of each queue (told with ``basic.cancel`` when it is deleted).
        self.readers: dict[str, dict[AnyConsumer, None]] = {}
        #: Channels consuming ``amq.rabbitmq.reply-to`` (direct reply-to), by token.
        self.replies = ReplyTargets()
        #: Queues with ``x-expires``: deleted once unused that long (RabbitMQ's queue TTL).
        # Through the proxy, never a bound method of the broker's (that would hold it strongly).
        self.expiry = QueueExpiry(
            self.specs,
            lambda name: self.broker.router.queues.get(name),
            lambda: self.broker.now(),
            self.delete_queue,
            lambda: self.broker.timers_changed(),
        )
        #: Per queue, how many of its 0-9-1 consumers have an ``x-priority`` (consumers.py).
        self.rankings: dict[str, Ranking] = {}
        broker.timers.add(self)
        broker.reset_hooks.append(self.reset)
        broker.node_deleted_hooks.append(self.node_deleted)

    def reset(self) -> None:
        self._own.reset()
        self.specs.clear()
        self.owners.clear()
        self.readers.clear()
        self.replies.clear()
        self.expiry.clear()
        self.rankings.clear()

    def consumer_added(self, consumer: AnyConsumer) -> None:
        """A channel started ``consumer``: it is told with ``basic.cancel`` if its queue goes."""
        self.readers.setdefault(consumer.name, {})[consumer] = None

    def consumer_removed(self, consumer: AnyConsumer) -> None:
        """A channel ended ``consumer``: its queue's auto-delete or ``x-expires`` idle time may start."""
        readers = self.readers.get(consumer.name)
        if readers is not None:
            readers.pop(consumer, None)
            if not readers:
                del self.readers[consumer.name]
        spec = self.specs.get(consumer.name)
        if spec is not None and not consumer.remaining():
            if spec.auto_delete:
                # RabbitMQ: an auto-delete queue goes when its last consumer does.
                self.delete_queue(consumer.name)
            else:
                self.used(consumer.name)  # an x-expires queue's idle time starts

    @property
    def exchanges(self) -> Exchanges:
        """The RabbitMQ 4 layer's exchanges when it is on (shared with its AMQP 1.0 clients), else ours."""
        if self._shared is None:  # looked up until found: a layer, once on, stays on (and keeps its Exchanges)
            shared = getattr(self.broker.layer("rabbitmq"), "exchanges", None)
            self._shared = shared if isinstance(shared, Exchanges) else None
        return self._shared if self._shared is not None else self._own

    def is_queue(self, name: str) -> bool:
        node = self.broker.router.nodes.get(name)
        return node is not None and node.KIND in QUEUE_KINDS

    def queue(self, name: str, class_id: int, method_id: int) -> Queue:
        """The queue named ``name``, or 404 NOT_FOUND."""
        queue = self.broker.router.queues.get(name)
        if queue is None:
            if name in self.broker.router.streams:
                # RabbitMQ 3.10 closes the connection (540) for what a stream cannot do.
                what = _STREAM_REFUSED.get((class_id, method_id), "this method")
                raise AMQP091Error(
                    codes.NOT_IMPLEMENTED, f"{what} not supported by stream queues queue '{name}' in vhost '/'",
                    class_id, method_id,
                )  # fmt: skip
            raise not_found("queue", name, class_id, method_id)
        return queue

    def stream(self, name: str) -> Stream | None:
        """The stream named ``name``, if it is one."""
        return self.broker.router.streams.get(name)

    def check_owner(self, name: str, owner: object, class_id: int, method_id: int) -> None:
        """405 RESOURCE_LOCKED when another connection declared ``name`` exclusive."""
        holder = self.owners.get(name)
        if holder is not None and holder is not owner:
            raise _locked(name, class_id, method_id)

    # ------------------------------------------------------------ exchanges

    def declare_exchange(
        self, name: str, kind: str, *, passive: bool, durable: bool, auto_delete: bool, internal: bool,
        arguments: Mapping[str, Any],
    ) -> None:  # fmt: skip
        """``exchange.declare`` (§1.6.2.1); passive: 404 unless it exists.  The default exchange
        is refused even passively (403), as RabbitMQ's ``check_not_default_exchange`` does."""
        if name == "":
            raise AMQP091Error(codes.ACCESS_REFUSED, "operation not permitted on the default exchange", 40, 10)
        exchanges = self.exchanges
        existing = exchanges.exchanges.get(name)
        if passive:
            if existing is None:
                raise not_found("exchange", name, 40, 10)
            return
        if existing is None and (name == "" or name.startswith("amq.")):
            raise AMQP091Error(codes.ACCESS_REFUSED, f"exchange name '{name}' contains reserved prefix 'amq.*'", 40, 10)
        if existing is not None:
            for field, wanted, current in (
                ("type", kind, existing.type),
                ("durable", durable, existing.durable),
                ("auto_delete", auto_delete, existing.auto_delete),
                ("internal", internal, existing.internal),
            ):
                if wanted != current:
                    raise AMQP091Error(
                        codes.PRECONDITION_FAILED,
                        f"inequivalent arg '{field}' for exchange '{name}' in vhost '/': "
                        f"received '{_shown(wanted)}' but current is '{_shown(current)}'",
                        40, 10,
                    )  # fmt: skip
            wanted_ae, current_ae = arguments.get("alternate-exchange"), existing.arguments.get("alternate-exchange")
            if wanted_ae != current_ae:
                raise AMQP091Error(
                    codes.PRECONDITION_FAILED,
                    f"inequivalent arg 'alternate-exchange' for exchange '{name}' in vhost '/': "
                    + _ae_inequivalence(wanted_ae, current_ae),
                    40, 10,
                )  # fmt: skip
            return
        try:
            exchanges.declare(
                name, kind, durable=durable, auto_delete=auto_delete, internal=internal, arguments=arguments
            )
        except ExchangeError as exc:
            if exc.status == 400:  # an unknown type: RabbitMQ closes the connection for it
                raise AMQP091Error(codes.COMMAND_INVALID, f"unknown exchange type '{kind}'", 40, 10) from None
            raise _error(exc, 40, 10) from None

    def delete_exchange(self, name: str, if_unused: bool) -> None:
        """``exchange.delete`` (§1.6.2.3): a missing one is no error (RabbitMQ 3.x)."""
        if name == "":
            raise AMQP091Error(codes.ACCESS_REFUSED, "operation not permitted on the default exchange", 40, 20)
        exchanges = self.exchanges
        existing = exchanges.exchanges.get(name)
        if existing is None:
            return
        if name in DEFAULT_EXCHANGES:
            raise AMQP091Error(codes.ACCESS_REFUSED, f"operation not permitted on exchange '{name}'", 40, 20)
        if if_unused and existing.bindings:
            raise AMQP091Error(codes.PRECONDITION_FAILED, f"exchange '{name}' in vhost '/' in use", 40, 20)
        exchanges.delete(name)

    def bind(self, binding: Binding, class_id: int, method_id: int, unbind: bool = False) -> None:
        """``queue.bind`` / ``exchange.bind`` and their unbinds (RabbitMQ's exchange-to-exchange extension)."""
        exchanges = self.exchanges
        if binding.source == "":
            raise AMQP091Error(codes.ACCESS_REFUSED, "operation not permitted on the default exchange", class_id, method_id)
        missing = None
        if binding.destination_kind == "queue" and not self.is_queue(binding.destination):
            missing = not_found("queue", binding.destination, class_id, method_id)
        elif binding.source not in exchanges.exchanges:
            missing = not_found("exchange", binding.source, class_id, method_id)
        elif binding.destination_kind == "exchange" and binding.destination not in exchanges.exchanges:
            missing = not_found("exchange", binding.destination, class_id, method_id)
        if missing is not None:
            if unbind:
                # RabbitMQ 3.10 answers unbind-ok when the queue or an exchange is gone (an
                # auto-delete exchange may have gone with its last binding): nothing is bound.
                return
            raise missing
        try:
            if unbind:
                exchanges.unbind(binding)
            else:
                exchanges.bind(binding)
        except ExchangeError as exc:
            raise _error(exc, class_id, method_id) from None

    # --------------------------------------------------------------- queues

    def declare_queue(
        self, name: str, *, owner: object, passive: bool, durable: bool, exclusive: bool, auto_delete: bool,
        arguments: Mapping[str, Any], authorise: Callable[[str, Mapping[str, Any]], None] | None = None,
    ) -> tuple[str, Queue | None]:  # fmt: skip
        """``queue.declare`` (§1.7.2.1): the queue's name (server-named when empty) and the queue
        (None for a stream, which is declared but read only over AMQP 1.0 here); ``authorise``
        checks the declaring user's permissions once the name is chosen (RabbitMQ checks a
        server-made name too)."""
        router = self.broker.router
        if passive:
            if not self.is_queue(name):
                raise not_found("queue", name, 50, 10)
            self.check_owner(name, owner, 50, 10)
            self.used(name)
            return name, router.queues.get(name)
        if not name:
            name = "amq.gen-" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        elif name.startswith("amq."):
            raise AMQP091Error(codes.ACCESS_REFUSED, f"queue name '{name}' contains reserved prefix 'amq.*'", 50, 10)
        if authorise is not None:
            authorise(name, arguments)
        try:
            spec = queue_spec(
                name,
                {"durable": durable, "exclusive": exclusive, "auto_delete": auto_delete, "arguments": dict(arguments)},
                QueueOptions(),
            )
        except ExchangeError as exc:
            raise _error(exc, 50, 10) from None
        if self.is_queue(name):
            self.check_owner(name, owner, 50, 10)
            existing = self.specs.get(name)
            if existing is not None:
                if existing.exclusive != spec.exclusive:
                    # RabbitMQ checks exclusivity first and strictly on a redeclare, even by the
                    # owner (rabbit_amqqueue:assert_equivalence): 405, not an inequivalent 406.
                    raise _locked(name, 50, 10)
                differs = existing.equivalent(spec)
                if differs is not None:
                    raise AMQP091Error(
                        codes.PRECONDITION_FAILED,
                        f"inequivalent arg '{differs}' for queue '{name}' in vhost '/': "
                        f"received {_argument(spec, differs, existing)} but current is {_argument(existing, differs, spec)}",
                        50, 10,
                    )  # fmt: skip
                self.used(name)
                return name, router.queues.get(name)
        _check_replicated(spec)
        limit = self.options.max_queues
        if limit is not None and len(self.specs) >= limit:
            raise AMQP091Error(
                codes.ACCESS_REFUSED,
                f"cannot declare queue '{name}': queue limit of {limit} queues declared over AMQP 0-9-1 is reached "
                "(RabbitMQOptions.max_queues); delete queues or raise the limit",
                50, 10,
            )  # fmt: skip
        self.specs[name] = spec
        if exclusive:
            self.owners[name] = owner
        if spec.stream is not None:
            self.broker.declare_stream(name, spec.stream)
            return name, None
        queue = router.queues.get(name)
        if queue is None:
            queue = self.broker.declare_queue(name, spec.options)
        else:
            # A queue made over AMQP 1.0 or the API (the pytest marker's ``queues=``) keeps its
            # options, as a RabbitMQ policy applies under a client's declaration; the x-arguments
            # the declaration gives win over them (RabbitMQ: "optional arguments take precedence").
            queue.options = dataclasses.replace(queue.options, **_given(name, spec))
        if spec.dead_letter_exchange is not None:
            self._dead_lettered.add(queue)  # its dead letters go to the exchange (_dead_letter)
        self.used(name)
        return name, queue

    def delete_queue(self, name: str) -> int:
        """Delete a queue (its bindings, declaration and consumers go in :meth:`node_deleted`);
        how many ready messages it had."""
        node = self.broker.router.nodes.get(name)
        if node is None or node.KIND not in QUEUE_KINDS:
            self.node_deleted(name, node)
            return 0
        queue = self.broker.router.queues.get(name)
        count = queue.available_count if queue is not None else 0
        self.broker.delete_node(name)
        return count

    def node_deleted(self, name: str, node: object) -> None:
        """A queue went (deleted over either protocol or the API): its declaration and bindings go,
        and its 0-9-1 consumers are told with ``basic.cancel`` (RabbitMQ's consumer cancel notification)."""
        self.specs.pop(name, None)
        self.owners.pop(name, None)
        self.expiry.forget(name)
        self.rankings.pop(name, None)
        self.exchanges.drop_destination(name, "queue")
        for consumer in list(self.readers.pop(name, {})):
            consumer.channel.end_consumer(consumer, notify=True)
            consumer.channel.connection.mark_dirty()

    def connection_closed(self, owner: object) -> None:
        """RabbitMQ deletes a connection's exclusive queues when it closes (§1.7.2.1 ``exclusive``)."""
        for name in [name for name, holder in self.owners.items() if holder is owner]:
            self.delete_queue(name)

    # --------------------------------------------------------------- routing

    def route(self, exchange: str, key: str, headers: Mapping[str, Any] | None) -> list[str]:
        """The queues a publish to ``exchange`` with ``key`` reaches (404 for a missing exchange),
        its ``CC`` and ``BCC`` keys included (406 for a ``CC`` or ``BCC`` that is not an array,
        reported after the exchange's errors, as RabbitMQ orders them: ``selected.py``)."""
        exchanges = self.exchanges
        found = exchanges.exchanges.get(exchange)
        if found is None:
            raise not_found("exchange", exchange, 60, 40)
        if found.internal:
            raise AMQP091Error(
                codes.ACCESS_REFUSED, f"cannot publish to internal exchange '{exchange}' in vhost '/'", 60, 40
            )
        also = routing_keys(headers) if headers else ()
        if headers and BCC in headers:
            headers = without_bcc(headers)  # RabbitMQ removes it before routing
        try:
            queues = exchanges.route(exchange, key, headers, also)
            # RabbitMQ's alternate exchanges: what an exchange routes nowhere goes to its
            # ``alternate-exchange`` (and on to that one's), each exchange tried once.
            tried = {exchange}
            while not queues:
                alternate = found.arguments.get("alternate-exchange")
                if not isinstance(alternate, str) or alternate in tried or alternate not in exchanges.exchanges:
                    break
                tried.add(alternate)
                found = exchanges.exchanges[alternate]
                queues = exchanges.route(alternate, key, headers, also)
            return queues
        except RoutingRefused as exc:
            raise AMQP091Error(codes.PRECONDITION_FAILED, str(exc), 60, 40) from None

    # ---------------------------------------------------------------- x-expires
    #
    # RabbitMQ's queue TTL: a queue unused for ``x-expires`` ms is deleted.  Unused: no
    # consumers, not redeclared and not read with ``basic.get`` since; on the broker's clock.

    def used(self, name: str) -> None:
        """``name`` was declared or read, or lost its last consumer: its idle time starts again."""
        self.expiry.used(name)


    def next_deadline(self) -> float | None:
        """When the first unused ``x-expires`` queue is due (timers.py)."""
        return self.expiry.next_deadline()

    def run_timers(self, now: float) -> None:
        self.expiry.run_timers(now)

    def _dead_letter(self, queue: Queue, entry: Entry, reason: str, description: str | None) -> bool:
        """Republish a dead letter to the queue's ``x-dead-letter-exchange`` with
        ``x-dead-letter-routing-key`` or its own key (RabbitMQ's dead-lettering; dropped without one)."""
        if queue not in self._dead_lettered:
            return False  # not declared with x-dead-letter-exchange here: the router's own way
        stored = entry.message
        if type(stored) is OriginMessage and entry.annotations is None and isinstance(stored.origin, Arrived):
            self._dead_letter_091(queue, stored.origin, reason)
            return True
        annotations = entry.merged_annotations() or {}
        target = dead_letter_target(
            self.specs.get(queue.name), self.exchanges.exchanges, annotations.get(X_ROUTING_KEY), queue.name
        )
        if target is None:
            return True  # dropped, as RabbitMQ does
        exchange, key = target
        now = self.broker.now()
        header = entry.message.header
        # The publisher's per-message TTL (0-9-1 expiration): RabbitMQ keeps it in the x-death
        # table as original-expiration when it drops it (aio-pika's suite reads it).
        expiration = str(int(header.ttl)) if header is not None and header.ttl is not None else None
        recorded = record_death(annotations, queue.name, reason, now, expiration)
        entry.annotate({**recorded, X_EXCHANGE: exchange, X_ROUTING_KEY: key})
        queue.counters.dead_lettered += 1
        # RabbitMQ drops the message's TTL when it dead-letters it, so it does not expire again.
        message = StoredMessage(entry.payload_for_delivery(now, keep_ttl=False), now)
        router = self.broker.router
        deaths = [{str(field): value for field, value in death.items()} for death in recorded[X_DEATH]]
        for name in self.exchanges.route(exchange, key, message.application_properties):
            if not is_cycle(reason, name, deaths):
                router.route(router.nodes[name], message, now, Source.DEAD_LETTER)
        return True


    def publish_refused(self, name: str, message: StoredMessage) -> None:
        """A full queue refused a publish: with ``x-overflow: reject-publish-dlx`` it is dead-lettered
        (reason ``maxlen``) as well as nacked, as RabbitMQ 3.10 does ("Queue Length Limit", its
        overflow behaviour; checked against a node)."""
        spec = self.specs.get(name)
        queue = self.broker.router.queues.get(name)
        if spec is not None and queue is not None and spec.arguments.get("x-overflow") == "reject-publish-dlx":
            self._dead_letter(queue, Entry(0, message, 0, None), "MaxLengthExceeded", None)

    def _dead_letter_091(self, queue: Queue, origin: Arrived, reason: str) -> None:
        """Dead-letter a 0-9-1 publish kept as it came in its 0-9-1 form, nothing converted
        (``deadletter.py``: RabbitMQ 3.10's routing keys, headers and ``x-death``)."""
        spec = self.specs.get(queue.name)
        target = dead_letter_target(spec, self.exchanges.exchanges, origin.routing_key, queue.name)
        if spec is None or target is None:
            return  # dropped, as RabbitMQ does
        exchange = target[0]
        now = self.broker.now()
        letter = dead_letter(origin, queue.name, reason, now, exchange, spec.dead_letter_routing_key)
        queue.counters.dead_lettered += 1
        new = letter.origin
        # No ttl: RabbitMQ removes the expiration, so it does not expire again.
        message = OriginMessage(new, header_of(new.properties, None), now)
        router = self.broker.router
        deaths = (new.properties.headers or {}).get("x-death")
        for name in self.exchanges.route(exchange, new.routing_key, new.properties.headers, letter.also):
            if not is_cycle(reason, name, deaths):
                router.route(router.nodes[name], message, now, Source.DEAD_LETTER)


def _ae_inequivalence(wanted: Any, current: Any) -> str:
    """RabbitMQ 3.10's words for a redeclared exchange's other ``alternate-exchange`` (checked against it)."""
    if wanted is not None and current is not None:
        return f"received '{wanted}' but current is '{current}'"
    if wanted is not None:
        return f"received the value '{wanted}' of type 'longstr' but current is none"
    return f"received none but current is the value '{current}' of type 'longstr'"


def _check_replicated(spec: QueueSpec) -> None:
    """Quorum queues and streams are durable, shared and kept: RabbitMQ refuses a new one declared
    auto-delete, exclusive or non-durable, in that order (``rabbit_quorum_queue:declare``,
    ``rabbit_stream_queue:declare``), with 406 naming the property."""
    if spec.type not in ("quorum", "stream"):
        return
    for refused, flagged in (("auto-delete", spec.auto_delete), ("exclusive-owner", spec.exclusive),
                             ("non-durable", not spec.durable)):  # fmt: skip
        if flagged:
            raise AMQP091Error(
                codes.PRECONDITION_FAILED, f"invalid property '{refused}' for queue '{spec.name}' in vhost '/'", 50, 10
            )


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(int(value)) if isinstance(value, int) else str(value)  # int32(3) shown as 3


def _argument(spec: QueueSpec, argument: str, other: QueueSpec) -> str:
    """How RabbitMQ shows one side of an inequivalent queue argument (``other``: the other side).

    ``rabbit_misc:assert_args_equivalence``: when both sides have the argument only the values
    are shown ("received '4' but current is '3'"); when one side lacks it, it is ``none`` and the
    other is shown with its type ("the value '3' of type 'signedint'").
    """
    if argument in ("durable", "exclusive", "auto_delete"):
        return f"'{_shown(getattr(spec, argument))}'"
    if argument == "x-queue-type":
        return f"'{spec.type}'"
    if argument not in spec.arguments:
        return "none"
    value = spec.arguments[argument]
    if argument in other.arguments:
        return f"'{_shown(value)}'"
    kind = "signedint" if isinstance(value, int) and not isinstance(value, bool) else "longstr"
    return f"the value '{_shown(value)}' of type '{kind}'"


def _locked(name: str, class_id: int, method_id: int) -> AMQP091Error:
    """RabbitMQ's 405 for an exclusive queue another connection owns, or whose exclusivity a redeclare changes."""
    return AMQP091Error(
        codes.RESOURCE_LOCKED,
        f"cannot obtain exclusive access to locked queue '{name}' in vhost '/'. It could be originally "
        "declared on another connection or the exclusive property value does not match that of the "
        "original declaration.",
        class_id, method_id,
    )  # fmt: skip
