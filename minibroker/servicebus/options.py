"""Options of the Service Bus layer (lock duration, delivery limit, declared entities)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ServiceBusOptions"]


@dataclass(frozen=True, slots=True)
class ServiceBusOptions:
    """How the broker behaves for Azure Service Bus clients.

    ``lock_duration`` is how long a peek-lock receive holds a message (seconds
    on the broker's clock, so a ``ManualClock`` drives expiry);
    ``max_delivery_count`` is the number of deliveries after which a message
    goes to the entity's ``$DeadLetterQueue``.  ``queues`` and ``topics``
    (topic name -> subscription names) are created when the broker starts,
    like the entities of the Service Bus emulator's config file: a topic's
    subscriptions must exist before messages are sent to it, or those
    messages reach nobody.
    """

    lock_duration: float = 60.0
    max_delivery_count: int = 10
    queues: tuple[str, ...] = ()
    topics: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.lock_duration <= 0:
            raise ValueError(f"lock_duration must be a positive number of seconds, got {self.lock_duration}")
        if self.max_delivery_count < 1:
            raise ValueError(f"max_delivery_count must be >= 1, got {self.max_delivery_count}")
        if isinstance(self.queues, str):
            raise TypeError(f"queues must be a tuple of names, got the string {self.queues!r}; write ({self.queues!r},)")
        for topic, subscriptions in self.topics.items():
            if isinstance(subscriptions, str):
                raise TypeError(
                    f"topics maps a topic to a tuple of subscription names; got the string {subscriptions!r} "
                    f"for {topic!r}, write ({subscriptions!r},)"
                )
