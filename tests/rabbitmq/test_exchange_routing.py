"""Exchange routing (RabbitMQ's model): direct, fanout, topic words, headers x-match, chains."""

from __future__ import annotations

import pytest

from minibroker.rabbitmq.exchanges import (
    Binding,
    ExchangeError,
    Exchanges,
    RoutingRefused,
    headers_match,
    topic_matches,
)


@pytest.mark.parametrize(
    ("pattern", "key", "expected"),
    [
        ("stock.usd.nyse", "stock.usd.nyse", True),
        ("stock.*.nyse", "stock.usd.nyse", True),
        ("stock.*.nyse", "stock.nyse", False),
        ("stock.*", "stock.usd.nyse", False),
        ("stock.#", "stock.usd.nyse", True),
        ("stock.#", "stock", True),
        ("#.nyse", "stock.usd.nyse", True),
        ("#", "", True),
        ("#", "anything.at.all", True),
        ("*", "", False),
        ("*.*", "a.b", True),
        ("a.#.b", "a.b", True),
        ("a.#.b", "a.x.y.b", True),
        ("a.#.b", "a.x.y.c", False),
        ("#.#", "a", True),
        ("a.*.#", "a", False),
        ("", "", True),
        ("", "a", False),
    ],
)
def test_topic_words(pattern: str, key: str, expected: bool) -> None:
    assert topic_matches(pattern, key) is expected


def test_topic_matching_is_bounded_by_pattern_times_key() -> None:
    # A pathological pattern of many '#' against a long key answers at once (no backtracking).
    assert topic_matches(".".join(["#"] * 200) + ".z", ".".join(["a"] * 200)) is False


@pytest.mark.parametrize(
    ("arguments", "headers", "expected"),
    [
        ({"x-match": "all", "a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}, True),
        ({"x-match": "all", "a": 1, "b": 2}, {"a": 1}, False),
        ({"a": 1, "b": 2}, {"a": 1, "b": 3}, False),  # x-match defaults to all
        ({"x-match": "any", "a": 1, "b": 2}, {"b": 2}, True),
        ({"x-match": "any", "a": 1, "b": 2}, {"c": 2}, False),
        ({"x-match": "any", "a": None}, {"a": "whatever"}, True),  # presence only
        ({"x-match": "all", "x-tag": "t"}, {}, True),  # x- keys are ignored...
        ({"x-match": "all-with-x", "x-tag": "t"}, {}, False),  # ...unless asked for
        ({"x-match": "any-with-x", "x-tag": "t"}, {"x-tag": "t"}, True),
        ({"x-match": "any"}, {"a": 1}, False),
    ],
)
def test_headers_x_match(arguments: dict[str, object], headers: dict[str, object], expected: bool) -> None:
    assert headers_match(arguments, headers) is expected


@pytest.fixture
def exchanges() -> Exchanges:
    queues = {"q1", "q2", "q3"}
    return Exchanges(lambda name: name in queues)


def test_default_exchange_routes_by_queue_name(exchanges: Exchanges) -> None:
    assert exchanges.route("", "q1", None) == ["q1"]
    assert exchanges.route("", "missing", None) == []
    assert exchanges.exchanges[""].unroutable == 1


def test_direct_fanout_and_one_copy_per_queue(exchanges: Exchanges) -> None:
    exchanges.declare("d", "direct")
    exchanges.bind(Binding("d", "q1", "queue", "k"))
    exchanges.bind(Binding("d", "q1", "queue", "k2"))
    exchanges.bind(Binding("d", "q2", "queue", "k"))
    assert sorted(exchanges.route("d", "k", None)) == ["q1", "q2"]
    assert exchanges.route("d", "nope", None) == []
    exchanges.declare("f", "fanout")
    exchanges.bind(Binding("f", "q3", "queue", "ignored"))
    assert exchanges.route("f", "any", None) == ["q3"]


def test_exchange_to_exchange_chain_and_cycle(exchanges: Exchanges) -> None:
    for name, kind in (("a", "topic"), ("b", "direct"), ("c", "fanout")):
        exchanges.declare(name, kind)
    exchanges.bind(Binding("a", "b", "exchange", "orders.#"))
    exchanges.bind(Binding("b", "c", "exchange", "orders.eu"))
    exchanges.bind(Binding("c", "a", "exchange"))  # a cycle: each exchange is visited once
    exchanges.bind(Binding("c", "q1", "queue"))
    exchanges.bind(Binding("b", "q2", "queue", "orders.us"))
    assert exchanges.route("a", "orders.eu", None) == ["q1"]
    assert exchanges.route("a", "orders.us", None) == ["q2"]
    assert exchanges.route("a", "invoices", None) == []


def test_management_errors_carry_rabbitmq_status(exchanges: Exchanges) -> None:
    exchanges.declare("x", "topic")
    assert exchanges.declare("x", "topic") is False  # equivalent: no error
    with pytest.raises(ExchangeError) as inequivalent:
        exchanges.declare("x", "fanout")
    assert inequivalent.value.status == 409 and "inequivalent arg 'type'" in str(inequivalent.value)
    with pytest.raises(ExchangeError) as reserved:
        exchanges.declare("amq.mine", "direct")
    assert reserved.value.status == 403
    with pytest.raises(ExchangeError) as unknown:
        exchanges.declare("y", "x-consistent-hash")
    assert unknown.value.status == 400
    with pytest.raises(ExchangeError) as missing:
        exchanges.bind(Binding("x", "nowhere", "queue"))
    assert missing.value.status == 404


def test_deleting_an_exchange_drops_bindings_to_it(exchanges: Exchanges) -> None:
    exchanges.declare("a", "fanout")
    exchanges.declare("b", "fanout")
    exchanges.bind(Binding("a", "b", "exchange"))
    exchanges.bind(Binding("b", "q1", "queue"))
    exchanges.delete("b")
    assert exchanges.exchanges["a"].bindings == []
    exchanges.delete("b")  # a missing exchange: no error, as RabbitMQ answers 204


def test_local_random_takes_bound_queues_in_turn(exchanges: Exchanges) -> None:
    exchanges.declare("r", "x-local-random")
    exchanges.bind(Binding("r", "q1", "queue"))
    exchanges.bind(Binding("r", "q2", "queue"))
    picks = [exchanges.route("r", "", None) for _ in range(4)]
    assert all(len(p) == 1 for p in picks)
    assert {p[0] for p in picks} == {"q1", "q2"}


def test_bindings_are_indexed_but_keep_their_order_and_identity(exchanges: Exchanges) -> None:
    exchanges.declare("h", "headers")
    listed = {"x-match": "any", "tags": ["a", "b"]}  # an unhashable argument value
    for queue in ("q2", "q1", "q3"):
        exchanges.bind(Binding("h", queue, "queue", "", listed))
    exchanges.bind(Binding("h", "q1", "queue", "", dict(listed)))  # identical: not added twice
    exchanges.bind(Binding("h", "q1", "queue", "", {"x-match": "any", "tags": ["a"]}))  # other arguments
    assert [b.destination for b in exchanges.exchanges["h"].bindings] == ["q2", "q1", "q3", "q1"]
    assert exchanges.route("h", "", {"tags": ["a", "b"]}) == ["q2", "q1", "q3"]
    assert exchanges.unbind(Binding("h", "q1", "queue", "", {"x-match": "any", "tags": ["a"]})) == 1
    assert exchanges.unbind(Binding("h", "q1", "queue", "", {}), any_arguments=True) == 1
    exchanges.drop_destination("q2", "queue")
    assert [b.destination for b in exchanges.exchanges["h"].bindings] == ["q3"]
    assert exchanges.binding_count == 1


def test_topic_bindings_match_in_the_order_made_after_unbinding(exchanges: Exchanges) -> None:
    exchanges.declare("t", "topic")
    for queue, key in (("q3", "a.#"), ("q1", "*.b"), ("q2", "a.b"), ("q1", "#")):
        exchanges.bind(Binding("t", queue, "queue", key))
    assert exchanges.route("t", "a.b", None) == ["q3", "q1", "q2"]
    exchanges.unbind(Binding("t", "q3", "queue", "a.#"))
    exchanges.unbind(Binding("t", "q1", "queue", "#"))
    assert exchanges.route("t", "a.b", None) == ["q1", "q2"]
    assert exchanges.route("t", "a.c", None) == []


def test_keys_over_255_bytes_and_counts_past_the_limits_are_refused() -> None:
    queues = {"q1"}
    exchanges = Exchanges(lambda name: name in queues, max_exchanges=2, max_bindings=2)
    exchanges.declare("t", "topic")
    with pytest.raises(ExchangeError) as long_key:
        exchanges.bind(Binding("t", "q1", "queue", "é" * 128))  # 256 bytes of UTF-8
    assert long_key.value.status == 400 and "at most 255 bytes" in str(long_key.value)
    exchanges.bind(Binding("t", "q1", "queue", "é" * 127 + "a"))  # exactly 255: taken
    exchanges.bind(Binding("t", "q1", "queue", "k"))
    exchanges.bind(Binding("t", "q1", "queue", "k"))  # identical: no new binding, no error at the limit
    with pytest.raises(ExchangeError) as bindings:
        exchanges.bind(Binding("t", "q1", "queue", "k2"))
    assert bindings.value.status == 403 and "RabbitMQOptions.max_bindings" in str(bindings.value)
    exchanges.declare("u", "fanout")
    with pytest.raises(ExchangeError) as declared:
        exchanges.declare("v", "fanout")
    assert declared.value.status == 403 and "RabbitMQOptions.max_exchanges" in str(declared.value)
    exchanges.delete("t")  # its bindings go with it: room again
    exchanges.declare("v", "fanout")
    assert exchanges.binding_count == 0


def test_a_topic_match_past_max_topic_visits_is_refused_not_walked() -> None:
    queues = {"q1"}
    exchanges = Exchanges(lambda name: name in queues, max_topic_visits=10)
    exchanges.declare("t", "topic")
    exchanges.bind(Binding("t", "q1", "queue", "a.b.c"))
    assert exchanges.route("t", "a.b.c", None) == ["q1"]  # four nodes: within the bound
    for i in range(10):
        exchanges.bind(Binding("t", "q1", "queue", f"#.x{i}.#"))
    with pytest.raises(RoutingRefused) as refused:
        exchanges.route("t", ".".join(f"x{i}" for i in range(10)), None)  # reaches every '#' path
    assert "max_topic_visits" in str(refused.value) and "topic exchange 't'" in str(refused.value)


def test_headers_bindings_are_found_through_the_message_headers_in_the_order_made(exchanges: Exchanges) -> None:
    exchanges.declare("h", "headers")
    rules = [
        ("q1", {"x-match": "all", "region": "eu", "tier": None}),  # filed under region=eu
        ("q2", {"x-match": "any", "tier": "gold", "vip": None}),  # under tier=gold and vip present
        ("q3", {"x-match": "all"}),  # nothing to compare: every message
        ("q1", {"x-match": "any"}),  # nothing to compare: no message
        ("q2", {"x-match": "all", "tags": ["a"]}),  # an unhashable value: under tags present
    ]
    for queue, arguments in rules:
        exchanges.bind(Binding("h", queue, "queue", "", arguments))
    assert exchanges.route("h", "", {"region": "eu", "tier": "silver"}) == ["q1", "q3"]
    assert exchanges.route("h", "", {"vip": 1}) == ["q2", "q3"]
    assert exchanges.route("h", "", {"tags": ["a"], "tier": "gold"}) == ["q2", "q3"]
    assert exchanges.route("h", "", {"region": "eu"}) == ["q3"]  # all: tier must be present too
    exchanges.unbind(Binding("h", "q3", "queue", "", {"x-match": "all"}))
    assert exchanges.route("h", "", {}) == []
