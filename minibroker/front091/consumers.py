"""A ``basic.consume`` as the queue sees it: a consumer with credit from its prefetch window.

The queue drives it through its ``Consumer`` protocol (``minibroker.broker.queue``): it asks
``credit()`` before each message and hands it over with ``deliver()``.  Credit is the room left
in the prefetch window (``basic.qos``, §1.8.3.1) as RabbitMQ 3.x interprets it: ``global=false``
limits each consumer of the channel, ``global=true`` the channel as a whole; 0 means no limit.
A ``no-ack`` consumer has no window (§1.8.3.3: "the server does not expect acknowledgements").
Nothing is sent while the channel's flow is off (``channel.flow``, §1.5.2.3) or the connection's
output is over its bound.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from ..broker.queue import Queue
from ..broker.stored import Entry

if TYPE_CHECKING:
    from .channel import Channel

__all__ = ["Consumer091", "MAX_UNACKED", "UNLIMITED"]

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


class Consumer091:
    """One consumer tag on one channel, reading one queue."""

    browse = False

    def __init__(self, channel: Channel, tag: str, queue: Queue, no_ack: bool, prefetch: int) -> None:
        self.channel = channel
        self.tag = tag
        self.queue = queue
        self.no_ack = no_ack
        #: ``basic.qos`` prefetch-count with ``global=false`` when it consumed (0: no limit).
        self.prefetch = prefetch
        #: Deliveries not yet acknowledged.
        self.unacked = 0
        self.link_id = next(_IDS)

    def credit(self) -> int:
        channel = self.channel
        if not channel.active or channel.connection.output_full():
            return 0
        if self.no_ack:
            return UNLIMITED
        room = self.prefetch - self.unacked if self.prefetch else UNLIMITED
        # No prefetch (or a large one on many consumers): the channel's own bound stops it.
        room = min(room, MAX_UNACKED - len(channel.unacked))
        if channel.global_prefetch:
            room = min(room, channel.global_prefetch - len(channel.unacked))
        return room

    def accepts(self, entry: Entry) -> bool:
        return True

    def deliver(self, entry: Entry) -> None:
        self.channel.deliver(self, entry)
