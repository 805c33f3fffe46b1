"""The broker's attach of a stream reader states the stream's first and next offsets in its link properties.

Part 2 §2.7.3: the attach's ``properties`` (fields) describe the link.  Deliveries tell a reader the
offsets of messages; these tell it the offsets of a stream with nothing to deliver, such as one whose
retention dropped everything, so a reader resuming at an offset learns whether what it was to read
next is gone.
"""

from __future__ import annotations

from minibroker import ManualClock, ThreadedBroker
from minibroker.amqp.types import symbol
from minibroker.broker.stream import FIRST_OFFSET_PROPERTY, NEXT_OFFSET_PROPERTY
from minibroker.client import Client

T0 = 1_700_000_000.0


def stated(client: Client, address: str, **reader: object) -> tuple[int, int]:
    """The (first, next) offsets the broker's attach of a reader of ``address`` states."""
    receiver = client.receiver(address, timeout=5, **reader)  # type: ignore[arg-type]
    try:
        properties = receiver.properties
        return properties["x-stream-first-offset"], properties["x-stream-next-offset"]
    finally:
        receiver.close(5)


def test_a_reader_is_told_the_stream_offsets_even_when_retention_dropped_everything() -> None:
    assert (FIRST_OFFSET_PROPERTY, NEXT_OFFSET_PROPERTY) == (symbol("x-stream-first-offset"), symbol("x-stream-next-offset"))
    with ThreadedBroker(clock=ManualClock(T0)) as broker, Client(broker.url) as client:
        broker.declare_stream("events", max_age=60)
        assert stated(client, "events", offset="first") == (0, 0)  # never written: nothing, from 0 on
        broker.publish_many("events", ["a", "b", "c"])
        broker.clock.advance(30)
        broker.publish_many("events", ["d", "e"])
        # Whatever the offset spec and whether the reader desires the enqueued time, the same offsets.
        assert stated(client, "events", offset="last") == (0, 5)
        assert stated(client, "events", offset=3, desired_capabilities=["x-opt-enqueued-time"]) == (0, 5)
        broker.clock.advance(30)  # a, b and c are 60 s old: dropped
        assert stated(client, "events", offset="first") == (3, 5)
        broker.clock.advance(30)  # and d and e: the stream retains nothing, its next offset is still 5
        assert broker.stream("events").count == 0
        assert stated(client, "events", offset=2) == (5, 5)
        broker.publish("events", "f")
        assert stated(client, "events") == (5, 6)
        assert broker.purge("events") == 1  # a purge keeps the offsets going too
        assert stated(client, "events", offset="next") == (6, 6)


def test_a_queue_reader_and_a_sender_get_no_link_properties() -> None:
    with ThreadedBroker() as broker, Client(broker.url) as client:
        broker.declare_stream("events")
        broker.declare_queue("jobs")
        assert client.receiver("jobs", timeout=5).properties == {}
        assert client.receiver("jobs", browse=True, timeout=5).properties == {}
        assert client.sender("events").properties == {}
