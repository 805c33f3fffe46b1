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

Routing and binding keys are at most 255 bytes of UTF-8 (AMQP 0-9-1 §4.2.5.3:
they are ``shortstr``, which RabbitMQ keeps for every protocol), so one
topic match is bounded: see :class:`.matching.TopicTrie`.  Each exchange indexes its
bindings for its type: a direct exchange by key (one lookup per message), a
topic exchange in a trie over binding words, a headers exchange by the
(name, value) pairs its bindings compare, so a message costs the words,
headers and bindings it can reach, not every binding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import field
from typing import Any, Literal

from ..records import record
from .matching import (
    HeadersIndex,
    HeadersRule,
    RoutingRefused,
    TopicTrie,
    discard,
    headers_match,
    topic_matches,
)

__all__ = [
    "EXCHANGE_TYPES",
    "MAX_KEY_BYTES",
    "Binding",
    "Exchange",
    "ExchangeError",
    "Exchanges",
    "RoutingRefused",
    "TopicTrie",
    "key_too_long",
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

#: The most UTF-8 bytes a routing or binding key has (an AMQP 0-9-1 ``shortstr``, §4.2.5.3).
MAX_KEY_BYTES = 255


def key_too_long(key: str) -> bool:
    """Whether ``key`` is over :data:`MAX_KEY_BYTES` bytes of UTF-8 (a short key is never encoded)."""
    return len(key) * 4 > MAX_KEY_BYTES and len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES


class ExchangeError(Exception):
    """A management operation that cannot be done: ``status`` is RabbitMQ's HTTP-like code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@record(frozen=True, slots=True)
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


def _fingerprint(arguments: Mapping[str, Any]) -> int:
    """Equal for equal arguments (so identical bindings share a bucket); their names alone if a value is unhashable."""
    try:
        return hash(frozenset(arguments.items()))
    except TypeError:
        return hash(frozenset(arguments))


class _Bindings:
    """One exchange's bindings in the order they were made, indexed for its type's matching.

    Each binding has a serial (the order it was made); ``_to`` finds the
    bindings to one destination (a deleted queue) and ``_same`` the ones with
    the same destination, key and arguments (an identical binding, an unbind),
    without a scan; direct and topic exchanges index keys, headers exchanges
    their compiled rules by the headers they name.
    """

    __slots__ = ("kind", "_by_serial", "_next", "_to", "_same", "_direct", "_topic", "_headers")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._by_serial: dict[int, Binding] = {}
        self._next = 0
        self._to: dict[tuple[str, str], dict[int, None]] = {}
        self._same: dict[tuple[str, str, str, int], dict[int, None]] = {}
        self._direct: dict[str, dict[int, None]] = {}
        self._topic = TopicTrie() if kind == "topic" else None
        self._headers = HeadersIndex()

    def __len__(self) -> int:
        return len(self._by_serial)

    def __iter__(self) -> Iterator[Binding]:
        return iter(self._by_serial.values())

    def has_destination(self, kind: str, destination: str) -> bool:
        return (kind, destination) in self._to

    @staticmethod
    def _bucket(binding: Binding) -> tuple[str, str, str, int]:
        return binding.destination_kind, binding.destination, binding.key, _fingerprint(binding.arguments)

    def has(self, binding: Binding) -> bool:
        """Whether an identical binding (same destination, key and arguments) is here."""
        return any(binding.same(self._by_serial[s]) for s in self._same.get(self._bucket(binding), ()))

    def add(self, binding: Binding) -> bool:
        """Add ``binding`` unless an identical one is here; whether it was added."""
        if self.has(binding):
            return False
        serial = self._next
        self._next += 1
        self._by_serial[serial] = binding
        self._to.setdefault((binding.destination_kind, binding.destination), {})[serial] = None
        self._same.setdefault(self._bucket(binding), {})[serial] = None
        if self.kind == "direct":
            self._direct.setdefault(binding.key, {})[serial] = None
        elif self._topic is not None:
            self._topic.add(binding.key, serial)
        elif self.kind == "headers":
            self._headers.add(serial, HeadersRule.of(binding.arguments))
        return True

    def unbind(self, binding: Binding, any_arguments: bool) -> int:
        """Remove the bindings like ``binding`` (same key and arguments, or any arguments); how many."""
        if any_arguments:
            candidates = self._to.get((binding.destination_kind, binding.destination), {})
            gone = [s for s in candidates if self._by_serial[s].key == binding.key]
        else:
            gone = [s for s in self._same.get(self._bucket(binding), ()) if binding.same(self._by_serial[s])]
        for serial in gone:
            self._remove(serial)
        return len(gone)

    def drop(self, kind: str, destination: str) -> int:
        """Remove every binding to ``destination``; how many."""
        gone = list(self._to.get((kind, destination), ()))
        for serial in gone:
            self._remove(serial)
        return len(gone)

    def _remove(self, serial: int) -> None:
        binding = self._by_serial.pop(serial)
        discard(self._to, (binding.destination_kind, binding.destination), serial)
        discard(self._same, self._bucket(binding), serial)
        if self.kind == "direct":
            discard(self._direct, binding.key, serial)
        elif self._topic is not None:
            self._topic.remove(binding.key, serial)
        elif self.kind == "headers":
            self._headers.remove(serial)

    def matching(
        self, routing_key: str, headers: Mapping[str, Any] | None, budget: int | None = None, also: Sequence[str] = ()
    ) -> list[Binding]:
        """The bindings a message with ``routing_key`` (and the keys ``also``) and ``headers``
        matches, each once, in the order made."""
        if self.kind == "direct":
            if also:
                serials = {s for key in (routing_key, *also) for s in self._direct.get(key, ())}
                return [self._by_serial[s] for s in sorted(serials)]
            return [self._by_serial[s] for s in self._direct.get(routing_key, ())]
        if self._topic is not None:
            found = self._topic.match(routing_key, budget, also)
            return [self._by_serial[s] for s in sorted(set(found) if also else found)]
        if self.kind == "headers":
            return [self._by_serial[s] for s in self._headers.matching(headers or {})]
        return list(self._by_serial.values())  # fanout, x-local-random: every binding


@record(slots=True)
class Exchange:
    """An exchange: its type, flags, arguments and bindings (in the order they were made)."""

    name: str
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)
    #: Messages published to it, and of those the ones no queue received (RabbitMQ's "unroutable").
    published: int = 0
    unroutable: int = 0
    _turn: int = 0
    table: _Bindings = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.table = _Bindings(self.type)

    @property
    def bindings(self) -> list[Binding]:
        """Its bindings, in the order they were made."""
        return list(self.table)

    def matching(
        self, routing_key: str, headers: Mapping[str, Any] | None, budget: int | None = None, also: Sequence[str] = ()
    ) -> Sequence[Binding]:
        """The bindings a message matches (``x-local-random``: the one whose turn it is); ``also``:
        more routing keys it is routed with."""
        matched = self.table.matching(routing_key, headers, budget, also)
        if self.type == "x-local-random" and matched:
            self._turn += 1
            return [matched[self._turn % len(matched)]]
        return matched


class Exchanges:
    """The exchanges of one virtual host and the routing through them.

    ``queue_exists`` tells whether a queue of a name exists (the broker's own
    queues, so plain addresses and ``/queues/`` name the same queue).
    ``max_exchanges`` and ``max_bindings`` bound how many a client can declare,
    ``max_topic_visits`` the trie nodes one message may reach in a topic
    exchange (``RabbitMQOptions``; None: no bound).
    """

    def __init__(
        self,
        queue_exists: Callable[[str], bool],
        max_exchanges: int | None = None,
        max_bindings: int | None = None,
        max_topic_visits: int | None = None,
    ) -> None:
        self._queue_exists = queue_exists
        self.max_exchanges = max_exchanges
        self.max_bindings = max_bindings
        self.max_topic_visits = max_topic_visits
        self.exchanges: dict[str, Exchange] = {}
        #: For each destination (kind, name): the exchanges with bindings to it.
        self._sources: dict[tuple[str, str], dict[str, None]] = {}
        self.binding_count = 0
        self.reset()

    def reset(self) -> None:
        self.exchanges = {name: Exchange(name, kind) for name, kind in DEFAULT_EXCHANGES.items()}
        self._sources = {}
        self.binding_count = 0

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

        Raises :class:`ExchangeError` 403 for the default and ``amq.`` exchanges or past
        ``max_exchanges``, 400 for an unknown type, 409 for an existing exchange declared differently.
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
        declared = len(self.exchanges) - len(DEFAULT_EXCHANGES)
        if self.max_exchanges is not None and declared >= self.max_exchanges:
            raise ExchangeError(
                403,
                f"cannot declare exchange '{name}' in vhost '/': exchange limit of {self.max_exchanges} is reached "
                "(RabbitMQOptions.max_exchanges); delete exchanges or raise the limit",
            )
        self.exchanges[name] = Exchange(name, kind, durable, auto_delete, internal, dict(arguments or {}))
        return True

    def delete(self, name: str) -> None:
        """Delete an exchange and every binding to or from it (a missing one is no error, as RabbitMQ)."""
        if name == "" or name in DEFAULT_EXCHANGES:
            raise ExchangeError(403, f"ACCESS_REFUSED - operation not permitted on the default exchange '{name}'")
        exchange = self.exchanges.pop(name, None)
        if exchange is None:
            return
        for binding in exchange.bindings:  # its own bindings: it is no longer their destinations' source
            sources = self._sources.get((binding.destination_kind, binding.destination))
            if sources is not None:
                sources.pop(name, None)
                if not sources:
                    del self._sources[(binding.destination_kind, binding.destination)]
        self.binding_count -= len(exchange.table)
        self.drop_destination(name, "exchange")

    def drop_destination(self, name: str, kind: Literal["queue", "exchange"]) -> None:
        """A queue or exchange went: the bindings to it go too (only the exchanges that have some are visited)."""
        for source in list(self._sources.pop((kind, name), ())):
            exchange = self.exchanges.get(source)
            if exchange is not None:
                self.binding_count -= exchange.table.drop(kind, name)
                self._auto_delete(exchange)

    def _unbound(self, exchange: Exchange, kind: str, destination: str) -> None:
        """``exchange`` may have no binding to ``destination`` left: keep the reverse index right."""
        if exchange.table.has_destination(kind, destination):
            return
        sources = self._sources.get((kind, destination))
        if sources is not None:
            sources.pop(exchange.name, None)
            if not sources:
                del self._sources[(kind, destination)]

    def _auto_delete(self, exchange: Exchange) -> None:
        """An auto-delete exchange goes when its last binding does (RabbitMQ: once it has had one)."""
        if exchange.auto_delete and not len(exchange.table) and exchange.name in self.exchanges:
            self.delete(exchange.name)

    def bind(self, binding: Binding) -> None:
        """Add a binding (an identical one is not added twice).

        404 if either end is missing, 400 for a key over 255 bytes, 403 past ``max_bindings``.
        """
        if binding.source == "":
            raise ExchangeError(403, "ACCESS_REFUSED - operation not permitted on the default exchange")
        if key_too_long(binding.key):
            raise ExchangeError(
                400,
                f"binding key of {len(binding.key.encode('utf-8', 'surrogatepass'))} bytes: a binding key is at most "
                f"{MAX_KEY_BYTES} bytes of UTF-8 (an AMQP 0-9-1 shortstr, as RabbitMQ keeps it); use a shorter key",
            )
        source = self.exchanges.get(binding.source)
        if source is None:
            raise ExchangeError(404, f"NOT_FOUND - no exchange '{binding.source}' in vhost '/'")
        if binding.destination_kind == "queue":
            if not self._queue_exists(binding.destination):
                raise ExchangeError(404, f"NOT_FOUND - no queue '{binding.destination}' in vhost '/'")
        elif binding.destination not in self.exchanges:
            raise ExchangeError(404, f"NOT_FOUND - no exchange '{binding.destination}' in vhost '/'")
        if self.max_bindings is not None and self.binding_count >= self.max_bindings:
            if source.table.has(binding):
                return  # an identical binding is no new one
            raise ExchangeError(
                403,
                f"cannot bind '{binding.source}' to {binding.destination_kind} '{binding.destination}': binding limit "
                f"of {self.max_bindings} is reached (RabbitMQOptions.max_bindings); unbind or raise the limit",
            )
        if source.table.add(binding):
            self.binding_count += 1
            self._sources.setdefault((binding.destination_kind, binding.destination), {})[source.name] = None

    def unbind(self, binding: Binding, any_arguments: bool = False) -> int:
        """Remove a binding (``any_arguments``: whatever its arguments); how many were removed."""
        source = self.exchanges.get(binding.source)
        if source is None:
            return 0
        removed = source.table.unbind(binding, any_arguments)
        if removed:
            self.binding_count -= removed
            self._unbound(source, binding.destination_kind, binding.destination)
            self._auto_delete(source)
        return removed

    # ------------------------------------------------------------- routing

    def route(
        self, exchange: str, routing_key: str, headers: Mapping[str, Any] | None, also: Sequence[str] = ()
    ) -> list[str]:
        """The queues a message published to ``exchange`` with ``routing_key`` goes to, each once.

        ``also``: more routing keys the message is routed with, at every exchange it passes
        (RabbitMQ's sender-selected distribution, ``front091/selected.py``).  Counts the message
        on the exchange it was published to (and as unroutable there when it reaches no queue).
        Raises :class:`RoutingRefused` when a topic exchange's match would pass
        ``max_topic_visits`` (all the keys' matches together).
        """
        first = self.exchanges[exchange]
        first.published += 1
        queues: dict[str, None] = {}
        if exchange == "":
            if self._queue_exists(routing_key):
                queues[routing_key] = None
            for key in also:
                if self._queue_exists(key):
                    queues[key] = None
        else:
            seen = {exchange}
            pending = [first]
            for current in pending:  # breadth first: the list grows while it is walked
                try:
                    matched = current.matching(routing_key, headers, self.max_topic_visits, also)
                except RoutingRefused as exc:
                    raise RoutingRefused(
                        f"{exc} in topic exchange '{current.name}' (RabbitMQOptions.max_topic_visits); "
                        "bind keys with fewer '#' and '*', or raise the limit"
                    ) from None
                for binding in matched:
                    if binding.destination_kind == "queue":
                        if self._queue_exists(binding.destination):
                            queues[binding.destination] = None
                    elif binding.destination not in seen and binding.destination in self.exchanges:
                        seen.add(binding.destination)
                        pending.append(self.exchanges[binding.destination])
        if not queues:
            first.unroutable += 1
        return list(queues)
