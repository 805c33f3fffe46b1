"""A queue with ``duplicate_window`` accepts and drops a client's message whose message-id it took
within that window (minibroker.broker.duplicates), as Service Bus's duplicate detection does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from minibroker import Client, ManualClock, Message, QueueOptions, ThreadedBroker
from minibroker.amqp.messaging import Properties
from minibroker.broker import duplicates

T0 = 1_700_000_000.0


@pytest.fixture
def broker() -> Iterator[ThreadedBroker]:
    with ThreadedBroker(clock=ManualClock(T0)) as running:
        running.declare_queue("out", duplicate_window=60)
        yield running


def message(body: str, message_id: object = None) -> Message:
    return Message(body=body, properties=Properties(message_id=message_id))


def send(broker: ThreadedBroker, address: str, messages: list[Message]) -> None:
    with Client(broker.url) as client, client.sender(address) as sender:
        sender.send_many(messages)  # returns once the broker accepted every one


def test_a_repeated_message_id_is_accepted_and_dropped(broker: ThreadedBroker) -> None:
    send(broker, "out", [message("a", "id-1"), message("b", "id-2"), message("a again", "id-1")])
    send(broker, "out", [message("b again", "id-2"), message("no id"), message("no id")])
    assert [m.message.body for m in broker.queue("out").messages] == ["a", "b", "no id", "no id"]
    send(broker, "out", [message("typed", 1), message("text", "1")])  # ulong 1 and "1" are different ids
    assert broker.queue("out").depth == 6


def test_ids_are_forgotten_after_the_window_and_other_queues_keep_every_message(broker: ThreadedBroker) -> None:
    send(broker, "out", [message("a", "id-1")])
    broker.clock.advance(59)
    send(broker, "out", [message("a again", "id-1")])
    broker.clock.advance(2)  # 61 s after the first: forgotten
    send(broker, "out", [message("a later", "id-1")])
    assert [m.message.body for m in broker.queue("out").messages] == ["a", "a later"]
    send(broker, "plain", [message("x", "id-1"), message("x", "id-1")])
    assert broker.queue("plain").depth == 2  # no window: no detection


def test_a_refused_message_is_not_remembered(broker: ThreadedBroker) -> None:
    broker.declare_queue("small", max_depth=1, duplicate_window=60)
    send(broker, "small", [message("first", "id-1")])
    with pytest.raises(Exception, match="rejected|full|max_depth"):
        send(broker, "small", [message("refused", "id-2")])
    with Client(broker.url) as client, client.receiver("small") as receiver:
        receiver.settle(receiver.fetch(1))
    broker.wait_for(lambda b: b.queue("small").depth == 0, timeout=5)
    send(broker, "small", [message("sent again", "id-2")])  # not a repeat: it was never kept
    assert [m.message.body for m in broker.queue("small").messages] == ["sent again"]


def test_the_window_is_checked_and_the_ids_kept_are_bounded() -> None:
    with pytest.raises(ValueError, match="duplicate_window must be a positive number of seconds"):
        QueueOptions(duplicate_window=0)
    recent = duplicates.RecentIds(60)
    for i in range(duplicates.MAX_REMEMBERED + 5):
        recent.remember(f"id-{i}", T0)
    assert len(recent) == duplicates.MAX_REMEMBERED and not recent.repeats("id-0", T0)  # the oldest forgotten
    long_id = "x" * 10_000
    assert len(duplicates.message_key(long_id) or "") == 64  # kept as its hash, not its 10,000 characters
    assert duplicates.message_key(None) is None


def test_a_stream_with_a_window_does_not_append_a_repeat(broker: ThreadedBroker) -> None:
    broker.declare_stream("log", duplicate_window=60)
    send(broker, "log", [message("a", "id-1"), message("a again", "id-1"), message("b", "id-2")])
    broker.assert_stream("log", bodies=["a", "b"])
    broker.clock.advance(61)
    send(broker, "log", [message("a later", "id-1")])
    broker.assert_stream("log", bodies=["a", "b", "a later"])
    broker.declare_stream("plain")
    send(broker, "plain", [message("x", "id-1"), message("x", "id-1")])
    broker.assert_stream("plain", count=2)
    with pytest.raises(ValueError, match="duplicate_window must be a positive number of seconds"):
        broker.declare_stream("bad", duplicate_window=0)
