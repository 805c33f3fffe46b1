"""The Service Bus layer's options: what ``BrokerConfig(servicebus=ServiceBusOptions(...))`` says.

Light on purpose (no import of the layer): the public ``BrokerConfig`` and the pytest plugin name
these classes without loading the layer, which loads when a broker turns it on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field

from ..broker.config import check_tier
from ..records import record

__all__ = [
    "CorrelationFilter", "DEFAULT_RULE", "EntityProperties", "SERVICE_BUS_MESSAGE_SIZE", "ServiceBusOptions",
    "SqlFilter", "SubscriptionRule",
]  # fmt: skip

#: The largest message a Service Bus entity takes, by tier (Azure Service Bus quotas, "Message size
#: for a queue, topic, or subscription entity": 256 KB Basic and Standard, 100 MB Premium on AMQP).
SERVICE_BUS_MESSAGE_SIZE: dict[str, int] = {"basic": 256 * 1024, "standard": 256 * 1024, "premium": 100 * 1024 * 1024}


@record(frozen=True, slots=True)
class SqlFilter:
    """A Service Bus SQL filter: a SQL-92 condition over ``sys.`` properties and application properties.

    ``SqlFilter("1=1")`` is the true filter (the ``$Default`` rule's), ``SqlFilter("1=0")`` the false one.
    """

    expression: str


@record(frozen=True, slots=True)
class CorrelationFilter:
    """A Service Bus correlation filter: every field given must equal the message's (application
    ``properties`` too); fields left None are not compared."""

    correlation_id: str | None = None
    message_id: str | None = None
    to: str | None = None
    reply_to: str | None = None
    subject: str | None = None
    session_id: str | None = None
    reply_to_session_id: str | None = None
    content_type: str | None = None
    properties: Mapping[str, object] = field(default_factory=dict)


@record(frozen=True, slots=True)
class SubscriptionRule:
    """A subscription's rule: a filter and an optional SQL action (``SET p = expr; REMOVE q``).

    A subscription takes a message when any rule's filter matches: one copy for the
    rules without actions, and a copy per matching rule with an action, changed by it.
    """

    name: str
    filter: SqlFilter | CorrelationFilter = SqlFilter("1=1")
    action: str | None = None


@record(frozen=True, slots=True)
class EntityProperties:
    """A Service Bus queue's, topic's or subscription's own settings (the emulator config's ``Properties``).

    Times are seconds on the broker's clock; None takes the :class:`ServiceBusOptions` value
    (``lock_duration``, ``max_delivery_count``) or means no limit (``default_message_time_to_live``).
    """

    lock_duration: float | None = None
    max_delivery_count: int | None = None
    #: The longest a message lives in the entity (a message's own shorter ttl still applies).
    default_message_time_to_live: float | None = None
    #: Expired messages go to the dead-letter queue (reason ``TTLExpiredException``) instead of away.
    dead_lettering_on_message_expiration: bool = False
    #: A message whose message-id the entity saw within the window is accepted and dropped.
    requires_duplicate_detection: bool = False
    duplicate_detection_history_time_window: float = 600.0
    #: Messages that reach the entity go on to this queue or topic.
    forward_to: str | None = None
    #: The entity's dead letters go to this queue or topic instead of its ``$DeadLetterQueue``.
    forward_dead_lettered_messages_to: str | None = None
    #: Receivers must lock a session.
    requires_session: bool = False

    def __post_init__(self) -> None:
        for name in ("lock_duration", "default_message_time_to_live"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds or None, got {value}")
        if self.max_delivery_count is not None and self.max_delivery_count < 1:
            raise ValueError(f"max_delivery_count must be >= 1, got {self.max_delivery_count}")
        if self.duplicate_detection_history_time_window <= 0:
            raise ValueError(
                "duplicate_detection_history_time_window must be a positive number of seconds, "
                f"got {self.duplicate_detection_history_time_window}"
            )


#: The rule every subscription starts with when none are configured.
DEFAULT_RULE = SubscriptionRule("$Default")


@record(frozen=True, slots=True)
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
    #: A subscription's rules by ``"topic/subscription"``; a subscription not named has ``$Default``.
    rules: Mapping[str, tuple[SubscriptionRule, ...]] = field(default_factory=dict)
    #: Settings of entities by queue name, topic name or ``"topic/subscription"``.
    entities: Mapping[str, EntityProperties] = field(default_factory=dict)
    #: The most bytes one session's state may hold: one message's worth, 256 KiB on the Standard
    #: tier (100 MB on Premium); a bigger ``set_state`` raises ``MessageSizeExceededError``.
    max_session_state_size: int = 256 * 1024
    #: The namespace's tier: ``standard`` (and ``basic``) take messages up to 256 KB, ``premium`` up
    #: to 100 MB (:data:`SERVICE_BUS_MESSAGE_SIZE`), advertised as senders' max-message-size.
    tier: str = "standard"

    def __post_init__(self) -> None:
        if self.max_session_state_size < 0:
            raise ValueError(f"max_session_state_size must be >= 0 bytes, got {self.max_session_state_size}")
        check_tier(self.tier, SERVICE_BUS_MESSAGE_SIZE, "Service Bus")
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
        for key, rules in self.rules.items():
            topic, _, subscription = key.partition("/")
            if subscription not in self.topics.get(topic, ()):
                raise ValueError(
                    f"rules are given for {key!r}, which is not a subscription in topics; key rules by "
                    f"'topic/subscription' and declare it, e.g. topics={{{topic!r}: ({subscription!r},)}}"
                )
            if isinstance(rules, SubscriptionRule) or not all(isinstance(r, SubscriptionRule) for r in rules):
                raise TypeError(f"rules[{key!r}] must be a tuple of SubscriptionRule, got {rules!r}")
