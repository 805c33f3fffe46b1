"""A stream reader whose filter matches nothing (not yet tried in the first round; stream.py).

Before the fix ``Stream.feed`` scanned from the reader's position to the end of the log in one
loop: a reader attached at ``first`` with a ``rabbitmq:stream-filter`` value no message carries
made one dispatch visit every retained message on the event loop, while every other client
waited.  Now a filtering reader visits at most :data:`~minibroker.broker.stream.SCAN` entries per
dispatch and the rest in later slices, scheduled through the broker's timer.  Counted, not timed:
the entries each dispatch visits (``filtered_out`` before and after each ``Stream.feed``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hostile_peer import Attacker, good_client_round_trip  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp.types import Described, symbol
from minibroker.broker.stream import SCAN, Stream

pytestmark = pytest.mark.interop

OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")
STREAM_FILTER = symbol("rabbitmq:stream-filter")
LOG = 50_000


@pytest.fixture
def visits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The log entries each ``Stream.feed`` filtered out (runs in the broker's thread)."""
    seen: list[int] = []
    feed = Stream.feed

    def counted(stream: Stream, reader: Any) -> None:
        before = stream.counters.filtered_out
        feed(stream, reader)
        seen.append(stream.counters.filtered_out - before)

    monkeypatch.setattr(Stream, "feed", counted)
    yield seen


def test_a_filter_that_matches_nothing_visits_a_bounded_slice_per_dispatch(visits: list[int]) -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_stream("log")
        broker.publish_many("log", range(LOG))
        attacker = Attacker(broker)
        attacker.start()
        source = {
            "filter": {
                OFFSET_SPEC: Described(OFFSET_SPEC, "first"),
                STREAM_FILTER: Described(STREAM_FILTER, "a value no message carries"),
            }
        }
        attacker.send(attacker.peer.attach_receiver("nothing", "log", 0, **source) + attacker.peer.flow(0, credit=100))
        good_client_round_trip(broker)  # served while the reader's slices go on
        broker.wait_for(lambda b: b.stream("log").statistics.filtered_out == LOG, timeout=30)
        assert max(visits) <= SCAN  # no dispatch walked more than one slice of the log
        assert sum(visits) == LOG and len([v for v in visits if v]) >= LOG // SCAN
        assert broker._read(lambda: broker._broker.router.nodes["log"].pending) == {}  # done: nothing due
        # A message that matches, appended later, still reaches the reader.
        broker.publish("log", "wanted", annotations={"x-stream-filter-value": "a value no message carries"})
        attacker.read_until(lambda frames: "Transfer" in frames.names())
        attacker.close()
