"""Broker and node options."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from ..records import record

__all__ = ["BrokerConfig", "QueueOptions", "StreamOptions", "DEFAULT_DEAD_LETTER_SUFFIX", "check_tier"]

#: A queue's dead-letter address is ``<queue>/$DeadLetterQueue`` unless configured.
DEFAULT_DEAD_LETTER_SUFFIX = "/$DeadLetterQueue"


@record(frozen=True, slots=True)
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


def check_tier(tier: object, sizes: dict[str, int], service: str) -> None:
    """Refuse a ``tier`` that is not a key of ``sizes`` (a layer's options: ``service`` names the product)."""
    if tier not in sizes:
        raise ValueError(f"{service} tier must be one of {', '.join(map(repr, sizes))}, got {tier!r}")


@record(frozen=True, slots=True)
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


@record(slots=True)
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
    #: The protocol layers' options by layer name (``minibroker.broker.layers``): a layer given
    #: options here is on from the start.  The public ``minibroker.BrokerConfig`` fills this from
    #: its keyword per layer.
    layers: dict[str, Any] = field(default_factory=dict)
    #: Keep the last N frames of every connection for ``broker.frames()``; 0 keeps none and costs nothing.
    frame_log: int = 0

    def __post_init__(self) -> None:
        limit = self.max_auto_created
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"max_auto_created must be a count >= 0 or None (no bound), got {limit!r}")
