"""Per-node counters and the frozen snapshots the inspection API returns."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..amqp.message import Message

__all__ = [
    "NodeCounters", "NodeStatistics", "BrokerStatistics", "QueueSnapshot", "QueuedMessage",
    "TopicSnapshot", "SubscriptionSnapshot", "TransactionSnapshot", "FrameRecord",
]  # fmt: skip


@dataclass(slots=True)
class NodeCounters:
    """Live counters of one node; only the broker thread touches them."""

    enqueued: int = 0
    delivered: int = 0
    acknowledged: int = 0
    released: int = 0
    modified: int = 0
    rejected: int = 0
    dropped: int = 0
    expired: int = 0
    dead_lettered: int = 0
    filtered_out: int = 0

    def freeze(self) -> NodeStatistics:
        return NodeStatistics(**dataclasses.asdict(self))


@dataclass(frozen=True, slots=True)
class NodeStatistics:
    """Counters of one queue or topic at one moment.

    ``enqueued`` messages accepted into the node; ``delivered`` transfers sent to
    consumers (redeliveries included); ``acknowledged`` accepted by consumers;
    ``released``/``modified``/``rejected`` outcomes received; ``dropped``
    published to a topic with no subscriber; ``expired`` passed their TTL;
    ``dead_lettered`` moved to the dead-letter address; ``filtered_out``
    skipped by a subscription's selector.
    """

    enqueued: int = 0
    delivered: int = 0
    acknowledged: int = 0
    released: int = 0
    modified: int = 0
    rejected: int = 0
    dropped: int = 0
    expired: int = 0
    dead_lettered: int = 0
    filtered_out: int = 0


@dataclass(frozen=True, slots=True)
class BrokerStatistics:
    """Counters of the whole broker: ``nodes`` maps each queue and topic name to its counters."""

    nodes: dict[str, NodeStatistics]
    connections: int
    links: int
    connections_total: int


@dataclass(frozen=True, slots=True)
class QueuedMessage:
    """A message in a queue snapshot, decoded as a consumer would receive it now."""

    message: Message
    acquired: bool
    delivery_count: int
    priority: int
    expires_at: float | None

    @property
    def body(self) -> Any:
        return self.message.body

    @property
    def header(self) -> Any:
        return self.message.header

    @property
    def properties(self) -> Any:
        return self.message.properties

    @property
    def application_properties(self) -> dict[str, Any] | None:
        return self.message.application_properties

    @property
    def annotations(self) -> dict[Any, Any] | None:
        return self.message.message_annotations


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """A queue at one moment: ``messages`` in delivery order (uncommitted publishes excluded)."""

    name: str
    depth: int
    available: int
    acquired: int
    consumers: int
    messages: tuple[QueuedMessage, ...]
    statistics: NodeStatistics

    @property
    def bodies(self) -> list[Any]:
        return [m.body for m in self.messages]


@dataclass(frozen=True, slots=True)
class SubscriptionSnapshot:
    """One subscription of a topic: its name, whether durable, and its queued depth."""

    name: str
    durable: bool
    attached: bool
    depth: int


@dataclass(frozen=True, slots=True)
class TopicSnapshot:
    """A topic at one moment."""

    name: str
    subscriptions: tuple[SubscriptionSnapshot, ...]
    statistics: NodeStatistics


@dataclass(frozen=True, slots=True)
class TransactionSnapshot:
    """An open transaction and the work it has staged."""

    txn_id: bytes
    publishes: tuple[tuple[str, Message], ...]
    retirements: int
    acquisitions: int
    age: float


@dataclass(frozen=True, slots=True)
class FrameRecord:
    """One frame the broker received (``"in"``) or sent (``"out"``), as kept by the frame log."""

    time: float
    connection: str
    direction: str
    channel: int
    performative: Any

    @property
    def name(self) -> str:
        """The performative's name: ``open``, ``attach``, ``transfer``, ``sasl-init`` ..."""
        return str(self.performative.DESCRIPTOR_NAME).split(":")[1]

    def __str__(self) -> str:
        arrow = "->" if self.direction == "in" else "<-"
        return f"{self.connection} {arrow} [{self.channel}] {self.performative!r:.200}"
