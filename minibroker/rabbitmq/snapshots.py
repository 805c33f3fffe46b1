"""Frozen pictures of the RabbitMQ layer's exchanges, for tests and reports."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records import record

__all__ = ["BindingSnapshot", "ExchangeSnapshot"]


@record(frozen=True, slots=True)
class BindingSnapshot:
    """One binding from an exchange: to a queue or an exchange, with its key and arguments."""

    destination: str
    destination_kind: str
    key: str
    arguments: Mapping[str, Any]


@record(frozen=True, slots=True)
class ExchangeSnapshot:
    """An exchange as it is now: type, flags, bindings, and the messages it was sent."""

    name: str
    type: str
    durable: bool
    auto_delete: bool
    internal: bool
    arguments: Mapping[str, Any]
    bindings: tuple[BindingSnapshot, ...]
    #: Messages published to it, and of those the ones no queue received (settled ``released``).
    published: int
    unroutable: int

    def bound(self, destination: str) -> list[BindingSnapshot]:
        """The bindings to ``destination`` (a queue or exchange name)."""
        return [b for b in self.bindings if b.destination == destination]
