"""The RabbitMQ layer's options: what ``BrokerConfig(rabbitmq=RabbitMQOptions(...))`` says.

Light on purpose (no import of the layer), as ``minibroker.servicebus.options``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field

from ..records import record

__all__ = ["RabbitMQOptions"]

@record(frozen=True, slots=True)
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
