"""Local transactions (OASIS AMQP 1.0 Part 4; broker paper §3; RabbitMQ tx semantics).

A client attaches a sending link whose target is a ``coordinator`` and sends
``declare`` and ``discharge`` messages on it (§4.3-§4.4).  Work tagged with a
``transactional-state`` is staged in its :class:`Transaction`:

* publishes are held back and published, in publication order, on commit
  (through the publish path, source ``commit``, so limits apply: see
  "Transactions and limits" below);
* outcomes a consumer gives are applied on commit; on rollback a delivery the
  consumer still holds unsettled stays acquired by it, anything else becomes
  available again in its original place (acknowledgements are transactional,
  consumption is not);
* messages sent on credit from a flow carrying ``txn-id`` are acquired in the
  transaction: rollback makes them available again.

Transactions may span sessions and several may be open per session
(``amqp:multi-txns-per-ssn``, ``amqp:multi-ssns-per-txn``).

Transactions and limits
-----------------------
A transactional transfer to a bounded node (``max_depth``, ``max_bytes``,
limits.py) is checked when it arrives, counting what every open transaction
already holds for that node (so that many transactions cannot together stage
more than the node may hold); a node that does not exist yet, and that the
commit would create, is checked against ``queue_defaults``.  One that would
not fit is settled at once with
``transactional-state`` carrying ``rejected``
(``amqp:resource-limit-exceeded``) and is not part of the transaction; the
rest commit.  This is what the transactions document describes for a
transactional publish the resource cannot take (a ``rejected``
transactional-state on that delivery), and what RabbitMQ does: it "performs
the necessary checks immediately (rather than, say, at the time of commit)"
(RabbitMQ broker semantics, "Semantics of tx").  The client learns which
message did not fit, on the delivery that carried it.  Room can still go
between arrival and discharge (other producers, other transactions): then
the commit publishes nothing and fails with ``amqp:transaction:rollback``,
as "the transaction coordinator can always also indicate a failing
discharge if it is unable to honor the transaction controller's request"
(transactions document, discharge).  Either way the node never passes its
bounds because of a transaction, and a commit is all or nothing.

What a transaction may hold is bounded whatever its nodes' bounds:
``max_transaction_bytes`` of staged messages (a transfer past it is refused
as above), ``max_transactions_per_connection`` open at once (one more
``declare`` is rejected: "if the coordinator is unable to perform the
declare ... the message MUST be rejected", Part 4 §4.3, here with
``amqp:resource-limit-exceeded``, Part 2 §2.8.15), and ``transaction_timeout``
(300 s by default, ActiveMQ Artemis' ``transaction-timeout``) after which it
is rolled back.  Together they bound what one connection can make the broker
hold in transactions (docs/limits-and-security.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ..amqp import errors as conditions
from ..amqp.errors import AMQPDecodeError
from ..amqp.message import decode_message
from ..amqp.messaging import Accepted, Rejected, Released
from ..amqp.performatives import Error, amqp_error
from ..amqp.transactions import (
    DISTRIBUTED_TRANSACTIONS,
    LOCAL_TRANSACTIONS,
    MULTI_SSNS_PER_TXN,
    MULTI_TXNS_PER_SSN,
    PROMOTABLE_TRANSACTIONS,
    Coordinator,
    Declare,
    Declared,
    Discharge,
    TransactionalState,
)
from ..amqp.types import symbol
from ..protocol import LinkState
from ..protocol.endpoints import Delivery, Link
from ..records import record
from .addresses import parse_address
from .bounds import StagedMessages, refusal
from .config import BrokerConfig, QueueOptions
from .links import Client, ConsumerLink, CoordinatorLink, ProducerLink, apply_outcome
from .publish import Source
from .router import Router
from .stored import ACQUIRED, Entry, StoredMessage

if TYPE_CHECKING:
    from .statistics import TransactionSnapshot

__all__ = ["Transaction", "TransactionManager", "Unborn", "SUPPORTED_CAPABILITIES"]

SUPPORTED_CAPABILITIES = (LOCAL_TRANSACTIONS, MULTI_TXNS_PER_SSN, MULTI_SSNS_PER_TXN)
UNSUPPORTED_CAPABILITIES = frozenset({DISTRIBUTED_TRANSACTIONS, PROMOTABLE_TRANSACTIONS})
#: How many timed-out ids are remembered to answer ``amqp:transaction:timeout``.
TIMED_OUT_MEMORY = 1024
#: What a staged message costs beside its payload (its delivery, the staging entries), counted
#: against ``max_transaction_bytes`` so that tiny messages cannot hold far more than the bound:
#: measured about 600 bytes each (100,000 staged 6-byte messages: +57 MiB of broker RSS).
STAGED_OVERHEAD = 1024


@record(eq=False)
class Transaction:
    """One open transaction and its staged work."""

    txn_id: bytes
    controller: CoordinatorLink
    started: float
    publishes: list[tuple[ProducerLink, Delivery, StoredMessage]] = field(default_factory=list)
    #: What the transaction holds for each node, by name, in publication order (checked against its limits).
    staged: dict[str, list[StoredMessage]] = field(default_factory=dict)
    #: Encoded bytes of every message staged, plus ``STAGED_OVERHEAD`` each (``max_transaction_bytes``).
    bytes: int = 0
    outcomes: list[tuple[ConsumerLink, Delivery, Entry, Any]] = field(default_factory=list)
    acquisitions: list[tuple[ConsumerLink, Entry, Delivery]] = field(default_factory=list)
    #: Consumers given credit by a flow naming this transaction (§4.4.3).
    credited: set[ConsumerLink] = field(default_factory=set)

    def acquired(self, consumer: ConsumerLink, entry: Entry, delivery: Delivery) -> None:
        """A message sent on transactional credit (§4.4.3): acquired within this transaction."""
        entry.transaction = self
        self.acquisitions.append((consumer, entry, delivery))

    def has_outcome(self, entry: Entry) -> bool:
        """Whether an outcome for ``entry`` is staged here (the transaction then decides its fate)."""
        return any(staged is entry for _c, _d, staged, _o in self.outcomes)

    def forget_acquisition(self, entry: Entry) -> None:
        """``entry`` left the transaction's acquisitions (its link ended before any outcome)."""
        self.acquisitions = [item for item in self.acquisitions if item[1] is not entry]
        entry.transaction = None


#: What open transactions hold for a node they stage nothing for (read only, never added to).
NOTHING_STAGED = StagedMessages()


@record(eq=False)
class Unborn:
    """A node that does not exist yet and that a commit would create (auto-create): it holds
    nothing and has ``queue_defaults``' bounds (the :class:`~.bounds.Bounded` a staged message is
    checked against)."""

    name: str
    options: QueueOptions
    bytes: int = 0
    largest: int = 0
    depth: int = 0

    def drop_head(self, reason: str, description: str) -> bool:
        return False  # nothing to drop: it holds nothing


class TransactionManager:
    """The broker's transaction coordinator.

    It routes committed publishes through the ``router``, reads the time from
    ``now``, ends a consumer that names an unknown transaction through
    ``detach_consumer`` and calls ``timers_changed`` when a transaction brings
    a new deadline (``transaction_timeout``).
    """

    def __init__(
        self,
        config: BrokerConfig,
        router: Router,
        now: Callable[[], float],
        *,
        detach_consumer: Callable[[ConsumerLink, Error], None],
        timers_changed: Callable[[], None],
    ) -> None:
        self.config = config
        self.router = router
        self.now = now
        self._detach_consumer = detach_consumer
        self._timers_changed = timers_changed
        self.open: dict[bytes, Transaction] = {}
        #: What all open transactions hold for each node, by name (checked against its bounds).
        self._staged: dict[str, StagedMessages] = {}
        #: Open transactions of each connection (``max_transactions_per_connection``).
        self._per_connection: dict[Client, int] = {}
        self._ids = itertools.count(1)
        self._timed_out: dict[bytes, None] = {}

    # --------------------------------------------------------------- links

    def attach_coordinator(self, connection: Client, link: Link, target: Coordinator) -> None:
        """Attach a coordinator link if every capability it asks for is supported (§4.2)."""
        asked = frozenset(str(c) for c in (target.capabilities or ()))
        unsupported = asked - set(SUPPORTED_CAPABILITIES)
        protocol = connection.protocol
        if unsupported:
            condition = conditions.NOT_IMPLEMENTED if asked & UNSUPPORTED_CAPABILITIES else conditions.PRECONDITION_FAILED
            protocol.refuse_link(
                link,
                amqp_error(
                    condition,
                    f"transaction capabilities {sorted(unsupported)} are not supported; "
                    f"this coordinator offers {list(SUPPORTED_CAPABILITIES)}",
                ),
            )
            return
        link.context = CoordinatorLink(connection, link, self)
        protocol.accept_link(
            link,
            source=link.source,
            target=Coordinator(capabilities=[symbol(c) for c in SUPPORTED_CAPABILITIES]),
        )
        protocol.grant_credit(link, self.config.link_credit)

    def coordinator_gone(self, controller: CoordinatorLink) -> None:
        """Closing the controller's link (or connection) rolls back its open transactions (§4.3)."""
        for txn in [t for t in self.open.values() if t.controller is controller]:
            self._rollback(txn)

    # ----------------------------------------------------- control messages

    def on_control_message(self, controller: CoordinatorLink, delivery: Delivery) -> None:
        protocol = controller.connection.protocol
        try:
            body = decode_message(delivery.payload).body
        except AMQPDecodeError as exc:
            protocol.settle(delivery, Rejected(error=amqp_error(conditions.DECODE_ERROR, f"malformed control message: {exc}")))
            return
        now = self.now()
        if isinstance(body, Declare):
            if body.global_id is not None:
                outcome: Any = Rejected(
                    error=amqp_error(conditions.NOT_IMPLEMENTED, "distributed transactions (global-id) are not supported")
                )
            elif self._per_connection.get(controller.connection, 0) >= self.config.max_transactions_per_connection:
                outcome = Rejected(
                    error=amqp_error(
                        conditions.RESOURCE_LIMIT_EXCEEDED,
                        f"this connection already has {self.config.max_transactions_per_connection} open "
                        "transactions (max_transactions_per_connection); discharge one first",
                    )
                )
            else:
                txn_id = b"txn:%d" % next(self._ids)
                self.open[txn_id] = Transaction(txn_id, controller, now)
                connection = controller.connection
                self._per_connection[connection] = self._per_connection.get(connection, 0) + 1
                outcome = Declared(txn_id=txn_id)
                if self.config.transaction_timeout is not None:
                    # A new deadline (next_deadline): wake the server's timer so that the
                    # transaction is rolled back on time (transaction_timeout; Part 4 §4.5
                    # amqp:transaction:timeout) even when nothing else is due.
                    self._timers_changed()
        elif isinstance(body, Discharge):
            outcome = self._discharge(body.txn_id, bool(body.fail))
        else:
            outcome = Rejected(
                error=amqp_error(
                    conditions.DECODE_ERROR,
                    f"a coordinator takes amqp-value bodies declare or discharge (Part 4 §4.5), got {type(body).__name__}",
                )
            )
        protocol.settle(delivery, outcome)

    def _discharge(self, txn_id: bytes, fail: bool) -> Any:
        txn = self.open.get(txn_id)
        if txn is None:
            return Rejected(error=self._unknown(txn_id))
        if fail:
            self._rollback(txn)
            return Accepted()
        problem = self._cannot_commit(txn)
        if problem is not None:
            return self.roll_back(txn_id, problem)
        self._commit(txn)
        return Accepted()

    def roll_back(self, txn_id: bytes, description: str) -> Any:
        """Answer a commit with ``amqp:transaction:rollback``: nothing of the transaction happens (Part 4 §4.4)."""
        txn = self.open.get(txn_id)
        if txn is None:
            return Rejected(error=self._unknown(txn_id))
        self._rollback(txn)
        return Rejected(error=amqp_error(conditions.TRANSACTION_ROLLBACK, description))

    def _unknown(self, txn_id: bytes) -> Error:
        if txn_id in self._timed_out:
            return amqp_error(
                conditions.TRANSACTION_TIMEOUT,
                f"transaction {txn_id!r} was rolled back after {self.config.transaction_timeout} s",
            )
        return amqp_error(conditions.TRANSACTION_UNKNOWN_ID, f"no open transaction {txn_id!r} (unknown or already discharged)")

    def _cannot_commit(self, txn: Transaction) -> str | None:
        """Why the commit cannot be honoured (a message with no node, or no room left), or None."""
        held: dict[str, list[StoredMessage]] = {}
        for producer, _delivery, message in txn.publishes:
            target = self.router.node_for_publish(producer.address, message)
            if isinstance(target, Error):
                return f"a message of the transaction cannot be routed: {target.description}"
            ahead = held.setdefault(target.name, [])
            full = target.admit(message, ahead)  # changes nothing: do all of them still fit?
            if full is not None:
                return f"the transaction no longer fits: {full.description}"
            ahead.append(message)
        return None

    # -------------------------------------------------------------- staging

    def stage_publish(
        self, producer: ProducerLink, delivery: Delivery, messages: list[StoredMessage], txn_id: bytes
    ) -> None:
        """Hold a delivery's transactional publishes until discharge (§4.4.1); answer provisionally accepted.

        A message that would not fit its node, with what the transaction already
        holds for it, refuses the whole delivery now (module docstring).
        """
        protocol = producer.connection.protocol
        txn = self.open.get(txn_id)
        if txn is None:
            protocol.settle(delivery, Rejected(error=self._unknown(txn_id)))
            return
        size = sum(len(m.payload) for m in messages) + STAGED_OVERHEAD * len(messages)
        limit = self.config.max_transaction_bytes
        full: Error | None = None
        if txn.bytes + size > limit:
            full = amqp_error(
                conditions.RESOURCE_LIMIT_EXCEEDED,
                f"transaction {txn_id!r} holds {txn.bytes} bytes and this transfer brings {size} more (each "
                f"message counted with {STAGED_OVERHEAD} bytes of bookkeeping), past "
                f"max_transaction_bytes={limit}; commit it and go on in another transaction",
            )
        placed: list[tuple[str, StoredMessage]] = []
        for message in messages if full is None else ():
            name, full = self._admit(producer.address, message)
            if full is not None:
                break
            if name is not None:  # counted at once: the same delivery's next message comes after it
                self._staged.setdefault(name, StagedMessages()).add(message)
                placed.append((name, message))
        if full is not None:
            for name, message in placed:  # the whole delivery is refused: none of it stays counted
                self._unstage(name, message)
            if not delivery.remote_settled:
                protocol.settle(delivery, TransactionalState(txn_id=txn_id, outcome=Rejected(error=full)))
            return
        for name, message in placed:
            txn.staged.setdefault(name, []).append(message)
        txn.bytes += size
        for message in messages:
            txn.publishes.append((producer, delivery, message))
        if not delivery.remote_settled:
            protocol.settle(delivery, TransactionalState(txn_id=txn_id, outcome=Accepted()), settled=False)

    def _admit(self, address: str | None, message: StoredMessage) -> tuple[str | None, Error | None]:
        """The node ``message`` is staged for (by name, None if none) and the error refusing it, or None.

        Counted ahead of it: what every open transaction holds for that node.  A node that
        does not exist yet is made at commit, if auto-create makes it: until then it is an
        :class:`Unborn` with ``queue_defaults``' bounds.
        """
        target = self.router.node_for_publish(address, message, create=False)
        if isinstance(target, Error):
            to = message.properties.to if message.properties is not None else None
            named = address if address is not None else to
            if not isinstance(named, str) or not named or not self.config.auto_create:
                return None, None  # no node will be made: the discharge fails with transaction:rollback
            name = parse_address(named)[0]
            defaults = self.config.queue_defaults
            if defaults.max_depth is None and defaults.max_bytes is None:
                return name, None
            return name, refusal(Unborn(name, defaults), message, self._staged.get(name, NOTHING_STAGED))
        return target.name, target.admit(message, self._staged.get(target.name, NOTHING_STAGED))

    def _unstage(self, name: str, message: StoredMessage) -> None:
        staged = self._staged.get(name)
        if staged is not None:
            staged.discard(message)
            if not staged:
                del self._staged[name]

    def _close(self, txn: Transaction) -> None:
        """``txn`` is discharged: it leaves the open transactions, and its staged messages their nodes' counts."""
        self.open.pop(txn.txn_id, None)
        connection = txn.controller.connection
        left = self._per_connection.get(connection, 1) - 1
        if left > 0:
            self._per_connection[connection] = left
        else:
            self._per_connection.pop(connection, None)
        for name, messages in txn.staged.items():
            for message in messages:
                self._unstage(name, message)

    def stage_outcome(
        self, consumer: ConsumerLink, delivery: Delivery, entry: Entry, state: TransactionalState, settled: bool
    ) -> None:
        """Hold a consumer's outcome until discharge (§4.4.2)."""
        txn = self.open.get(state.txn_id)
        if txn is None:
            self._detach_consumer(consumer, self._unknown(state.txn_id))
            return
        entry.transaction = txn
        # A later disposition for the same delivery (update, then settle) replaces the staged one.
        txn.outcomes = [item for item in txn.outcomes if item[1] is not delivery]
        txn.outcomes.append((consumer, delivery, entry, state.outcome))
        if settled:
            consumer.unsettled.pop(delivery.delivery_id, None)

    def on_flow(self, consumer: ConsumerLink, properties: dict[Any, Any] | None) -> None:
        """A flow carrying ``txn-id`` makes what is sent on its credit transactional (§4.4.3)."""
        txn_id = properties.get(symbol("txn-id")) if properties else None
        if txn_id is None:
            consumer.transaction = None
            return
        txn = self.open.get(txn_id) if isinstance(txn_id, bytes) else None
        if txn is None:
            # Credit for a transaction we do not have must not acquire outside one.
            self._detach_consumer(consumer, self._unknown(bytes(txn_id)))
            return
        consumer.transaction = txn
        txn.credited.add(consumer)

    # ------------------------------------------------------------ discharge

    def _commit(self, txn: Transaction) -> None:
        """Make the transaction's work visible at once, publishes in publication order."""
        self._close(txn)
        router = self.router
        now = self.now()
        for producer, delivery, message in txn.publishes:
            target = router.node_for_publish(producer.address, message)
            if not isinstance(target, Error):
                # Limited (publish.py), but _cannot_commit has just found room for all of them.
                router.publisher.publish(target, message, now, Source.COMMIT)
            self._settle(producer.connection, delivery, TransactionalState(txn_id=txn.txn_id, outcome=Accepted()))
        for consumer, delivery, entry, outcome in txn.outcomes:
            entry.transaction = None
            consumer.unsettled.pop(delivery.delivery_id, None)
            apply_outcome(consumer.queue, entry, outcome, consumer.link_id, now)
            if not delivery.remote_settled:
                self._settle(consumer.connection, delivery, outcome)
        for _consumer, entry, _delivery in txn.acquisitions:
            entry.transaction = None  # stays acquired until its outcome arrives
        self._finish(txn)

    def _rollback(self, txn: Transaction) -> None:
        """Discard the transaction's work (§4.4; acknowledgements undone, consumption kept)."""
        self._close(txn)
        now = self.now()
        for producer, delivery, _message in txn.publishes:
            self._settle(producer.connection, delivery, TransactionalState(txn_id=txn.txn_id, outcome=Released()))
        for consumer, delivery, entry, _outcome in txn.outcomes:
            entry.transaction = None
            held = (
                not delivery.remote_settled
                and consumer.link.state is LinkState.ATTACHED
                and delivery.delivery_id in consumer.unsettled
            )
            if not held and entry.state == ACQUIRED:
                consumer.unsettled.pop(delivery.delivery_id, None)
                consumer.queue.release(entry, now)
                # release() counts a client's released outcome; this is the transaction undoing
                # its own staged outcome, so the counter is corrected back (statistics stay what
                # clients did, and a rollback leaves them as they were before the transaction).
                consumer.queue.counters.released -= 1  # a rollback is not a client's release
        for consumer, entry, delivery in txn.acquisitions:
            entry.transaction = None
            if entry.state == ACQUIRED and delivery.delivery_id in consumer.unsettled:
                del consumer.unsettled[delivery.delivery_id]
                consumer.queue.release(entry, now)
                consumer.queue.counters.released -= 1  # as above: no client released it
                self._settle(consumer.connection, delivery, Released())
        self._finish(txn)

    def _settle(self, connection: Client, delivery: Delivery, state: Any) -> None:
        """Settle a delivery the peer still remembers: one it sent pre-settled is forgotten (Part 2 §2.6.12)."""
        if delivery.remote_settled or delivery.settled:
            return  # forgotten by the peer, or already settled (a batch's other messages)
        if connection.open and delivery.link.state is LinkState.ATTACHED:
            connection.protocol.settle(delivery, state)
            connection.mark_dirty()

    def _finish(self, txn: Transaction) -> None:
        """After discharge: end transactional credit (§4.4.3) and dispatch what became available.

        Credit granted by a flow naming a discharged transaction no longer acquires in it:
        a later delivery would otherwise belong to a transaction that can never be
        discharged (and stay acquired for ever once its link ends).
        """
        for consumer in txn.credited:
            if consumer.transaction is txn:
                consumer.transaction = None
        queues = {consumer.queue for consumer, *_ in txn.outcomes} | {c.queue for c, *_ in txn.acquisitions}
        now = self.now()
        for queue in queues:
            queue.dispatch(now)

    # ------------------------------------------------------------ timeouts

    def next_deadline(self) -> float | None:
        timeout = self.config.transaction_timeout
        if timeout is None or not self.open:
            return None
        return min(t.started for t in self.open.values()) + timeout

    def run_timers(self, now: float) -> None:
        """Roll back transactions open longer than the configured timeout (a timer participant, timers.py)."""
        timeout = self.config.transaction_timeout
        if timeout is None:
            return
        for txn in [t for t in self.open.values() if now - t.started >= timeout]:
            self._rollback(txn)
            self._timed_out[txn.txn_id] = None
            if len(self._timed_out) > TIMED_OUT_MEMORY:
                del self._timed_out[next(iter(self._timed_out))]

    def reset(self) -> None:
        self.open.clear()
        self._staged.clear()
        self._per_connection.clear()
        self._timed_out.clear()

    def snapshots(self, now: float) -> list[TransactionSnapshot]:
        from .statistics import TransactionSnapshot  # the snapshots' module loads when first asked for

        return [
            TransactionSnapshot(
                txn_id=txn.txn_id,
                publishes=tuple(
                    (producer.address or "", message.decode()) for producer, _d, message in txn.publishes
                ),
                retirements=len(txn.outcomes),
                acquisitions=len(txn.acquisitions),
                age=now - txn.started,
            )
            for txn in self.open.values()
        ]
