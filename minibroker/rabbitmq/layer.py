"""The RabbitMQ layer: RabbitMQ 4's addresses, exchanges and management node on the broker.

Turned on by ``BrokerConfig(rabbitmq=RabbitMQOptions(...))`` (which also
makes every connection's ``open`` say product ``RabbitMQ``, as its client
requires), or when a client attaches ``/management``.  It takes the links
whose addresses are RabbitMQ's: the management pair, ``/queues/`` consumers
(and direct reply-to's dynamic ones), publishers to ``/exchanges/``,
``/queues/`` and the null address.  Other links are the broker's, so plain
addresses keep working and ``/queues/orders`` and ``orders`` are one queue.

Queues stay the broker's own (declared through ``/management`` with their
arguments mapped by :mod:`.arguments`); exchanges and bindings live here
(:mod:`.exchanges`).  A message published through an exchange enters each
queue it routes to through the broker's router, with RabbitMQ's
``x-exchange`` and ``x-routing-key`` annotations.
"""

from __future__ import annotations

import dataclasses
import uuid
import weakref
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from ..amqp import errors as conditions
from ..amqp.messaging import Accepted, MessageAnnotations, Rejected, Released, Source, Target
from ..amqp.performatives import Error, amqp_error
from ..amqp.types import symbol
from ..broker.attach import Refusal, capabilities
from ..broker.client_connection import ConnectionIdentity
from ..broker.publish import Source as MessageSource
from ..broker.publish import route_all
from ..broker.queue import Queue
from ..broker.replies import ReplyLink
from ..broker.router import NodeError
from ..broker.stored import Entry, StoredMessage
from ..protocol.endpoints import Link
from .addresses import (
    MANAGEMENT,
    QUEUES,
    AddressError,
    Destination,
    is_rabbitmq_address,
    parse_destination,
    queue_address,
)
from .arguments import QueueSpec, dead_letter_target
from .exchanges import MAX_KEY_BYTES, Binding, ExchangeError, Exchanges, RoutingRefused, key_too_long
from .expiry import QueueExpiry
from .links import X_EXCHANGE, X_ROUTING_KEY, ManagementRequests, Publisher, RabbitConsumer
from .options import RabbitMQOptions
from .snapshots import BindingSnapshot, ExchangeSnapshot

if TYPE_CHECKING:
    from ..broker.client_connection import BrokerConnection
    from ..broker.layers import LayerHost

__all__ = ["RabbitMQLayer", "DIRECT_REPLY_TO_CAPABILITY"]

#: The capability RabbitMQ's clients put on a dynamic source to ask for direct reply-to.
DIRECT_REPLY_TO_CAPABILITY = "rabbitmq:volatile-queue"
DIRECT_REPLY_TO_PREFIX = "amq.rabbitmq.reply-to."
#: RabbitMQ's dead-lettering reasons, by the reason the broker's queues give.
_DEATH_REASONS = {
    "TTLExpiredException": "expired",
    "MaxLengthExceeded": "maxlen",
    "MaxDeliveryCountExceeded": "delivery_limit",
}
#: The node kinds RabbitMQ calls queues (its classic and quorum queues, and its streams).
QUEUE_KINDS = ("queue", "stream")
#: The node name RabbitMQ reports as a queue's leader and replica.
NODE_NAME = "rabbit@minibroker"


class RabbitMQLayer:
    """RabbitMQ 4 semantics for the broker's clients (see the module docstring)."""

    def __init__(self, broker: LayerHost, options: RabbitMQOptions | None = None) -> None:
        self.broker = broker
        #: Given options (the broker was asked to be RabbitMQ, not only turned on by ``/management``):
        #: every connection's ``open`` says product ``RabbitMQ`` and ``version``, as its client
        #: requires, and answers an attach before the transfers read with it, RabbitMQ's order.
        self.identity = (
            ConnectionIdentity(
                {"product": "RabbitMQ", "version": options.version, "minibroker": True},
                users=options.users,
                attach_answer_alone=True,
            )
            if options is not None
            else None
        )
        self.options = options or RabbitMQOptions()
        options = self.options
        self.exchanges = Exchanges(self.is_queue, options.max_exchanges, options.max_bindings, options.max_topic_visits)
        #: Queues declared through /management, with their type and arguments.
        self.specs: dict[str, QueueSpec] = {}
        #: Queues declared with ``x-dead-letter-exchange``: their dead letters are this layer's to route.
        self._dead_lettered: weakref.WeakSet[Queue] = weakref.WeakSet()
        broker.router.dead_letter_handlers.append(self._dead_letter)
        #: Messages no queue received (settled ``released``), over all exchanges.
        self.unroutable = 0
        #: Queues with ``x-expires``: deleted once unused that long (no consumer, no declare or get).
        self.expiry = QueueExpiry(
            self.specs, lambda name: broker.router.queues.get(name), broker.now, self.delete_queue, self.broker.timers_changed
        )
        if broker.permissions is not None:  # RabbitMQ addresses never create a node: send/receive rights suffice
            broker.permissions.creates_nothing = is_rabbitmq_address

    def is_queue(self, name: str) -> bool:
        """Whether ``name`` is what RabbitMQ calls a queue here (a queue or a stream node)."""
        node = self.broker.router.nodes.get(name)
        return node is not None and node.KIND in QUEUE_KINDS

    # ------------------------------------------------------------ connections

    def opened(self, connection: BrokerConnection, hostname: str | None) -> Error | None:
        """Refuse a virtual host the broker does not have (``open``'s hostname ``vhost:NAME``).

        As RabbitMQ 4 does (``rabbit_amqp_reader:check_vhost_exists``): the ``open`` is not
        answered and the socket closes, so the client fails to connect (its
        ``ConnectionException``) instead of taking a ``close`` for a dropped connection to
        recover.  RabbitMQ's error, ``amqp:unauthorized-access``, goes only to its log; here it
        goes to the broker's observers (the failure report).  RabbitMQ waits 3 s before
        closing, against password guessing; a test broker closes at once.
        """
        if hostname is None or not hostname.startswith("vhost:"):
            return None  # RabbitMQ takes any other hostname as the default virtual host
        vhost = unquote(hostname[len("vhost:") :])
        if vhost in self.options.vhosts:
            return None
        return amqp_error(
            conditions.UNAUTHORIZED_ACCESS,
            f"AMQP 1.0 connection failed: virtual host '{vhost}' does not exist; this broker has "
            f"{list(self.options.vhosts)} (RabbitMQOptions.vhosts)",
        )

    # ------------------------------------------------------------------ attach

    def attach(self, connection: BrokerConnection, link: Link) -> bool:
        if link.is_sender:
            return self._attach_outgoing(connection, link)
        target = link.target
        if not isinstance(target, Target) or target.dynamic:
            return False  # the coordinator, a dynamic node: the broker's
        engine = connection.engine
        address = target.address
        if address == MANAGEMENT:
            link.context = ManagementRequests(self, connection, link)
        elif address is None:
            link.context = Publisher(self, connection, link, None)
        elif isinstance(address, str) and (address.startswith(QUEUES) or address.startswith("/exchanges/")):
            link.context = Publisher(self, connection, link, self._existing(address))
        else:
            return False
        engine.accept_link(link, source=link.source, target=target)
        engine.grant_credit(link, self.broker.config.link_credit)
        return True

    def _attach_outgoing(self, connection: BrokerConnection, link: Link) -> bool:
        source = link.source
        if not isinstance(source, Source):
            return False
        address = source.address
        if address == MANAGEMENT:
            link.context = ReplyLink(connection, link)
            connection.engine.accept_link(link, source=source, target=link.target)
            return True
        if source.dynamic and DIRECT_REPLY_TO_CAPABILITY in capabilities(source):
            name = DIRECT_REPLY_TO_PREFIX + uuid.uuid4().hex
            self.broker.router.declare_queue(name, temporary=True)
            link.source = dataclasses.replace(source, dynamic=False, address=queue_address(name))
            consumer = self.broker.attacher.consumer(connection, link, connection.container_id, _dynamic_consumer)
            self.broker.add_consumer(consumer)
            return True
        if not isinstance(address, str) or not (address.startswith(QUEUES) or address.startswith("/exchanges/")):
            return False
        destination = self._existing(address)
        if destination.kind != "queue":
            raise Refusal(conditions.INVALID_FIELD, f"{address!r}: consume from a queue, /queues/{{name}}")
        spec = self.specs.get(destination.name)

        def build(*args: Any, **kwargs: Any) -> RabbitConsumer:
            consumer = RabbitConsumer(*args, **kwargs)
            if spec is not None:  # a queue declared with RabbitMQ's arguments
                consumer.single_active = spec.single_active_consumer
                consumer.on_end = self._consumer_ended
            return consumer

        self.broker.add_consumer(self.broker.attacher.consumer(connection, link, connection.container_id, build))
        return True

    def _existing(self, address: str) -> Destination:
        """The destination a v2 address names, which must exist; else :class:`Refusal`."""
        try:
            destination = parse_destination(address)
        except AddressError as exc:
            raise Refusal(conditions.INVALID_FIELD, str(exc)) from None
        if destination.kind == "exchange" and destination.name not in self.exchanges.exchanges:
            raise Refusal(conditions.NOT_FOUND, f"no exchange '{destination.name}' in vhost '/'")
        if destination.kind == "exchange" and self.exchanges.exchanges[destination.name].internal:
            raise Refusal(conditions.UNAUTHORIZED_ACCESS, f"forbidden to publish to internal exchange '{destination.name}'")
        if destination.kind == "queue" and not self.is_queue(destination.name):
            raise Refusal(conditions.NOT_FOUND, f"no queue '{destination.name}' in vhost '/'")
        if destination.key is not None and key_too_long(destination.key):
            raise Refusal(conditions.INVALID_FIELD, _long_key(destination.key))
        return destination

    # ----------------------------------------------------------------- routing

    def publish(
        self, destination: Destination | None, message: StoredMessage, now: float,
        source: MessageSource = MessageSource.CLIENT,
    ) -> Any:  # fmt: skip
        """Route one message; the outcome to settle it with (RabbitMQ 4: ``released`` when unroutable)."""
        if destination is None:
            properties = message.properties
            to = properties.to if properties is not None else None
            if not isinstance(to, str) or not (to.startswith(QUEUES) or to.startswith("/exchanges/")):
                router = self.broker.router  # a plain address: the broker's anonymous relay
                return route_all(router.node_for_publish, router.publisher, None, [message], now)
            try:
                destination = parse_destination(to)
            except AddressError as exc:
                return Rejected(error=amqp_error(conditions.INVALID_FIELD, str(exc)))
        if destination.kind == "exchange":
            exchange = self.exchanges.exchanges.get(destination.name)
            if exchange is None:  # named by `to`, or deleted since the link attached
                return Rejected(error=amqp_error(conditions.NOT_FOUND, f"no exchange '{destination.name}' in vhost '/'"))
            if exchange.internal:
                return Rejected(
                    error=amqp_error(
                        conditions.UNAUTHORIZED_ACCESS, f"forbidden to publish to internal exchange '{destination.name}'"
                    )
                )
        if destination.kind == "queue":
            return self.route("", destination.name, message, now, source)
        if destination.key is not None:
            return self.route(destination.name, destination.key, message, now, source)
        # /exchanges/{name}: the routing key is the message's subject
        subject = message.properties.subject if message.properties is not None else None
        return self.route(destination.name, str(subject) if subject is not None else "", message, now, source)

    def route(self, exchange: str, key: str, message: StoredMessage, now: float, source: MessageSource) -> Any:
        """Publish to ``exchange`` with ``key``: each queue it routes to gets the message once.

        Each copy enters its queue through the broker's publish path, so limits
        (x-max-length, x-max-length-bytes) apply to what clients send and the
        plugin's recorder sees every message.  A routing key over 255 bytes is
        rejected with ``amqp:invalid-field``, the condition RabbitMQ 4 rejects a
        message's bad routing keys with (``bad_x_cc`` in ``rabbit_amqp_session``);
        one whose topic match passes ``max_topic_visits`` with ``amqp:resource-limit-exceeded``.
        """
        if exchange and key_too_long(key):
            return Rejected(error=amqp_error(conditions.INVALID_FIELD, _long_key(key)))
        try:
            queues = self.exchanges.route(exchange, key, message.application_properties)
        except RoutingRefused as exc:  # crafted topic bindings: the work one message may cost is bounded
            return Rejected(error=amqp_error(conditions.RESOURCE_LIMIT_EXCEEDED, str(exc)))
        if not queues:
            self.unroutable += 1
            return Released()
        annotated = _annotated(message, {X_EXCHANGE: exchange, X_ROUTING_KEY: key})
        refused: list[Error] = []
        router = self.broker.router
        for name in queues:
            error = router.route(router.nodes[name], annotated, now, source)
            if error is not None:
                refused.append(error)
        return Rejected(error=refused[0]) if refused else Accepted()

    # ------------------------------------------------------------------ queues

    def declare_queue(self, spec: QueueSpec) -> None:
        """Create a queue as ``PUT /queues/{name}`` asks; 409 if it exists declared differently."""
        name = spec.name
        if name.startswith("amq."):
            raise ExchangeError(403, f"ACCESS_REFUSED - queue name '{name}' contains reserved prefix 'amq.*'")
        router = self.broker.router
        kind = "stream" if spec.type == "stream" else "queue"
        other = router.nodes.get(name)
        if other is not None and other.KIND != kind:
            raise ExchangeError(
                409 if other.KIND in QUEUE_KINDS else 400,
                f"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue '{name}' in vhost '/': "
                f"received '{spec.type}' but '{name}' is a {other.KIND} here",
            )
        limit = self.options.max_queues
        if other is None and limit is not None and len(self.specs) >= limit:
            raise ExchangeError(  # RabbitMQ's answer past its cluster_queue_limit: 403
                403,
                f"cannot declare queue '{name}': queue limit of {limit} queues declared through /management is "
                "reached (RabbitMQOptions.max_queues); delete queues or raise the limit",
            )
        existing = self.specs.get(name) if other is not None else None
        if existing is not None:
            differs = existing.equivalent(spec)
            if differs is not None:
                raise ExchangeError(
                    409,
                    f"PRECONDITION_FAILED - inequivalent arg '{differs}' for queue '{name}' in vhost '/': "
                    f"received {_shown(spec, differs)} but current is {_shown(existing, differs)}",
                )
            self.used(name)
            return
        self.specs[name] = spec
        if spec.stream is not None:  # a node made another way takes the declaration too
            self.broker.declare_stream(name, spec.stream)
            return
        queue = router.queues.get(name)
        if queue is None:
            queue = self.broker.declare_queue(name, spec.options)
        else:
            queue.options = spec.options  # a queue made by a plain address takes the declaration
        if spec.dead_letter_exchange is not None:
            self._dead_lettered.add(queue)  # its dead letters go to the exchange (_dead_letter)
        self.used(name)

    def delete_queue(self, name: str) -> int:
        """``DELETE /queues/{name}``: the queue, its bindings and declaration; its ready-message count."""
        self.specs.pop(name, None)
        self.expiry.forget(name)
        self.exchanges.drop_destination(name, "queue")
        node = self.broker.router.nodes.get(name)
        if node is None or node.KIND not in QUEUE_KINDS:
            return 0
        count = self.message_count(name)
        self.broker.delete_node(name)
        return count

    def message_count(self, name: str) -> int:
        """RabbitMQ's ``message_count``: a queue's ready messages, a stream's retained ones."""
        router = self.broker.router
        queue = router.queues.get(name)
        if queue is not None:
            return queue.available_count
        return len(router.streams[name].log)

    def queue_info(self, name: str) -> dict[str, Any]:
        """What ``GET /queues/{name}`` answers (RabbitMQ's fields)."""
        router = self.broker.router
        queue = router.queues.get(name)
        spec = self.specs.get(name)
        kind = "stream" if queue is None else "classic"
        consumers = len(queue.consumers) if queue is not None else len(router.streams[name].readers)
        return {
            "name": name,
            "vhost": "/",
            "durable": spec.durable if spec is not None else True,
            "auto_delete": spec.auto_delete if spec is not None else False,
            "exclusive": spec.exclusive if spec is not None else False,
            "type": spec.type if spec is not None else kind,
            "arguments": dict(spec.arguments) if spec is not None else {},
            "leader": NODE_NAME,
            "replicas": [NODE_NAME],
            "message_count": self.message_count(name),
            "consumer_count": consumers,
        }

    def _dead_letter(self, queue: Queue, entry: Entry, reason: str, description: str | None) -> bool:
        """Republish a dead letter to the queue's ``x-dead-letter-exchange`` (RabbitMQ's dead-lettering).

        The routing key is ``x-dead-letter-routing-key``, else the message's
        own; ``x-first-death-*`` and ``x-last-death-*`` annotations say where
        and why.  With no such exchange the message is dropped, as RabbitMQ does.
        """
        if queue not in self._dead_lettered:
            return False  # not declared with x-dead-letter-exchange here: the router's own way
        annotations = entry.merged_annotations() or {}
        target = dead_letter_target(
            self.specs.get(queue.name), self.exchanges.exchanges, annotations.get(X_ROUTING_KEY), queue.name
        )
        if target is None:
            return True  # dropped, as RabbitMQ does
        exchange, key = target
        why = _DEATH_REASONS.get(reason, "rejected")
        death = {
            symbol("x-last-death-queue"): queue.name,
            symbol("x-last-death-reason"): why,
            symbol("x-last-death-exchange"): str(annotations.get(X_EXCHANGE, "")),
        }
        if symbol("x-first-death-queue") not in annotations:
            death.update({symbol(str(k).replace("x-last-", "x-first-")): v for k, v in death.items()})
        entry.annotate(death)
        now = self.broker.now()
        queue.counters.dead_lettered += 1
        # RabbitMQ drops the message's TTL when it dead-letters it, so it does not expire again.
        message = StoredMessage(entry.payload_for_delivery(now, keep_ttl=False), now)
        self.route(exchange, key, message, now, MessageSource.DEAD_LETTER)
        return True

    # ------------------------------------------------------------- inspection

    def exchange_snapshot(self, name: str) -> ExchangeSnapshot:
        exchange = self.exchanges.exchanges.get(name)
        if exchange is None:
            raise LookupError(f"no exchange named {name!r}; known exchanges: {sorted(self.exchanges.exchanges)}")
        return ExchangeSnapshot(
            name=exchange.name,
            type=exchange.type,
            durable=exchange.durable,
            auto_delete=exchange.auto_delete,
            internal=exchange.internal,
            arguments=dict(exchange.arguments),
            bindings=tuple(
                BindingSnapshot(b.destination, b.destination_kind, b.key, dict(b.arguments)) for b in exchange.bindings
            ),
            published=exchange.published,
            unroutable=exchange.unroutable,
        )

    def bind(self, binding: Binding) -> None:
        self.exchanges.bind(binding)

    def publish_to_exchange(self, address: str, payload: bytes) -> None:
        """Route an encoded message to ``/exchanges/{name}/{key}`` as a client's publish would (the
        Python API's ``publish``; unroutable: counted, dropped).  Raises for an exchange that does
        not exist or refuses it (an internal exchange takes no publishers)."""
        destination = parse_destination(address)
        if destination.name not in self.exchanges.exchanges:
            raise NodeError(f"no exchange named {destination.name!r}; declare it first (broker.declare_exchange)")
        now = self.broker.now()
        outcome = self.publish(destination, StoredMessage(payload, now), now, MessageSource.API)
        error = getattr(outcome, "error", None)
        if error is not None:
            raise ValueError(f"{address!r} refused the message: {error.description}")

    # ------------------------------------------------------------------ timers
    #
    # x-expires (RabbitMQ: "queue TTL"): a queue unused for that long is deleted.  Unused: no
    # consumer, and not declared or read (GET) through /management since.  Message TTLs are
    # the queues' own timers.

    def used(self, name: str) -> None:
        """``name`` was declared or read: an ``x-expires`` queue's idle time starts again."""
        self.expiry.used(name)

    def _consumer_ended(self, name: str, now: float) -> None:
        spec = self.specs.get(name)
        queue = self.broker.router.queues.get(name)
        if spec is not None and spec.auto_delete and queue is not None and not queue.consumers:
            self.delete_queue(name)  # RabbitMQ: an auto-delete queue goes with its last consumer
            return
        self.used(name)

    def next_deadline(self) -> float | None:
        return self.expiry.next_deadline()

    def run_timers(self, now: float) -> None:
        self.expiry.run_timers(now)

    def reset(self) -> None:
        self.exchanges.reset()
        self.specs.clear()
        self.expiry.clear()
        self.unroutable = 0


def _long_key(key: str) -> str:
    size = len(key.encode("utf-8", "surrogatepass"))
    return (
        f"routing key of {size} bytes: a routing key is at most {MAX_KEY_BYTES} bytes of UTF-8 "
        "(an AMQP 0-9-1 shortstr, as RabbitMQ keeps it); use a shorter key"
    )


def _shown(spec: QueueSpec, argument: str) -> str:
    if argument == "x-queue-type":
        return f"'{spec.type}'"
    if argument in ("durable", "exclusive", "auto_delete"):
        return f"'{getattr(spec, argument)}'"
    return f"'{spec.arguments.get(argument)}'" if argument in spec.arguments else "none"


def _annotated(message: StoredMessage, extra: dict[Any, Any]) -> StoredMessage:
    """``message`` with ``extra`` merged into its message-annotations (Part 3 §3.2.3: a broker may add them)."""
    merged = dict(message.message_annotations or {})
    merged.update(extra)
    sections = message.sections
    payload = message.payload
    out = bytearray(payload[: sections.message_annotations[0]])
    MessageAnnotations(merged).encode_into(out)
    out += payload[sections.bare[0] :]
    return StoredMessage(bytes(out), message.arrived_at)


def _dynamic_consumer(*args: Any, **kwargs: Any) -> RabbitConsumer:
    """A direct reply-to consumer: its queue goes when the link does."""
    consumer = RabbitConsumer(*args, **kwargs)
    consumer.dynamic = True
    return consumer
