"""A ``basic.consume`` as the queue sees it: a consumer with credit from its prefetch window.

The queue drives it through its ``Consumer`` protocol (``minibroker.broker.queue``): it asks
``credit()`` before each message and hands it over with ``deliver()``.  Credit is the room left
in the prefetch window (``basic.qos``, §1.8.3.1) as RabbitMQ 3.x interprets it: ``global=false``
limits each consumer of the channel, ``global=true`` the channel as a whole; 0 means no limit.
A ``no-ack`` consumer has no window (§1.8.3.3: "the server does not expect acknowledgements").
RabbitMQ's extensions narrow who gets credit: on an ``x-single-active-consumer`` queue only the
first consumer (the others take over in order when it goes); a consumer with a lower
``x-priority`` than another of its queue only while every higher one has no room (RabbitMQ's
"Consumer Priorities": "active consumers with lower priority only receive messages when the
higher priority ones are blocked").
Nothing is sent while the channel's flow is off (``channel.flow``, §1.5.2.3) or the connection's
output is over its bound.

A consumer of a stream (``x-queue-type: stream``) is a :class:`StreamReader091`: a reader of the
stream's log from the ``x-stream-offset`` it asked for (RabbitMQ's "Streams" docs), credited by its
prefetch window, which RabbitMQ requires; an ack frees room in the window and removes nothing.
Both kinds answer to the channel alike: ``name``, ``detach()``, ``dispatch(now)``, ``remaining()``.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Sized
from typing import Any, Protocol

from ..broker.queue import Queue
from ..broker.stored import Entry, StoredMessage
from ..broker.stream import Stream
from ..broker.streamfilters import StreamFilter
from ..broker.streamlog import Instant, OffsetSpec, StreamLog, interval_seconds

__all__ = ["AnyConsumer", "Consumer091", "ConsumerChannel", "ConsumerConnection", "MAX_UNACKED", "Ranking", "StreamReader091", "UNLIMITED", "stream_offset"]

#: Unacknowledged deliveries one channel holds at most, whatever ``basic.qos`` says (RabbitMQ
#: keeps no such bound; a prefetch-count is a short, so 65535 is the largest window a client
#: can ask for): past it the channel's consumers get nothing more until it acknowledges, and a
#: ``basic.get`` is refused with 406.
MAX_UNACKED = 65535

#: Credit of a consumer with no window: the queue sends while the connection's output has room.
UNLIMITED = 1 << 30
#: Link ids for 0-9-1 consumers, apart from the broker's (a queue remembers ids a message may
#: not go back to; 0-9-1 never asks for that, but the ids must not collide).
_IDS = itertools.count(1 << 48)


class ConsumerConnection(Protocol):
    """What a consumer (and the vhost ending one) asks of its channel's connection
    (``.connection.Connection091``)."""

    def output_full(self) -> bool: ...

    def mark_dirty(self) -> None: ...


class ConsumerChannel(Protocol):
    """What a consumer (and the vhost ending one) reads and calls on its channel
    (``.channel.Channel``, a floor above this module, described here rather than imported;
    read-only members, so nothing is wrapped at run time)."""

    @property
    def connection(self) -> ConsumerConnection: ...

    @property
    def active(self) -> bool: ...

    @property
    def global_prefetch(self) -> int: ...

    @property
    def unacked(self) -> Sized: ...

    def deliver(self, consumer: Consumer091, entry: Entry) -> None: ...

    def deliver_stream(self, reader: StreamReader091, offset: int, message: StoredMessage) -> None: ...

    def end_consumer(self, consumer: AnyConsumer, notify: bool = False) -> None: ...


class Ranking:
    """The 0-9-1 consumers of one queue, and how many of them have a non-zero ``x-priority``."""

    __slots__ = ("prioritised", "members")

    def __init__(self) -> None:
        self.prioritised = 0
        #: The queue's 0-9-1 consumers (not its AMQP 1.0 ones: ``x-priority`` is a 0-9-1 argument).
        self.members: list[Consumer091] = []


class Consumer091:
    """One consumer tag on one channel, reading one queue."""

    browse = False

    def __init__(
        self, channel: ConsumerChannel, tag: str, queue: Queue, no_ack: bool, prefetch: int, *, single_active: bool = False,
        priority: int = 0, quorum: bool = False, ranking: Ranking | None = None,
    ) -> None:  # fmt: skip
        self.channel = channel
        self.tag = tag
        self.queue = queue
        self.no_ack = no_ack
        #: ``basic.qos`` prefetch-count with ``global=false`` when it consumed (0: no limit).
        self.prefetch = prefetch
        #: Deliveries not yet acknowledged.
        self.unacked = 0
        self.link_id = next(_IDS)
        self.single_active = single_active
        #: ``x-priority`` (RabbitMQ's default 0).
        self.priority = priority
        #: A quorum queue's consumer: its deliveries carry ``x-delivery-count``.
        self.quorum = quorum
        #: Shared by the queue's 0-9-1 consumers: whether any has an ``x-priority`` (only then are
        #: the others looked at for each message).
        self.ranking = ranking or Ranking()
        self.ranking.members.append(self)
        if priority:
            self.ranking.prioritised += 1

    @property
    def name(self) -> str:
        return self.queue.name

    @property
    def dispatcher(self) -> Queue:
        """What hands it messages: its queue (shared with the queue's other consumers)."""
        return self.queue

    def detach(self) -> None:
        self.queue.remove_consumer(self)
        if self in self.ranking.members:
            self.ranking.members.remove(self)
            if self.priority:
                self.ranking.prioritised -= 1

    def dispatch(self, now: float) -> None:
        self.queue.dispatch(now)

    def remaining(self) -> int:
        """Consumers the queue has (after this one was detached: whether it was the last)."""
        return len(self.queue.consumers)

    def credit(self) -> int:
        channel = self.channel
        if not channel.active or channel.connection.output_full():
            return 0
        if self.single_active and self.queue.consumers[0] is not self:
            return 0
        if self.ranking.prioritised and self._outranked():
            return 0
        if self.no_ack:  # _room inlined: credit is asked before each message
            return UNLIMITED
        room = self.prefetch - self.unacked if self.prefetch else UNLIMITED
        # No prefetch (or a large one on many consumers): the channel's own bound stops it.
        room = min(room, MAX_UNACKED - len(channel.unacked))
        if channel.global_prefetch:
            room = min(room, channel.global_prefetch - len(channel.unacked))
        return room

    def _room(self) -> int:
        if self.no_ack:
            return UNLIMITED
        channel = self.channel
        room = self.prefetch - self.unacked if self.prefetch else UNLIMITED
        room = min(room, MAX_UNACKED - len(channel.unacked))
        if channel.global_prefetch:
            room = min(room, channel.global_prefetch - len(channel.unacked))
        return room

    def _outranked(self) -> bool:
        """Whether a 0-9-1 consumer of higher ``x-priority`` on the queue has room (it gets the message)."""
        return any(
            other.priority > self.priority and other.channel.active and other._room() > 0
            for other in self.ranking.members
        )

    def accepts(self, entry: Entry) -> bool:
        return True

    def deliver(self, entry: Entry) -> None:
        self.channel.deliver(self, entry)


class StreamReader091:
    """One consumer tag reading a stream from an offset (a :class:`~minibroker.broker.stream.Reader`)."""

    no_ack = False  # RabbitMQ refuses no-ack consumers of streams (540)
    stream_filter = StreamFilter()

    def __init__(self, channel: ConsumerChannel, tag: str, stream: Stream, prefetch: int) -> None:
        self.channel = channel
        self.tag = tag
        self.stream = stream
        self.prefetch = prefetch
        self.unacked = 0
        #: The offset read next (the stream sets it when the reader is added).
        self.position = 0
        #: False once cancelled: settling what it was sent frees room nobody reads with.
        self.reading = False

    @property
    def name(self) -> str:
        return self.stream.name

    def start(self, spec: OffsetSpec, now: float) -> None:
        self.stream.add_reader(self, spec)
        self.reading = True
        self.stream.dispatch(now)

    @property
    def dispatcher(self) -> StreamReader091:
        """What hands it messages: itself (it reads the stream at its own position)."""
        return self

    def detach(self) -> None:
        self.reading = False
        self.stream.remove_reader(self)

    def dispatch(self, now: float) -> None:
        if self.reading:
            self.stream.feed(self)

    def remaining(self) -> int:
        return len(self.stream.readers)

    def credit(self) -> int:
        channel = self.channel
        if not channel.active or channel.connection.output_full():
            return 0
        room = self.prefetch - self.unacked
        if channel.global_prefetch:
            room = min(room, channel.global_prefetch - len(channel.unacked))
        return room

    def deliver_offset(self, offset: int, message: StoredMessage) -> bool:
        self.channel.deliver_stream(self, offset, message)
        return True

    def deliver_run(self, log: StreamLog, position: int, end: int) -> int | None:
        return None  # one message at a time: each is converted for 0-9-1 anyway


#: What a channel's consumer tag names: a queue's consumer or a stream's reader.
AnyConsumer = Consumer091 | StreamReader091


def stream_offset(value: Any, now: float) -> OffsetSpec | None:
    """Where a ``basic.consume`` argument ``x-stream-offset`` starts reading (RabbitMQ's "Streams"
    docs): ``first``, ``last``, ``next``, an offset (a negative one: the first retained), a
    timestamp, or an interval before ``now`` such as ``"10m"`` (``x-max-age``'s units); None
    for anything else."""
    if value is None:
        return "next"
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, datetime.datetime):
        return Instant(value.timestamp())
    if isinstance(value, int) and not isinstance(value, bool):
        return max(0, value)
    if isinstance(value, str):
        if value in ("first", "last", "next"):
            return value  # type: ignore[return-value]
        seconds = interval_seconds(value)
        if seconds is not None:
            return Instant(now - seconds)
    return None
