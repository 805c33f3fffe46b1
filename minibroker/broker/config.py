"""Broker and node options."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BrokerConfig", "EventHubOptions", "EventHubsOptions", "QueueOptions", "RabbitMQOptions", "ServiceBusOptions",
    "StreamOptions", "DEFAULT_CONSUMER_GROUP", "DEFAULT_DEAD_LETTER_SUFFIX", "config_from_keywords",
    "EVENT_HUBS_MESSAGE_SIZE", "SERVICE_BUS_MESSAGE_SIZE", "CONSUMER_GROUPS_PER_HUB",
]  # fmt: skip

#: The largest message a Service Bus entity takes, by tier (Azure Service Bus quotas, "Message size
#: for a queue, topic, or subscription entity": 256 KB Basic and Standard, 100 MB Premium on AMQP).
SERVICE_BUS_MESSAGE_SIZE: dict[str, int] = {"basic": 256 * 1024, "standard": 256 * 1024, "premium": 100 * 1024 * 1024}
#: The largest publication (one event or a batch) an event hub takes, by tier (Azure Event Hubs
#: quotas, "Maximum size of Event Hubs publication": 256 KB Basic, 1 MB Standard, Premium, Dedicated).
EVENT_HUBS_MESSAGE_SIZE: dict[str, int] = {
    "basic": 256 * 1024, "standard": 1024 * 1024, "premium": 1024 * 1024, "dedicated": 1024 * 1024,
}  # fmt: skip

#: Consumer groups an event hub may have, by tier (Azure Event Hubs quotas, "Number of consumer
#: groups per event hub"); minibroker bounds the groups receivers create by naming them with it.
CONSUMER_GROUPS_PER_HUB: dict[str, int] = {"basic": 1, "standard": 20, "premium": 100, "dedicated": 1000}

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
    #: Seconds a message-id a client sent is remembered, so that a message with the same id within
    #: them is accepted and dropped (duplicate detection, see ``minibroker.broker.duplicates``); None: off.
    duplicate_window: float | None = None

    def __post_init__(self) -> None:
        _check_types(self, QUEUE_OPTION_TYPES, "queue option")
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
        for name in ("default_ttl", "max_ttl", "duplicate_window"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds or None, got {value}")


#: What each queue option takes, checked before any comparison so that ``max_depth="10"`` says so
#: instead of failing inside the queue later (``bool`` is an ``int`` to Python, but never a count).
QUEUE_OPTION_TYPES: dict[str, tuple[str, tuple[type, ...], bool]] = {
    "priorities": ("an int", (int,), False),
    "default_ttl": ("a number of seconds or None", (int, float), True),
    "max_ttl": ("a number of seconds or None", (int, float), True),
    "dead_letter_address": ("a queue name (str), '' for none, or None for the default", (str,), True),
    "dead_letter_on_expiry": ("True or False", (bool,), False),
    "max_delivery_count": ("an int", (int,), False),
    "max_depth": ("an int (messages) or None", (int,), True),
    "max_bytes": ("an int (bytes) or None", (int,), True),
    "overflow": ("'reject-publish', 'drop-head' or 'withhold-credit'", (str,), False),
    "duplicate_window": ("a number of seconds or None", (int, float), True),
}


def _check_types(options: object, table: dict[str, tuple[str, tuple[type, ...], bool]], what: str) -> None:
    for name, (expected, types, optional) in table.items():
        value = getattr(options, name)
        if value is None and optional:
            continue
        wrong_bool = isinstance(value, bool) and bool not in types
        if wrong_bool or not isinstance(value, types):
            raise TypeError(f"{what} {name} must be {expected}, got {value!r} ({type(value).__name__})")


def _check_tier(tier: object, sizes: dict[str, int], service: str) -> None:
    if tier not in sizes:
        raise ValueError(f"{service} tier must be one of {', '.join(map(repr, sizes))}, got {tier!r}")


@dataclass(frozen=True, slots=True)
class SqlFilter:
    """A Service Bus SQL filter: a SQL-92 condition over ``sys.`` properties and application properties.

    ``SqlFilter("1=1")`` is the true filter (the ``$Default`` rule's), ``SqlFilter("1=0")`` the false one.
    """

    expression: str


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class SubscriptionRule:
    """A subscription's rule: a filter and an optional SQL action (``SET p = expr; REMOVE q``).

    A subscription takes a message when any rule's filter matches: one copy for the
    rules without actions, and a copy per matching rule with an action, changed by it.
    """

    name: str
    filter: SqlFilter | CorrelationFilter = SqlFilter("1=1")
    action: str | None = None


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class StreamOptions:
    """Retention of a stream (see :mod:`minibroker.broker.streamlog`).

    ``max_bytes`` bounds the encoded bytes kept (the oldest messages are
    dropped first, the newest always stays); ``max_age`` drops messages that
    many seconds after they were appended, on the broker's clock (so a
    ``ManualClock`` drives it in tests).  None: no bound.
    """

    max_bytes: int | None = None
    max_age: float | None = None
    #: Seconds a message-id a client appended is remembered, so that a message with the same id
    #: within them is accepted and not appended (``minibroker.broker.duplicates``); None: off.
    duplicate_window: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_age", "duplicate_window"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise TypeError(f"{name} must be a number or None, got {type(value).__name__} {value!r}")
        if self.duplicate_window is not None and self.duplicate_window <= 0:
            raise ValueError(f"duplicate_window must be a positive number of seconds or None, got {self.duplicate_window!r}")
        if self.max_bytes is not None and self.max_bytes < 1:
            raise ValueError(f"max_bytes must be a positive number of bytes or None (no bound), got {self.max_bytes!r}")
        if self.max_age is not None and self.max_age <= 0:
            raise ValueError(f"max_age must be a positive number of seconds or None (no bound), got {self.max_age!r}")


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
        _check_tier(self.tier, SERVICE_BUS_MESSAGE_SIZE, "Service Bus")
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


@dataclass(frozen=True, slots=True)
class RabbitMQOptions:
    """How the broker presents itself to RabbitMQ 4 clients (``minibroker.rabbitmq``).

    Every connection's ``open`` says product ``RabbitMQ`` and ``version``
    (RabbitMQ's own client refuses any other broker, and turns features on
    by version: 4.1 stream filters, 4.2 SQL filters and direct reply-to);
    ``minibroker`` in the properties says what it really is.  ``vhosts`` are
    the virtual hosts a client may name in ``open``'s hostname
    (``vhost:NAME``); an ``open`` naming another is not answered (the connection
    closes, as RabbitMQ 4 refuses it).  ``users``
    log in with SASL PLAIN, as RabbitMQ's default ``guest``/``guest``.

    ``max_queues``, ``max_exchanges`` and ``max_bindings`` bound what clients
    declare through ``/management`` (queues declared there, exchanges besides
    the default ones, bindings in all): past one, a declaration is answered
    403 naming the option, as RabbitMQ answers past its ``cluster_queue_limit``.
    None: no bound.  They bound the broker's memory (about 2.4 KiB a queue,
    0.9 KiB an exchange, 2.2 KiB a topic binding) and what one message costs
    through fanout, headers and chained exchanges (docs/limits-and-security.md).
    ``max_topic_visits`` bounds the binding-key prefixes (trie nodes) one
    message may reach in one topic exchange: real bindings reach a few per
    routing-key word; bindings crafted to keep many ``#`` paths alive are
    refused past it, the message rejected with ``amqp:resource-limit-exceeded``.
    """

    version: str = "4.2.0"
    vhosts: tuple[str, ...] = ("/",)
    users: Mapping[str, str] = field(default_factory=lambda: {"guest": "guest"}, repr=False)
    max_queues: int | None = 10_000
    max_exchanges: int | None = 10_000
    max_bindings: int | None = 10_000
    max_topic_visits: int | None = 20_000

    def __post_init__(self) -> None:
        parts = self.version.split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts) or int(parts[0]) < 4:
            raise ValueError(f"version must be a RabbitMQ version MAJOR.MINOR.PATCH, 4.0.0 or later, got {self.version!r}")
        if isinstance(self.vhosts, str):
            raise TypeError(f"vhosts must be a tuple of names, got the string {self.vhosts!r}; write ({self.vhosts!r},)")
        for option in ("max_queues", "max_exchanges", "max_bindings", "max_topic_visits"):
            value = getattr(self, option)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{option} must be a positive int or None (no bound), got {value!r}")


#: The consumer group every event hub has (Azure Event Hubs' ``$Default``).
DEFAULT_CONSUMER_GROUP = "$Default"


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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
        _check_tier(self.tier, EVENT_HUBS_MESSAGE_SIZE, "Event Hubs")
        if isinstance(self.hubs, EventHubOptions):
            raise TypeError(f"hubs is a tuple of EventHubOptions; write ({self.hubs!r},)")
        for hub in self.hubs:
            if not isinstance(hub, EventHubOptions):
                raise TypeError(f"hubs holds EventHubOptions(name, partitions=...), got {hub!r}")
        EventHubOptions("default", self.default_partitions)  # same bounds as a declared hub


@dataclass(slots=True)
class BrokerConfig:
    """Options for the whole broker."""

    container_id: str = "minibroker"
    #: Create a queue (or a topic, for ``topic://`` and the ``topic`` capability)
    #: when a link names an unknown address; if False such links are refused.
    auto_create: bool = True
    #: Most entities created on demand at once (queues, topics and streams an address names,
    #: event hubs, Service Bus subscriptions); one more is refused with
    #: amqp:resource-limit-exceeded naming this option.  None: no bound.  Declared entities
    #: do not count.  10,000 is Service Bus Standard's queues and topics per namespace.
    max_auto_created: int | None = 10_000
    #: Options of queues created on demand.
    queue_defaults: QueueOptions = field(default_factory=QueueOptions)
    #: Credit the broker keeps granted to each sending client (Part 2 §2.6.7).
    link_credit: int = 1000
    #: SASL PLAIN users (name -> password); anonymous access may stay allowed.  Never shown in repr.
    users: dict[str, str] = field(default_factory=dict, repr=False)
    #: Failed SASL logins from one peer address within a minute before its new connections are
    #: slowed to one per ``login_delay`` (see ``minibroker.broker.logins``); None: never.  100: a
    #: test suite's deliberate wrong logins (a parametrised or property test of them) stay far below it,
    #: while a guesser is cut from about 80,000 guesses a minute to 100 and then one a second.
    max_login_failures: int | None = 100
    #: Seconds between the connections of an address past ``max_login_failures``.
    login_delay: float = 1.0
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
    #: Seconds from accepting a socket to a completed ``open`` (SASL included) before it is
    #: closed; None: never.  10 s is RabbitMQ's and Artemis' default.
    handshake_timeout: float | None = 10.0
    #: Connections still in their handshake at once; they hold no ``max_connections`` slot.
    #: One more makes the server close the oldest of them, so a client that logs in at once
    #: always gets through, however many sockets dawdle.
    max_handshakes: int = 256
    #: Seconds a transaction may stay open before it is rolled back (later use of its id answers
    #: ``amqp:transaction:timeout``); None: forever.  300 s is ActiveMQ Artemis' default
    #: (``transaction-timeout``): staged messages are memory, and a forgotten transaction holds them.
    transaction_timeout: float | None = 300.0
    #: Transactions one connection may have open at once; one more ``declare`` is rejected with
    #: ``amqp:resource-limit-exceeded`` (Part 4 §4.3).
    max_transactions_per_connection: int = 16
    #: Encoded message bytes one transaction may hold staged until its discharge; a transfer that
    #: would pass it is rejected (transactional-state, ``amqp:resource-limit-exceeded``).
    max_transaction_bytes: int = 8 * 1024 * 1024
    #: Keep the last N frames of every connection for ``broker.frames()``; 0 keeps none and costs nothing.
    frame_log: int = 0
    #: The Azure Service Bus layer's options; it also turns on (with defaults) when a client attaches ``$cbs``.
    servicebus: ServiceBusOptions | None = None
    #: Present the broker as RabbitMQ 4 (exchanges, ``/management``, its client's checks); see RabbitMQOptions.
    rabbitmq: RabbitMQOptions | None = None
    #: The Azure Event Hubs layer's options (it includes the Service Bus layer and turns on the same way).
    event_hubs: EventHubsOptions | None = None

    def __post_init__(self) -> None:
        limit = self.max_auto_created
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"max_auto_created must be a count >= 0 or None (no bound), got {limit!r}")

def config_from_keywords(
    config: BrokerConfig | None, fields: Mapping[str, Any], caller: str, own: Sequence[str]
) -> BrokerConfig:
    """``config``, or a :class:`BrokerConfig` of the ``fields`` a broker handle (``caller``) was
    given as keywords; a keyword that is neither one of its ``own`` nor a field names them all
    (``BrokerConfig(**fields)`` alone would say only ``__init__() got an unexpected keyword``)."""
    if config is not None:
        if fields:
            raise TypeError("pass either config=BrokerConfig(...) or its fields as keywords, not both")
        return config
    known = [f.name for f in dataclasses.fields(BrokerConfig)]
    unknown = sorted(set(fields) - set(known))
    if unknown:
        raise TypeError(
            f"{caller}: unknown keyword(s) {', '.join(unknown)}; valid keywords are: {', '.join(own)}, "
            f"and the BrokerConfig fields {', '.join(known)}"
        )
    return BrokerConfig(**fields)
