"""Subscription rules: which messages a topic's subscription takes, and how it changes them.

As Service Bus does (docs: "Topic filters and actions"): a subscription has
named rules, each a filter and an optional action.  A message is taken when
any filter matches; the rules without an action together give one copy, and
each matching rule with an action gives its own copy, changed by the action.
A subscription starts with the ``$Default`` rule (true filter, no action).

Filters:

* SQL filter: a SQL-92 condition (the selector grammar of
  :mod:`minibroker.broker.selector`) over ``sys.`` properties (``sys.Label``,
  ``sys.MessageId``, ...) and application properties (``user.color``, or
  plain ``color``); ``1=1`` and ``1=0`` are the true and false filters.
* Correlation filter: equality on the properties it names, all of them.

Actions: ``SET name = expression`` and ``REMOVE name`` statements separated
by ``;``, on application properties or the settable ``sys.`` properties.

On the wire (``com.microsoft:add-rule`` / ``remove-rule`` / ``enumerate-rules``)
rule descriptions are the described lists below (codes from the SDKs).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from ..amqp.messaging import Properties
from ..amqp.types import Described, timestamp, ulong
from ..broker.selector import SelectorError, parse_selector, parse_value
from ..broker.stored import StoredMessage
from .options import DEFAULT_RULE, CorrelationFilter, SqlFilter, SubscriptionRule
from .sections import with_bare

__all__ = ["RuleError", "RuleSet", "Rules", "rule_from_description", "describe_rule"]

RULE_DESCRIPTION = ulong(0x0000013700000004)
SQL_FILTER = ulong(0x0000001370000006)
TRUE_FILTER = ulong(0x0000001370000007)
FALSE_FILTER = ulong(0x0000001370000008)
CORRELATION_FILTER = ulong(0x0000001370000009)
EMPTY_RULE_ACTION = ulong(0x0000013700000005)
SQL_RULE_ACTION = ulong(0x0000013700000006)

#: A rule's filter and action text are bounded (the service allows 1024 characters per SQL filter).
MAX_EXPRESSION = 1024

#: ``sys.`` name (lower case) -> the properties field it is.
_SYSTEM = {
    "messageid": "message_id", "correlationid": "correlation_id", "to": "to", "replyto": "reply_to",
    "label": "subject", "subject": "subject", "sessionid": "group_id", "replytosessionid": "reply_to_group_id",
    "contenttype": "content_type",
}  # fmt: skip
#: Correlation filter field -> the properties field it compares.
_CORRELATION = {
    "correlation_id": "correlation_id", "message_id": "message_id", "to": "to", "reply_to": "reply_to",
    "subject": "subject", "session_id": "group_id", "reply_to_session_id": "reply_to_group_id",
    "content_type": "content_type",
}  # fmt: skip
_NO_PROPERTIES = Properties()


class RuleError(ValueError):
    """A rule the broker cannot take: the message says what is wrong."""


def _value(value: object) -> object:
    """A property as a SQL expression sees it: symbols and ids as text, other types as they are."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, list, dict)):
        return None  # not comparable in SQL
    return str(value)  # a uuid or ulong id: as text


def _lookup(message: StoredMessage) -> Callable[[str], object]:
    """Names as a rule's SQL sees them; the message's sections are read as names are looked up, so
    whatever fails there fails inside the selector's evaluation, which keeps it to that rule."""

    def lookup(name: str) -> object:
        scope, dot, rest = name.partition(".")
        if dot and scope.lower() == "sys":
            field = _SYSTEM.get(rest.lower())
            return _value(getattr(message.properties or _NO_PROPERTIES, field)) if field is not None else None
        if dot and scope.lower() == "user":
            name = rest
        return _value((message.application_properties or {}).get(name))

    return lookup


class _Statement(NamedTuple):
    remove: bool
    scope: str  # "sys" or "user"
    name: str
    value: Callable[[Callable[[str], object]], object] | None


_SET = re.compile(r"\s*SET\s+([A-Za-z_$][\w$.]*)\s*=(.*)", re.IGNORECASE | re.DOTALL)
_REMOVE = re.compile(r"\s*REMOVE\s+([A-Za-z_$][\w$.]*)\s*", re.IGNORECASE)


def _split_statements(text: str) -> list[str]:
    """Split on ``;`` outside string literals."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char == "'":
            quoted = not quoted
        if char == ";" and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def _target(name: str) -> tuple[str, str]:
    scope, dot, rest = name.partition(".")
    if dot and scope.lower() == "sys":
        if rest.lower() not in _SYSTEM:
            raise RuleError(f"sys.{rest} cannot be set; settable: {', '.join('sys.' + n for n in sorted(_SYSTEM))}")
        return "sys", _SYSTEM[rest.lower()]
    return "user", rest if dot and scope.lower() == "user" else name


def _parse_action(text: str) -> list[_Statement]:
    statements = []
    for part in _split_statements(text):
        matched = _SET.fullmatch(part)
        if matched is not None:
            scope, name = _target(matched.group(1))
            try:
                value = parse_value(matched.group(2), qualified_names=True)
            except SelectorError as exc:
                raise RuleError(f"invalid expression in action {part.strip()!r}: {exc}") from None
            statements.append(_Statement(False, scope, name, value))
            continue
        matched = _REMOVE.fullmatch(part)
        if matched is None:
            raise RuleError(f"an action is 'SET name = expression' or 'REMOVE name' statements, got {part.strip()!r}")
        scope, name = _target(matched.group(1))
        statements.append(_Statement(True, scope, name, None))
    return statements


def _apply(statements: list[_Statement], message: StoredMessage) -> StoredMessage:
    lookup = _lookup(message)
    properties = message.properties or _NO_PROPERTIES
    application = dict(message.application_properties or {})
    changes: dict[str, Any] = {}
    for statement in statements:
        value = None if statement.value is None else statement.value(lookup)
        if statement.scope == "sys":
            changes[statement.name] = None if statement.remove else (None if value is None else str(value))
        elif statement.remove:
            application.pop(statement.name, None)
        else:
            application[statement.name] = value
    return with_bare(message, dataclasses.replace(properties, **changes), application)


class _Compiled(NamedTuple):
    rule: SubscriptionRule
    matches: Callable[[StoredMessage], bool]
    action: list[_Statement] | None


def _compile(rule: SubscriptionRule) -> _Compiled:
    if not rule.name or len(rule.name) > 50:
        raise RuleError(f"a rule name has 1 to 50 characters, got {rule.name!r}")
    filter_ = rule.filter
    matches: Callable[[StoredMessage], bool]
    if isinstance(filter_, SqlFilter):
        if len(filter_.expression) > MAX_EXPRESSION:
            raise RuleError(f"a SQL filter has at most {MAX_EXPRESSION} characters, got {len(filter_.expression)}")
        try:
            selector = parse_selector(filter_.expression, qualified_names=True)
        except SelectorError as exc:
            raise RuleError(f"invalid SQL filter of rule {rule.name!r}: {exc}") from None
        matches = lambda message: selector.matches(_lookup(message))  # noqa: E731
    elif isinstance(filter_, CorrelationFilter):
        matches = _correlation(filter_)
    else:
        raise RuleError(f"a rule's filter is a SqlFilter or a CorrelationFilter, got {type(filter_).__name__}")
    action = None
    if rule.action is not None and rule.action.strip():
        if len(rule.action) > MAX_EXPRESSION:
            raise RuleError(f"an action has at most {MAX_EXPRESSION} characters, got {len(rule.action)}")
        action = _parse_action(rule.action)
    return _Compiled(rule, matches, action)


def _correlation(filter_: CorrelationFilter) -> Callable[[StoredMessage], bool]:
    wanted = [(field, getattr(filter_, name)) for name, field in _CORRELATION.items() if getattr(filter_, name) is not None]
    wanted_properties = dict(filter_.properties)

    def matches(message: StoredMessage) -> bool:
        properties = message.properties or _NO_PROPERTIES
        if any(_value(getattr(properties, field)) != value for field, value in wanted):
            return False
        application = message.application_properties or {}
        return all(name in application and application[name] == value for name, value in wanted_properties.items())

    return matches


class RuleSet:
    """One subscription's rules, in the order they were added; called with each message its topic gets."""

    def __init__(self, rules: tuple[SubscriptionRule, ...], created_at: float) -> None:
        self._rules: dict[str, tuple[_Compiled, float]] = {}
        for rule in rules:
            self.add(rule, created_at)

    def add(self, rule: SubscriptionRule, now: float) -> None:
        if rule.name in self._rules:
            raise RuleError(f"the subscription already has a rule named {rule.name!r}")
        self._rules[rule.name] = (_compile(rule), now)

    def remove(self, name: str) -> bool:
        return self._rules.pop(name, None) is not None

    def __iter__(self) -> Iterator[tuple[SubscriptionRule, float]]:
        for compiled, created in self._rules.values():
            yield compiled.rule, created

    def __call__(self, message: StoredMessage) -> list[StoredMessage]:
        copies: list[StoredMessage] = []
        plain = False
        for compiled, _created in self._rules.values():
            if not compiled.matches(message):
                continue
            if compiled.action is None:
                plain = True
            else:
                copies.append(_apply(compiled.action, message))
        return [message, *copies] if plain else copies


class Rules:
    """Every subscription's rule set, by subscription queue name (``topic/Subscriptions/name``)."""

    def __init__(self, configured: Mapping[str, tuple[SubscriptionRule, ...]]) -> None:
        self._configured = configured  # by "topic/subscription"
        self._sets: dict[str, RuleSet] = {}

    def for_subscription(self, topic: str, subscription: str, key: str, now: float) -> RuleSet:
        ruleset = self._sets.get(key)
        if ruleset is None:
            rules = self._configured.get(f"{topic}/{subscription}", (DEFAULT_RULE,))
            ruleset = self._sets[key] = RuleSet(rules, now)
        return ruleset

    def get(self, key: str) -> RuleSet | None:
        return self._sets.get(key)

    def clear(self) -> None:
        self._sets.clear()


# ------------------------------------------------------------------ the wire form


def rule_from_description(name: str, description: Mapping[str, Any]) -> SubscriptionRule:
    """An ``add-rule`` request's ``rule-description`` map as a rule."""
    if "sql-filter" in description:
        sql = description["sql-filter"] or {}
        filter_: SqlFilter | CorrelationFilter = SqlFilter(str(sql.get("expression", "")))
    elif "correlation-filter" in description:
        fields = description["correlation-filter"] or {}
        text = {
            attribute: None if fields.get(wire) is None else str(fields.get(wire))
            for attribute, wire in (
                ("correlation_id", "correlation-id"), ("message_id", "message-id"), ("to", "to"),
                ("reply_to", "reply-to"), ("subject", "label"), ("session_id", "session-id"),
                ("reply_to_session_id", "reply-to-session-id"), ("content_type", "content-type"),
            )
        }  # fmt: skip
        filter_ = CorrelationFilter(**text, properties=dict(fields.get("properties") or {}))
    else:
        raise RuleError("a rule-description holds a sql-filter or a correlation-filter")
    action = (description.get("sql-rule-action") or {}).get("expression")
    return SubscriptionRule(name, filter_, None if action is None else str(action))


def describe_rule(rule: SubscriptionRule, created_at: float) -> Described:
    """An ``enumerate-rules`` entry's ``rule-description``: filter, action, name, creation time."""
    filter_ = rule.filter
    if isinstance(filter_, SqlFilter):
        compact = filter_.expression.replace(" ", "")
        if compact == "1=1":
            described = Described(TRUE_FILTER, [])
        elif compact == "1=0":
            described = Described(FALSE_FILTER, [])
        else:
            described = Described(SQL_FILTER, [filter_.expression, 20])  # 20: the SQL compatibility level
    else:
        described = Described(
            CORRELATION_FILTER,
            [
                filter_.correlation_id, filter_.message_id, filter_.to, filter_.reply_to, filter_.subject,
                filter_.session_id, filter_.reply_to_session_id, filter_.content_type, dict(filter_.properties),
            ],
        )  # fmt: skip
    action = Described(EMPTY_RULE_ACTION, []) if rule.action is None else Described(SQL_RULE_ACTION, [rule.action, 20])
    return Described(RULE_DESCRIPTION, [described, action, rule.name, timestamp(int(created_at * 1000))])
