"""The source filters a stream reader attaches with, as RabbitMQ 4 and its clients send them.

A filter-set (Part 3 §3.5.8) maps names to filter values.  RabbitMQ 4 finds
its stream filters by the value's *descriptor*, whatever the key (its own
AMQP 1.0 tests attach with the key ``"my offset"``); its official clients
use the descriptor as the key too, and older clients (RabbitMQ 3.x, the
JavaScript client through rhea) send an undescribed value under the
descriptor's name as key.  Both forms are read here:

``rabbitmq:stream-offset-spec``
    Where reading starts: the string (or symbol) ``"first"``, ``"last"`` or
    ``"next"``; an offset as any AMQP integer (clients send ``long``; Go
    sends ``ulong``); a ``timestamp`` (milliseconds, Part 1 §1.6.20): the
    first message appended at or after it; or an interval string such as
    ``"10m"`` or ``"7D"`` (units ``Y M D h m s``, as RabbitMQ's
    ``x-max-age``): the first message appended within that interval before
    now.  No offset spec means ``"next"`` (RabbitMQ's default).
``rabbitmq:stream-filter``
    A string or a list of strings: only messages whose message annotation
    ``x-stream-filter-value`` is one of them are delivered.  RabbitMQ
    filters whole chunks with a Bloom filter and expects the client to
    filter again; we keep no chunks and filter each message exactly, so
    nothing the client would drop arrives.
``rabbitmq:stream-match-unfiltered``
    A boolean: with ``rabbitmq:stream-filter``, also deliver messages that
    carry no ``x-stream-filter-value``.

The JMS selector filter (``apache.org:selector-filter:string``, see
:mod:`.filters`) is honoured on streams as on queues, and so are the AMQP
filter expressions RabbitMQ 4.1 and 4.2 read (properties, application-properties
and SQL filters, :mod:`.expressions`).  Anything else refuses the link
(broker paper 2.3.10: a filter is never silently ignored).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..amqp.filternames import MATCH_UNFILTERED, OFFSET_SPEC, STREAM_FILTER
from ..amqp.types import Array, Described, symbol, timestamp
from ..records import record
from .expressions import EXPRESSION_FILTERS, Expression, parse_expression_filters
from .filters import FilterError, parse_filter_set, selector_matches
from .stored import StoredMessage

if TYPE_CHECKING:
    from .selector import Selector
from .streamlog import Instant, OffsetSpec, interval_seconds

__all__ = [
    "FILTER_VALUE_ANNOTATION", "MATCH_UNFILTERED", "OFFSET_SPEC", "STREAM_FILTER", "STREAM_FILTER_NAMES", "StreamFilter",
    "has_stream_filters", "parse_stream_filters",
]  # fmt: skip

#: The message annotation a publisher tags a message with for ``rabbitmq:stream-filter``.
FILTER_VALUE_ANNOTATION = symbol("x-stream-filter-value")

_STREAM_NAMES = frozenset({OFFSET_SPEC, STREAM_FILTER, MATCH_UNFILTERED})
#: The stream filters' names, for error descriptions.
STREAM_FILTER_NAMES = ", ".join((OFFSET_SPEC, STREAM_FILTER, MATCH_UNFILTERED))
#: Most values one ``rabbitmq:stream-filter`` may list: bounds the work an attach can ask for.
MAX_FILTER_VALUES = 1024


@record(frozen=True, slots=True)
class StreamFilter:
    """What a stream reader asked for: where to start, and which messages it wants."""

    offset: OffsetSpec = "next"
    values: frozenset[str] | None = None
    match_unfiltered: bool = False
    selector: Selector | None = None
    #: AMQP filter expressions (:mod:`.expressions`), all of which must match.
    expressions: tuple[Expression, ...] = ()

    def matches(self, message: StoredMessage) -> bool:
        """Whether the reader wants ``message`` (its filter value, then its selector)."""
        if self.values is not None:
            annotations = message.message_annotations
            value = annotations.get(FILTER_VALUE_ANNOTATION) if annotations else None
            if value is None:
                if not self.match_unfiltered:
                    return False
            elif value not in self.values:
                return False
        if self.expressions and not all(expression(message) for expression in self.expressions):
            return False
        if self.selector is not None:
            return selector_matches(self.selector, message)
        return True

    @property
    def selects(self) -> bool:
        """Whether any message may be left out (so each one must be looked at)."""
        return self.values is not None or self.selector is not None or bool(self.expressions)


def _kind(name: Any, value: Any) -> str | None:
    """Which stream filter an entry is: by its descriptor, else (undescribed) by its key."""
    if isinstance(value, Described):
        descriptor = value.descriptor
        return str(descriptor) if isinstance(descriptor, str) and descriptor in _STREAM_NAMES else None
    return str(name) if isinstance(name, str) and name in _STREAM_NAMES else None


def has_stream_filters(filter_set: Mapping[Any, Any] | None) -> bool:
    """Whether a filter-set carries any of RabbitMQ's stream filters or filter expressions (to refuse them on a queue)."""
    return bool(filter_set) and any(
        _kind(k, v) is not None or (isinstance(v, Described) and v.descriptor in EXPRESSION_FILTERS)
        for k, v in (filter_set or {}).items()
    )


def parse_stream_filters(filter_set: Mapping[Any, Any] | None, now: float) -> tuple[StreamFilter, dict[Any, Any] | None]:
    """Read a stream reader's filter-set; return it and the filter-set to echo in the attach.

    Raises :class:`~minibroker.broker.filters.FilterError` (the link is
    refused with ``amqp:invalid-field``) for a value of the wrong type or an
    unknown filter.
    """
    if not filter_set:
        return StreamFilter(), None
    offset: OffsetSpec = "next"
    values: frozenset[str] | None = None
    match_unfiltered = False
    rest: dict[Any, Any] = {}
    accepted: dict[Any, Any] = {}
    for name, entry in filter_set.items():
        kind = _kind(name, entry)
        if kind is None:
            rest[name] = entry
            continue
        accepted[name] = entry
        value = entry.value if isinstance(entry, Described) else entry
        if kind == OFFSET_SPEC:
            offset = _offset_spec(value, now)
        elif kind == STREAM_FILTER:
            values = _filter_values(value)
        else:
            if not isinstance(value, bool):
                raise FilterError(f"{MATCH_UNFILTERED} takes a boolean, got {value!r}")
            match_unfiltered = value
    expressions, expressed, rest = parse_expression_filters(rest)
    accepted.update(expressed)
    selector, echoed = parse_filter_set(rest)
    if echoed:
        accepted.update(echoed)
    return StreamFilter(offset, values, match_unfiltered, selector, tuple(expressions)), accepted


def _offset_spec(value: Any, now: float) -> OffsetSpec:
    if isinstance(value, timestamp):  # before int: a timestamp is an int subclass
        return Instant(int(value) / 1000)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise FilterError(f"{OFFSET_SPEC} offset must be >= 0, got {value}")
        return int(value)
    if isinstance(value, str):
        text = str(value)
        if text in ("first", "last", "next"):
            return text  # type: ignore[return-value]
        seconds = interval_seconds(text)
        if seconds is not None:
            return Instant(now - seconds)
    raise FilterError(
        f"{OFFSET_SPEC} takes 'first', 'last', 'next', an offset (long), a timestamp or an interval "
        f"such as '10m' or '7D' (units Y M D h m s), got {value!r}"
    )


def _filter_values(value: Any) -> frozenset[str]:
    items = [value] if isinstance(value, str) else value.elements if isinstance(value, Array) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
        raise FilterError(f"{STREAM_FILTER} takes a string or a list of strings, got {value!r}")
    if len(items) > MAX_FILTER_VALUES:
        raise FilterError(f"{STREAM_FILTER} lists {len(items)} values; at most {MAX_FILTER_VALUES} are taken")
    return frozenset(str(v) for v in items)
