"""Frozen views of an event hub for tests: ``broker.event_hub(name)`` returns an :class:`EventHubSnapshot`."""

from __future__ import annotations

from typing import Any

from ..amqp.message import decode_message
from ..records import record
from .events import PARTITION_KEY
from .hub import EventHub

__all__ = ["EventHubSnapshot", "PartitionSnapshot", "ReceiverSnapshot", "snapshot"]


@record(frozen=True, slots=True)
class ReceiverSnapshot:
    """A receiver attached to a partition: its consumer group, owner level and next sequence number."""

    consumer_group: str
    owner_level: int | None
    position: int
    delivered: int


@record(frozen=True, slots=True)
class PartitionSnapshot:
    """One partition: its retained events (bodies and partition keys, oldest first) and positions."""

    id: str
    begin_sequence_number: int
    #: -1 when the partition is empty (as the service reports it).
    last_enqueued_sequence_number: int
    #: When the last event was enqueued (broker clock, seconds), or None when empty.
    last_enqueued_time: float | None
    bodies: tuple[Any, ...]
    partition_keys: tuple[str | None, ...]
    bytes: int
    receivers: tuple[ReceiverSnapshot, ...]

    @property
    def depth(self) -> int:
        """Events retained."""
        return len(self.bodies)


@record(frozen=True, slots=True)
class EventHubSnapshot:
    """An event hub at one moment: partition ids, consumer groups and every partition's snapshot."""

    name: str
    partition_ids: tuple[str, ...]
    consumer_groups: tuple[str, ...]
    created_at: float
    retention: float | None
    partitions: tuple[PartitionSnapshot, ...]

    def partition(self, partition_id: str | int) -> PartitionSnapshot:
        """The snapshot of one partition, by id (``"0"`` or ``0``)."""
        for partition in self.partitions:
            if partition.id == str(partition_id):
                return partition
        raise KeyError(f"event hub {self.name!r} has partitions {list(self.partition_ids)}, not {partition_id!r}")

    @property
    def depth(self) -> int:
        """Events retained over all partitions."""
        return sum(p.depth for p in self.partitions)


def snapshot(hub: EventHub) -> EventHubSnapshot:
    """Copy what a test may look at (in the broker's thread: it reads live state)."""
    partitions = []
    for pid in hub.partition_ids:
        stream = hub.partitions[pid]
        log = stream.log
        last = hub.last_enqueued(pid)
        bodies, keys = [], []
        for offset in range(log.first_offset, log.next_offset):
            message = log.get(offset)
            assert message is not None
            bodies.append(decode_message(message.payload).body)
            key = (message.message_annotations or {}).get(PARTITION_KEY)
            keys.append(key if isinstance(key, str) else None)
        receivers = tuple(
            ReceiverSnapshot(r.group, r.owner_level, r.position, r.delivered)
            for (group, partition), attached in hub.receivers.items()
            if partition == pid
            for r in attached
        )
        partitions.append(
            PartitionSnapshot(
                pid,
                log.first_offset,
                last.sequence_number if last is not None else -1,
                last.enqueued_at if last is not None else None,
                tuple(bodies),
                tuple(keys),
                log.bytes,
                receivers,
            )
        )
    return EventHubSnapshot(
        hub.name, hub.partition_ids, tuple(hub.consumer_groups), hub.created_at, hub.options.retention, tuple(partitions)
    )
