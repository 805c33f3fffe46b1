"""AMQP filter expressions on stream readers: properties, application-properties and SQL filters."""

from __future__ import annotations

from typing import Any

import pytest

from minibroker import build_message
from minibroker.amqp.types import Described, symbol
from minibroker.broker.expressions import parse_expression_filters
from minibroker.broker.filters import FilterError
from minibroker.broker.stored import StoredMessage
from minibroker.broker.streamfilters import parse_stream_filters


def stored(body: Any = "x", **fields: Any) -> StoredMessage:
    return StoredMessage(build_message(body, **fields).encode(), 0.0)


def selects(filter_set: dict[Any, Any], message: StoredMessage) -> bool:
    stream_filter, _echoed = parse_stream_filters(filter_set, 0.0)
    return stream_filter.matches(message)


def described(name: str, value: Any) -> Described:
    return Described(symbol(name), value)


def test_properties_filter_with_prefix_and_suffix() -> None:
    red = stored(subject="colour.red", message_id="m-1")
    filters = {symbol("amqp:properties-filter"): described("amqp:properties-filter", {symbol("subject"): "&p:colour."})}
    assert selects(filters, red)
    assert not selects(filters, stored(subject="size.big"))
    by_id = {symbol("f"): described("amqp:properties-filter", {symbol("message-id"): "m-1", symbol("subject"): "&s:red"})}
    assert selects(by_id, red) and not selects(by_id, stored(subject="colour.red", message_id="m-2"))
    literal = {symbol("f"): described("amqp:properties-filter", {symbol("subject"): "&&p:x"})}
    assert selects(literal, stored(subject="&p:x"))


def test_application_properties_filter() -> None:
    filters = {symbol("f"): described("amqp:application-properties-filter", {"region": "eu", "tier": 2})}
    assert selects(filters, stored(application_properties={"region": "eu", "tier": 2, "extra": True}))
    assert not selects(filters, stored(application_properties={"region": "eu"}))
    assert not selects(filters, stored())


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("properties.subject LIKE '%in_the_filter%' AND a_in_the_filter_key = 'a_in_the_filter_value'", True),
        ("p.subject = 'something_in_the_filter_1'", True),
        ("h.priority > 5", True),
        ("header.priority < 5", False),
        ("a.a_in_the_filter_key = 'nope'", False),
        ("application_properties.a_in_the_filter_key IS NOT NULL", True),
        ("'p.subject' = 'p.subject'", True),  # a string literal is not an identifier
        ("missing IS NULL", True),
    ],
)
def test_sql_filter(sql: str, expected: bool) -> None:
    message = stored(
        subject="something_in_the_filter_1", priority=7, application_properties={"a_in_the_filter_key": "a_in_the_filter_value"}
    )
    assert selects({symbol("sql-filter"): described("amqp:sql-filter", sql)}, message) is expected


def test_bad_filters_refuse_the_link_with_what_was_wrong() -> None:
    with pytest.raises(FilterError, match="invalid SQL filter expression"):
        parse_expression_filters({symbol("s"): described("amqp:sql-filter", "subject ===")})
    with pytest.raises(FilterError, match="takes a map"):
        parse_expression_filters({symbol("p"): described("amqp:properties-filter", "subject")})
    with pytest.raises(FilterError, match="at most"):
        parse_expression_filters({symbol("s"): described("amqp:sql-filter", "a = 1 OR " * 1000 + "a = 2")})


def test_an_expression_alone_makes_a_stream_reader() -> None:
    # The client sends only the SQL filter when no offset is asked for: the link is still a stream reader's.
    from minibroker.broker.streamfilters import has_stream_filters

    assert has_stream_filters({symbol("sql-filter"): described("amqp:sql-filter", "p.subject = 'a'")})
