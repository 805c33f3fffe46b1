"""The node kinds the router can create, by address kind (see node.py for the contract).

Adding a kind of node is one class implementing :class:`~.node.Node`, one
row in :data:`~.addresses.ADDRESS_KINDS` and one entry here: declaring,
finding, snapshotting and deleting a node of any kind go through this table
(``Broker.declare(kind, name, options)``, ``Broker.snapshot(name)``).
"""

from __future__ import annotations

from .node import Node
from .queue import Queue
from .stream import Stream
from .topic import Topic

__all__ = ["NODE_KINDS"]

#: Each node class by its ``KIND``.
NODE_KINDS: dict[str, type[Node]] = {cls.KIND: cls for cls in (Queue, Topic, Stream)}
