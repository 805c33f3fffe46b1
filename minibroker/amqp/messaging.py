"""Message sections, delivery states and termini (OASIS AMQP 1.0 Part 3)."""

from __future__ import annotations

from typing import Any

from .composite import Composite, DescribedValue, composite, described_value, field
from .performatives import Error

__all__ = [
    "Accepted", "AmqpSequence", "AmqpValue", "ApplicationProperties", "Data",
    "DeleteOnClose", "DeleteOnNoLinks", "DeleteOnNoLinksOrMessages", "DeleteOnNoMessages",
    "DeliveryAnnotations", "Footer", "Header", "MessageAnnotations", "Modified", "Outcome",
    "Properties", "Received", "Rejected", "Released", "Source", "Target",
]  # fmt: skip


@composite(0x70, "amqp:header:list")
class Header(Composite):
    """Transport headers for a message (§3.2.1)."""

    durable: bool = field("boolean", default=False)
    priority: int = field("ubyte", default=4)
    ttl: int | None = field("uint", default=None)
    first_acquirer: bool = field("boolean", default=False)
    delivery_count: int = field("uint", default=0)


@described_value(0x71, "amqp:delivery-annotations:map", "fields")
class DeliveryAnnotations(DescribedValue):
    """Annotations for the next hop only (§3.2.2)."""

    __slots__ = ()


@described_value(0x72, "amqp:message-annotations:map", "fields")
class MessageAnnotations(DescribedValue):
    """Annotations intermediaries may add (§3.2.3)."""

    __slots__ = ()


@composite(0x73, "amqp:properties:list")
class Properties(Composite):
    """Immutable properties of the bare message (§3.2.4)."""

    message_id: Any = field("*", default=None)
    user_id: bytes | None = field("binary", default=None)
    to: Any = field("*", default=None)
    subject: str | None = field("string", default=None)
    reply_to: Any = field("*", default=None)
    correlation_id: Any = field("*", default=None)
    content_type: str | None = field("symbol", default=None)
    content_encoding: str | None = field("symbol", default=None)
    absolute_expiry_time: int | None = field("timestamp", default=None)
    creation_time: int | None = field("timestamp", default=None)
    group_id: str | None = field("string", default=None)
    group_sequence: int | None = field("uint", default=None)
    reply_to_group_id: str | None = field("string", default=None)


@described_value(0x74, "amqp:application-properties:map", "map")
class ApplicationProperties(DescribedValue):
    """Application-defined properties, string keys and simple values (§3.2.5)."""

    __slots__ = ()


@described_value(0x75, "amqp:data:binary", "binary")
class Data(DescribedValue):
    """Opaque binary body section (§3.2.6)."""

    __slots__ = ()


@described_value(0x76, "amqp:amqp-sequence:list", "list")
class AmqpSequence(DescribedValue):
    """A body section holding a list of AMQP values (§3.2.7)."""

    __slots__ = ()


@described_value(0x77, "amqp:amqp-value:*", "*")
class AmqpValue(DescribedValue):
    """A body section holding a single AMQP value (§3.2.8)."""

    __slots__ = ()


@described_value(0x78, "amqp:footer:map", "fields")
class Footer(DescribedValue):
    """Transport footers, e.g. message hashes (§3.2.9)."""

    __slots__ = ()


@composite(0x23, "amqp:received:list")
class Received(Composite):
    """Partial message data seen by the receiver (§3.4.1)."""

    section_number: int = field("uint", default=None, mandatory=True)
    section_offset: int = field("ulong", default=None, mandatory=True)


@composite(0x24, "amqp:accepted:list")
class Accepted(Composite):
    """The message was processed successfully (§3.4.2)."""


@composite(0x25, "amqp:rejected:list")
class Rejected(Composite):
    """The message is invalid and will not be processed (§3.4.3)."""

    error: Error | None = field("*", default=None)


@composite(0x26, "amqp:released:list")
class Released(Composite):
    """The message was not processed and may be redelivered (§3.4.4)."""


@composite(0x27, "amqp:modified:list")
class Modified(Composite):
    """The message was modified but not processed (§3.4.5)."""

    delivery_failed: bool = field("boolean", default=False)
    undeliverable_here: bool = field("boolean", default=False)
    message_annotations: dict[Any, Any] | None = field("fields", default=None)


Outcome = Accepted | Rejected | Released | Modified


@composite(0x28, "amqp:source:list")
class Source(Composite):
    """The source terminus of a link (§3.5.3)."""

    address: Any = field("*", default=None)
    durable: int = field("uint", default=0)
    expiry_policy: str = field("symbol", default="session-end")
    timeout: int = field("uint", default=0)
    dynamic: bool = field("boolean", default=False)
    dynamic_node_properties: dict[Any, Any] | None = field("fields", default=None)
    distribution_mode: str | None = field("symbol", default=None)
    filter: dict[Any, Any] | None = field("fields", default=None)
    default_outcome: Any = field("*", default=None)
    outcomes: list[str] | None = field("symbol*", default=None)
    capabilities: list[str] | None = field("symbol*", default=None)


@composite(0x29, "amqp:target:list")
class Target(Composite):
    """The target terminus of a link (§3.5.4)."""

    address: Any = field("*", default=None)
    durable: int = field("uint", default=0)
    expiry_policy: str = field("symbol", default="session-end")
    timeout: int = field("uint", default=0)
    dynamic: bool = field("boolean", default=False)
    dynamic_node_properties: dict[Any, Any] | None = field("fields", default=None)
    capabilities: list[str] | None = field("symbol*", default=None)


@composite(0x2B, "amqp:delete-on-close:list")
class DeleteOnClose(Composite):
    """Lifetime policy: delete the node when its creating link closes (§3.5.10)."""


@composite(0x2C, "amqp:delete-on-no-links:list")
class DeleteOnNoLinks(Composite):
    """Lifetime policy: delete the node when it has no links (§3.5.11)."""


@composite(0x2D, "amqp:delete-on-no-messages:list")
class DeleteOnNoMessages(Composite):
    """Lifetime policy: delete the node when it holds no messages (§3.5.12)."""


@composite(0x2E, "amqp:delete-on-no-links-or-messages:list")
class DeleteOnNoLinksOrMessages(Composite):
    """Lifetime policy: delete the node when it has neither links nor messages (§3.5.13)."""
