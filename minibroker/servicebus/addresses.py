"""Service Bus entity addresses, reduced to the broker's node names.

Clients name entities by URI (``amqps://host:port/orders``) or by path
(``orders/$management``); a topic's subscription is ``topic/Subscriptions/name``
and every queue or subscription has a ``/$DeadLetterQueue``.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Entity", "parse_address", "node_name", "MANAGEMENT", "CBS", "DEAD_LETTER_QUEUE", "SUBSCRIPTIONS"]

CBS = "$cbs"
MANAGEMENT = "$management"
DEAD_LETTER_QUEUE = "$DeadLetterQueue"
SUBSCRIPTIONS = "Subscriptions"


def node_name(address: str) -> str:
    """``amqps://host:port/orders/$DeadLetterQueue`` -> ``orders/$DeadLetterQueue``; a path stays a path."""
    scheme = address.find("://")
    if scheme != -1:
        slash = address.find("/", scheme + 3)
        address = address[slash + 1 :] if slash != -1 else ""
    return address.strip("/")


class Entity(NamedTuple):
    """What a node name designates: an entity, one of its subscriptions, its dead letters, its management."""

    name: str  # the queue or topic
    subscription: str | None
    dead_letter: bool
    management: bool

    @property
    def node(self) -> str:
        """The broker node holding its messages: the queue, subscription queue or dead-letter queue."""
        name = self.name
        if self.subscription is not None:
            name = f"{name}/{SUBSCRIPTIONS}/{self.subscription}"
        return f"{name}/{DEAD_LETTER_QUEUE}" if self.dead_letter else name


def parse_address(address: str) -> Entity:
    """Split an address into its entity, subscription, dead-letter and management parts."""
    parts = node_name(address).split("/")
    management = len(parts) > 1 and parts[-1] == MANAGEMENT
    if management:
        parts.pop()
    dead_letter = len(parts) > 1 and parts[-1] == DEAD_LETTER_QUEUE
    if dead_letter:
        parts.pop()
    subscription = None
    if len(parts) == 3 and parts[1] == SUBSCRIPTIONS and parts[2]:
        subscription = parts.pop()
        parts.pop()
    return Entity("/".join(parts), subscription, dead_letter, management)
