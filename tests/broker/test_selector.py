"""Unit tests of :mod:`minibroker.broker.selector`: JMS 2.0 §3.8.1 message selectors.

Literals, identifiers, every operator, precedence, the three-valued logic of
§3.8.1.2 (NULL / UNKNOWN), type rules, and parse errors that name the column
and what was expected.  Hypothesis checks integer comparison and arithmetic
against Python, and AND/OR/NOT against the SQL truth tables.

Three-valued results are observed through the public API only: a selector
``S`` is UNKNOWN exactly when neither ``S`` nor ``NOT (S)`` matches.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibroker.amqp.message import Message
from minibroker.broker.filters import field_lookup
from minibroker.broker.selector import Selector, SelectorError, parse_selector, parse_value
from minibroker.broker.stored import StoredMessage

Props = dict[str, Any]


def matches(text: str, props: Props | None = None) -> bool:
    return parse_selector(text).matches((props or {}).get)


def truth(text: str, props: Props | None = None) -> bool | None:
    """The selector's three-valued result: True, False or None (UNKNOWN)."""
    lookup = (props or {}).get
    if parse_selector(text).matches(lookup):
        return True
    if parse_selector(f"NOT ({text})").matches(lookup):
        return False
    return None


def error_of(text: str) -> SelectorError:
    with pytest.raises(SelectorError) as info:
        parse_selector(text)
    return info.value


# --------------------------------------------------------------------------- API


def test_parse_returns_selector_with_text() -> None:
    selector = parse_selector("color = 'red'")
    assert isinstance(selector, Selector)
    assert selector.text == "color = 'red'"
    assert selector.matches({"color": "red"}.get)
    assert not selector.matches({"color": "blue"}.get)
    assert "color = 'red'" in repr(selector)


def test_selector_error_is_value_error() -> None:
    assert issubclass(SelectorError, ValueError)


def test_lookup_is_called_with_identifier_names() -> None:
    asked: list[str] = []

    def lookup(name: str) -> object:
        asked.append(name)
        return {"a": 1, "b": 2}.get(name)

    assert parse_selector("a + b = 3").matches(lookup)
    assert asked == ["a", "b"]


def test_selector_is_reusable() -> None:
    selector = parse_selector("n > 10")
    results = [selector.matches({"n": n}.get) for n in (5, 11, 10, 100)]
    assert results == [False, True, False, True]


# --------------------------------------------------------------------------- literals


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("'red'", "red"),
        ("''", ""),
        ("'it''s'", "it's"),
        ("''''", "'"),
        ("'a''''b'", "a''b"),
        ("'%_.*'", "%_.*"),
        ("'naïve ✓'", "naïve ✓"),
    ],
)
def test_string_literals(text: str, value: str) -> None:
    assert matches(f"s = {text}", {"s": value})
    assert not matches(f"s = {text}", {"s": value + "x"})


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("42", 42),
        ("42L", 42),
        ("42l", 42),
        ("9223372036854775807", 9223372036854775807),
        ("-9223372036854775808", -9223372036854775808),
        ("0x1F", 31),
        ("0X1fL", 31),
        ("017", 15),
        ("-7", -7),
        ("+7", 7),
    ],
)
def test_exact_numeric_literals(text: str, value: int) -> None:
    assert matches(f"n = {text}", {"n": value})
    assert not matches(f"n = {text}", {"n": value + 1})


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1.5", 1.5),
        ("7E3", 7000.0),
        ("7e3", 7000.0),
        ("-2.5E-1", -0.25),
        ("2.5e+2", 250.0),
        (".5", 0.5),
        ("5.", 5.0),
        ("5.e1", 50.0),
        ("0.0", 0.0),
    ],
)
def test_approximate_numeric_literals(text: str, value: float) -> None:
    assert matches(f"n = {text}", {"n": value})
    assert not matches(f"n = {text}", {"n": value + 1})


@pytest.mark.parametrize("text", ["TRUE", "true", "True", "tRuE"])
def test_true_literal_any_case(text: str) -> None:
    assert matches(text)
    assert matches(f"b = {text}", {"b": True})
    assert not matches(f"b = {text}", {"b": False})


@pytest.mark.parametrize("text", ["FALSE", "false", "False"])
def test_false_literal_any_case(text: str) -> None:
    assert not matches(text)
    assert matches(f"NOT {text}")
    assert matches(f"b = {text}", {"b": False})


def test_null_literal_compares_unknown() -> None:
    assert truth("x = NULL", {"x": 1}) is None
    assert matches("NULL IS NULL")


@pytest.mark.parametrize(
    "text",
    ["x=1", "x = 1", "  x\t=\n1  ", "\r\nx\f=\v1", "(x=1)AND(y='a')OR FALSE"],
)
def test_whitespace(text: str) -> None:
    assert matches(text, {"x": 1, "y": "a"})


# --------------------------------------------------------------------------- identifiers


@pytest.mark.parametrize("name", ["x", "_x", "$x", "x1", "JMSPriority", "a_b$c", "ünïcode", "camelCase"])
def test_identifier_shapes(name: str) -> None:
    assert matches(f"{name} = 1", {name: 1})


def test_identifiers_are_case_sensitive() -> None:
    props = {"Color": "red", "color": "blue"}
    assert matches("Color = 'red'", props)
    assert matches("color = 'blue'", props)
    assert not matches("COLOR = 'red'", props)


@pytest.mark.parametrize(
    "keyword", ["NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE", "and", "Escape"]
)
def test_keywords_are_not_identifiers(keyword: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(f"{keyword} = 1")


@pytest.mark.parametrize("keyword", ["NULL", "TRUE", "FALSE", "null", "True"])
def test_literal_keywords_are_never_looked_up(keyword: str) -> None:
    asked: list[str] = []

    def lookup(name: str) -> object:
        asked.append(name)
        return 1

    parse_selector(f"{keyword} = 1 OR {keyword} IS NULL").matches(lookup)
    assert asked == []


def test_keyword_prefix_is_an_identifier() -> None:
    assert matches(
        "ANDY = 1 AND notes = 'x' AND island = 2 AND order_ = 3",
        {"ANDY": 1, "notes": "x", "island": 2, "order_": 3},
    )


@pytest.mark.parametrize(
    "text",
    [
        "a = 1 and b = 2",
        "a = 1 And b = 2",
        "NOT c = 3 AND a = 1",
        "not c = 3 and a = 1",
        "c = 3 or a = 1",
        "a between 0 and 2",
        "s like 'x%'",
        "s in ('xy')",
        "z is null",
        "a is not null",
        "s not like 'q%' escape '!'",
    ],
)
def test_keywords_are_case_insensitive(text: str) -> None:
    assert matches(text, {"a": 1, "b": 2, "c": 4, "s": "xy"})


def test_identifier_alone_must_be_boolean() -> None:
    assert truth("flag", {"flag": True}) is True
    assert truth("flag", {"flag": False}) is False
    assert truth("flag", {}) is None
    assert truth("flag", {"flag": 1}) is None
    assert truth("flag", {"flag": "true"}) is None
    assert truth("flag AND TRUE", {"flag": 1}) is None


def test_unsupported_value_types_are_absent() -> None:
    assert matches("x IS NULL", {"x": b"bytes"})
    assert truth("x = 1", {"x": [1]}) is None


# --------------------------------------------------------------------------- comparison


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("=", [False, True, False]),
        ("<>", [True, False, True]),
        ("<", [True, False, False]),
        ("<=", [True, True, False]),
        (">", [False, False, True]),
        (">=", [False, True, True]),
    ],
)
def test_numeric_comparison_operators(op: str, expected: list[bool]) -> None:
    assert [matches(f"n {op} 5", {"n": n}) for n in (4, 5, 6)] == expected


@pytest.mark.parametrize(
    ("text", "props", "expected"),
    [
        ("n = 5", {"n": 5.0}, True),
        ("n = 5.0", {"n": 5}, True),
        ("n < 5.5", {"n": 5}, True),
        ("n > 4.999", {"n": 5}, True),
        ("n = 0.1", {"n": 0.1}, True),
        ("a = b", {"a": 3, "b": 3.0}, True),
        ("a < b", {"a": 3, "b": 3.5}, True),
    ],
)
def test_exact_and_approximate_compare_numerically(text: str, props: Props, expected: bool) -> None:
    assert matches(text, props) is expected


@pytest.mark.parametrize(
    ("text", "props", "expected"),
    [
        ("s = 'abc'", {"s": "abc"}, True),
        ("s = 'abc'", {"s": "ABC"}, False),
        ("s <> 'abc'", {"s": "abd"}, True),
        ("s <> 'abc'", {"s": "abc"}, False),
        ("s = t", {"s": "q", "t": "q"}, True),
        ("b = TRUE", {"b": True}, True),
        ("b <> TRUE", {"b": False}, True),
        ("b = c", {"b": False, "c": False}, True),
        ("(n > 1) = TRUE", {"n": 2}, True),
        ("(n > 1) <> (m > 1)", {"n": 2, "m": 0}, True),
    ],
)
def test_string_and_boolean_equality(text: str, props: Props, expected: bool) -> None:
    assert matches(text, props) is expected


@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
def test_strings_and_booleans_do_not_order(op: str) -> None:
    # Ordering two string (or boolean) identifiers is not defined: UNKNOWN.
    assert truth(f"s {op} t", {"s": "a", "t": "b"}) is None
    assert truth(f"s {op} t", {"s": True, "t": False}) is None
    # With a literal the type is known from the text: a syntax error.
    assert "only support = and <>" in str(error_of(f"s {op} 'a'"))
    assert "only support = and <>" in str(error_of(f"TRUE {op} s"))


@pytest.mark.parametrize(
    ("text", "props"),
    [
        ("s = 5", {"s": "5"}),
        ("s <> 5", {"s": "5"}),
        ("n = '5'", {"n": 5}),
        ("n <> '5'", {"n": 5}),
        ("b = 1", {"b": True}),
        ("b = 0", {"b": False}),
        ("n = TRUE", {"n": 1}),
        ("b > 0", {"b": True}),
        ("s < 10", {"s": "1"}),
        ("s = TRUE", {"s": "TRUE"}),
    ],
)
def test_unlike_types_compare_false(text: str, props: Props) -> None:
    assert truth(text, props) is False


def test_python_bool_is_not_a_number() -> None:
    assert not matches("b + 1 = 2", {"b": True})
    assert truth("b + 1 = 2", {"b": True}) is None
    assert not matches("b = 1", {"b": True})


# --------------------------------------------------------------------------- arithmetic


@pytest.mark.parametrize(
    ("text", "props", "expected"),
    [
        ("a + b = 7", {"a": 3, "b": 4}, True),
        ("a - b = -1", {"a": 3, "b": 4}, True),
        ("a * b = 12", {"a": 3, "b": 4}, True),
        ("a / b = 2", {"a": 9, "b": 4}, True),
        ("a / b = -2", {"a": -9, "b": 4}, True),
        ("a / b = -2", {"a": 9, "b": -4}, True),
        ("a / b = 2", {"a": -9, "b": -4}, True),
        ("a / b = 2.25", {"a": 9.0, "b": 4}, True),
        ("a / b = 2.25", {"a": 9, "b": 4.0}, True),
        ("a / 2.0 = 4.5", {"a": 9}, True),
        ("-a = -3", {"a": 3}, True),
        ("- -a = 3", {"a": 3}, True),
        ("+a = 3", {"a": 3}, True),
        ("a * 1.5 = 4.5", {"a": 3}, True),
        ("a + 0.5 > a", {"a": 3}, True),
        ("a + b + c = 6", {"a": 1, "b": 2, "c": 3}, True),
        ("a - b - c = -4", {"a": 1, "b": 2, "c": 3}, True),
        ("a / b / c = 2", {"a": 24, "b": 4, "c": 3}, True),
    ],
)
def test_arithmetic(text: str, props: Props, expected: bool) -> None:
    assert matches(text, props) is expected


@pytest.mark.parametrize(
    ("text", "props"),
    [
        ("a + 1 = 2", {}),
        ("a + 1 = 2", {"a": "1"}),
        ("a * 2 = 2", {"a": True}),
        ("-a = -1", {"a": "1"}),
        ("+a = 1", {"a": "1"}),
        ("a / 0 = 1", {"a": 1}),
        ("a / 0.0 = 1", {"a": 1.0}),
        ("a / b = 1", {"a": 1, "b": 0}),
        ("a + b = 1", {"a": 1, "b": None}),
        ("a * 1.5 = 1", {"a": 10**400}),
    ],
)
def test_arithmetic_unknown(text: str, props: Props) -> None:
    assert truth(text, props) is None


# --------------------------------------------------------------------------- precedence


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 + 2 * 3 = 7", True),
        ("(1 + 2) * 3 = 9", True),
        ("10 - 4 - 3 = 3", True),
        ("10 - (4 - 3) = 9", True),
        ("8 / 4 / 2 = 1", True),
        ("2 * 3 + 4 * 5 = 26", True),
        ("-2 * -3 = 6", True),
        ("-(2 + 3) = -5", True),
        ("1 + 1 = 2 AND 2 * 2 = 4", True),
        # AND binds tighter than OR
        ("TRUE OR TRUE AND FALSE", True),
        ("(TRUE OR TRUE) AND FALSE", False),
        ("FALSE AND FALSE OR TRUE", True),
        ("FALSE AND (FALSE OR TRUE)", False),
        # NOT binds tighter than AND, looser than comparison
        ("NOT FALSE AND FALSE", False),
        ("NOT (FALSE AND FALSE)", True),
        ("NOT 1 = 2", True),
        ("NOT NOT TRUE", True),
        ("NOT 1 = 1 OR TRUE", True),
        ("NOT (1 = 1 OR TRUE)", False),
        # comparison binds looser than arithmetic
        ("1 + 2 > 2 + 0", True),
        ("2 BETWEEN 1 + 0 AND 1 + 1", True),
        ("((((TRUE))))", True),
    ],
)
def test_precedence(text: str, expected: bool) -> None:
    assert matches(text) is expected


# --------------------------------------------------------------------------- three-valued logic

T, F, U = True, False, None
VALUE_SELECTOR = {T: "TRUE", F: "FALSE", U: "missing = 1"}

AND_TABLE = [
    (T, T, T),
    (T, F, F),
    (T, U, U),
    (F, T, F),
    (F, F, F),
    (F, U, F),
    (U, T, U),
    (U, F, F),
    (U, U, U),
]
OR_TABLE = [(T, T, T), (T, F, T), (T, U, T), (F, T, T), (F, F, F), (F, U, U), (U, T, T), (U, F, U), (U, U, U)]


@pytest.mark.parametrize(("a", "b", "expected"), AND_TABLE)
def test_and_truth_table(a: bool | None, b: bool | None, expected: bool | None) -> None:
    assert truth(f"({VALUE_SELECTOR[a]}) AND ({VALUE_SELECTOR[b]})") is expected


@pytest.mark.parametrize(("a", "b", "expected"), OR_TABLE)
def test_or_truth_table(a: bool | None, b: bool | None, expected: bool | None) -> None:
    assert truth(f"({VALUE_SELECTOR[a]}) OR ({VALUE_SELECTOR[b]})") is expected


@pytest.mark.parametrize(("a", "expected"), [(T, F), (F, T), (U, U)])
def test_not_truth_table(a: bool | None, expected: bool | None) -> None:
    assert truth(f"NOT ({VALUE_SELECTOR[a]})") is expected


@pytest.mark.parametrize("op", ["=", "<>", "<", "<=", ">", ">="])
def test_comparison_with_null_is_unknown(op: str) -> None:
    assert truth(f"x {op} 1") is None
    assert truth(f"1 {op} x") is None
    assert truth(f"x {op} y") is None
    assert truth(f"s {op} y", {"s": 1}) is None


def test_unknown_selector_never_matches() -> None:
    assert not matches("x = 1")
    assert not matches("NOT (x = 1)")
    assert not matches("x <> 1")


def test_known_operand_decides_despite_unknown() -> None:
    assert matches("x = 1 OR y = 2", {"y": 2})
    assert not matches("x = 1 AND y = 2", {"y": 2})
    assert matches("NOT (x = 1 AND y = 2)", {"y": 3})


@st.composite
def _tri(draw: st.DrawFn) -> bool | None:
    return draw(st.sampled_from([True, False, None]))


def _tri_and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _tri_or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _tri_not(a: bool | None) -> bool | None:
    return None if a is None else not a


@st.composite
def _logic_expression(draw: st.DrawFn, depth: int = 3) -> tuple[str, Callable[[Props], bool | None]]:
    """A random AND/OR/NOT tree over boolean identifiers with a Python model of its value."""
    if depth == 0 or draw(st.booleans()):
        name = draw(st.sampled_from(["p", "q", "r"]))
        return name, lambda props: props.get(name)
    kind = draw(st.sampled_from(["AND", "OR", "NOT"]))
    left_text, left = draw(_logic_expression(depth - 1))
    if kind == "NOT":
        return f"NOT ({left_text})", lambda props: _tri_not(left(props))
    right_text, right = draw(_logic_expression(depth - 1))
    combine = _tri_and if kind == "AND" else _tri_or
    return f"({left_text}) {kind} ({right_text})", lambda props: combine(left(props), right(props))


@given(_logic_expression(), _tri(), _tri(), _tri())
def test_three_valued_logic_matches_model(
    expression: tuple[str, Callable[[Props], bool | None]], p: bool | None, q: bool | None, r: bool | None
) -> None:
    text, model = expression
    props = {name: value for name, value in (("p", p), ("q", q), ("r", r)) if value is not None}
    assert truth(text, props) is model(props)
    assert matches(text, props) is (model(props) is True)


# --------------------------------------------------------------------------- BETWEEN


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (14, False),
        (15, True),
        (17, True),
        (19, True),
        (20, False),
        (15.0, True),
        (19.5, False),
        (14.99, False),
    ],
)
def test_between(n: float, expected: bool) -> None:
    assert matches("age BETWEEN 15 AND 19", {"age": n}) is expected
    assert matches("age NOT BETWEEN 15 AND 19", {"age": n}) is not expected


@pytest.mark.parametrize(
    ("text", "props", "expected"),
    [
        ("x BETWEEN 1 AND 3", {}, U),
        ("x NOT BETWEEN 1 AND 3", {}, U),
        ("x BETWEEN 'a' AND 'z'", {"x": "m"}, "error"),
        ("x BETWEEN lo AND hi", {"x": 2, "lo": 1, "hi": 3}, T),
        ("x BETWEEN lo AND hi", {"x": 2, "hi": 3}, U),  # NULL <= 2 is UNKNOWN
        ("x BETWEEN lo AND hi", {"x": 5, "hi": 3}, F),  # ... but 5 <= 3 is FALSE
        ("x BETWEEN 3 AND 1", {"x": 2}, F),
        ("x BETWEEN 1 AND 3", {"x": "2"}, F),
        ("x NOT BETWEEN 1 AND 3", {"x": "2"}, T),
        ("x BETWEEN 1 AND 3", {"x": True}, F),
        ("x + 1 BETWEEN 2 * 1 AND 4 - 1", {"x": 1}, T),
        ("x BETWEEN -1 AND 1 AND y = 2", {"x": 0, "y": 2}, T),
        ("x BETWEEN 0.5 AND 1.5", {"x": 1}, T),
    ],
)
def test_between_edge_cases(text: str, props: Props, expected: bool | None | str) -> None:
    if expected == "error":
        assert "expected a numeric expression" in str(error_of(text))
    else:
        assert truth(text, props) is expected


# --------------------------------------------------------------------------- IN


@pytest.mark.parametrize(
    ("country", "expected"),
    [("UK", True), ("US", True), ("France", True), ("Peru", False), ("uk", False), ("", False)],
)
def test_in(country: str, expected: bool) -> None:
    assert matches("Country IN ('UK', 'US', 'France')", {"Country": country}) is expected
    assert matches("Country NOT IN ('UK', 'US', 'France')", {"Country": country}) is not expected


@pytest.mark.parametrize(
    ("text", "props", "expected"),
    [
        ("x IN ('a')", {"x": "a"}, T),
        ("x IN ('a')", {}, U),
        ("x NOT IN ('a')", {}, U),
        ("x NOT IN ('a', 'b')", {"x": "c"}, T),
        ("x IN ('it''s')", {"x": "it's"}, T),
        ("x IN ('1')", {"x": 1}, F),
        ("x NOT IN ('1')", {"x": 1}, T),
        ("x IN ('a','b','a')", {"x": "b"}, T),
        ("x IN ('a') AND y IN ('b')", {"x": "a", "y": "b"}, T),
    ],
)
def test_in_edge_cases(text: str, props: Props, expected: bool | None) -> None:
    assert truth(text, props) is expected


# --------------------------------------------------------------------------- LIKE


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("12%3", "123", True),
        ("12%3", "12993", True),
        ("12%3", "1234", False),
        ("l_se", "lose", True),
        ("l_se", "loose", False),
        ("l_se", "lse", False),
        ("%", "", True),
        ("%", "anything", True),
        ("_", "", False),
        ("_", "x", True),
        ("abc", "abc", True),
        ("abc", "abcd", False),  # the whole string must match
        ("abc", "xabc", False),
        ("a%", "a\nb", True),  # % crosses line breaks
        ("a_b", "a\nb", True),
        ("a.c", "a.c", True),  # regex metacharacters are literal
        ("a.c", "abc", False),
        ("a*", "a*", True),
        ("a*", "aaa", False),
        ("a+b?", "a+b?", True),
        ("(x)[y]{2}|^$\\", "(x)[y]{2}|^$\\", True),
        ("%.txt", "notes.txt", True),
        ("%.txt", "notesXtxt", False),
        ("", "", True),
        ("A%", "abc", False),  # case-sensitive
    ],
)
def test_like(pattern: str, value: str, expected: bool) -> None:
    quoted = pattern.replace("'", "''")
    assert matches(f"s LIKE '{quoted}'", {"s": value}) is expected
    assert matches(f"s NOT LIKE '{quoted}'", {"s": value}) is not expected


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("name LIKE 'a\\_%' ESCAPE '\\'", "a_bc", True),
        ("name LIKE 'a\\_%' ESCAPE '\\'", "abc", False),
        ("name LIKE 'a\\_%' ESCAPE '\\'", "a_", True),
        ("name LIKE '\\_foo' ESCAPE '\\'", "_foo", True),
        ("name LIKE '\\_foo' ESCAPE '\\'", "bfoo", False),
        ("name LIKE '100!%' ESCAPE '!'", "100%", True),
        ("name LIKE '100!%' ESCAPE '!'", "1000", False),
        ("name LIKE 'a!!b' ESCAPE '!'", "a!b", True),
        ("name LIKE '%x%%' ESCAPE 'x'", "50% off", True),
        ("name LIKE '%x%%' ESCAPE 'x'", "50 off", False),
        ("name LIKE 'a''%' ESCAPE ''''", "a%", True),
        ("name LIKE 'a''%' ESCAPE ''''", "ab", False),
        ("name LIKE '!.' ESCAPE '!'", ".", True),  # escaping an ordinary char keeps it literal
        ("name LIKE '%\\%' ESCAPE '\\'", "100%", True),
        ("name NOT LIKE 'a\\_%' ESCAPE '\\'", "abc", True),
    ],
)
def test_like_escape(text: str, value: str, expected: bool) -> None:
    assert matches(text, {"name": value}) is expected


@pytest.mark.parametrize(
    ("text", "props", "expected"),
    [
        ("s LIKE 'a%'", {}, U),
        ("s NOT LIKE 'a%'", {}, U),
        ("s LIKE '1%'", {"s": 123}, F),
        ("s NOT LIKE '1%'", {"s": 123}, T),
        ("s LIKE 'T%'", {"s": True}, F),
    ],
)
def test_like_null_and_type(text: str, props: Props, expected: bool | None) -> None:
    assert truth(text, props) is expected


# --------------------------------------------------------------------------- IS NULL


@pytest.mark.parametrize(
    ("props", "is_null"),
    [({}, True), ({"x": None}, True), ({"x": 0}, False), ({"x": ""}, False), ({"x": False}, False)],
)
def test_is_null(props: Props, is_null: bool) -> None:
    assert truth("x IS NULL", props) is is_null
    assert truth("x IS NOT NULL", props) is (not is_null)


def test_is_null_on_expressions() -> None:
    assert matches("x + 1 IS NULL")
    assert matches("x + 1 IS NOT NULL", {"x": 1})
    assert matches("(x = 1) IS NULL")
    assert matches("x IS NULL AND y IS NOT NULL OR z = 1", {"y": 2})


# --------------------------------------------------------------------------- realistic selectors


@pytest.mark.parametrize(
    ("text", "props", "expected"),
    [
        (
            "JMSType = 'car' AND color = 'blue' AND weight > 2500",
            {"JMSType": "car", "color": "blue", "weight": 3000},
            True,
        ),
        ("JMSType = 'car' AND color = 'blue' AND weight > 2500", {"JMSType": "car", "color": "blue"}, False),
        ("phone LIKE '12%3' OR region IN ('EU', 'US')", {"region": "EU"}, True),
        ("NOT (priority < 5) AND (retries IS NULL OR retries <= 3)", {"priority": 7}, True),
        ("quantity * price >= 100.0 AND vip", {"quantity": 10, "price": 10, "vip": True}, True),
        ("quantity * price >= 100.0 AND vip", {"quantity": 10, "price": 10, "vip": "yes"}, False),
    ],
)
def test_realistic_selectors(text: str, props: Props, expected: bool) -> None:
    assert matches(text, props) is expected


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("text", "column", "phrases"),
    [
        # empty selector
        ("", 1, ["expected a conditional expression", "found end of input", "empty"]),
        ("   ", 4, ["expected a conditional expression", "found end of input", "empty"]),
        # unbalanced parentheses
        ("color = 'red' AND (x > 1", 25, ["expected ')'", "column 19", "found end of input"]),
        ("((a = 1)", 9, ["expected ')'", "found end of input"]),
        ("a = 1)", 6, ["expected end of input", "found ')'", "unbalanced"]),
        ("()", 2, ["expected an expression", "found ')'"]),
        # trailing garbage
        ("a = 1 b", 7, ["expected end of input", "found identifier b"]),
        ("a = 1 2", 7, ["expected end of input", "found number 2"]),
        ("a = 1 = 2", 7, ["expected end of input", "found '='"]),
        ("a = 1 'x'", 7, ["expected end of input", "found string literal 'x'"]),
        # bad tokens
        ("a # 1", 3, ["unexpected character '#'"]),
        ("a != 1", 3, ["unexpected character '!'", "<>"]),
        ('a = "x"', 5, ["unexpected character '\"'"]),
        ("a == 1", 4, ["expected an expression", "found '='"]),
        ("a = 'abc", 5, ["unterminated string literal"]),
        ("a = 'it''s", 5, ["unterminated string literal"]),
        ("a = 12abc", 5, ["malformed number '12abc'"]),
        ("a = 1.2.3", 5, ["malformed number"]),
        ("a = 09", 5, ["malformed octal number"]),
        # missing operands
        ("a =", 4, ["expected an expression", "found end of input"]),
        ("color = = 'red'", 9, ["expected an expression", "found '='"]),
        ("= 1", 1, ["expected an expression", "found '='"]),
        ("a = 1 AND", 10, ["expected an expression", "found end of input"]),
        ("a = 1 OR OR b = 2", 10, ["expected an expression", "found keyword OR"]),
        ("NOT", 4, ["expected an expression", "found end of input"]),
        ("a + * 2 = 1", 5, ["expected an expression", "found '*'"]),
        ("a BETWEEN 1", 12, ["expected AND", "found end of input"]),
        ("a BETWEEN 1 AND", 16, ["expected an expression", "found end of input"]),
        ("a NOT 1", 7, ["expected BETWEEN, IN or LIKE after NOT", "found number 1"]),
        ("a IS 1", 6, ["expected NULL", "found number 1"]),
        ("a IS NOT 1", 10, ["expected NULL", "found number 1"]),
        ("a IN 'x'", 6, ["expected '(' after IN", "found string literal 'x'"]),
        ("a IN ()", 7, ["expected a string literal", "found ')'"]),
        ("a IN ('x',)", 11, ["expected a string literal", "found ')'"]),
        ("a IN ('x' 'y')", 11, ["expected ',' or ')'", "found string literal 'y'"]),
        ("a IN (1, 2)", 7, ["expected a string literal", "found number 1"]),
        ("a LIKE b", 8, ["expected a string literal as the LIKE pattern", "found identifier b"]),
        ("a LIKE 'x' ESCAPE", 18, ["expected a string literal after ESCAPE", "found end of input"]),
        ("a LIKE 'x' ESCAPE 'ab'", 19, ["expected a single character after ESCAPE"]),
        ("a LIKE 'x' ESCAPE ''", 19, ["expected a single character after ESCAPE"]),
        ("a LIKE 'x!' ESCAPE '!'", 8, ["LIKE pattern ends with the escape character"]),
        ("NULL = 1 AND TRUE =", 20, ["expected an expression"]),
        # types known from the text
        ("5", 1, ["expected a boolean expression", "found number 5"]),
        ("'red'", 1, ["expected a boolean expression", "found string literal 'red'"]),
        ("a + 1", 1, ["expected a boolean expression", "found an arithmetic expression"]),
        ("NOT 5", 5, ["expected a boolean expression", "found number 5"]),
        ("a = 1 AND 2", 11, ["expected a boolean expression", "found number 2"]),
        ("'a' OR TRUE", 1, ["expected a boolean expression"]),
        ("'a' + 1 = 2", 1, ["expected a numeric expression for '+'", "found string literal 'a'"]),
        ("a * TRUE = 2", 5, ["expected a numeric expression for '*'", "found keyword TRUE"]),
        ("-'a' = 1", 2, ["expected a numeric expression after unary '-'"]),
        ("(a = 1) + 1 = 2", 1, ["expected a numeric expression", "found a comparison"]),
        ("5 LIKE 'x'", 1, ["expected a string value before LIKE", "found number 5"]),
        ("5 IN ('x')", 1, ["expected a string value before IN", "found number 5"]),
        ("'x' BETWEEN 1 AND 2", 1, ["expected a numeric expression before BETWEEN"]),
        ("a < 'x'", 5, ["only support = and <>"]),
        # keywords where an identifier is expected
        ("IN = 1", 1, ["expected an expression", "found keyword IN"]),
        ("a = 1 AND is = 2", 11, ["expected an expression", "found keyword IS"]),
    ],
)
def test_errors(text: str, column: int, phrases: list[str]) -> None:
    error = error_of(text)
    message = str(error)
    assert message.startswith(f"selector error at column {column}: ")
    assert message.endswith(f" in: {text}")
    assert error.position == column - 1
    for phrase in phrases:
        assert phrase in message


# --------------------------------------------------------------------------- properties

COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@given(st.integers(), st.integers(-(2**64) + 1, 2**64 - 1), st.sampled_from(sorted(COMPARISONS)))
def test_integer_comparison_matches_python(a: int, b: int, op: str) -> None:
    """Any property value against any literal a selector takes (below 2**64 in magnitude)."""
    assert parse_selector(f"x {op} {b}").matches({"x": a}.get) is COMPARISONS[op](a, b)


@given(
    st.one_of(st.integers(-(10**6), 10**6), st.floats(-1e6, 1e6, allow_nan=False)),
    st.one_of(st.integers(-(10**6), 10**6), st.floats(-1e6, 1e6, allow_nan=False)),
    st.sampled_from(sorted(COMPARISONS)),
)
def test_mixed_numeric_comparison_matches_python(a: float, b: float, op: str) -> None:
    assert parse_selector(f"x {op} y").matches({"x": a, "y": b}.get) is COMPARISONS[op](a, b)


def _java_divide(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


@given(st.integers(-(10**9), 10**9), st.integers(-(10**9), 10**9), st.sampled_from(["+", "-", "*", "/"]))
def test_integer_arithmetic_matches_java(a: int, b: int, op: str) -> None:
    selector = parse_selector(f"x {op} y = z")
    if op == "/" and b == 0:
        assert not selector.matches({"x": a, "y": b, "z": 0}.get)
        return
    expected = {"+": a + b, "-": a - b, "*": a * b, "/": _java_divide(a, b) if b else 0}[op]
    assert selector.matches({"x": a, "y": b, "z": expected}.get)
    assert not selector.matches({"x": a, "y": b, "z": expected + 1}.get)


@given(st.text())
def test_string_literal_round_trip(value: str) -> None:
    quoted = value.replace("'", "''")
    assert parse_selector(f"s = '{quoted}'").matches({"s": value}.get)


@given(st.text(max_size=30))
def test_arbitrary_text_parses_or_raises_selector_error(text: str) -> None:
    try:
        selector = parse_selector(text)
    except SelectorError as error:
        assert 0 <= error.position <= len(text)
    else:
        selector.matches(lambda name: None)


# --------------------------------------------------------------------------- Event Hubs positions


@pytest.mark.parametrize(
    ("text", "values", "expected"),
    [
        ("amqp.annotation.x-opt-enqueued-time > '1700000000000'", {"x-opt-enqueued-time": 1700000000001}, True),
        ("amqp.annotation.x-opt-enqueued-time > '1700000000000'", {"x-opt-enqueued-time": 1700000000000}, False),
        ("amqp.annotation.x-opt-enqueued-time >= '1700000000000'", {"x-opt-enqueued-time": 1700000000000}, True),
        ("amqp.annotation.x-opt-sequence-number > '41'", {"x-opt-sequence-number": 42}, True),
        ("amqp.annotation.x-opt-sequence-number >= '42'", {"x-opt-sequence-number": 41}, False),
        ("amqp.annotation.x-opt-offset > '-1'", {"x-opt-offset": 0}, True),
        ("'5' < amqp.annotation.x-opt-offset", {"x-opt-offset": 6}, True),  # the literal on the left too
        ("amqp.annotation.x-opt-offset = '7'", {"x-opt-offset": "7"}, True),  # = compares as written
        ("amqp.annotation.x-opt-offset > '1'", {}, False),  # absent: UNKNOWN
    ],
)
def test_event_hubs_position_filters(text: str, values: dict[str, object], expected: bool) -> None:
    seen: list[str] = []

    def lookup(name: str) -> object:
        seen.append(name)
        return values.get(name.removeprefix("amqp.annotation."))

    assert parse_selector(text).matches(lookup) is expected
    assert seen and all(name.startswith("amqp.annotation.x-opt-") for name in seen)


@pytest.mark.parametrize(
    "text",
    [
        "x-opt-offset > '1'",  # '-' only inside an amqp.annotation. name
        "amqp.annotation. > '1'",  # no name
        "amqp.annotation.x-opt-offset > '@latest'",  # not a number: ordering a string is refused
        "color > '5'",  # quoted numbers are numbers only against annotations
    ],
)
def test_event_hubs_syntax_refused_elsewhere(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


def test_annotation_identifier_reads_message_annotations() -> None:
    payload = Message(body="x", message_annotations={"x-opt-sequence-number": 9}, application_properties={"k": 1}).encode()
    lookup = field_lookup(StoredMessage(payload, 0.0))
    assert parse_selector("amqp.annotation.x-opt-sequence-number >= '9' AND k = 1").matches(lookup)
    assert not parse_selector("amqp.annotation.x-opt-sequence-number > '9'").matches(lookup)


def test_qualified_names_only_when_asked() -> None:
    with pytest.raises(SelectorError):
        parse_selector("sys.Label = 'x'")
    selector = parse_selector("sys.Label = 'x' AND user.n > 1", qualified_names=True)
    values = {"sys.Label": "x", "user.n": 2}
    assert selector.matches(values.get)
    assert parse_value("n * 2 + 1", qualified_names=True)({"n": 4}.get) == 9
    assert parse_value("'a'")({}.get) == "a"
    with pytest.raises(SelectorError):
        parse_value("'a' + 1")


def test_service_bus_exists_and_not_equal_only_in_qualified_mode() -> None:
    selector = parse_selector("EXISTS(user.color) AND sys.Label != 'x'", qualified_names=True)
    assert selector.matches({"user.color": "red", "sys.Label": "y"}.get)
    assert not selector.matches({"sys.Label": "y"}.get)
    assert not selector.matches({"user.color": "red", "sys.Label": "x"}.get)
    with pytest.raises(SelectorError, match="use <> for 'not equal'"):
        parse_selector("a != 1")
    with pytest.raises(SelectorError, match="a property name in EXISTS"):
        parse_selector("EXISTS(1)", qualified_names=True)
