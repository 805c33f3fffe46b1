"""Queue.put's direct hand-off is what enqueue followed by dispatch does (Part 3 §3.2.1, §3.4, §3.5.3).

With nothing else waiting and no browser, put() gives a new message straight to the next consumer
in turn with credit that takes it, skipping the FIFO, the expiry index and dispatch.  Two queues
run the same operations, one publishing with put() and one with enqueue() then dispatch(): every
consumer must get the same messages in the same order with the same delivery-counts, and the
queues must end with the same contents and counters, whatever the priorities, TTLs, selectors,
credit (also credit the queue is not told of until its next dispatch), browsers and outcomes in
between.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from minibroker.api import build_message
from minibroker.broker.config import QueueOptions
from minibroker.broker.queue import Queue
from minibroker.broker.statistics import NodeCounters
from minibroker.broker.stored import ACQUIRED, Entry, StoredMessage

T0 = 1_700_000_000.0


class Consumer:
    """A consumer with credit and an optional selector on the message's priority parity."""

    def __init__(self, link_id: int, credit: int, browse: bool, parity: int | None) -> None:
        self.link_id = link_id
        self.browse = browse
        self.link_credit = credit
        self.parity = parity
        self.delivered: list[Entry] = []

    def credit(self) -> int:
        return self.link_credit

    def accepts(self, entry: Entry) -> bool:
        if entry.undeliverable is not None and self.link_id in entry.undeliverable:
            return False
        return self.parity is None or entry.message.priority % 2 == self.parity

    def deliver(self, entry: Entry) -> None:
        assert self.link_credit > 0
        self.link_credit -= 1
        self.delivered.append(entry)

    def held(self) -> list[Entry]:
        return [entry for entry in self.delivered if entry.state == ACQUIRED and entry.owner is self]


publish = st.tuples(st.just("publish"), st.integers(0, 9), st.sampled_from([None, None, 0.5, 3.0]))
operations = st.lists(
    st.one_of(
        publish,
        publish,
        st.tuples(st.just("attach"), st.integers(0, 3), st.booleans(), st.sampled_from([None, None, 0, 1])),
        st.tuples(st.just("credit"), st.integers(0, 7), st.integers(1, 3)),
        st.tuples(st.just("quiet-credit"), st.integers(0, 7), st.integers(1, 3)),
        st.tuples(
            st.just("outcome"), st.integers(0, 7), st.sampled_from(["accept", "release", "modify", "refuse"])
        ),
        st.tuples(st.just("detach"), st.integers(0, 7)),
        st.tuples(st.just("tick"), st.sampled_from([0.25, 1.0, 4.0])),
    ),
    min_size=10,
    max_size=80,
)


def run(ops: list[tuple[Any, ...]], priorities: int, default_ttl: float | None, handoff: bool) -> Any:
    queue = Queue("q", QueueOptions(priorities=priorities, default_ttl=default_ttl), NodeCounters())
    consumers: list[Consumer] = []
    now = T0
    sent = 0
    for op in ops:
        kind = op[0]
        if kind == "publish":
            sent += 1
            fields: dict[str, Any] = {"priority": op[1]}
            if op[2] is not None:
                fields["ttl"] = op[2]
            message = StoredMessage(build_message(sent, **fields).encode(), now)
            if handoff:
                queue.put(message, now)
            elif queue.enqueue(message, now) is not None:
                queue.dispatch(now)
        elif kind == "attach":
            consumer = Consumer(len(consumers) + 1, op[1], op[2], op[3])
            consumers.append(consumer)
            queue.add_consumer(consumer)
            queue.dispatch(now)
        elif kind == "credit" and consumers:
            consumers[op[1] % len(consumers)].link_credit += op[2]
            queue.dispatch(now)
        elif kind == "quiet-credit" and consumers:
            # Credit the queue is not told of (a consumer's output or session window drains before
            # the broker dispatches again): messages may wait while a consumer could take them.
            consumers[op[1] % len(consumers)].link_credit += op[2]
        elif kind == "outcome" and consumers:
            consumer = consumers[op[1] % len(consumers)]
            held = consumer.held()
            if held:
                entry = held[0]
                if op[2] == "accept":
                    queue.accept(entry)
                elif op[2] == "release":
                    queue.release(entry, now)
                else:  # modified: delivery-failed, and undeliverable-here for "refuse"
                    queue.modify(entry, now, True, op[2] == "refuse", None, consumer.link_id)
                queue.dispatch(now)
        elif kind == "detach" and consumers:
            consumer = consumers.pop(op[1] % len(consumers))
            queue.remove_consumer(consumer)
            for entry in consumer.held():
                queue.modify(entry, now, True, False, None, None)
            queue.dispatch(now)
        elif kind == "tick":
            now += op[1]
            queue.expire(now)
            queue.dispatch(now)
    got = [[(entry.seq, entry.delivery_count) for entry in consumer.delivered] for consumer in consumers]
    contents = [(entry.seq, entry.state, entry.delivery_count) for entry in queue.entries()]
    return got, contents, queue.counters.freeze(), queue.depth, queue.available_count, queue.bytes


@settings(max_examples=400, deadline=None)
# A consumer detached after the last turn, a publish no consumer takes, then credit and a new
# consumer: put must leave the next turn where dispatch leaves it (found by Hypothesis).
@example(
    ops=[
        ("detach", 0), ("publish", 0, None), ("publish", 0, None), ("attach", 3, False, None),
        ("attach", 0, False, None), ("publish", 0, None), ("detach", 1), ("publish", 0, None),
        ("quiet-credit", 0, 1), ("attach", 1, False, None),
    ],
    priorities=1,
    default_ttl=None,
)
@given(ops=operations, priorities=st.sampled_from([1, 3, 10]), default_ttl=st.sampled_from([None, 2.0]))
def test_put_delivers_as_enqueue_then_dispatch(
    ops: list[tuple[Any, ...]], priorities: int, default_ttl: float | None
) -> None:
    assert run(ops, priorities, default_ttl, handoff=True) == run(ops, priorities, default_ttl, handoff=False)
