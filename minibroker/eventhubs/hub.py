"""An event hub: partitions (each a stream), consumer groups, and which receiver owns what.

A hub has a fixed number of partitions, named ``"0"``, ``"1"``, ...; each is
a stream node of the broker, ``hub/Partitions/id`` (an append-only log
addressed by offset, :mod:`minibroker.broker.stream`), so
``broker.stream("hub/Partitions/0")`` shows it too and a plain AMQP client
may read it as a stream.  Consumer groups are views of the same partitions: each
receiver holds only its own position, so groups read independently.

Where an event sent to the hub goes: a producer that names a partition
(``hub/Partitions/2``) picks it; one that gives ``x-opt-partition-key``
gets the partition the key hashes to (CRC-32 of the key's UTF-8 bytes,
modulo the partition count: the same key always lands in the same
partition, though not the one the service would pick); anything else goes
round-robin, as the service spreads unkeyed events.

Owner level (``com.microsoft:epoch``, Azure Event Hubs "epoch receivers"):
per consumer group and partition, a receiver with an owner level
disconnects every receiver with a lower one and every receiver without
one; a receiver cannot attach while one with a higher level is attached,
nor without a level while one with a level is.  Equal levels: the newer wins,
as the service documents.  At most :data:`MAX_RECEIVERS` receivers read one
partition for one consumer group (the service's quota, which also bounds
what a client can make the broker hold).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from ..broker.stored import StoredMessage
from ..broker.stream import Stream
from .addresses import partition_node
from .events import LastEnqueued, Position
from .options import EventHubOptions

if TYPE_CHECKING:
    from ..broker.client_connection import BrokerConnection
    from ..protocol.endpoints import Link

__all__ = ["EventHub", "MAX_RECEIVERS", "Owned", "StreamFactory"]

#: Receivers per partition and consumer group (Azure Event Hubs quotas: 5, every tier).
MAX_RECEIVERS = 5

#: Makes (or finds) the stream of one partition, by node name and retention in seconds.
StreamFactory = Callable[[str, float | None], Stream]
#: Puts one event on a partition's stream at ``now`` through the broker's publish path
#: (``publish.Publisher``, the one way into a node), so that whatever observes the messages
#: nodes receive (the pytest plugin's hooks and failure report) sees events too.
PublishEvent = Callable[[Stream, StoredMessage, float], None]


class Owned(Protocol):
    """A receiver as the hub sees it (reader.EventHubReader): its owner level, and what a
    snapshot shows of it and a higher epoch detaches."""

    owner_level: int | None
    group: str
    position: int
    delivered: int
    link: Link
    connection: BrokerConnection


class EventHub:
    """One event hub's partitions and receivers (see the module docstring)."""

    def __init__(
        self, options: EventHubOptions, created_at: float, make_stream: StreamFactory, publish: PublishEvent
    ) -> None:
        self.options = options
        self._publish = publish
        self.name = options.name
        self.created_at = created_at
        self.partition_ids = tuple(str(i) for i in range(options.partitions))
        self.partitions: dict[str, Stream] = {
            pid: make_stream(partition_node(self.name, pid), options.retention) for pid in self.partition_ids
        }
        self.consumer_groups: list[str] = list(options.groups)
        self._next = 0
        #: Attached receivers by (consumer group, partition id).
        self.receivers: dict[tuple[str, str], list[Owned]] = {}

    # -------------------------------------------------------------- sending

    def partition_for(self, key: str | None) -> str:
        """The partition an event without a named partition goes to: by key hash, else round-robin."""
        count = len(self.partition_ids)
        if key is not None:
            return self.partition_ids[zlib.crc32(key.encode("utf-8")) % count]
        pid = self.partition_ids[self._next % count]
        self._next += 1
        return pid

    def append(self, partition: str, messages: Iterable[StoredMessage], now: float) -> None:
        stream = self.partitions[partition]
        for message in messages:
            self._publish(stream, message, now)  # appends, then sends to the readers waiting with credit

    # ------------------------------------------------------------ positions

    def last_enqueued(self, partition: str) -> LastEnqueued | None:
        log = self.partitions[partition].log
        if not log.count:
            return None
        last = log.next_offset - 1
        at = log.appended_at(last)
        assert at is not None
        return LastEnqueued(last, at)

    def start(self, partition: str, position: Position | None) -> int:
        """The offset a receiver with ``position`` reads first (no filter: the first retained event)."""
        log = self.partitions[partition].log
        if position is None:
            return log.first_offset
        if position.value is None:  # @latest
            return log.next_offset
        if position.kind == "time":
            offset = log.seek_time(position.value)
            if not position.inclusive:
                while (at := log.appended_at(offset)) is not None and at <= position.value:
                    offset += 1
            return offset
        offset = int(position.value) + (0 if position.inclusive else 1)
        return min(max(offset, log.first_offset), log.next_offset)

    # -------------------------------------------------------------- owners

    def admit(self, group: str, partition: str, level: int | None) -> tuple[list[Owned], str | None, bool]:
        """Receivers a new one with owner ``level`` disconnects, or why it may not attach (and whether
        that is the quota: True, or owner levels: False)."""
        current = self.receivers.get((group, partition), [])
        kicked, refusal = self._owners(current, group, partition, level)
        if refusal is None and len(current) - len(kicked) >= MAX_RECEIVERS:
            return [], (
                f"Exceeded the maximum number of allowed receivers per partition in a consumer group which is "
                f"{MAX_RECEIVERS}: partition {partition!r} of consumer group {group!r}"
            ), True
        return kicked, refusal, False

    def _owners(
        self, current: list[Owned], group: str, partition: str, level: int | None
    ) -> tuple[list[Owned], str | None]:
        levels = [r.owner_level for r in current if r.owner_level is not None]
        highest = max(levels) if levels else None
        if level is None:
            if highest is not None:
                return [], (
                    f"a receiver with owner level {highest} is attached to partition {partition!r} of consumer group "
                    f"{group!r}; a receiver without an owner level cannot attach beside it"
                )
            return [], None
        if highest is not None and highest > level:
            return [], (
                f"a receiver with a higher owner level ({highest}) is attached to partition {partition!r} of consumer "
                f"group {group!r}; this receiver's level {level} cannot attach: use a higher owner level"
            )
        return [r for r in current if r.owner_level is None or r.owner_level <= level], None

    def add_receiver(self, group: str, partition: str, receiver: Owned) -> None:
        self.receivers.setdefault((group, partition), []).append(receiver)

    def remove_receiver(self, group: str, partition: str, receiver: Owned) -> None:
        current = self.receivers.get((group, partition))
        if current is not None and receiver in current:
            current.remove(receiver)
            if not current:
                del self.receivers[(group, partition)]
