"""Streams through the Python API (``ThreadedBroker``, trio's ``open_broker``), the CLI and the failure report.

No client connects: declaring, publishing and inspecting go through the API;
retention runs on a ``ManualClock``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio

from minibroker import ManualClock, NodeError, StreamSnapshot, ThreadedBroker, open_broker
from minibroker.cli import _parser, build_broker
from minibroker.testing import StreamMismatch

T0 = 1_700_000_000.0


@pytest.fixture
def broker() -> Iterator[ThreadedBroker]:
    with ThreadedBroker(clock=ManualClock(T0)) as running:
        yield running


def test_declare_publish_and_snapshot(broker: ThreadedBroker) -> None:
    broker.declare_stream("events")
    broker.publish_many("events", ["a", "b", "c"])
    broker.publish("stream://events", {"n": 1}, subject="s")
    snapshot = broker.stream("events")
    assert isinstance(snapshot, StreamSnapshot)
    assert (snapshot.first_offset, snapshot.last_offset, snapshot.count) == (0, 3, 4)
    assert snapshot.bodies == ["a", "b", "c", {"n": 1}]
    assert snapshot.bytes > 0
    last = snapshot.messages[-1]
    assert last.offset == 3 and last.properties.subject == "s"
    assert last.annotations == {"x-stream-offset": 3}
    assert broker.stream("stream://events").count == 4
    assert broker.streams() == ["events"] and broker.queues() == []


def test_a_snapshot_is_frozen(broker: ThreadedBroker) -> None:
    broker.declare_stream("events", max_bytes=10_000)
    broker.publish("events", "a")
    snapshot = broker.stream("events")
    broker.publish("events", "b")
    assert snapshot.bodies == ["a"] and broker.stream("events").bodies == ["a", "b"]


def test_retention_on_the_manual_clock(broker: ThreadedBroker) -> None:
    broker.declare_stream("events", max_age=60)
    broker.publish("events", "old")
    broker.clock.advance(30)
    broker.publish("events", "new")
    broker.clock.advance(30)
    broker.assert_stream("events", ["new"], first_offset=1, last_offset=1, count=1)
    broker.clock.advance(30)
    broker.assert_stream("events", [], count=0, first_offset=2, last_offset=1)
    assert broker.stream("events").statistics.expired == 2


def test_redeclaring_sets_the_retention(broker: ThreadedBroker) -> None:
    broker.declare_stream("events")
    broker.publish_many("events", [f"m{i}" for i in range(10)])
    broker.declare_stream("events")  # no limits given: nothing changes
    assert broker.stream("events").count == 10
    size = broker.stream("events").bytes // 10
    broker.declare_stream("events", max_bytes=size * 3)
    broker.assert_stream("events", ["m7", "m8", "m9"])


def test_assert_stream_failures_say_what_is_there(broker: ThreadedBroker) -> None:
    broker.declare_stream("events")
    broker.publish_many("events", ["a", "b"])
    with pytest.raises(StreamMismatch, match=r"has count 2, expected 3: it holds 2 message\(s\) at offsets 0..1"):
        broker.assert_stream("events", count=3)
    with pytest.raises(StreamMismatch, match=r"(?s)does not hold the expected bodies.*At index 1 diff: 'b' != 'c'"):
        broker.assert_stream("events", ["a", "c"])
    with pytest.raises(StreamMismatch, match="stream 'nope' does not exist"):
        broker.assert_stream("nope", count=0)
    with pytest.raises(TypeError, match="assert_stream needs what to check"):
        broker.assert_stream("events")


def test_misuse_raises_with_what_to_do_instead(broker: ThreadedBroker) -> None:
    broker.declare_queue("jobs")
    with pytest.raises(NodeError, match=r"'jobs' is a queue, not a stream: use broker.queue\('jobs'\)"):
        broker.stream("jobs")
    with pytest.raises(NodeError, match="a queue and a stream cannot share a name"):
        broker.declare_stream("jobs")
    broker.declare_stream("events")
    with pytest.raises(NodeError, match=r"'events' is a stream, not a topic: use broker.stream\('events'\)"):
        broker.topic("events")
    with pytest.raises(ValueError, match=r"'stream://events' is a stream address; use broker.stream\('events'\)"):
        broker.queue("stream://events")
    with pytest.raises(ValueError, match="max_age must be a positive number of seconds"):
        broker.declare_stream("more", max_age=0)
    with pytest.raises(TypeError, match="max_bytes must be a number or None, got str"):
        broker.declare_stream("more", max_bytes="1MB")  # type: ignore[arg-type]
    with pytest.raises(NodeError, match="no stream named 'nope'; known streams: \\['events'\\]"):
        broker.stream("nope")


def test_purge_delete_and_reset(broker: ThreadedBroker) -> None:
    broker.declare_stream("events")
    broker.publish_many("events", ["a", "b"])
    assert broker.purge("stream://events") == 2
    broker.publish("events", "c")
    broker.assert_stream("events", ["c"], first_offset=2)
    broker.delete("stream://events")
    assert broker.streams() == []
    broker.declare_stream("events")
    broker.reset()
    assert broker.streams() == []


def test_the_trio_handle_has_the_same_api() -> None:
    async def main() -> None:
        async with open_broker() as broker:
            broker.declare_stream("events", max_bytes=1_000_000)
            broker.publish_many("events", range(3))
            assert broker.stream("events").bodies == [0, 1, 2]
            broker.assert_stream("events", count=3)

    trio.run(main)


def test_cli_declares_streams() -> None:
    args = _parser().parse_args(["serve", "--stream", "events", "--stream", "audit", "--queue", "jobs"])
    broker = build_broker(args)
    assert sorted(broker.streams) == ["audit", "events"] and list(broker.queues) == ["jobs"]
