"""The node kinds the router can create, by address kind (see node.py for the contract).

Adding a kind of node is one class implementing :class:`~.node.Node`, one
row in :data:`~.addresses.ADDRESS_KINDS` and one entry here: declaring,
finding, snapshotting and deleting a node of any kind go through this table
(``Broker.declare(kind, name, options)``, ``Broker.snapshot(name)``).

A kind's module is imported the first time a node of that kind is made (or its class asked
for), not with the broker: a broker that never declares a stream never loads the stream's
log, filters and snapshots (issue #47, the fixture's fixed cost).  Code that only compares
kinds uses the names below, which need no import.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .node import Node

__all__ = ["NODE_KINDS", "QUEUE", "TOPIC", "STREAM"]

#: The kinds' names (each class's ``KIND``).
QUEUE = "queue"
TOPIC = "topic"
STREAM = "stream"


class _NodeKinds(Mapping[str, "type[Node]"]):
    """Each node class by its ``KIND``, the class's module imported at the first lookup of the kind."""

    def __init__(self, where: dict[str, str]) -> None:
        self._where = where  # kind -> "module:Class", the module relative to this package
        self._classes: dict[str, type[Node]] = {}

    def __getitem__(self, kind: str) -> type[Node]:
        cls = self._classes.get(kind)
        if cls is None:
            module, name = self._where[kind].split(":")  # KeyError: no such kind, as a dict says
            cls = self._classes[kind] = getattr(importlib.import_module(module, __package__), name)
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


#: Each node class by its ``KIND`` (iterating lists the kinds without importing any).
NODE_KINDS: Mapping[str, type[Node]] = _NodeKinds({QUEUE: ".queue:Queue", TOPIC: ".topic:Topic", STREAM: ".stream:Stream"})
