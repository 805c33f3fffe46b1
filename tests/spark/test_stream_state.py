"""The streaming reader's settlement logic against a real broker, without Spark (pyspark_minibroker.stream)."""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Iterator

import pytest
from pyspark_minibroker.options import Options, parse_options
from pyspark_minibroker.stream import StreamState, unpack

from minibroker import Client, Message, ThreadedBroker

TIMEOUT = 5.0
START = {"n": 0, "ids": []}


@pytest.fixture
def broker() -> Iterator[ThreadedBroker]:
    with ThreadedBroker() as b:
        for i in range(10):
            b.publish("in", f"m{i}")
        yield b


def options(broker: ThreadedBroker) -> Options:
    return Options(url=broker.url, address="in", max_batch=4, timeout=TIMEOUT)


def texts(batch: list) -> list[str]:
    return [d.message.body for d in batch]


def test_batches_are_settled_when_the_next_read_starts_after_them(broker: ThreadedBroker) -> None:
    state = StreamState(options(broker))
    first, end1 = state.next_batch(START)
    assert texts(first) == ["m0", "m1", "m2", "m3"] and end1["n"] == 4 and len(unpack(end1["ids"])) == 4
    assert broker.queue("in").depth == 10  # acquired, not settled: Spark has not committed
    second, end2 = state.next_batch(end1)
    assert texts(second) == ["m4", "m5", "m6", "m7"]
    broker.wait_for(lambda b: b.queue("in").depth == 6, timeout=TIMEOUT)
    state.settle_through(end2["n"])
    broker.wait_for(lambda b: b.queue("in").depth == 2, timeout=TIMEOUT)
    third, end3 = state.next_batch(end2)
    assert texts(third) == ["m8", "m9"]
    empty, same = state.next_batch(end3)
    assert empty == [] and same == end3  # nothing new: the same offset, as Spark expects


def test_a_new_reader_recognises_the_uncommitted_last_batch_of_the_previous_one(broker: ThreadedBroker) -> None:
    old = StreamState(options(broker))
    _, end1 = old.next_batch(START)
    assert old.client is not None
    old.client.close()  # the query ended before committing its last batch: the broker takes them back
    broker.wait_for(lambda b: b.queue("in").available == 10, timeout=TIMEOUT)
    new = StreamState(options(broker))
    batch, end2 = new.next_batch(end1)
    assert texts(batch) == ["m4", "m5", "m6", "m7"]  # m0-m3 are not handed out again...
    broker.wait_for(lambda b: b.queue("in").depth == 6, timeout=TIMEOUT)  # ...they are accepted
    assert end2["n"] == 8


def test_a_dropped_connection_repeats_nothing(broker: ThreadedBroker) -> None:
    state = StreamState(options(broker))
    first, end1 = state.next_batch(START)
    second, end2 = state.next_batch(end1)  # m4-m7 held for Spark's commit
    assert state.client is not None
    state.client._sock.shutdown(socket.SHUT_RDWR)  # the network drops the connection
    third, end3 = state.next_batch(end2)
    assert texts(third) == ["m8", "m9"]  # m4-m7 came back redelivered and were recognised
    state.settle_through(end3["n"])
    broker.wait_for(lambda b: b.queue("in").depth == 0, timeout=TIMEOUT)
    assert texts(first) + texts(second) + texts(third) == [f"m{i}" for i in range(10)]


def test_replay_browses_the_batch_by_fingerprint(broker: ThreadedBroker) -> None:
    state = StreamState(options(broker))
    batch, end = state.next_batch(START)
    assert state.client is not None
    state.client.close()
    broker.wait_for(lambda b: b.queue("in").available == 10, timeout=TIMEOUT)
    again = StreamState.replay(options(broker), end)
    assert texts(again) == texts(batch)
    assert broker.queue("in").available == 10  # browsing acquires nothing


def test_frozen_reader_stops_at_what_was_there(broker: ThreadedBroker) -> None:
    state = StreamState(options(broker))
    state.freeze()
    broker.publish("in", "later")
    seen: list[str] = []
    start: dict = START
    while True:
        batch, end = state.next_batch(start)
        if not batch:
            break
        seen += texts(batch)
        start = end
    assert seen == [f"m{i}" for i in range(10)]


def test_available_now_holds_one_batch_and_stops_at_the_depth_at_the_trigger(broker: ThreadedBroker) -> None:
    state = StreamState(options(broker))  # maxBatch 4; the queue holds 10
    state.freeze()
    assert state.remaining == 10  # the first fetch's drain answer: 4 taken, 6 more available
    assert len(state.buffer) == 4 and broker.queue("in").acquired == 4  # no whole-backlog prefetch
    broker.publish("in", "later")
    seen: list[str] = []
    start: dict = START
    while True:
        batch, end = state.next_batch(start)
        assert broker.queue("in").acquired <= 8  # the batch Spark has not committed, and this one
        if not batch:
            break
        seen += texts(batch)
        state.settle_through(end["n"])  # Spark commits each batch
        start = end
    assert seen == [f"m{i}" for i in range(10)]  # not "later": it came after the trigger


def lose_dispositions(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """From now on the client's settlements never reach the broker, as when a connection dies with
    them written but unread (a process killed with unread input resets its connections)."""
    lost: list[bytes] = []
    send = Client._send

    def dropping(self: Client, data: bytes) -> None:
        if data[8:11] == b"\x00S\x15":  # frame header, then the disposition's descriptor (0x15, §2.7.6)
            lost.append(data)
            return
        send(self, data)

    monkeypatch.setattr(Client, "_send", dropping)
    return lost


def test_acceptances_lost_with_the_connection_are_recognised_then_and_after_a_restart(
    broker: ThreadedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = StreamState(options(broker))
    first, end1 = state.next_batch(START)
    assert texts(first) == ["m0", "m1", "m2", "m3"]
    lost = lose_dispositions(monkeypatch)
    state.settle_through(end1["n"])  # Spark committed the batch; its acceptance never arrives
    assert lost
    assert state.client is not None
    state.client._sock.shutdown(socket.SHUT_RDWR)  # ...and the connection dies
    second, end2 = state.next_batch(end1)  # a new connection: m0-m3 come back redelivered
    assert texts(second) == ["m4", "m5", "m6", "m7"]  # recognised, not handed out again
    # Their acceptance on the new connection is lost too, and the driver dies before knowing it:
    # the offset Spark checkpointed for the second batch still names them.
    assert state.client is not None
    state.client._sock.shutdown(socket.SHUT_RDWR)
    monkeypatch.undo()
    broker.wait_for(lambda b: b.queue("in").available == 10, timeout=TIMEOUT)
    restarted = StreamState(options(broker))
    third, end3 = restarted.next_batch(end2)  # the query restarted from its checkpoint
    assert texts(third) == ["m8", "m9"]
    restarted.settle_through(end3["n"])
    broker.wait_for(lambda b: b.queue("in").depth == 0, timeout=TIMEOUT)


def test_options_name_what_is_missing_or_wrong() -> None:
    with pytest.raises(ValueError, match="needs option 'url'"):
        parse_options({"address": "q"})
    with pytest.raises(ValueError, match="needs option 'address'"):
        parse_options({"url": "amqp://127.0.0.1:1"})
    with pytest.raises(ValueError, match="'maxBatch' must be at least 1"):
        parse_options({"url": "amqp://127.0.0.1:1", "address": "q", "maxBatch": "0"})
    with pytest.raises(ValueError, match="option 'url'"):
        parse_options({"url": "http://x", "address": "q"})
    with pytest.raises(ValueError, match="'maxBatchBytes' must be at least 1"):
        parse_options({"url": "amqp://127.0.0.1:1", "address": "q", "maxBatchBytes": "0"})
    parsed = parse_options({"url": "amqp://u:p@127.0.0.1:1", "address": "q", "mode": "CONSUME", "timeout": "2.5"})
    assert (parsed.mode, parsed.timeout, parsed.user) == ("consume", 2.5, "u")
    assert (parsed.max_batch, parsed.max_batch_bytes) == (10_000, 16 * 2**20)
    assert "p@" not in parsed.safe_url


def test_a_micro_batch_stops_at_max_batch_bytes_and_the_rest_follow_in_order() -> None:
    """``maxBatchBytes`` bounds what the driver holds per micro-batch, whatever ``maxBatch``: a batch
    takes messages until their bytes reach it; later batches go on in queue order."""
    with ThreadedBroker() as broker:
        bodies = [f"{i:03d}".ljust(1000, "x") for i in range(150)]
        broker.publish_many("big", bodies)
        size = len(Message(body=bodies[0]).encode())  # each message's bytes as sent and delivered
        state = StreamState(Options(url=broker.url, address="big", max_batch=100, max_batch_bytes=10 * size, timeout=TIMEOUT))
        got: list[str] = []
        start: dict = START
        counts = []
        while True:
            batch, start = state.next_batch(start)
            if not batch:
                break
            counts.append(len(batch))
            assert sum(len(d.payload) for d in batch) < 10 * size + size  # the batch stops once it reached the bound
            got += texts(batch)
            state.settle_through(start["n"])
        assert counts == [10] * 15
        assert got == bodies
        broker.wait_for(lambda b: b.queue("big").depth == 0, timeout=TIMEOUT)


def test_fetches_are_sized_by_the_mean_message_so_far() -> None:
    from pyspark_minibroker.ranges import FIRST_WINDOW, fetch_size

    assert fetch_size(10_000, 16 * 2**20, 0, 0) == FIRST_WINDOW  # nothing seen: a small first fetch
    assert fetch_size(10, 2**20, 0, 0) == 10
    assert fetch_size(10_000, 16 * 2**20, 64, 64 * 2**20) == 16  # 1 MiB messages: 16 make the room
    assert fetch_size(10_000, 16 * 2**20, 64, 64 * 300) == 10_000  # small ones: what is wanted
    assert fetch_size(10_000, 100, 1, 2**20) == 1  # at least one, however large


def test_an_offset_keeps_a_batch_compactly_with_the_backlog_after_it() -> None:
    """A micro-batch of 10,000 (the default maxBatch): its offset, written to Spark's offsets log
    and shown in every progress event, took 240 KB as a JSON list of hex fingerprints."""
    with ThreadedBroker() as broker:
        broker.publish_many("big", [f"m{i}" for i in range(10_500)])
        state = StreamState(Options(url=broker.url, address="big", timeout=TIMEOUT))
        batch, end = state.next_batch(START)
        assert len(batch) == 10_000 and len(unpack(end["ids"])) == 10_000
        assert len(json.dumps(end)) < 81_000  # 8 characters a message
        assert end["backlog"] == 500  # the queue's lag after the batch: what the broker said waits
        assert state.client is not None
        state.client.close()


def test_an_offset_written_before_packing_is_still_recognised(broker: ThreadedBroker) -> None:
    """A query restarted from a checkpoint of the previous form (a JSON list of 20 hex digits a
    message) recognises its last batch when it comes back."""
    old = StreamState(options(broker))
    batch, end1 = old.next_batch(START)
    assert old.client is not None
    old.client.close()
    broker.wait_for(lambda b: b.queue("in").available == 10, timeout=TIMEOUT)
    from minibroker.amqp.message import split_sections

    def old_fingerprint(payload: bytes) -> str:
        start, end = split_sections(payload).bare
        return hashlib.sha256(payload[start:end]).hexdigest()[:20]

    previous = {"n": end1["n"], "ids": [old_fingerprint(d.payload) for d in batch]}
    new = StreamState(options(broker))
    again, _ = new.next_batch(previous)
    assert texts(again) == ["m4", "m5", "m6", "m7"]
    broker.wait_for(lambda b: b.queue("in").depth == 6, timeout=TIMEOUT)  # m0-m3 accepted, m4-m7 held
