"""The consumer registry: every receiving link the broker serves, from attach to end.

A consumer is any :class:`~.consuming.NodeConsumer` (a queue's or topic's
:class:`~.links.ConsumerLink`, an extension's consumer, whatever a new node
kind builds).  The registry starts it, passes it credit and the client's
outcomes, detaches it when its node is deleted and ends it with its link.  For
consumers on queues it also applies outcomes (Part 3 §3.4), staging those
that name a transaction (Part 4 §4.4.2) and refusing outcomes the link did
not declare (§3.5.3 ``outcomes``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..amqp import errors as conditions
from ..amqp.messaging import Accepted, Received, Rejected
from ..amqp.performatives import Error, amqp_error
from ..amqp.transactions import TransactionalState
from ..protocol.endpoints import Delivery
from .consuming import NodeConsumer
from .links import DELIVERY_FAILED, ConsumerLink, apply_outcome
from .node import Node
from .router import Router

if TYPE_CHECKING:
    from .transactions import TransactionManager

__all__ = ["Consumers"]


class Consumers:
    """The consumers the broker serves (an ended one is forgotten)."""

    def __init__(self, router: Router, now: Callable[[], float]) -> None:
        self.router = router
        self.now = now
        #: Set by the broker once built (transactions end consumers through :meth:`detach` too).
        self.transactions: TransactionManager | None = None
        self._consumers: set[NodeConsumer] = set()

    def __contains__(self, consumer: object) -> bool:
        return consumer in self._consumers

    def __len__(self) -> int:
        return len(self._consumers)

    def clear(self) -> None:
        self._consumers.clear()

    def add(self, consumer: NodeConsumer) -> None:
        """Start a consumer (one an extension attached, too); it ends with its link."""
        consumer.start(self)
        self._consumers.add(consumer)

    def credit(self, consumer: NodeConsumer, properties: dict[Any, Any] | None, drain: bool) -> None:
        """The client granted credit: a flow naming a transaction makes it transactional (§4.4.3)."""
        consumer.on_flow(properties)  # a transaction's credit (§4.4.3): it may detach the consumer
        if consumer not in self._consumers:
            return  # refused: the flow named a transaction that does not exist
        consumer.pump(self.now())
        if drain:
            # A drain is answered at once (§2.7.6) with what the consumer says is waiting.
            consumer.link.available = consumer.available()
            consumer.connection.protocol.drained(consumer.link)
            # The figure answered this drain; later flows (an echo, a credit top-up) must not
            # repeat a count the queue no longer has.
            consumer.link.available = 0

    def pump(self, consumer: NodeConsumer, now: float) -> None:
        """The session's window opened: a consumer that still reads sends what it may."""
        if consumer in self._consumers:
            consumer.pump(now)

    def on_flow(self, consumer: ConsumerLink, properties: dict[Any, Any] | None) -> None:
        """A consumer on a queue got a flow: one naming a transaction makes its credit transactional (§4.4.3)."""
        if self.transactions is not None:
            self.transactions.on_flow(consumer, properties)

    def drop_temporary(self, name: str) -> None:
        """A dynamic node's consumer ended: the node goes with it."""
        self.router.drop_temporary(name)

    def queue_outcomes(self, consumer: ConsumerLink, deliveries: list[Delivery], state: Any, settled: bool) -> None:
        """Apply one disposition's outcome to its deliveries from a queue, in order (a range, §2.7.6)."""
        if type(state) is Accepted and settled and consumer.outcomes is None:
            # The usual outcome for the whole range, as queue_outcome's first branch, in one loop.
            pop = consumer.unsettled.pop
            consumer.queue.accept_all(
                [entry for delivery in deliveries if (entry := pop(delivery.delivery_id, None)) is not None]
            )
            return
        for delivery in deliveries:
            self.queue_outcome(consumer, delivery, state, settled)

    def queue_outcome(self, consumer: ConsumerLink, delivery: Delivery, state: Any, settled: bool) -> None:
        """Apply a client's outcome to a delivery from a queue (the ``on_outcome`` of a ConsumerLink)."""
        entry = consumer.unsettled.get(delivery.delivery_id)
        if entry is None:
            return
        if type(state) is Accepted and settled and consumer.outcomes is None:
            # The usual outcome, settled by the client, on a link that declared no outcomes list.
            del consumer.unsettled[delivery.delivery_id]
            consumer.queue.accept(entry)
            return
        if isinstance(state, TransactionalState) and self.transactions is not None:
            self.transactions.stage_outcome(consumer, delivery, entry, state, settled)
            return
        if state is None or isinstance(state, Received):
            if not settled:
                return
            state = consumer.default_outcome or DELIVERY_FAILED
        if consumer.outcomes is not None and state.DESCRIPTOR_NAME not in consumer.outcomes:
            error = amqp_error(
                conditions.NOT_ALLOWED,
                f"outcome {state.DESCRIPTOR_NAME} is not among the outcomes this link declared: {sorted(consumer.outcomes)}",
            )
            self.detach(consumer, error)
            return
        del consumer.unsettled[delivery.delivery_id]
        now = self.now()
        apply_outcome(consumer.queue, entry, state, consumer.link_id, now)
        if not settled:
            consumer.connection.protocol.settle(delivery, state)
        if not isinstance(state, (Accepted, Rejected)):
            consumer.queue.dispatch(self.now())  # the message is available again

    def node_deleted(self, name: str, node: Node) -> None:
        """Detach every consumer reading from a deleted node with ``amqp:resource-deleted``."""
        error = amqp_error(conditions.RESOURCE_DELETED, f"node {name!r} was deleted")
        for consumer in list(self._consumers):
            if consumer.reads_from(node):
                consumer.connection.protocol.detach_link(consumer.link, error)
                self.end(consumer, closed=True)
                consumer.connection.mark_dirty()

    def detach(self, consumer: NodeConsumer, error: Error) -> None:
        """Detach a consumer's link with ``error`` (closing it) and end it."""
        consumer.connection.protocol.detach_link(consumer.link, error)
        self.end(consumer, closed=True)

    def end(self, consumer: NodeConsumer, closed: bool) -> None:
        """A consumer's link ended: what it held goes back, a dynamic node goes with it (its ``end``)."""
        if consumer not in self._consumers:
            return  # ended already (its node was deleted, or a fault or a layer detached it)
        self._consumers.discard(consumer)
        consumer.finish(closed, self.now())
