"""Per-node counters and the frozen snapshots the inspection API returns."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, overload

from ..amqp.message import Message, decode_message
from ..records import record
from . import wireframes
from .addresses import parse_address
from .capture import Capture, QueuedRow

if TYPE_CHECKING:
    from .config import StreamOptions
    from .stored import Entry, StoredMessage

__all__ = [
    "NodeCounters", "NodeStatistics", "BrokerStatistics", "QueueSnapshot", "QueuedMessage", "QueuedMessages",
    "QueuedRow", "StreamMessage", "StreamMessages", "StreamSnapshot", "TopicSnapshot", "SubscriptionSnapshot", "TransactionSnapshot", "FrameRecord",
]  # fmt: skip


@record(slots=True)
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
        return NodeStatistics(*[getattr(self, name) for name in _COUNTER_NAMES])


@record(frozen=True, slots=True)
class NodeStatistics:
    """Counters of one queue or topic at one moment.

    ``enqueued`` messages accepted into the node; ``delivered`` transfers sent to
    consumers (redeliveries included); ``acknowledged`` accepted by consumers;
    ``released``/``modified``/``rejected`` outcomes received; ``dropped``
    published to a topic with no subscriber; ``expired`` passed their TTL;
    ``dead_lettered`` moved to the dead-letter address; ``filtered_out`` (topics
    only) one per subscription whose selector did not match a message, so it got
    no copy.  A queue never counts ``filtered_out``: a consumer's selector leaves a
    message it does not match in the queue for other consumers.
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


_COUNTER_NAMES = tuple(f.name for f in dataclasses.fields(NodeStatistics))


@record(frozen=True, slots=True)
class BrokerStatistics(Mapping[str, "NodeStatistics"]):
    """Counters of the whole broker: ``nodes`` maps each queue, topic and stream name to its
    counters, and the snapshot itself reads as that mapping: ``statistics()["orders"].enqueued``,
    ``"orders" in stats``, ``stats.get("audit")``, ``stats.items()``."""

    nodes: dict[str, NodeStatistics]
    connections: int
    links: int
    connections_total: int

    def __getitem__(self, name: str) -> NodeStatistics:
        """The counters of node ``name`` (or ``queue://name``, ``topic://name``, ``stream://name``)."""
        key = parse_address(name)[0] if isinstance(name, str) else name
        try:
            return self.nodes[key]
        except KeyError:
            raise KeyError(
                f"no node named {name!r} has counters (nodes: {sorted(self.nodes)}); a node gets them "
                "when it is declared or first used"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)


@record(frozen=True, slots=True)
class QueuedMessage:
    """A message in a queue snapshot, decoded as a consumer would receive it at the snapshot's time.

    So its ``header.ttl`` is the **remaining** time to live in milliseconds, as the broker would
    send it: "the transmitted message's header SHOULD contain a ttl that is computed as the
    difference between the current time and the formerly computed message expiration time, i.e.,
    the reduced ttl" (AMQP 1.0 Part 3 §3.2.1).  The expiration time is the earliest of the
    producer's ttl, its absolute-expiry-time and the queue's ``default_ttl``/``max_ttl``
    (``expires_at``, a clock reading), so a queue's default ttl shows there too.  What the
    producer sent is :attr:`arrived`.
    """

    message: Message
    acquired: bool
    delivery_count: int
    priority: int
    expires_at: float | None
    #: The bytes the node received (``arrived`` decodes them); the same object the broker holds.
    arrived_payload: bytes = field(repr=False, compare=False)

    @property
    def arrived(self) -> Message:
        """The message as it arrived at this node, decoded: its header as the producer sent it
        (``arrived.header.ttl`` the ttl it was published with, in milliseconds; delivery-count as
        sent).  A dead letter's is the copy the queue that dead-lettered it passed on."""
        return decode_message(self.arrived_payload)

    @property
    def body(self) -> Any:
        return self.message.body

    @property
    def header(self) -> Any:
        return self.message.header

    @property
    def properties(self) -> Any:
        """The AMQP **properties section** (§3.2.4): ``message_id``, ``to``, ``subject``,
        ``reply_to``, ``correlation_id`` ... (or None).  Not what python-qpid-proton calls
        ``Message.properties``: that is :attr:`application_properties` here."""
        return self.message.properties

    @property
    def application_properties(self) -> dict[str, Any] | None:
        """The application-properties section (§3.2.5), a dict: what python-qpid-proton calls
        ``Message.properties`` and what selectors filter on."""
        return self.message.application_properties

    @property
    def annotations(self) -> dict[Any, Any] | None:
        return self.message.message_annotations


class QueuedMessages(Sequence[QueuedMessage]):
    """The messages of a queue snapshot, in delivery order, each decoded when first read.

    A read-only sequence: index it, slice it, iterate it, ``len()`` it.  Nothing is
    copied out of the broker until it is first read (see :mod:`minibroker.broker.capture`).
    """

    __slots__ = ("_capture", "_now", "_decoded")

    def __init__(self, capture: Capture, now: float) -> None:
        self._capture = capture
        self._now = now  # the clock time of the snapshot: a ttl shows what was left then
        self._decoded: dict[int, QueuedMessage] = {}

    def _message(self, rows: list[QueuedRow], index: int) -> QueuedMessage:
        found = self._decoded.get(index)
        if found is None:
            entry, acquired = rows[index]
            message = decode_message(entry.payload_for_delivery(self._now))
            found = QueuedMessage(
                message, acquired, entry.delivery_count, entry.message.priority, entry.expires_at, entry.message.payload
            )
            self._decoded[index] = found
        return found

    def __len__(self) -> int:
        return len(self._capture.rows())

    @overload
    def __getitem__(self, index: int) -> QueuedMessage: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[QueuedMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> QueuedMessage | tuple[QueuedMessage, ...]:
        rows = self._capture.rows()
        if isinstance(index, slice):
            return tuple(self._message(rows, i) for i in range(*index.indices(len(rows))))
        if index < 0:
            index += len(rows)
        if not 0 <= index < len(rows):
            raise IndexError(f"message index {index} out of range: the snapshot holds {len(rows)}")
        return self._message(rows, index)

    def __iter__(self) -> Iterator[QueuedMessage]:
        rows = self._capture.rows()
        for i in range(len(rows)):
            yield self._message(rows, i)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if not self._capture.filled:
            return "QueuedMessages(<not read yet>)"
        return f"QueuedMessages({list(self)!r})"


@record(frozen=True, slots=True)
class QueueSnapshot:
    """A queue at one moment: counters, and ``messages`` in delivery order (uncommitted publishes
    excluded), copied and decoded only when read, so taking a snapshot costs the same at any depth."""

    name: str
    depth: int
    available: int
    acquired: int
    consumers: int
    messages: QueuedMessages = field(repr=False)
    statistics: NodeStatistics

    @property
    def bodies(self) -> list[Any]:
        return [m.body for m in self.messages]

    @classmethod
    def missing(cls, name: str) -> QueueSnapshot:
        """The snapshot of a queue nobody has used yet: empty, every counter 0."""
        return cls(name, 0, 0, 0, 0, QueuedMessages(Capture(_NoEntries()), 0.0), NodeStatistics())


class _NoEntries:
    """The contents of a queue that does not exist."""

    def entries(self) -> Iterator[Entry]:
        return iter(())


@record(frozen=True, slots=True)
class StreamMessage:
    """A message in a stream snapshot, decoded as a reader would receive it (``x-stream-offset`` included)."""

    offset: int
    message: Message

    @property
    def body(self) -> Any:
        return self.message.body

    @property
    def properties(self) -> Any:
        """The AMQP properties section (§3.2.4), or None."""
        return self.message.properties

    @property
    def application_properties(self) -> dict[str, Any] | None:
        """The application-properties section (§3.2.5): what python-qpid-proton calls ``Message.properties``."""
        return self.message.application_properties

    @property
    def annotations(self) -> dict[Any, Any] | None:
        return self.message.message_annotations


class StreamMessages(Sequence[StreamMessage]):
    """The messages of a stream snapshot, oldest first, each decoded when first read.

    Holds references to the stored messages (immutable bytes), never copies of them.
    """

    __slots__ = ("_stored", "_decoded", "_payload")

    def __init__(self, stored: tuple[tuple[int, StoredMessage], ...]) -> None:
        # (a stream's module: loaded with the first stream, not with the queues' snapshots)
        from .streamlog import delivery_payload

        self._stored = stored
        self._decoded: dict[int, StreamMessage] = {}
        self._payload = delivery_payload

    def _message(self, index: int) -> StreamMessage:
        found = self._decoded.get(index)
        if found is None:
            offset, stored = self._stored[index]
            found = StreamMessage(offset, decode_message(self._payload(stored, offset)))
            self._decoded[index] = found
        return found

    def __len__(self) -> int:
        return len(self._stored)

    def offsets(self) -> list[int]:
        """The offset of each message, oldest first (nothing decoded)."""
        return [offset for offset, _message in self._stored]

    @overload
    def __getitem__(self, index: int) -> StreamMessage: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[StreamMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> StreamMessage | tuple[StreamMessage, ...]:
        count = len(self._stored)
        if isinstance(index, slice):
            return tuple(self._message(i) for i in range(*index.indices(count)))
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError(f"message index {index} out of range: the snapshot holds {count}")
        return self._message(index)

    def __iter__(self) -> Iterator[StreamMessage]:
        for i in range(len(self._stored)):
            yield self._message(i)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StreamMessages({len(self._stored)} messages)"


@record(frozen=True, slots=True)
class StreamSnapshot:
    """A stream at one moment: its retained offsets ``first_offset``..``last_offset`` (``last_offset``
    is ``first_offset - 1`` when empty), ``count`` and ``bytes`` retained, readers attached, and
    ``messages`` (each with its ``offset``), decoded only when read."""

    name: str
    first_offset: int
    last_offset: int
    count: int
    bytes: int
    readers: int
    options: StreamOptions
    messages: StreamMessages = field(repr=False)
    statistics: NodeStatistics

    @property
    def bodies(self) -> list[Any]:
        return [m.body for m in self.messages]

    @property
    def offsets(self) -> list[int]:
        return self.messages.offsets()

    @property
    def depth(self) -> int:
        """Messages retained (``count``): what every node snapshot calls its depth."""
        return self.count


@record(frozen=True, slots=True)
class SubscriptionSnapshot:
    """One subscription of a topic: its name, whether durable, and its queued depth."""

    name: str
    durable: bool
    attached: bool
    depth: int


@record(frozen=True, slots=True)
class TopicSnapshot:
    """A topic at one moment."""

    name: str
    subscriptions: tuple[SubscriptionSnapshot, ...]
    statistics: NodeStatistics

    @property
    def depth(self) -> int:
        """Messages its subscriptions hold (a topic holds none itself)."""
        return sum(subscription.depth for subscription in self.subscriptions)


@record(frozen=True, slots=True)
class TransactionSnapshot:
    """An open transaction and the work it has staged."""

    txn_id: bytes
    publishes: tuple[tuple[str, Message], ...]
    retirements: int
    acquisitions: int
    age: float


@record(frozen=True, slots=True)
class FrameRecord:
    """One frame the broker received (``"in"``) or sent (``"out"``), as kept by the frame log,
    whatever its wire protocol.

    ``connection`` names the client (its peer address, then its container-id, or for AMQP 0-9-1
    the connection name or product its client announced); ``channel`` is the 1.0 session's
    channel or the 0-9-1 channel.  ``performative`` is the protocol's own frame object (also
    ``frame``): an AMQP 1.0 performative or SASL frame body, or an AMQP 0-9-1
    :class:`~minibroker.amqp091.observed.MethodFrame` (a method with the content that followed
    it: one record per message).  The protocol-neutral description is derived from it when read
    (:mod:`.wireframes`): ``protocol``, ``name``, ``fields``, ``body`` and ``summary``.
    """

    time: float
    connection: str
    direction: str
    channel: int
    performative: Any

    @property
    def frame(self) -> Any:
        """The protocol-specific frame object (the same as ``performative``)."""
        return self.performative

    @property
    def protocol(self) -> str:
        """``"AMQP 1.0"`` or ``"AMQP 0-9-1"``."""
        return wireframes.protocol_of(self.performative)

    @property
    def name(self) -> str:
        """The performative's name: ``open``, ``attach``, ``transfer``, ``sasl-init`` ...; the 0-9-1
        method's: ``basic.publish``, ``basic.deliver``, ``basic.ack`` ..."""
        return wireframes.name_of(self.performative)

    @property
    def fields(self) -> dict[str, Any]:
        """Key fields by their specification names: ``handle``, ``delivery-id`` (1.0);
        ``delivery-tag``, ``consumer-tag``, ``exchange``, ``routing-key`` (0-9-1)."""
        return wireframes.fields_of(self.performative)

    @property
    def body(self) -> str | None:
        """The message a 0-9-1 publish or delivery carried, cut short; None for other frames."""
        return wireframes.body_of(self.performative)

    @property
    def summary(self) -> str:
        """One line saying what the frame says (what the failure report shows)."""
        return wireframes.summarize(self.performative)

    def __str__(self) -> str:
        arrow = "->" if self.direction == "in" else "<-"
        return f"{self.connection} {arrow} [{self.channel}] {self.performative!r:.200}"
