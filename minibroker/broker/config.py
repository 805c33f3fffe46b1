"""Broker and node options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..servicebus.options import ServiceBusOptions

__all__ = ["BrokerConfig", "QueueOptions", "DEFAULT_DEAD_LETTER_SUFFIX"]

#: A queue's dead-letter address is ``<queue>/$DeadLetterQueue`` unless configured.
DEFAULT_DEAD_LETTER_SUFFIX = "/$DeadLetterQueue"


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """Per-queue behaviour.

    ``priorities`` is the number of distinct priority levels (Part 3 §3.2.1);
    ``dead_letter_address`` is ``None`` for the default
    ``<queue>/$DeadLetterQueue`` and ``""`` to turn dead-lettering off.
    """

    priorities: int = 10
    default_ttl: float | None = None
    max_ttl: float | None = None
    dead_letter_address: str | None = None
    dead_letter_on_expiry: bool = False
    max_delivery_count: int = 10
    #: Most messages held (acquired ones included); None: no bound.  See ``minibroker.broker.limits``.
    max_depth: int | None = None
    #: Most encoded message bytes held; None: no bound.
    max_bytes: int | None = None
    #: What a full queue does: ``reject-publish``, ``drop-head`` or ``withhold-credit``.
    overflow: str = "reject-publish"

    def __post_init__(self) -> None:
        if not 1 <= self.priorities <= 256:
            raise ValueError(f"priorities must be 1..256 distinct levels, got {self.priorities}")
        if self.max_delivery_count < 1:
            raise ValueError(f"max_delivery_count must be >= 1, got {self.max_delivery_count}")
        if self.overflow not in ("reject-publish", "drop-head", "withhold-credit"):
            raise ValueError(
                f"overflow must be 'reject-publish', 'drop-head' or 'withhold-credit', got {self.overflow!r}"
            )
        for name in ("max_depth", "max_bytes"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be a positive number or None (no bound), got {value}")
        for name in ("default_ttl", "max_ttl"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds or None, got {value}")


@dataclass(slots=True)
class BrokerConfig:
    """Options for the whole broker."""

    container_id: str = "minibroker"
    #: Create a queue (or a topic, for ``topic://`` and the ``topic`` capability)
    #: when a link names an unknown address; if False such links are refused.
    auto_create: bool = True
    #: Options of queues created on demand.
    queue_defaults: QueueOptions = field(default_factory=QueueOptions)
    #: Credit the broker keeps granted to each sending client (Part 2 §2.6.7).
    link_credit: int = 1000
    #: SASL PLAIN users (name -> password); anonymous access may stay allowed.  Never shown in repr.
    users: dict[str, str] = field(default_factory=dict, repr=False)
    #: Per-user rights by address pattern, ``{user: {pattern: "send receive manage"}}``
    #: (see :mod:`minibroker.broker.permissions`); None: everyone may do everything.
    permissions: dict[str, dict[str, str]] | None = None
    allow_anonymous: bool = True
    max_frame_size: int = 256 * 1024
    #: Largest message accepted from a client, advertised in attach; None: no limit.
    #: 128 MiB (RabbitMQ's default) bounds what one delivery in progress can hold.
    max_message_size: int | None = 128 * 1024 * 1024
    #: Client connections served at once; one more is refused with amqp:resource-limit-exceeded.
    max_connections: int = 1024
    #: Sessions per connection, offered as channel-max + 1 in ``open`` (Part 2 §2.7.1).
    max_sessions: int = 256
    #: Links per connection, over all its sessions; one more is refused with amqp:resource-limit-exceeded.
    max_links: int = 1024
    #: Seconds of peer silence before a connection is closed; None: never.
    idle_timeout: float | None = 60.0
    #: Seconds a transaction may stay open before it is rolled back; None: forever.
    transaction_timeout: float | None = None
    #: Keep the last N frames of every connection for ``broker.frames()``; 0 keeps none and costs nothing.
    frame_log: int = 0
    #: The Azure Service Bus layer's options; it also turns on (with defaults) when a client attaches ``$cbs``.
    servicebus: ServiceBusOptions | None = None
