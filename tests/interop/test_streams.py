"""Streams with real clients over loopback: python-qpid-proton and rhea read a stream by offset.

They attach as RabbitMQ 4's clients do: the source filter-set maps the symbol
``rabbitmq:stream-offset-spec`` to a value described by that same symbol
(``"first"``, ``"last"``, ``"next"``, a long offset or a timestamp), and read
every delivery's ``x-stream-offset`` message annotation.  Covered: each start
position, readers at different offsets at once, outcomes that change nothing
for other readers, retention seen by a reader, and a 100,000-message stream
read from offset 99,990.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from proton import Described, Message, symbol, timestamp
from proton.reactor import AtMostOnce, Filter
from proton.utils import BlockingConnection, BlockingReceiver
from proton_helpers import TIMEOUT, connect, pump_until, receive
from test_rhea import Rhea, background, no_errors

import minibroker

pytestmark = pytest.mark.interop

T0 = 1_700_000_000.0
OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")
OFFSET = symbol("x-stream-offset")


@pytest.fixture
def manual() -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(clock=minibroker.ManualClock(T0)) as running:
        yield running


def offset_filter(spec: Any) -> Filter:
    """What RabbitMQ's Python client puts on the source: the spec described by the filter's own name."""
    return Filter({OFFSET_SPEC: Described(OFFSET_SPEC, spec)})


def offsets_and_bodies(messages: list[Message]) -> list[tuple[int, Any]]:
    return [(m.annotations[OFFSET], m.body) for m in messages]


def drained(conn: BlockingConnection, receiver: BlockingReceiver) -> bool:
    """Whether nothing more arrives for the credit left: drain it (Part 2 §2.6.7) and see none come."""
    link = receiver.link
    link.drain(0)
    conn.wait(lambda: link.credit == 0 and not link.draining(), msg="drain", timeout=TIMEOUT)
    return receiver.fetcher.has_message == 0


# ------------------------------------------------------------------ proton


def test_proton_reads_from_first_last_offset_and_timestamp(manual: minibroker.ThreadedBroker) -> None:
    manual.declare_stream("events")
    manual.publish_many("events", ["a", "b"])
    manual.clock.advance(10)
    manual.publish_many("events", ["c", "d"])
    with connect(manual) as conn:
        cases: list[tuple[Any, list[tuple[int, Any]]]] = [
            ("first", [(0, "a"), (1, "b"), (2, "c"), (3, "d")]),
            ("last", [(3, "d")]),
            (2, [(2, "c"), (3, "d")]),
            (timestamp(int((T0 + 5) * 1000)), [(2, "c"), (3, "d")]),
        ]
        for spec, expected in cases:
            receiver = conn.create_receiver("events", credit=10, name=f"from-{spec}", options=offset_filter(spec))
            assert offsets_and_bodies(receive(receiver, len(expected))) == expected, spec
            assert drained(conn, receiver), spec
            receiver.close()
    # Reading removed nothing.
    manual.assert_stream("events", ["a", "b", "c", "d"])


def test_proton_next_and_no_filter_read_only_what_comes_after(broker: minibroker.ThreadedBroker) -> None:
    broker.declare_stream("events")
    broker.publish("events", "before")
    with connect(broker) as conn:
        explicit = conn.create_receiver("events", credit=10, name="explicit", options=offset_filter("next"))
        default = conn.create_receiver("stream://events", credit=10, name="default")
        pump_until(conn, lambda: broker.stream("events").readers == 2)
        broker.publish("events", "after")
        assert offsets_and_bodies(receive(explicit, 1)) == [(1, "after")]
        assert offsets_and_bodies(receive(default, 1)) == [(1, "after")]


def test_proton_two_readers_at_different_offsets_and_their_outcomes(broker: minibroker.ThreadedBroker) -> None:
    broker.declare_stream("events")
    broker.publish_many("events", [f"e{i}" for i in range(6)])
    with connect(broker) as conn:
        early = conn.create_receiver("events", credit=10, name="early", options=offset_filter("first"))
        late = conn.create_receiver("events", credit=10, name="late", options=offset_filter(4))
        got_early = []
        for _ in range(6):  # the early reader releases everything: nothing comes back, nothing is lost
            got_early.append(early.receive(timeout=TIMEOUT))
            early.release(delivered=False)  # released (delivered=True would be modified)
        got_late = receive(late, 2)  # and the late one accepts
        assert [m.annotations[OFFSET] for m in got_early] == [0, 1, 2, 3, 4, 5]
        assert offsets_and_bodies(got_late) == [(4, "e4"), (5, "e5")]
        assert drained(conn, early) and drained(conn, late)
        pump_until(conn, lambda: broker.stream("events").statistics.released == 6)
    snapshot = broker.assert_stream("events", [f"e{i}" for i in range(6)])
    assert snapshot.statistics.acknowledged == 2 and snapshot.statistics.delivered == 8


def test_proton_sees_retention_drop_what_it_had_not_read(manual: minibroker.ThreadedBroker) -> None:
    manual.declare_stream("events", max_age=60)
    manual.publish_many("events", ["old-1", "old-2"])
    manual.clock.advance(30)
    manual.publish("events", "new")
    with connect(manual) as conn:
        receiver = conn.create_receiver("events", credit=1, options=offset_filter("first"))
        assert offsets_and_bodies(receive(receiver, 1)) == [(0, "old-1")]
        manual.clock.advance(30)  # old-1 and old-2 are now 60 s old: dropped
        manual.assert_stream("events", ["new"], first_offset=2)
        receiver.flow(10)
        assert offsets_and_bodies(receive(receiver, 1)) == [(2, "new")]  # on from the first retained


def test_proton_reads_the_last_ten_of_100_000(broker: minibroker.ThreadedBroker) -> None:
    broker.declare_stream("big")
    broker.publish_many("big", range(100_000))
    with connect(broker) as conn:
        receiver = conn.create_receiver("big", credit=10, options=offset_filter(99_990))
        assert offsets_and_bodies(receive(receiver, 10)) == [(i, i) for i in range(99_990, 100_000)]
        assert drained(conn, receiver)


def test_proton_reads_a_run_of_presettled_deliveries(broker: minibroker.ThreadedBroker) -> None:
    """A pre-settled reader (AtMostOnce) gets the broker's runs of deliveries written as one string of
    frames, past 256 delivery-ids and with messages of several frames among them: every message once,
    in order, with its offset."""
    broker.declare_stream("runs")
    bodies = ["x" * (70_000 if i % 500 == 250 else 40) + str(i) for i in range(2_000)]
    broker.publish_many("runs", bodies)
    with connect(broker) as conn:
        receiver = conn.create_receiver("runs", credit=300, options=[offset_filter("first"), AtMostOnce()])
        assert offsets_and_bodies(receive(receiver, 2_000, accept=False)) == list(enumerate(bodies))
        assert drained(conn, receiver)


def test_proton_sends_to_a_stream_and_a_bad_spec_is_refused(broker: minibroker.ThreadedBroker) -> None:
    broker.declare_stream("events")
    with connect(broker) as conn:
        sender = conn.create_sender("events")
        for i in range(3):
            sender.send(Message(body=i, annotations={"x-stream-filter-value": "even" if i % 2 == 0 else "odd"}))
        broker.assert_stream("events", [0, 1, 2])
        with pytest.raises(Exception, match="'latest'"):
            conn.create_receiver("events", credit=1, options=offset_filter("latest"))


def test_proton_reads_the_stream_offsets_in_the_attach_even_when_retention_emptied_it(
    manual: minibroker.ThreadedBroker,
) -> None:
    """The broker's attach states the stream's first and next offsets in its link properties
    (Part 2 §2.7.3; docs/streams.md), which proton gives as ``link.remote_properties``."""
    manual.declare_stream("events", max_age=60)
    manual.publish_many("events", ["a", "b", "c"])
    with connect(manual) as conn:
        receiver = conn.create_receiver("events", credit=1, name="at-first", options=offset_filter("first"))
        assert receiver.link.remote_properties == {
            symbol("x-stream-first-offset"): 0, symbol("x-stream-next-offset"): 3,
        }  # fmt: skip
        receiver.close()
        manual.clock.advance(60)  # all three dropped: no delivery could show where the stream is
        manual.assert_stream("events", [], first_offset=3)
        receiver = conn.create_receiver("events", credit=1, name="at-1", options=offset_filter(1))
        assert receiver.link.remote_properties == {
            symbol("x-stream-first-offset"): 3, symbol("x-stream-next-offset"): 3,
        }  # fmt: skip
        assert drained(conn, receiver)


# -------------------------------------------------------------------- rhea


def test_rhea_reads_from_first_offset_and_timestamp(manual: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    manual.declare_stream("events")
    manual.publish_many("events", ["a", "b"])
    manual.clock.advance(10)
    manual.publish_many("events", ["c", "d"])
    cases: list[tuple[dict[str, Any], list[tuple[int, str]]]] = [
        ({"string": "first"}, [(0, "a"), (1, "b"), (2, "c"), (3, "d")]),
        ({"long": 1}, [(1, "b"), (2, "c"), (3, "d")]),
        ({"timestamp": int((T0 + 5) * 1000)}, [(2, "c"), (3, "d")]),
        ({"string": "last"}, [(3, "d")]),
    ]
    for spec, expected in cases:
        result = rhea("receive", port=manual.port, address="events", stream_offset=spec, count=len(expected))
        no_errors(result)
        got = [(m["message_annotations"]["x-stream-offset"], m["body"]) for m in result["messages"]]
        assert got == expected, spec
    manual.assert_stream("events", count=4)


def test_rhea_next_and_two_readers_at_once(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    broker.declare_stream("events")
    broker.publish_many("events", ["a", "b", "c"])
    with background(rhea) as start:
        waiting = start("receive", port=broker.port, address="events", stream_offset={"string": "next"}, count=1)
        middle = start("receive", port=broker.port, address="events", stream_offset={"long": 1}, count=3)
        broker.wait_for(lambda b: b.stream("events").readers == 2, timeout=TIMEOUT)
        broker.publish("events", "d")
        later, mid = waiting.result(), middle.result()
    no_errors(later)
    no_errors(mid)
    assert [(m["message_annotations"]["x-stream-offset"], m["body"]) for m in later["messages"]] == [(3, "d")]
    assert [m["body"] for m in mid["messages"]] == ["b", "c", "d"]
    assert later["source"]["distribution_mode"] == "copy"


def test_rhea_undescribed_filters_and_stream_filter_values(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    """RabbitMQ's JavaScript client sends the stream filter values undescribed, under their names."""
    broker.declare_stream("events")
    for body, value in [("r1", "red"), ("b1", "blue"), ("none", None), ("r2", "red")]:
        broker.publish("events", body, annotations={"x-stream-filter-value": value} if value else None)
    result = rhea(
        "receive", port=broker.port, address="events", undescribed=True, stream_offset={"string": "first"},
        stream_filter=["red"], match_unfiltered=True, count=3,
    )  # fmt: skip
    no_errors(result)
    assert [m["body"] for m in result["messages"]] == ["r1", "none", "r2"]


def test_rhea_stream_filters_on_a_queue_are_refused(broker: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    broker.declare_queue("jobs")
    result = rhea("receive", port=broker.port, address="jobs", stream_offset={"string": "first"}, timeout_ms=5000)
    assert any("apply to streams" in str(error) for error in result["errors"]), result


def test_rhea_reads_the_stream_offsets_in_the_attach(manual: minibroker.ThreadedBroker, rhea: Rhea) -> None:
    manual.declare_stream("events", max_age=60)
    manual.publish_many("events", ["a", "b"])
    manual.clock.advance(60)
    manual.publish("events", "c")
    result = rhea("receive", port=manual.port, address="events", stream_offset={"long": 0}, count=1)
    no_errors(result)
    assert result["link_properties"] == {"x-stream-first-offset": 2, "x-stream-next-offset": 3}
    assert [(m["message_annotations"]["x-stream-offset"], m["body"]) for m in result["messages"]] == [(2, "c")]
