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
        # The selector's limits (hardening round two, finding 7): refused when the rule is added.
        (SubscriptionRule("r", SqlFilter("(" * 40 + "1=1" + ")" * 40)), "nested too deeply"),
        (SubscriptionRule("r", SqlFilter(" AND ".join(["a = 1"] * 60))), "too many tokens"),
        (SubscriptionRule("r", SqlFilter("x = " + "9" * 1000)), "out of range"),
        (SubscriptionRule("r", SqlFilter("1=1"), "SET x = " + "- " * 40 + "1"), "nested too deeply"),
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


def test_a_backtracking_like_in_a_rule_is_one_pass() -> None:
    """Finding 1: the regex took minutes for 64 characters; the value here is 100,000."""
    ruleset = RuleSet((SubscriptionRule("r", SqlFilter("x LIKE '%a%a%a%a%a%a%a%a%b'")),), 0.0)
    assert ruleset(_message(x="a" * 100_000)) == []
    message = _message(x="a" * 100_000 + "b")
    assert ruleset(message) == [message]


def test_a_rule_whose_evaluation_raises_does_not_match_and_raises_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """An evaluation error stays with its rule: that filter does not match, an action's value is
    NULL, the other rules still apply, and nothing reaches the producer that published the message."""
    import minibroker.servicebus.rules as rules_module

    def failing_value(value: object) -> object:
        raise RuntimeError("reading a property failed")

    rules = (
        SubscriptionRule("broken", SqlFilter("amount = 1")),
        SubscriptionRule("plain", SqlFilter("1=1")),
        SubscriptionRule("copy", SqlFilter("1=1"), action="SET total = amount + 1"),
    )
    ruleset = RuleSet(rules, 0.0)
    message = _message("order", amount=1)
    monkeypatch.setattr(rules_module, "_value", failing_value)
    plain, copy = ruleset(message)
    assert plain is message
    assert copy.application_properties == {"amount": 1, "total": None}


def test_a_rule_whose_message_sections_fail_to_read_does_not_match(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the message's sections happens inside the rule's evaluation (a lookup reads them),
    so a section that fails to read is that rule's no match, not an exception for the producer."""

    class Unreadable(StoredMessage):
        __slots__ = ()

        @property
        def application_properties(self) -> dict[str, object] | None:
            raise RuntimeError("application-properties failed to decode")

    message = _message("order", amount=1)
    unreadable = Unreadable(message.payload, 0.0)
    ruleset = RuleSet((SubscriptionRule("r", SqlFilter("amount = 1")), SubscriptionRule("all", SqlFilter("1=1"))), 0.0)
    assert ruleset(unreadable) == [unreadable]  # "r" could not read it; "all" takes it
