"""Attaching links: what a client's attach asks for, checked, resolved and answered.

A client attaches a link naming a terminus (Part 2 §2.6.3; Part 3 §3.5):
a receiving client's source names the node it consumes from, with its
distribution mode (``copy``: browse, broker paper 2.3.12), filters (2.3.10),
outcomes (Part 3 §3.4) and durability (a durable topic subscription,
2.3.11); a sending client's target names the node it publishes to, or none
for the anonymous relay (routing by each message's ``to``).  Either may ask
for a dynamic node (2.3.13).  What cannot be honoured raises
:class:`Refusal` with the error to refuse the link with.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from ..amqp import errors as conditions
from ..amqp.messaging import DeleteOnClose, Source, Target
from ..amqp.performatives import RCV_SECOND, SND_SETTLED, Error, amqp_error
from ..amqp.types import symbol
from ..protocol.endpoints import Link
from .consuming import ConsumerRequest, NodeConsumer
from .enqueued import asks_enqueued_time
from .filters import FilterError, parse_filter_set
from .limits import CreditGate
from .links import SUPPORTED_OUTCOMES, Client, ConsumerHost, ConsumerLink, ProducerHost, ProducerLink
from .node import Node
from .router import Router

if TYPE_CHECKING:
    from .queue import Queue
    from .selector import Selector
    from .streamfilters import StreamFilter
    from .topic import Subscription, Topic

__all__ = ["Attacher", "Refusal", "capabilities"]


class Refusal(Exception):
    """A link cannot be attached as asked: ``error`` says why (sent in the refusing detach)."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.error = amqp_error(condition, description)

    @classmethod
    def of(cls, error: Error) -> Refusal:
        """The refusal sending ``error`` (e.g. the router's, naming the bound that was reached)."""
        return cls(str(error.condition), error.description or "")


def capabilities(terminus: Any) -> frozenset[str]:
    """The capabilities a source or target lists (a single symbol or a list)."""
    caps = getattr(terminus, "capabilities", None)
    if not caps:
        return frozenset()
    if isinstance(caps, str):
        return frozenset({str(caps)})
    return frozenset(str(c) for c in caps)


def _outcomes(link: Link, source: Source) -> frozenset[str] | None:
    """The outcomes a receiving link declared (§3.5.3 ``outcomes``; None: any), or :class:`Refusal`
    for one it may not have (an unsupported outcome, rcv-settle-mode second on pre-settled sending)."""
    if link.rcv_settle_mode == RCV_SECOND and link.snd_settle_mode == SND_SETTLED:
        raise Refusal(conditions.INVALID_FIELD, "rcv-settle-mode second makes no sense with pre-settled sending")
    if not source.outcomes:
        return None
    outcomes = frozenset(str(o) for o in source.outcomes)
    unknown = outcomes - SUPPORTED_OUTCOMES
    if unknown:
        raise Refusal(
            conditions.NOT_IMPLEMENTED,
            f"outcomes {sorted(unknown)} are not supported; supported: {sorted(SUPPORTED_OUTCOMES)}",
        )
    return outcomes


def _read_filters(
    filter_set: dict[Any, Any] | None, now: float
) -> tuple[StreamFilter | None, Selector | None, dict[Any, Any] | None]:
    """A source's filter-set (broker paper 2.3.10) read: the stream filter (RabbitMQ's
    ``rabbitmq:stream-*`` filters and the filter expressions, streamfilters.py), the selector
    (filters.py), and the filter-set to echo; :class:`FilterError` for one not honoured.

    The stream filters (with the stream's log and the expressions they use) are imported with
    the first link that names a filter, the selector's parser with the first selector: most
    links name neither.
    """
    if not filter_set:
        return None, None, None
    from .streamfilters import has_stream_filters, parse_stream_filters

    if has_stream_filters(filter_set):
        stream_filter, filters = parse_stream_filters(filter_set, now)
        return stream_filter, stream_filter.selector, filters
    selector, filters = parse_filter_set(filter_set)
    return None, selector, filters


def _reply_source(source: Source, address: str, browse: bool, filters: Any) -> Source:
    """The source the broker's attach answers with (Part 2 §2.6.3): the node's address (a dynamic
    one's, made now), the filters it applies, ``copy`` when it browses, and the outcomes it takes."""
    return Source(
        address=address,
        durable=source.durable,
        expiry_policy=source.expiry_policy,
        timeout=source.timeout,
        dynamic=source.dynamic,
        dynamic_node_properties=(
            {symbol("lifetime-policy"): DeleteOnClose()} if source.dynamic else source.dynamic_node_properties
        ),
        distribution_mode=symbol("copy") if browse else source.distribution_mode,
        filter=filters,
        default_outcome=source.default_outcome,
        outcomes=list(source.outcomes) if source.outcomes else [symbol(o) for o in sorted(SUPPORTED_OUTCOMES)],
        capabilities=source.capabilities,
    )


def _durable_name(user: str | None, container_id: str | None, link_name: str) -> str:
    """A durable subscription's name: it belongs to the user who created it (from SASL PLAIN) and
    their container-id and link name (broker paper 2.3.11), so another user reusing the same
    container-id and link name gets a subscription of their own.  Anonymous clients share one
    namespace: without a login there is no one to tell apart."""
    owner = f"{user}/" if user is not None else ""
    return f"{owner}{container_id}:{link_name}"


class Attacher:
    """Builds the broker's side of a link from the client's attach."""

    def __init__(
        self,
        router: Router,
        now: Callable[[], float],
        link_credit: int,
        credit_gate: CreditGate | None = None,
        host: ConsumerHost | None = None,
        on_stolen: Callable[[ConsumerLink], None] | None = None,
    ) -> None:
        self.router = router
        self.now = now
        self.link_credit = link_credit
        self.credit_gate = credit_gate  # producers of withhold-credit queues get only the room (limits.py)
        #: What a consumer on a queue reports outcomes, flows and its end to (the broker's consumer registry).
        self.host = host
        self._link_ids = itertools.count(1)  # distinct per consumer: undeliverable-here names them
        #: Called with a live consumer whose durable subscription a new attach takes over (link
        #: stealing, Part 2 §2.6.1): the broker detaches it with ``amqp:link:stolen``.
        self.on_stolen = on_stolen
        #: The connection that created each dynamic node (broker paper 2.3.13): only it may
        #: consume from the node; others may send to it (a reply-to address is made to be sent to).
        self._dynamic_owners: weakref.WeakKeyDictionary[Node, Client] = weakref.WeakKeyDictionary()

    def consumer(
        self, connection: Client, link: Link, container_id: str | None, factory: Callable[..., ConsumerLink] = ConsumerLink
    ) -> NodeConsumer:
        """Accept a link on which the client receives (source: any node, or a dynamic one), or raise :class:`Refusal`.

        The node builds the consumer (``Node.open_consumer``); the link is
        answered (attach) but the consumer not yet registered: the caller does that.
        ``factory`` builds a consumer on a queue (a layer's subclass, e.g. RabbitMQ's), given the
        ConsumerLink constructor's arguments.
        """
        source = link.source
        if not isinstance(source, Source):
            raise Refusal(conditions.INVALID_FIELD, "a receiving link needs a source naming the address to receive from")
        outcomes = _outcomes(link, source)
        try:
            stream_filter, selector, filters = _read_filters(source.filter, self.now())
        except FilterError as exc:
            raise Refusal(conditions.INVALID_FIELD, str(exc)) from None
        dynamic = bool(source.dynamic)
        node: Node | None
        if dynamic:
            address, node = self.router.declare_dynamic()
            self._dynamic_owners[node] = connection
        else:
            if not isinstance(source.address, str) or not source.address:
                raise Refusal(conditions.INVALID_FIELD, "the source has no address (set one, or dynamic=true)")
            address = source.address
            node = self.router.resolve(address, capabilities(source))
            if node is None:
                raise Refusal.of(self.router.refusal(address, capabilities(source)))
            owner = self._dynamic_owners.get(node)
            if owner is not None and owner is not connection:
                raise Refusal(
                    conditions.UNAUTHORIZED_ACCESS,
                    f"{address!r} is a dynamic node of another connection: only its creator receives from it "
                    "(attach with dynamic=true for one of your own)",
                )

        def queue_consumer(
            queue: Queue, *, browse: bool, subscription: Subscription | None = None, topic: Topic | None = None
        ) -> ConsumerLink:
            if stream_filter is not None:
                from .streamfilters import STREAM_FILTER_NAMES  # (loaded: it read the filters)

                raise Refusal(
                    conditions.INVALID_FIELD,
                    f"the stream filters ({STREAM_FILTER_NAMES}) apply to streams, and {address!r} is a {node.KIND}; "
                    f"declare it as a stream (declare_stream) or attach without them",
                )
            return self._queue_consumer(
                factory, connection, link, queue, browse, selector, source, outcomes, subscription, topic, dynamic
            )

        request = ConsumerRequest(
            connection=connection,
            link=link,
            copy=source.distribution_mode == "copy",
            selector=selector,
            durable=bool(source.durable) and source.expiry_policy == "never",
            durable_name=_durable_name(connection.protocol.user, container_id, link.name),
            queue_consumer=queue_consumer,
            stream_filter=stream_filter,
        )
        topic = self.router.topics.get(node.name) if request.durable else None
        if topic is not None:  # a durable subscription: a link that reattaches takes it over
            self._steal(topic, request.durable_name)
        consumer = node.open_consumer(request)
        browse = consumer.browse
        link.context = consumer
        # A reader that asked for its deliveries' enqueued time is told it gets it (enqueued.py);
        # a stream's reader is told the stream's offsets (stream.py, attach_properties).
        offered = list(consumer.offered_capabilities) or None
        reply = _reply_source(source, address, browse, filters)
        connection.protocol.accept_link(
            link, source=reply, target=link.target, offered_capabilities=offered, properties=consumer.attach_properties
        )
        return consumer

    def _queue_consumer(
        self,
        factory: Callable[..., ConsumerLink],
        connection: Client,
        link: Link,
        queue: Queue,
        browse: bool,
        selector: Selector | None,
        source: Source,
        outcomes: frozenset[str] | None,
        subscription: Subscription | None,
        topic: Topic | None,
        dynamic: bool,
    ) -> ConsumerLink:
        """The broker's consuming link on a queue (or a topic's subscription queue)."""
        return factory(
            connection,
            link,
            queue,
            next(self._link_ids),
            self.now,
            browse=browse,
            selector=selector,
            default_outcome=source.default_outcome,
            outcomes=outcomes,
            subscription=subscription,
            topic=topic,
            dynamic=dynamic,
            host=self.host,
            # The consumer of a queue, browsing or not, that asks for its messages' arrival times
            # gets them (enqueued.py), as a stream's reader gets its append times.
            enqueued_time=asks_enqueued_time(link.attach.desired_capabilities),
        )

    def _steal(self, topic: Topic, durable_name: str) -> None:
        """A link is identified by its name and its container (Part 2 §2.6.1): attaching a name
        that is live elsewhere takes it over, and the old link is detached (``amqp:link:stolen``)
        rather than sharing the subscription's messages with the new one."""
        existing = topic.subscriptions.get(f"{topic.name}::{durable_name}")  # Topic.open_consumer's key
        if existing is None or not existing.attached or self.on_stolen is None:
            return
        for consumer in list(existing.queue.consumers):
            # The subscription's links are the queue's consumers that name it (another front end's
            # consumer of the same queue names none).
            if getattr(consumer, "subscription", None) is existing:
                self.on_stolen(cast(ConsumerLink, consumer))

    def producer(self, connection: Client, link: Link, host: ProducerHost) -> ProducerLink:
        """Accept a link on which the client sends (target: a node, a dynamic node or none for anonymous relay)."""
        target = link.target
        if not isinstance(target, Target):
            raise Refusal(conditions.INVALID_FIELD, "a sending link needs a target (null address for anonymous relay)")
        dynamic = bool(target.dynamic)
        address: str | None
        if dynamic:
            address, queue = self.router.declare_dynamic()
            self._dynamic_owners[queue] = connection
        elif target.address is None:
            address = None  # anonymous relay: route every message by its ``to``
        else:
            if not isinstance(target.address, str) or not target.address:
                raise Refusal(conditions.INVALID_FIELD, f"target address must be a string, got {target.address!r}")
            address = target.address
            if self.router.resolve(address, capabilities(target)) is None:
                raise Refusal.of(self.router.refusal(address, capabilities(target)))
        producer = ProducerLink(connection, link, address, dynamic, host)
        link.context = producer
        reply = Target(
            address=address,
            durable=target.durable,
            expiry_policy=target.expiry_policy,
            timeout=target.timeout,
            dynamic=target.dynamic,
            dynamic_node_properties=(
                {symbol("lifetime-policy"): DeleteOnClose()} if dynamic else target.dynamic_node_properties
            ),
            capabilities=target.capabilities,
        )
        connection.protocol.accept_link(link, source=link.source, target=reply)
        node = self.router.resolve(address, capabilities(target)) if address is not None else None
        gated = self.credit_gate.gated(node) if self.credit_gate is not None else None
        if gated is not None and self.credit_gate is not None:  # withhold-credit (limits.py)
            self.credit_gate.attach(gated, producer)
        else:
            connection.protocol.grant_credit(link, self.link_credit)
        return producer
