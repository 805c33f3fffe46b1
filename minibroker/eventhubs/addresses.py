"""Event Hubs addresses, reduced to what they name.

Clients name a hub by URI (``amqps://host:port/telemetry``) or by path; a
producer may target one partition, ``telemetry/Partitions/0``; a receiver
reads one partition for one consumer group,
``telemetry/ConsumerGroups/$Default/Partitions/0``.  The hub's management
node is ``$management`` (Azure Event Hubs AMQP documentation, "AMQP 1.0 in
Azure Event Hubs": management operations).
"""

from __future__ import annotations

from typing import NamedTuple

from ..servicebus.addresses import node_name

__all__ = ["CONSUMER_GROUPS", "MANAGEMENT", "PARTITIONS", "HubAddress", "parse_hub_address", "partition_node"]

MANAGEMENT = "$management"
PARTITIONS = "Partitions"
CONSUMER_GROUPS = "ConsumerGroups"


class HubAddress(NamedTuple):
    """A hub, and where in it: a partition (for a producer or a receiver) and a consumer group (receiver)."""

    hub: str
    partition: str | None
    consumer_group: str | None


def parse_hub_address(address: str) -> HubAddress | None:
    """``hub``, ``hub/Partitions/id`` or ``hub/ConsumerGroups/group/Partitions/id``; None if none of them."""
    parts = node_name(address).split("/")
    if not parts[0] or any(not part for part in parts):
        return None
    if len(parts) == 1:
        return HubAddress(parts[0], None, None)
    if len(parts) == 3 and parts[1] == PARTITIONS:
        return HubAddress(parts[0], parts[2], None)
    if len(parts) == 5 and parts[1] == CONSUMER_GROUPS and parts[3] == PARTITIONS:
        return HubAddress(parts[0], parts[4], parts[2])
    return None


def partition_node(hub: str, partition: str) -> str:
    """The broker node (a stream) holding one partition's events: ``hub/Partitions/id``."""
    return f"{hub}/{PARTITIONS}/{partition}"
