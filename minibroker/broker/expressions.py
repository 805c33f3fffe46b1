"""AMQP Filter Expressions on streams: the properties, application-properties and SQL filters.

RabbitMQ 4.1 reads two filters of the OASIS AMQP Filter Expressions draft
(§4.2.4 properties filter, §4.2.5 application-properties filter) on stream
readers, and 4.2 the SQL filter; its clients send them with these symbolic
descriptors:

``amqp:properties-filter``
    a map of properties fields (``subject``, ``message-id``, ...) to values;
    a message matches when every field equals its value.  A string value
    starting ``&p:`` matches a prefix, ``&s:`` a suffix (``&&`` is a plain
    ``&``), as the draft's string modifiers;
``amqp:application-properties-filter``
    the same over application-properties keys;
``amqp:sql-filter``
    a SQL conditional expression (the JMS selector grammar of
    :mod:`.selector`) whose identifiers name message fields by section:
    ``properties.subject`` or ``p.subject``, ``header.priority`` or
    ``h.priority``, ``application_properties.k`` or ``a.k``; a bare
    identifier is an application property.

A reader's filters all have to match.  The work per message is bounded by
the filter the reader gave (its map size, its expression).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..amqp.types import Described, symbol
from .filters import FilterError
from .stored import StoredMessage

if TYPE_CHECKING:
    from .selector import Selector

__all__ = ["EXPRESSION_FILTERS", "Expression", "parse_expression_filters"]

PROPERTIES_FILTER = symbol("amqp:properties-filter")
APPLICATION_PROPERTIES_FILTER = symbol("amqp:application-properties-filter")
SQL_FILTER = symbol("amqp:sql-filter")
EXPRESSION_FILTERS = frozenset({PROPERTIES_FILTER, APPLICATION_PROPERTIES_FILTER, SQL_FILTER})
#: Most entries one map filter may hold: with the selector's length (RabbitMQ's 4,096 characters),
#: token and depth limits for SQL, they bound the work per message.
MAX_ENTRIES = 256

#: A predicate on a message.
Expression = Callable[[StoredMessage], bool]

_SECTIONS = {"p": "p", "properties": "p", "h": "h", "header": "h", "a": "a", "application_properties": "a"}
# A section-qualified identifier (outside string literals): ``p.subject`` -> ``$p$subject``.
_QUALIFIED = re.compile(r"(?<![\w$.])(properties|application_properties|header|p|h|a)\.([A-Za-z_][A-Za-z0-9_]*)")
_LITERAL = re.compile(r"'(?:[^']|'')*'")


def parse_expression_filters(filter_set: Mapping[Any, Any]) -> tuple[list[Expression], dict[Any, Any], dict[Any, Any]]:
    """Take the filter-expression entries out of ``filter_set``: (predicates, accepted entries, the rest)."""
    expressions: list[Expression] = []
    accepted: dict[Any, Any] = {}
    rest: dict[Any, Any] = {}
    for name, entry in filter_set.items():
        descriptor = entry.descriptor if isinstance(entry, Described) else None
        if descriptor not in EXPRESSION_FILTERS:
            rest[name] = entry
            continue
        accepted[name] = entry
        if descriptor == SQL_FILTER:
            expressions.append(_sql(entry.value))
        else:
            expressions.append(_fields(str(descriptor), entry.value, descriptor == PROPERTIES_FILTER))
    return expressions, accepted, rest


def _fields(kind: str, value: Any, properties: bool) -> Expression:
    if not isinstance(value, Mapping) or len(value) > MAX_ENTRIES:
        raise FilterError(f"{kind} takes a map of at most {MAX_ENTRIES} entries, got {value!r}")
    wanted = [(str(key).replace("-", "_") if properties else str(key), _matcher(v)) for key, v in value.items()]

    def matches(message: StoredMessage) -> bool:
        if properties:
            props = message.properties
            return props is not None and all(test(getattr(props, key, None)) for key, test in wanted)
        application = message.application_properties or {}
        return all(key in application and test(application[key]) for key, test in wanted)

    return matches


def _matcher(expected: Any) -> Callable[[Any], bool]:
    """Equality, or for a ``&p:``/``&s:`` string a prefix/suffix test (the draft's string modifiers)."""
    if isinstance(expected, str) and expected.startswith("&") and not expected.startswith("&&"):
        if expected.startswith("&p:"):
            prefix = expected[3:]
            return lambda actual: isinstance(actual, str) and actual.startswith(prefix)
        if expected.startswith("&s:"):
            suffix = expected[3:]
            return lambda actual: isinstance(actual, str) and actual.endswith(suffix)
    if isinstance(expected, str) and expected.startswith("&&"):
        expected = expected[1:]
    return lambda actual: actual == expected


def _sql(text: Any) -> Expression:
    # The parser (a large module: its grammar's tables and patterns) loads with the first SQL filter.
    from .selector import MAX_LENGTH, SelectorError, parse_selector

    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        raise FilterError(f"{SQL_FILTER} takes an expression of at most {MAX_LENGTH} characters, got {text!r:.80}")
    rewritten = _qualify(text)
    try:
        # The length that counts is the client's: rewriting 'p.x' as '$p$x' may add a character.
        selector = parse_selector(rewritten, max_length=len(rewritten))
    except SelectorError as exc:
        raise FilterError(f"invalid SQL filter expression {text!r}: {exc}") from None
    return lambda message: _evaluate(selector, message)


def _qualify(text: str) -> str:
    """Section-qualified identifiers as selector identifiers (``$p$subject``), string literals untouched."""
    out: list[str] = []
    position = 0
    for literal in _LITERAL.finditer(text):
        out.append(_QUALIFIED.sub(_name, text[position : literal.start()]))
        out.append(literal.group())
        position = literal.end()
    out.append(_QUALIFIED.sub(_name, text[position:]))
    return "".join(out)


def _name(match: re.Match[str]) -> str:
    return f"${_SECTIONS[match.group(1)]}${match.group(2)}"


def _evaluate(selector: Selector, message: StoredMessage) -> bool:
    def lookup(name: str) -> object:
        if name.startswith("$") and name.count("$") == 2:
            _, section, field = name.split("$")
            if section == "p":
                return _plain(getattr(message.properties, field, None)) if message.properties is not None else None
            if section == "h":
                header = message.header
                return _plain(getattr(header, field, None)) if header is not None else None
            name = field
        return _plain((message.application_properties or {}).get(name))

    return selector.matches(lookup)


def _plain(value: Any) -> object:
    """A field as the selector compares it: strings (symbols too), numbers, booleans; else None."""
    if isinstance(value, bool | int | float | str):
        return value
    return None
