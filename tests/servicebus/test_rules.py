"""Rule sets without a client: filters, actions, the wire form, and refusals with their reasons."""

from __future__ import annotations

import pytest

from minibroker.amqp.message import Message
from minibroker.amqp.messaging import Properties
from minibroker.broker.stored import StoredMessage
from minibroker.servicebus import CorrelationFilter, SqlFilter, SubscriptionRule
from minibroker.servicebus.rules import (
    CORRELATION_FILTER,
    RULE_DESCRIPTION,
    SQL_RULE_ACTION,
    TRUE_FILTER,
    RuleError,
    RuleSet,
    describe_rule,
    rule_from_description,
)


def _message(subject: str | None = None, **application: object) -> StoredMessage:
    properties = Properties(message_id="m-1", subject=subject, group_id="s-1", correlation_id="c-1")
    return StoredMessage(Message(body="x", properties=properties, application_properties=dict(application)).encode(), 0.0)


@pytest.mark.parametrize(
    ("expression", "matched"),
    [
        ("sys.Label = 'order'", True),
        ("sys.label = 'order'", True),  # system property names ignore case
        ("sys.MessageId = 'm-1' AND sys.SessionId = 's-1'", True),
        ("user.color = 'red' AND amount >= 10", True),
        ("color IN ('blue', 'green')", False),
        ("sys.CorrelationId LIKE 'c-%'", True),
        ("nothing IS NULL", True),
        ("EXISTS(color) AND NOT EXISTS(user.nothing) AND sys.Label != 'refund'", True),
        ("1=1", True),
        ("1=0", False),
    ],
)
def test_sql_filters_see_system_and_application_properties(expression: str, matched: bool) -> None:
    ruleset = RuleSet((SubscriptionRule("r", SqlFilter(expression)),), 0.0)
    assert bool(ruleset(_message("order", color="red", amount=10))) is matched


def test_correlation_filters_compare_every_field_they_name() -> None:
    rule = SubscriptionRule("r", CorrelationFilter(correlation_id="c-1", subject="order", properties={"color": "red"}))
    ruleset = RuleSet((rule,), 0.0)
    assert ruleset(_message("order", color="red"))
    assert not ruleset(_message("order", color="blue"))
    assert not ruleset(_message("refund", color="red"))
    assert not ruleset(_message("order"))  # a named property that is absent does not match


def test_an_action_changes_only_its_copy() -> None:
    action = "SET sys.Label = 'seen'; SET user.total = amount + 1; REMOVE color; SET note = 'a;b'"
    ruleset = RuleSet((SubscriptionRule("$Default"), SubscriptionRule("act", SqlFilter("1=1"), action)), 0.0)
    original = _message("order", color="red", amount=10)
    plain, changed = ruleset(original)
    assert plain is original
    assert changed.properties is not None and changed.properties.subject == "seen"
    assert changed.properties.message_id == "m-1"
    assert changed.application_properties == {"amount": 10, "total": 11, "note": "a;b"}
    assert changed.bare.endswith(b"\x00\x53\x77\xa1\x01x")  # the body (amqp-value "x") is kept


@pytest.mark.parametrize(
    ("rule", "complaint"),
    [
        (SubscriptionRule("r", SqlFilter("color = ")), "invalid SQL filter"),
        (SubscriptionRule("r", SqlFilter("1=1"), "DROP TABLE x"), "SET name = expression"),
        (SubscriptionRule("r", SqlFilter("1=1"), "SET sys.SequenceNumber = 1"), "cannot be set"),
        (SubscriptionRule("", SqlFilter("1=1")), "1 to 50 characters"),
        (SubscriptionRule("r", SqlFilter("x = '" + "a" * 2000 + "'")), "at most 1024"),
    ],
)
def test_bad_rules_are_refused_saying_why(rule: SubscriptionRule, complaint: str) -> None:
    with pytest.raises(RuleError, match=complaint):
        RuleSet((rule,), 0.0)


def test_a_rule_name_is_unique_in_its_subscription() -> None:
    ruleset = RuleSet((SubscriptionRule("$Default"),), 0.0)
    with pytest.raises(RuleError, match="already has a rule named"):
        ruleset.add(SubscriptionRule("$Default"), 1.0)
    assert ruleset.remove("$Default") and not ruleset.remove("$Default")
    assert ruleset(_message()) == []  # no rule: the subscription takes nothing


def test_wire_descriptions_round_trip() -> None:
    rule = rule_from_description(
        "corr", {"correlation-filter": {"correlation-id": "c-1", "label": "order", "properties": {"k": 1}}}
    )
    assert rule.filter == CorrelationFilter(correlation_id="c-1", subject="order", properties={"k": 1})
    described = describe_rule(rule, 2.0)
    assert described.descriptor == RULE_DESCRIPTION
    filter_, action, name, created = described.value
    assert filter_.descriptor == CORRELATION_FILTER and filter_.value[0] == "c-1" and filter_.value[4] == "order"
    assert (name, int(created)) == ("corr", 2000)
    sql = rule_from_description("s", {"sql-filter": {"expression": "1 = 1"}, "sql-rule-action": {"expression": "SET a = 1"}})
    filter_, action, _, _ = describe_rule(sql, 0.0).value
    assert filter_.descriptor == TRUE_FILTER
    assert action.descriptor == SQL_RULE_ACTION and action.value[0] == "SET a = 1"
    with pytest.raises(RuleError, match="sql-filter or a correlation-filter"):
        rule_from_description("x", {})
