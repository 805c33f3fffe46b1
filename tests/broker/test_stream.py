"""Unit tests of stream nodes (:mod:`minibroker.broker.stream`) and their filters (:mod:`.streamfilters`).

No broker, no sockets: readers are fakes with a credit counter, time is a number.
"""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.amqp.message import Message, decode_message
from minibroker.amqp.messaging import Header
from minibroker.amqp.types import Array, Described, symbol, timestamp, ulong
from minibroker.api import build_message
from minibroker.broker.config import StreamOptions
from minibroker.broker.filters import FilterError
from minibroker.broker.statistics import NodeCounters
from minibroker.broker.stored import StoredMessage
from minibroker.broker.stream import OFFSET_ANNOTATION, Stream, delivery_payload
from minibroker.broker.streamfilters import StreamFilter, has_stream_filters, parse_stream_filters
from minibroker.broker.streamlog import Instant, StreamLog

T0 = 1_700_000_000.0
OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")


def stored(body: Any, now: float = T0, **fields: Any) -> StoredMessage:
    return StoredMessage(build_message(body, **fields).encode(), now)


class FakeReader:
    """The stream's ``Reader`` protocol: a credit counter and what it was sent."""

    def __init__(self, credit: int = 0, stream_filter: StreamFilter | None = None) -> None:
        self.position = -1
        self.stream_filter = stream_filter or StreamFilter()
        self.link_credit = credit
        self.got: list[tuple[int, Any]] = []

    def credit(self) -> int:
        return self.link_credit

    def deliver_offset(self, offset: int, message: StoredMessage) -> bool:
        assert self.link_credit > 0, "sent a message without credit"
        self.link_credit -= 1
        self.got.append((offset, message.decode().body))
        return True

    def deliver_run(self, log: StreamLog, position: int, end: int) -> int | None:
        return None  # one message at a time, each checked against its credit above


def make_stream(**options: Any) -> Stream:
    return Stream("s", StreamOptions(**options), NodeCounters())


def fill(stream: Stream, *bodies: Any, now: float = T0) -> None:
    for body in bodies:
        stream.append(stored(body), now)


# ------------------------------------------------------------------ reading


def test_every_reader_gets_every_message_and_nothing_is_removed() -> None:
    stream = make_stream()
    fill(stream, "a", "b", "c")
    one, two = FakeReader(10, StreamFilter("first")), FakeReader(10, StreamFilter("first"))
    stream.add_reader(one)
    stream.add_reader(two)
    stream.dispatch(T0)
    assert one.got == two.got == [(0, "a"), (1, "b"), (2, "c")]
    assert stream.depth == 3
    assert stream.counters.delivered == 6 and stream.counters.enqueued == 3


def test_readers_at_different_offsets() -> None:
    stream = make_stream()
    fill(stream, *range(10))
    late, early, new = FakeReader(100, StreamFilter(7)), FakeReader(100, StreamFilter(2)), FakeReader(100)
    assert stream.add_reader(late) == 7
    assert stream.add_reader(early) == 2
    assert stream.add_reader(new) == 10  # no offset spec: "next"
    stream.dispatch(T0)
    assert [o for o, _b in late.got] == [7, 8, 9]
    assert [o for o, _b in early.got] == list(range(2, 10))
    assert new.got == []
    fill(stream, "x")
    stream.dispatch(T0)
    assert late.got[-1] == early.got[-1] == new.got[-1] == (10, "x")


def test_last_is_the_last_message_appended() -> None:
    stream = make_stream()
    fill(stream, "a", "b")
    reader = FakeReader(10, StreamFilter("last"))
    stream.add_reader(reader)
    stream.dispatch(T0)
    assert reader.got == [(1, "b")]


def test_timestamp_start() -> None:
    stream = make_stream()
    for i in range(5):
        stream.append(stored(i), T0 + i)
    reader = FakeReader(10, StreamFilter(Instant(T0 + 2.5)))
    stream.add_reader(reader)
    stream.dispatch(T0 + 5)
    assert reader.got == [(3, 3), (4, 4)]


def test_credit_is_honoured_exactly_and_the_position_is_all_a_reader_keeps() -> None:
    stream = make_stream()
    fill(stream, *range(5))
    reader = FakeReader(2, StreamFilter("first"))
    stream.add_reader(reader)
    stream.dispatch(T0)
    assert [o for o, _b in reader.got] == [0, 1] and reader.position == 2
    stream.dispatch(T0)
    assert len(reader.got) == 2  # no credit, nothing more
    reader.link_credit = 10
    stream.dispatch(T0)
    assert [o for o, _b in reader.got] == [0, 1, 2, 3, 4] and reader.position == 5 and reader.link_credit == 7


def test_a_reader_whose_position_was_dropped_goes_on_from_the_first_retained() -> None:
    stream = make_stream(max_bytes=len(stored(0).payload) * 3)
    fill(stream, 0, 1)
    reader = FakeReader(1, StreamFilter("first"))
    stream.add_reader(reader)
    stream.dispatch(T0)
    assert reader.got == [(0, 0)]
    fill(stream, 2, 3, 4, 5, 6)  # 0..3 dropped: the reader was at 1
    assert stream.log.first_offset == 4
    assert stream.counters.expired == 4
    reader.link_credit = 10
    stream.dispatch(T0)
    assert reader.got == [(0, 0), (4, 4), (5, 5), (6, 6)]


def test_max_age_drops_on_dispatch_and_tells_the_timer() -> None:
    deadlines: list[float] = []
    stream = Stream("s", StreamOptions(max_age=10), NodeCounters(), deadlines.append)
    stream.append(stored("a"), T0)
    stream.append(stored("b"), T0 + 5)
    assert deadlines == [T0 + 10]
    assert stream.next_expiry() == T0 + 10
    reader = FakeReader(10, StreamFilter("first"))
    stream.add_reader(reader)
    stream.dispatch(T0 + 10)  # "a" is 10 s old: gone before anyone reads it
    assert reader.got == [(1, "b")]
    assert deadlines == [T0 + 10, T0 + 15]
    assert stream.counters.expired == 1


def test_stream_filter_values_and_match_unfiltered() -> None:
    stream = make_stream()
    for body, value in [("r1", "red"), ("b1", "blue"), ("n1", None), ("r2", "red")]:
        annotations = {"x-stream-filter-value": value} if value else None
        stream.append(stored(body, annotations=annotations), T0)
    red = FakeReader(10, StreamFilter("first", frozenset({"red"})))
    red_or_none = FakeReader(10, StreamFilter("first", frozenset({"red"}), match_unfiltered=True))
    for reader in (red, red_or_none):
        stream.add_reader(reader)
    stream.dispatch(T0)
    assert red.got == [(0, "r1"), (3, "r2")]
    assert red_or_none.got == [(0, "r1"), (2, "n1"), (3, "r2")]
    assert red.position == red_or_none.position == 4


def test_purge_keeps_offsets_going() -> None:
    stream = make_stream()
    fill(stream, "a", "b")
    assert stream.purge() == 2
    assert stream.append(stored("c"), T0) == 2


def test_remove_reader() -> None:
    stream = make_stream()
    reader = FakeReader(10)
    stream.add_reader(reader)
    stream.remove_reader(reader)
    fill(stream, "a")
    stream.dispatch(T0)
    assert reader.got == []


# ------------------------------------------------------------ the wire form


def test_delivery_payload_adds_the_offset_annotation() -> None:
    message = stored("hello", priority=7, subject="s", application_properties={"k": 1})
    out = decode_message(delivery_payload(message, 12345678901))
    assert out.body == "hello"
    assert out.message_annotations == {OFFSET_ANNOTATION: 12345678901}
    assert out.header is not None and out.header.priority == 7
    assert out.properties is not None and out.properties.subject == "s"
    assert out.application_properties == {"k": 1}
    # The bare message is sent byte for byte as received.
    assert delivery_payload(message, 0).endswith(message.bare)


def test_delivery_payload_merges_existing_annotations_and_drops_delivery_annotations() -> None:
    original = Message(
        header=Header(durable=True),
        delivery_annotations={symbol("x-hop"): "one"},
        message_annotations={symbol("x-opt-tag"): "t"},
        body="b",
    )
    message = StoredMessage(original.encode(), T0)
    out = decode_message(delivery_payload(message, 3))
    assert out.message_annotations == {symbol("x-opt-tag"): "t", OFFSET_ANNOTATION: 3}
    assert not out.delivery_annotations
    assert out.header is not None and out.header.durable
    assert out.body == "b"


# ------------------------------------------------------------------ filters


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("first", "first"),
        (symbol("last"), "last"),
        ("next", "next"),
        (42, 42),
        (ulong(42), 42),
        (timestamp(int(T0 * 1000) + 1500), Instant(T0 + 1.5)),
        ("10m", Instant(T0 + 3600 - 600)),
    ],
)
def test_offset_spec_values(value: Any, expected: Any) -> None:
    now = T0 + 3600
    described, _ = parse_stream_filters({OFFSET_SPEC: Described(OFFSET_SPEC, value)}, now)
    assert described.offset == expected
    # RabbitMQ finds the filter by its descriptor, whatever the key ...
    keyed, _ = parse_stream_filters({symbol("my offset"): Described(OFFSET_SPEC, value)}, now)
    assert keyed.offset == expected
    # ... and older clients send the value undescribed under the descriptor's name.
    plain, echoed = parse_stream_filters({OFFSET_SPEC: value}, now)
    assert plain.offset == expected and echoed == {OFFSET_SPEC: value}


def test_no_offset_spec_is_next() -> None:
    assert parse_stream_filters(None, T0) == (StreamFilter("next"), None)
    assert parse_stream_filters({}, T0)[0].offset == "next"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("latest", "takes 'first', 'last', 'next', an offset"),
        (-1, "must be >= 0"),
        (1.5, "takes 'first'"),
        (True, "takes 'first'"),
        (None, "takes 'first'"),
    ],
)
def test_bad_offset_specs_refuse_with_a_readable_error(value: Any, message: str) -> None:
    with pytest.raises(FilterError, match=message):
        parse_stream_filters({OFFSET_SPEC: Described(OFFSET_SPEC, value)}, T0)


def test_stream_filter_forms() -> None:
    name = symbol("rabbitmq:stream-filter")
    unfiltered = symbol("rabbitmq:stream-match-unfiltered")
    parsed, _ = parse_stream_filters({name: Described(name, ["a", "b"]), unfiltered: Described(unfiltered, True)}, T0)
    assert parsed.values == frozenset({"a", "b"}) and parsed.match_unfiltered and parsed.offset == "next"
    assert parse_stream_filters({name: "a"}, T0)[0].values == frozenset({"a"})
    assert parse_stream_filters({name: Described(name, Array("string", ["x"]))}, T0)[0].values == frozenset({"x"})
    with pytest.raises(FilterError, match="a string or a list of strings"):
        parse_stream_filters({name: Described(name, [1])}, T0)
    with pytest.raises(FilterError, match="takes a boolean"):
        parse_stream_filters({unfiltered: Described(unfiltered, "yes")}, T0)


def test_selector_on_a_stream_and_unknown_filters() -> None:
    selector = symbol("apache.org:selector-filter:string")
    parsed, echoed = parse_stream_filters(
        {symbol("sel"): Described(selector, "n > 1"), OFFSET_SPEC: Described(OFFSET_SPEC, "first")}, T0
    )
    assert parsed.selector is not None and parsed.offset == "first"
    assert echoed is not None and set(echoed) == {symbol("sel"), OFFSET_SPEC}
    assert parsed.matches(stored("x", application_properties={"n": 2}))
    assert not parsed.matches(stored("x", application_properties={"n": 1}))
    with pytest.raises(FilterError, match="not supported"):
        parse_stream_filters({symbol("odd"): Described(symbol("example.org:odd"), "x")}, T0)


def test_has_stream_filters() -> None:
    assert has_stream_filters({symbol("any"): Described(OFFSET_SPEC, "first")})
    assert has_stream_filters({OFFSET_SPEC: "first"})
    assert not has_stream_filters({symbol("sel"): Described(symbol("apache.org:selector-filter:string"), "a = 1")})
    assert not has_stream_filters(None)
