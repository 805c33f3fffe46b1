"""A receiver of one partition for one consumer group: a stream reader that speaks Event Hubs.

It holds only its position in the partition (a stream offset), sends what
its credit and session window allow, settled (the layer answers the attach
with sender-settle-mode settled), and adds Event Hubs' annotations to each
event (:func:`~minibroker.eventhubs.events.event_payload`).  Outcomes
change nothing: reading a partition removes nothing, and checkpoints are the
client's business (the SDKs keep them in a checkpoint store).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..broker.extension import ExtensionLink
from ..broker.stored import StoredMessage
from ..broker.stream import Stream
from ..broker.streamfilters import StreamFilter
from ..protocol.endpoints import Link
from .addresses import CONSUMER_GROUPS, PARTITIONS
from .events import event_payload

if TYPE_CHECKING:
    from ..broker.client_connection import BrokerConnection
    from ..broker.streamlog import StreamLog
    from .hub import EventHub

__all__ = ["EventHubReader"]

#: Tags are a 4-byte big-endian counter per link (Part 2 §2.8.7 allows up to 32 bytes).
_TAG = struct.Struct(">I")


class EventHubReader(ExtensionLink):
    """Reads one partition of one hub for one consumer group (the partition stream's reader)."""

    def __init__(
        self,
        connection: BrokerConnection,
        link: Link,
        hub: EventHub,
        group: str,
        partition: str,
        owner_level: int | None,
        track_last_enqueued: bool,
        now: Callable[[], float],
    ) -> None:
        self.connection = connection
        self.now = now  # the broker's clock
        self.link = link
        self.hub = hub
        self.group = group
        self.partition = partition
        self.owner_level = owner_level
        self.track_last_enqueued = track_last_enqueued
        self.stream: Stream = hub.partitions[partition]
        self.position = 0
        #: Every event is wanted: the position filter only says where to start (the hub works it out).
        self.stream_filter = StreamFilter()
        self._tags = 0
        self.delivered = 0
        #: Faults name it ``hub/ConsumerGroups/group/Partitions/id``.
        self.address = f"{hub.name}/{CONSUMER_GROUPS}/{group}/{PARTITIONS}/{partition}"

    # Reader protocol (the partition stream calls these) ------------------

    def credit(self) -> int:
        link = self.link
        if link.session.remote_incoming_window <= 0 or link.outgoing is not None:
            return 0  # no room in the session window, or a large event still going out
        return link.credit

    def deliver_run(self, log: StreamLog, position: int, end: int) -> int | None:
        return None  # each event's annotations are its own (enqueued time, last enqueued): one at a time

    def deliver_offset(self, offset: int, message: StoredMessage) -> bool:
        log = self.stream.log
        enqueued_at = log.appended_at(offset)
        assert enqueued_at is not None  # the stream hands out retained events only
        now = self.now()
        last = self.hub.last_enqueued(self.partition) if self.track_last_enqueued else None
        payload = event_payload(message, offset, enqueued_at, last, now)
        limit = self.link.max_message_size
        if limit is not None and len(payload) > limit:
            return False  # larger than this receiver takes (Part 2 §2.7.3): it reads on past it
        self._tags = (self._tags + 1) & 0xFFFFFFFF
        connection = self.connection
        delivery = connection.protocol.send_transfer(self.link, _TAG.pack(self._tags), payload, True)
        connection.mark_dirty()
        if connection.protocol.hook is not None:  # the tap's delivery_out (tap.py): faults see the delivery
            connection.delivered(self, None, delivery)
        self.delivered += 1
        return True

    # ExtensionLink ------------------------------------------------------

    def on_credit(self, properties: dict[Any, Any] | None = None, drain: bool = False) -> None:
        self.stream.dispatch(self.now())

    def on_detach(self) -> None:
        self.stream.remove_reader(self)
        self.hub.remove_receiver(self.group, self.partition, self)

    def __repr__(self) -> str:
        return f"<EventHubReader {self.hub.name}/{self.group}/{self.partition} at {self.position}>"
