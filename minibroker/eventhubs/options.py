"""The Event Hubs layer's options: what ``BrokerConfig(event_hubs=EventHubsOptions(...))`` says.

Light on purpose (no import of the layer), as ``minibroker.servicebus.options``.
"""

from __future__ import annotations

from ..broker.config import check_tier
from ..records import record

__all__ = [
    "CONSUMER_GROUPS_PER_HUB", "DEFAULT_CONSUMER_GROUP", "EVENT_HUBS_MESSAGE_SIZE", "EventHubOptions", "EventHubsOptions",
]  # fmt: skip

#: The largest publication (one event or a batch) an event hub takes, by tier (Azure Event Hubs
#: quotas, "Maximum size of Event Hubs publication": 256 KB Basic, 1 MB Standard, Premium, Dedicated).
EVENT_HUBS_MESSAGE_SIZE: dict[str, int] = {
    "basic": 256 * 1024, "standard": 1024 * 1024, "premium": 1024 * 1024, "dedicated": 1024 * 1024,
}  # fmt: skip

#: Consumer groups an event hub may have, by tier (Azure Event Hubs quotas, "Number of consumer
#: groups per event hub"); minibroker bounds the groups receivers create by naming them with it.
CONSUMER_GROUPS_PER_HUB: dict[str, int] = {"basic": 1, "standard": 20, "premium": 100, "dedicated": 1000}


#: The consumer group every event hub has (Azure Event Hubs' ``$Default``).
DEFAULT_CONSUMER_GROUP = "$Default"


@record(frozen=True, slots=True)
class EventHubOptions:
    """One event hub: its partition count, consumer groups (``$Default`` always) and retention.

    ``retention`` is how many seconds an event stays readable, on the
    broker's clock (a ``ManualClock`` drives it in tests); None keeps every
    event.  Azure counts retention in hours or days; tests want seconds.
    """

    name: str
    partitions: int = 4
    consumer_groups: tuple[str, ...] = ()
    retention: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise ValueError(f"an event hub name is a non-empty str without '/', got {self.name!r}")
        if isinstance(self.partitions, bool) or not isinstance(self.partitions, int) or not 1 <= self.partitions <= 1024:
            raise ValueError(f"partitions must be an int from 1 to 1024 (Azure's limit), got {self.partitions!r}")
        if isinstance(self.consumer_groups, str):
            raise TypeError(
                f"consumer_groups is a tuple of names, got the string {self.consumer_groups!r}; "
                f"write ({self.consumer_groups!r},)"
            )
        for group in self.consumer_groups:
            if not isinstance(group, str) or not group or "/" in group:
                raise ValueError(f"a consumer group name is a non-empty str without '/', got {group!r}")
        if self.retention is not None and (isinstance(self.retention, bool) or self.retention <= 0):
            raise ValueError(f"retention must be a positive number of seconds or None (keep all), got {self.retention!r}")

    @property
    def groups(self) -> tuple[str, ...]:
        """Every consumer group, ``$Default`` first."""
        return (DEFAULT_CONSUMER_GROUP, *(g for g in self.consumer_groups if g != DEFAULT_CONSUMER_GROUP))


@record(frozen=True, slots=True)
class EventHubsOptions:
    """How the broker behaves for Azure Event Hubs clients.

    ``hubs`` are declared when the broker starts; with ``auto_create`` on, a
    hub an Event Hubs client names first is created with
    ``default_partitions`` partitions and the ``$Default`` consumer group.
    """

    hubs: tuple[EventHubOptions, ...] = ()
    default_partitions: int = 4
    #: The namespace's tier: ``basic`` takes publications up to 256 KB, the others up to 1 MB
    #: (:data:`EVENT_HUBS_MESSAGE_SIZE`), advertised as producers' max-message-size.  It also sets
    #: the consumer groups a hub may have (:data:`CONSUMER_GROUPS_PER_HUB`).
    tier: str = "standard"

    def __post_init__(self) -> None:
        check_tier(self.tier, EVENT_HUBS_MESSAGE_SIZE, "Event Hubs")
        if isinstance(self.hubs, EventHubOptions):
            raise TypeError(f"hubs is a tuple of EventHubOptions; write ({self.hubs!r},)")
        for hub in self.hubs:
            if not isinstance(hub, EventHubOptions):
                raise TypeError(f"hubs holds EventHubOptions(name, partitions=...), got {hub!r}")
        EventHubOptions("default", self.default_partitions)  # same bounds as a declared hub
