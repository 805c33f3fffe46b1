"""A broker outage under a read or a write: connections tried again with backoff for option
``reconnectTimeout`` seconds (pyspark_minibroker.retry), without a Spark session."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")  # the spark extra (CI installs it); the README's test command runs without it
from pyspark_minibroker.options import parse_options
from pyspark_minibroker.ranges import OffsetRange, read_range
from pyspark_minibroker.retry import Backoff
from pyspark_minibroker.source import _send_rows

from minibroker import ThreadedBroker
from minibroker.client import ConnectionFailed

TIMEOUT = 5.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def late_broker() -> Iterator[tuple[int, threading.Event, list[ThreadedBroker]]]:
    """A port no broker serves until ``go`` is set; then one does (the broker that came back)."""
    port = free_port()
    go = threading.Event()
    started: list[ThreadedBroker] = []

    def serve_later() -> None:
        go.wait(30)
        broker = ThreadedBroker(port=port).start()
        broker.declare_stream("events")
        broker.publish_many("events", [f"e{i}" for i in range(5)])
        started.append(broker)

    thread = threading.Thread(target=serve_later, daemon=True)
    thread.start()
    yield port, go, started
    go.set()
    thread.join(30)
    for broker in started:
        broker.stop()


def back_after_the_first_pause(monkeypatch: pytest.MonkeyPatch, go: threading.Event) -> list[float]:
    """Let the broker come back once the source has paused once: counted, not timed."""
    pauses: list[float] = []
    pause = Backoff._pause

    def counted(seconds: float) -> None:
        pauses.append(seconds)
        go.set()
        pause(seconds)

    monkeypatch.setattr(Backoff, "_pause", staticmethod(counted))
    return pauses


def test_a_connect_is_tried_again_until_the_broker_is_back(
    late_broker: tuple[int, threading.Event, list[ThreadedBroker]], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, go, started = late_broker
    url = f"amqp://127.0.0.1:{port}"
    with pytest.raises(ConnectionFailed, match=r"option url=.*cannot connect.*tried again for 0 s: option reconnectTimeout"):
        parse_options({"url": url, "address": "events", "reconnectTimeout": "0"}).connect()
    assert not go.is_set()  # no pause at all with reconnectTimeout=0
    pauses = back_after_the_first_pause(monkeypatch, go)
    options = parse_options({"url": url, "address": "events", "reconnectTimeout": "60", "timeout": str(TIMEOUT)})
    assert options.reconnect_timeout == 60
    with options.connect() as client:
        assert client is not None
    assert pauses[:2] == [0.1, 0.2][: len(pauses[:2])] and started  # backoff: 0.1 s, then doubled


def test_a_write_waits_for_the_broker_to_come_back(
    late_broker: tuple[int, threading.Event, list[ThreadedBroker]], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, go, started = late_broker
    pauses = back_after_the_first_pause(monkeypatch, go)
    options = parse_options({"url": f"amqp://127.0.0.1:{port}", "address": "out", "timeout": str(TIMEOUT)})
    sent = _send_rows(options, ["body"], iter([(f"w{i}",) for i in range(7)]), "q-0")
    assert sent.count == 7 and pauses and started[0].queue("out").depth == 7


def test_a_range_read_goes_on_after_its_connection_is_lost() -> None:
    with ThreadedBroker() as broker:
        broker.declare_stream("events")
        broker.publish_many("events", [f"e{i}" for i in range(300)])
        fault = broker.faults.drop_connection("events", after=150, times=1, must_fire=True)
        options = parse_options({"url": broker.url, "address": "events", "timeout": str(TIMEOUT)})
        got = [bytes(row[0]).decode() for rows in read_range(options, OffsetRange("events", 0, 300)) for row in rows.rows]
        assert got == [f"e{i}" for i in range(300)]  # each once, in order, across the lost connection
        assert fault.fired == 1
        none = parse_options({"url": broker.url, "address": "events", "timeout": str(TIMEOUT), "reconnectTimeout": "0"})
        broker.faults.drop_connection("events", after=10, times=1, must_fire=True)
        with pytest.raises(Exception, match="closed|connection|ended"):
            list(read_range(none, OffsetRange("events", 0, 300)))


def test_a_write_keeps_one_chunk_in_flight_while_it_encodes_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    # The writer sends chunk k+1 before it waits for chunk k's outcomes (source._Outbox), so the
    # broker takes a chunk while the next is encoded; the last is waited for before the task ends.
    from pyspark_minibroker import source

    from minibroker.client import Sender

    calls: list[tuple[str, int]] = []
    post, confirm = Sender.post_encoded, Sender.confirm

    def posting(self: Sender, payloads: list[bytes], timeout: float | None = None) -> list[int]:
        ids = post(self, payloads, timeout)
        calls.append(("post", ids[0]))
        return ids

    def confirming(self: Sender, ids: list[int], timeout: float | None = None) -> int:
        calls.append(("confirm", ids[0]))
        return confirm(self, ids, timeout)

    monkeypatch.setattr(Sender, "post_encoded", posting)
    monkeypatch.setattr(Sender, "confirm", confirming)
    monkeypatch.setattr(source, "SEND_CHUNK", 10)
    with ThreadedBroker() as broker:
        options = parse_options({"url": broker.url, "address": "out", "timeout": str(TIMEOUT)})
        sent = _send_rows(options, ["body"], iter([(f"w{i}",) for i in range(30)]), "q-0")
        assert sent.count == 30 and broker.queue("out").depth == 30
    assert calls == [
        ("post", 0), ("post", 10), ("confirm", 0), ("post", 20), ("confirm", 10), ("confirm", 20),
    ]  # fmt: skip


def test_a_write_sends_every_chunk_in_flight_again_after_a_lost_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    # The connection drops after 25 messages, with one or two chunks in flight (sent, not
    # confirmed): they go again on the new connection, under the same message-ids; the first
    # chunk, confirmed before the next one was waited for, is not sent again.
    from pyspark_minibroker import source

    monkeypatch.setattr(source, "SEND_CHUNK", 10)
    with ThreadedBroker() as broker:
        broker.declare_queue("out")
        fault = broker.faults.drop_connection("out", after=25, times=1, must_fire=True)
        options = parse_options({"url": broker.url, "address": "out", "timeout": str(TIMEOUT)})
        sent = _send_rows(options, ["body"], iter([(f"w{i}",) for i in range(50)]), "q-0")
        assert sent.count == 50 and fault.fired == 1
        ids = [m.properties.message_id for m in broker.queue("out").messages]
    assert set(ids) == {f"q-0-0-{i}" for i in range(50)} and len(ids) > 50
    assert all(ids.count(f"q-0-0-{i}") == 1 for i in range(10))
