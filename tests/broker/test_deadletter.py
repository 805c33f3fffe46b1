"""Dead-lettering in the broker engine: no sockets, no threads, no sleeps.

A rejected message (Part 3 §3.4.3) and one whose delivery-count exceeds the
queue's ``max_delivery_count`` (failed deliveries, §3.4.5) move to the
queue's dead-letter address, ``<queue>/$DeadLetterQueue`` unless configured
(``""`` turns it off), with the reason in the ``x-opt-deadletter-reason``
message annotation and the bare message (§3.2) untouched.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_consumer import FakeConsumer

from minibroker.amqp.message import decode_message
from minibroker.amqp.messaging import Accepted, Modified, Rejected, Released
from minibroker.amqp.performatives import Error
from minibroker.amqp.types import symbol
from minibroker.api import build_message
from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig, QueueOptions
from minibroker.broker.engine import Broker
from minibroker.broker.stored import Entry

T0 = 1_700_000_000.0
DLQ = "q/$DeadLetterQueue"
REASON = symbol("x-opt-deadletter-reason")
DESCRIPTION = symbol("x-opt-deadletter-description")


def make_broker(config: BrokerConfig | None = None, **options: Any) -> Broker:
    broker = Broker(config or BrokerConfig(), ManualClock(T0))
    broker.declare_queue("q", QueueOptions(**options) if options else None)
    return broker


def take(broker: Broker, name: str = "q") -> Entry:
    """Acquire the next message of a queue with a one-credit fake consumer."""
    queue = broker.queues[name]
    consumer = FakeConsumer(1)
    queue.add_consumer(consumer)
    queue.dispatch(broker.now())
    queue.remove_consumer(consumer)
    assert consumer.delivered, f"nothing to take from {name}"
    return consumer.delivered[0]


def outcome(broker: Broker, entry: Entry, state: Any, name: str = "q", link_id: int | None = None) -> None:
    broker.apply_outcome(broker.queues[name], entry, state, link_id)


def reject(
    broker: Broker, entry: Entry, condition: str | None = None, description: str | None = None
) -> None:
    error = Error(condition=symbol(condition), description=description) if condition else None
    outcome(broker, entry, Rejected(error=error))


# ------------------------------------------------------------------- rejected


def test_rejected_message_moves_to_the_dead_letter_queue_with_the_error() -> None:
    broker = make_broker()
    broker.publish("q", build_message({"order": 1}, message_id="m-1", application_properties={"k": "v"}))
    entry = take(broker)
    bare = entry.message.bare
    reject(broker, entry, "app:invalid-order", "order 1 has no lines")
    assert broker.queue_snapshot("q").depth == 0
    (dead,) = broker.queue_snapshot(DLQ).messages
    assert dead.body == {"order": 1}
    assert dead.properties.message_id == "m-1"
    assert dead.application_properties == {"k": "v"}
    assert dead.annotations[REASON] == "app:invalid-order"
    assert dead.annotations[DESCRIPTION] == "order 1 has no lines"
    (dead_entry,) = broker.queues[DLQ].entries()
    assert dead_entry.message.bare == bare, "the bare message must be kept byte for byte"


def test_rejected_without_error_uses_amqp_rejected_as_reason() -> None:
    broker = make_broker()
    broker.publish("q", build_message("m"))
    reject(broker, take(broker))
    (dead,) = broker.queue_snapshot(DLQ).messages
    assert dead.annotations[REASON] == "amqp:rejected"
    assert DESCRIPTION not in dead.annotations


def test_dead_lettering_keeps_the_message_own_annotations() -> None:
    broker = make_broker()
    broker.publish("q", build_message("m", annotations={"x-opt-tenant": "acme"}))
    reject(broker, take(broker), "app:bad")
    (dead,) = broker.queue_snapshot(DLQ).messages
    assert dead.annotations == {"x-opt-tenant": "acme", "x-opt-deadletter-reason": "app:bad"}


def test_dead_lettering_keeps_annotations_added_by_modified() -> None:
    broker = make_broker()
    broker.publish("q", build_message("m"))
    entry = take(broker)
    outcome(broker, entry, Modified(message_annotations={symbol("x-opt-tries"): 1}))
    reject(broker, take(broker), "app:bad")
    (dead,) = broker.queue_snapshot(DLQ).messages
    assert dead.annotations[symbol("x-opt-tries")] == 1
    assert dead.annotations[REASON] == "app:bad"


def test_dead_letter_queue_keeps_priority_and_order() -> None:
    broker = make_broker()
    for body, priority in [("low", 1), ("high", 9), ("mid", 5)]:
        broker.publish("q", build_message(body, priority=priority))
    entries = [take(broker) for _ in range(3)]
    for entry in reversed(entries):
        reject(broker, entry, "app:bad")
    assert broker.queue_snapshot(DLQ).bodies == ["high", "mid", "low"]
    assert [m.priority for m in broker.queue_snapshot(DLQ).messages] == [9, 5, 1]


# ------------------------------------------------------ max delivery count


def test_exceeding_max_delivery_count_dead_letters() -> None:
    broker = make_broker(max_delivery_count=3)
    broker.publish("q", build_message("poison"))
    broker.publish("q", build_message("fine"))
    for attempt in range(1, 4):
        entry = take(broker)
        assert entry.message.decode().body == "poison"
        outcome(broker, entry, Modified(delivery_failed=True))
        assert entry.delivery_count == attempt
        assert DLQ not in broker.queues
    entry = take(broker)
    assert decode_message(entry.payload_for_delivery(broker.now())).header.delivery_count == 3
    outcome(broker, entry, Modified(delivery_failed=True))
    (dead,) = broker.queue_snapshot(DLQ).messages
    assert dead.body == "poison"
    assert dead.annotations[REASON] == "MaxDeliveryCountExceeded"
    assert "max_delivery_count 3" in dead.annotations[DESCRIPTION]
    assert dead.header.delivery_count == 4
    assert broker.queue_snapshot("q").bodies == ["fine"]


def test_released_and_modified_without_failure_never_dead_letter() -> None:
    broker = make_broker(max_delivery_count=1)
    broker.publish("q", build_message("m"))
    for _ in range(5):
        outcome(broker, take(broker), Released())
        outcome(broker, take(broker), Modified(delivery_failed=False))
    assert DLQ not in broker.queues
    assert take(broker).delivery_count == 0


def test_an_unknown_outcome_counts_as_a_failed_delivery() -> None:
    broker = make_broker(max_delivery_count=1)
    broker.publish("q", build_message("m"))
    outcome(broker, take(broker), object())
    assert DLQ not in broker.queues
    outcome(broker, take(broker), object())
    assert broker.queue_snapshot(DLQ).bodies == ["m"]


def test_accepted_never_dead_letters() -> None:
    broker = make_broker()
    broker.publish("q", build_message("m"))
    outcome(broker, take(broker), Accepted())
    assert DLQ not in broker.queues
    assert broker.statistics().nodes["q"].acknowledged == 1


# -------------------------------------------------------- dead-letter address


def test_configured_dead_letter_address() -> None:
    broker = make_broker(dead_letter_address="graveyard")
    broker.publish("q", build_message("m"))
    reject(broker, take(broker), "app:bad")
    assert DLQ not in broker.queues
    assert broker.queue_snapshot("graveyard").bodies == ["m"]
    assert broker.queue_snapshot("graveyard").messages[0].annotations[REASON] == "app:bad"


def test_configured_dead_letter_address_may_be_an_existing_queue() -> None:
    broker = make_broker(dead_letter_address="errors")
    broker.declare_queue("errors")
    broker.publish("errors", build_message("already-there"))
    broker.publish("q", build_message("m"))
    reject(broker, take(broker), "app:bad")
    assert broker.queue_snapshot("errors").bodies == ["already-there", "m"]


def test_empty_dead_letter_address_turns_dead_lettering_off() -> None:
    broker = make_broker(dead_letter_address="", max_delivery_count=1)
    broker.publish("q", build_message("rejected"))
    broker.publish("q", build_message("failing"))
    reject(broker, take(broker), "app:bad")
    entry = take(broker)
    outcome(broker, entry, Modified(delivery_failed=True))
    outcome(broker, take(broker), Modified(delivery_failed=True))
    assert broker.queue_snapshot("q").depth == 0
    assert sorted(broker.queues) == ["q"]
    stats = broker.statistics().nodes["q"]
    assert stats.rejected == 1 and stats.dead_lettered == 0


def test_dead_letter_queue_is_created_even_without_auto_create() -> None:
    broker = make_broker(BrokerConfig(auto_create=False))
    assert broker.resolve("unknown") is None
    broker.publish("q", build_message("m"))
    reject(broker, take(broker), "app:bad")
    assert broker.queue_snapshot(DLQ).bodies == ["m"]


def test_dead_letter_queue_does_not_dead_letter_into_itself() -> None:
    broker = make_broker()
    broker.publish("q", build_message("m"))
    reject(broker, take(broker), "app:bad")
    assert broker.queues[DLQ].options.dead_letter_address == ""
    reject_entry = take(broker, DLQ)
    broker.apply_outcome(broker.queues[DLQ], reject_entry, Rejected(), None)
    assert broker.queue_snapshot(DLQ).depth == 0
    assert sorted(broker.queues) == ["q", DLQ]
    assert broker.statistics().nodes[DLQ].dead_lettered == 0


def test_a_queue_whose_dead_letter_address_is_itself_drops_instead_of_looping() -> None:
    broker = make_broker(dead_letter_address="q", max_delivery_count=1)
    broker.publish("q", build_message("rejected"))
    broker.publish("q", build_message("failing"))
    reject(broker, take(broker), "app:bad")
    assert broker.queue_snapshot("q").bodies == ["failing"]
    outcome(broker, take(broker), Modified(delivery_failed=True))
    outcome(broker, take(broker), Modified(delivery_failed=True))
    assert broker.queue_snapshot("q").depth == 0
    assert broker.statistics().nodes["q"].dead_lettered == 0


def test_explicitly_declared_dead_letter_queue_options_are_kept() -> None:
    broker = make_broker()
    broker.declare_queue(DLQ, QueueOptions(dead_letter_address="", priorities=1))
    for body, priority in [("low", 0), ("high", 9)]:
        broker.publish("q", build_message(body, priority=priority))
    high = take(broker)
    low = take(broker)
    reject(broker, low, "app:bad")
    reject(broker, high, "app:bad")
    assert broker.queue_snapshot(DLQ).bodies == ["low", "high"]  # FIFO: one level
    assert broker.queues[DLQ].options.priorities == 1


# ------------------------------------------------------------------ statistics


def test_statistics_count_rejected_and_dead_lettered() -> None:
    broker = make_broker(max_delivery_count=1)
    for i in range(4):
        broker.publish("q", build_message(i))
    reject(broker, take(broker), "app:bad")
    reject(broker, take(broker), "app:bad")
    entry = take(broker)
    outcome(broker, entry, Modified(delivery_failed=True))
    outcome(broker, take(broker), Modified(delivery_failed=True))  # 2 again: over the limit
    outcome(broker, take(broker), Accepted())  # 3
    nodes = broker.statistics().nodes
    q = nodes["q"]
    assert (q.enqueued, q.delivered, q.rejected, q.modified) == (4, 5, 2, 2)
    assert (q.acknowledged, q.dead_lettered) == (1, 3)
    assert nodes[DLQ].enqueued == 3
    assert broker.queue_snapshot(DLQ).bodies == [0, 1, 2]
    reasons = [m.annotations[REASON] for m in broker.queue_snapshot(DLQ).messages]
    assert reasons == ["app:bad", "app:bad", "MaxDeliveryCountExceeded"]


@pytest.mark.parametrize("max_delivery_count", [0, -1])
def test_invalid_max_delivery_count_is_refused(max_delivery_count: int) -> None:
    with pytest.raises(ValueError, match="max_delivery_count must be >= 1"):
        QueueOptions(max_delivery_count=max_delivery_count)
