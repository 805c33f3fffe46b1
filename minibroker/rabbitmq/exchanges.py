"""Exchanges and bindings: RabbitMQ's routing model (AMQP 0-9-1 §3.1.3, kept by RabbitMQ 4 for AMQP 1.0).

A publisher sends to an exchange with a routing key; the exchange's
bindings say which queues (and, exchange-to-exchange, which other
exchanges) get a copy.  A queue gets at most one copy however many
bindings and chains match it (RabbitMQ semantics document, "Message
ordering guarantees": one copy per queue, in publication order).

``direct``
    a binding matches when its key equals the routing key;
``fanout``
    every binding matches;
``topic``
    keys are '.'-separated words; in a binding key ``*`` matches exactly one
    word and ``#`` zero or more;
``headers``
    the routing key is ignored; a binding's arguments are matched against the
    message's application-properties: ``x-match`` ``all`` (default) or
    ``any``, and ``all-with-x``/``any-with-x`` to also compare ``x-`` keys.
    A binding argument with no value (``None``) matches the key's presence;
``x-local-random``
    one of the bound queues, taken in turn (RabbitMQ picks a local one at random:
    here a single node is local, and turns make tests repeatable).

The default exchange (named ``""``) is bound implicitly to every queue by its
name; it takes no explicit bindings.  An ``auto_delete`` exchange is deleted
when its last binding is removed; an ``internal`` one takes no publishers
(only exchange-to-exchange bindings reach it).  Exchange-to-exchange bindings are
followed breadth first, each exchange visited once, so a cycle ends.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "EXCHANGE_TYPES",
    "Binding",
    "Exchange",
    "ExchangeError",
    "Exchanges",
    "topic_matches",
    "headers_match",
    "DEFAULT_EXCHANGES",
]

EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers", "x-local-random")

#: The exchanges every RabbitMQ virtual host has (the default one is "").
DEFAULT_EXCHANGES = {
    "": "direct",
    "amq.direct": "direct",
    "amq.fanout": "fanout",
    "amq.topic": "topic",
    "amq.headers": "headers",
    "amq.match": "headers",
}


class ExchangeError(Exception):
    """A management operation that cannot be done: ``status`` is RabbitMQ's HTTP-like code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Binding:
    """A binding from ``source`` to a queue or an exchange, with a key and arguments."""

    source: str
    destination: str
    destination_kind: Literal["queue", "exchange"]
    key: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def same(self, other: Binding) -> bool:
        """Equal as RabbitMQ compares bindings (source, destination, key and arguments)."""
        return (
            self.source == other.source
            and self.destination == other.destination
            and self.destination_kind == other.destination_kind
            and self.key == other.key
            and dict(self.arguments) == dict(other.arguments)
        )


@dataclass(slots=True)
class Exchange:
    """An exchange: its type, flags, arguments and bindings (in the order they were made)."""

    name: str
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)
    bindings: list[Binding] = field(default_factory=list)
    #: Messages published to it, and of those the ones no queue received (RabbitMQ's "unroutable").
    published: int = 0
    unroutable: int = 0
    _turn: int = 0

    def matches(
        self, binding: Binding, routing_key: str, headers: Mapping[str, Any] | None, words: Sequence[str] | None = None
    ) -> bool:
        kind = self.type
        if kind == "fanout" or kind == "x-local-random":
            return True
        if kind == "topic":
            return topic_matches(binding.key, routing_key, words)
        if kind == "headers":
            return headers_match(binding.arguments, headers or {})
        return binding.key == routing_key  # direct


@functools.lru_cache(maxsize=4096)  # binding keys are few and reused for every message
def _words(pattern: str) -> tuple[str, ...] | None:
    """A topic binding key's words, or None when it has no wildcard (it then matches itself only)."""
    if "*" not in pattern and "#" not in pattern:
        return None
    return tuple(pattern.split(".")) if pattern else ()


def topic_matches(pattern: str, key: str, words: Sequence[str] | None = None) -> bool:
    """Whether a topic binding key (``*`` one word, ``#`` zero or more) matches ``key`` (split: ``words``)."""
    parts = _words(pattern)
    if parts is None:
        return pattern == key
    if words is None:
        words = key.split(".") if key else []
    # The key positions each pattern prefix can reach: work bounded by len(parts) * len(words).
    reachable = {0}
    for part in parts:
        following: set[int] = set()
        if part == "#":  # from the first reachable position, any number of words
            following.update(range(min(reachable), len(words) + 1))
        else:
            for position in reachable:
                if position < len(words) and (part == "*" or part == words[position]):
                    following.add(position + 1)
        reachable = following
        if not reachable:
            return False
    return len(words) in reachable


def headers_match(arguments: Mapping[str, Any], headers: Mapping[str, Any]) -> bool:
    """RabbitMQ's headers-exchange rule for one binding (``x-match`` all, any, all-with-x, any-with-x)."""
    mode = str(arguments.get("x-match", "all"))
    with_x = mode.endswith("-with-x")
    wanted = {k: v for k, v in arguments.items() if k != "x-match" and (with_x or not str(k).startswith("x-"))}
    if not wanted:
        return mode.startswith("all")

    def hit(name: str, value: Any) -> bool:
        return name in headers and (value is None or headers[name] == value)

    results = (hit(str(name), value) for name, value in wanted.items())
    return any(results) if mode.startswith("any") else all(results)


class Exchanges:
    """The exchanges of one virtual host and the routing through them.

    ``queue_exists`` tells whether a queue of a name exists (the broker's own
    queues, so plain addresses and ``/queues/`` name the same queue).
    """

    def __init__(self, queue_exists: Callable[[str], bool]) -> None:
        self._queue_exists = queue_exists
        self.exchanges: dict[str, Exchange] = {}
        self.reset()

    def reset(self) -> None:
        self.exchanges = {name: Exchange(name, kind) for name, kind in DEFAULT_EXCHANGES.items()}

    # ---------------------------------------------------------- management

    def declare(
        self,
        name: str,
        kind: str,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: Mapping[str, Any] | None = None,
    ) -> bool:
        """Create an exchange; True if created, False if an equivalent one exists.

        Raises :class:`ExchangeError` 403 for the default and ``amq.`` exchanges, 400 for an
        unknown type, 409 for an existing exchange declared differently.
        """
        if name == "" or name.startswith("amq."):
            raise ExchangeError(403, f"ACCESS_REFUSED - exchange name '{name}' contains reserved prefix 'amq.*'")
        if kind not in EXCHANGE_TYPES:
            raise ExchangeError(
                400, f"COMMAND_INVALID - unknown exchange type '{kind}'; this broker has {', '.join(EXCHANGE_TYPES)}"
            )
        existing = self.exchanges.get(name)
        if existing is not None:
            if (existing.type, existing.durable, existing.auto_delete, existing.internal) != (
                kind, durable, auto_delete, internal,
            ):  # fmt: skip
                raise ExchangeError(
                    409,
                    f"PRECONDITION_FAILED - inequivalent arg 'type' for exchange '{name}' in vhost '/': "
                    f"received '{kind}' but current is '{existing.type}'",
                )
            return False
        self.exchanges[name] = Exchange(name, kind, durable, auto_delete, internal, dict(arguments or {}))
        return True

    def delete(self, name: str) -> None:
        """Delete an exchange and every binding to or from it (a missing one is no error, as RabbitMQ)."""
        if name == "" or name in DEFAULT_EXCHANGES:
            raise ExchangeError(403, f"ACCESS_REFUSED - operation not permitted on the default exchange '{name}'")
        if self.exchanges.pop(name, None) is None:
            return
        self.drop_destination(name, "exchange")

    def drop_destination(self, name: str, kind: Literal["queue", "exchange"]) -> None:
        """A queue or exchange went: the bindings to it go too."""
        for exchange in list(self.exchanges.values()):
            kept = [b for b in exchange.bindings if not (b.destination == name and b.destination_kind == kind)]
            if len(kept) != len(exchange.bindings):
                exchange.bindings = kept
                self._auto_delete(exchange)

    def _auto_delete(self, exchange: Exchange) -> None:
        """An auto-delete exchange goes when its last binding does (RabbitMQ: once it has had one)."""
        if exchange.auto_delete and not exchange.bindings and exchange.name in self.exchanges:
            self.delete(exchange.name)

    def bind(self, binding: Binding) -> None:
        """Add a binding (an identical one is not added twice); 404 if either end is missing."""
        if binding.source == "":
            raise ExchangeError(403, "ACCESS_REFUSED - operation not permitted on the default exchange")
        source = self.exchanges.get(binding.source)
        if source is None:
            raise ExchangeError(404, f"NOT_FOUND - no exchange '{binding.source}' in vhost '/'")
        if binding.destination_kind == "queue":
            if not self._queue_exists(binding.destination):
                raise ExchangeError(404, f"NOT_FOUND - no queue '{binding.destination}' in vhost '/'")
        elif binding.destination not in self.exchanges:
            raise ExchangeError(404, f"NOT_FOUND - no exchange '{binding.destination}' in vhost '/'")
        if not any(binding.same(b) for b in source.bindings):
            source.bindings.append(binding)

    def unbind(self, binding: Binding, any_arguments: bool = False) -> int:
        """Remove a binding (``any_arguments``: whatever its arguments); how many were removed."""
        source = self.exchanges.get(binding.source)
        if source is None:
            return 0
        kept = [
            b
            for b in source.bindings
            if not (
                b.destination == binding.destination
                and b.destination_kind == binding.destination_kind
                and b.key == binding.key
                and (any_arguments or dict(b.arguments) == dict(binding.arguments))
            )
        ]
        removed = len(source.bindings) - len(kept)
        source.bindings = kept
        if removed:
            self._auto_delete(source)
        return removed

    # ------------------------------------------------------------- routing

    def route(self, exchange: str, routing_key: str, headers: Mapping[str, Any] | None) -> list[str]:
        """The queues a message published to ``exchange`` with ``routing_key`` goes to, each once.

        Counts the message on the exchange it was published to (and as
        unroutable there when it reaches no queue).
        """
        first = self.exchanges[exchange]
        first.published += 1
        queues: dict[str, None] = {}
        if exchange == "":
            if self._queue_exists(routing_key):
                queues[routing_key] = None
        else:
            seen = {exchange}
            pending = [first]
            while pending:
                current = pending.pop(0)
                for binding in self._matching(current, routing_key, headers):
                    if binding.destination_kind == "queue":
                        if self._queue_exists(binding.destination):
                            queues[binding.destination] = None
                    elif binding.destination not in seen and binding.destination in self.exchanges:
                        seen.add(binding.destination)
                        pending.append(self.exchanges[binding.destination])
        if not queues:
            first.unroutable += 1
        return list(queues)

    def _matching(self, exchange: Exchange, routing_key: str, headers: Mapping[str, Any] | None) -> Iterable[Binding]:
        words = routing_key.split(".") if exchange.type == "topic" and routing_key else []  # split once per exchange
        matched = [b for b in exchange.bindings if exchange.matches(b, routing_key, headers, words)]
        if exchange.type == "x-local-random" and matched:
            exchange._turn += 1
            return [matched[exchange._turn % len(matched)]]
        return matched
