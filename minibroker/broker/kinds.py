"""The node kinds the router can create, by address kind (see node.py for the contract).

Adding a kind of node is one class implementing :class:`~.node.Node`, one
row in :data:`~.addresses.ADDRESS_KINDS` and one entry here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .config import DEFAULT_DEAD_LETTER_SUFFIX, QueueOptions, StreamOptions
from .node import Node, NodeServices
from .queue import Queue
from .statistics import NodeCounters
from .stream import Stream
from .topic import Topic

__all__ = ["NODE_KINDS", "NodeFactory", "make_queue"]

#: Builds a node: ``(name, services, counters, options or None for the defaults)``.
NodeFactory = Callable[[str, NodeServices, NodeCounters, Any], Node]


def make_queue(
    name: str, services: NodeServices, counters: NodeCounters, options: QueueOptions | None, temporary: bool = False
) -> Queue:
    """A queue; one named ``<queue>/$DeadLetterQueue`` keeps what it gets and dead-letters nothing."""
    dead_letters = name.endswith(DEFAULT_DEAD_LETTER_SUFFIX)
    if options is None:
        options = services.config.queue_defaults
        if dead_letters:
            options = dataclasses.replace(options, dead_letter_address="")
    queue = Queue(name, options, counters, services.dead_letter, temporary, services.expiry_added)
    queue.keeps_expired = dead_letters
    return queue


def _make_topic(name: str, services: NodeServices, counters: NodeCounters, options: Any) -> Topic:
    return Topic(name, counters, services)


def _make_stream(name: str, services: NodeServices, counters: NodeCounters, options: StreamOptions | None) -> Stream:
    return Stream(name, options or StreamOptions(), counters, services.expiry_added)


NODE_KINDS: dict[str, NodeFactory] = {
    Queue.KIND: make_queue,
    Topic.KIND: _make_topic,
    Stream.KIND: _make_stream,
}
