"""Unit tests of :class:`minibroker.broker.streamlog.StreamLog`: offsets, seeking, retention.

No broker, no clock but numbers passed in.  A Hypothesis state machine checks
the log against a plain list of (offset, time, size) under appends, time
passing and seeks.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from minibroker.api import build_message
from minibroker.broker.config import StreamOptions
from minibroker.broker.stored import Entry, StoredMessage
from minibroker.broker.streamlog import Instant, StreamLog, interval_seconds

T0 = 1_700_000_000.0


def stored(body: Any, now: float = T0) -> StoredMessage:
    return StoredMessage(build_message(body).encode(), now)


def bodies(log: StreamLog, start: int = 0, limit: int = 1_000_000) -> list[Any]:
    return [message.decode().body for _offset, message in log.read(start, limit)]


def test_offsets_start_at_zero_and_follow_each_other() -> None:
    log = StreamLog()
    assert (log.first_offset, log.next_offset, log.count) == (0, 0, 0)
    assert [log.append(stored(i), T0) for i in range(3)] == [0, 1, 2]
    assert (log.first_offset, log.next_offset, log.count) == (0, 3, 3)
    assert log.get(1) is not None and log.get(1).decode().body == 1  # type: ignore[union-attr]
    assert log.get(3) is None and log.get(-1) is None


def test_reading_removes_nothing_and_two_readers_see_everything() -> None:
    log = StreamLog()
    for i in range(5):
        log.append(stored(i), T0)
    assert bodies(log) == [0, 1, 2, 3, 4]
    assert bodies(log, 2, 2) == [2, 3]
    assert bodies(log) == [0, 1, 2, 3, 4]
    assert log.count == 5


def test_start_specs() -> None:
    log = StreamLog()
    assert [log.start(s) for s in ("first", "last", "next")] == [0, 0, 0]
    for i in range(10):
        log.append(stored(i), T0 + i)
    assert log.start("first") == 0
    assert log.start("last") == 9
    assert log.start("next") == 10
    assert log.start(4) == 4
    assert log.start(10_000) == 10  # past the end: waits for the next message
    assert log.start(Instant(T0 + 3)) == 3  # the first appended at or after it
    assert log.start(Instant(T0 + 3.5)) == 4
    assert log.start(Instant(T0 - 100)) == 0
    assert log.start(Instant(T0 + 100)) == 10
    with pytest.raises(ValueError, match="offset spec is 'first', 'last', 'next'"):
        log.start("latest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="offset spec"):
        log.start(True)  # type: ignore[arg-type]


def test_time_stays_sorted_when_the_clock_steps_back() -> None:
    log = StreamLog()
    log.append(stored("a"), T0 + 10)
    log.append(stored("b"), T0 + 5)  # the wall clock stepped back: recorded as T0 + 10
    log.append(stored("c"), T0 + 20)
    assert log.appended_at(1) == T0 + 10
    assert log.start(Instant(T0 + 10)) == 0
    assert log.start(Instant(T0 + 11)) == 2


def test_max_bytes_drops_oldest_and_keeps_the_newest() -> None:
    size = len(stored(0).payload)
    log = StreamLog(StreamOptions(max_bytes=size * 3))
    for i in range(10):
        log.append(stored(i), T0)
        assert log.bytes <= size * 3
    assert (log.first_offset, log.next_offset) == (7, 10)
    assert bodies(log) == [7, 8, 9]
    assert log.dropped == 7
    assert log.get(6) is None
    assert log.start("first") == 7
    assert log.start(2) == 7  # a position that was dropped continues at the first retained offset


def test_a_message_larger_than_max_bytes_stays_until_the_next_arrives() -> None:
    log = StreamLog(StreamOptions(max_bytes=10))
    log.append(stored("x" * 100), T0)
    assert log.count == 1 and log.bytes > 10
    log.append(stored("y" * 100), T0)
    assert log.count == 1 and bodies(log) == ["y" * 100]


def test_max_age_on_the_clock_passed_in() -> None:
    log = StreamLog(StreamOptions(max_age=60))
    log.append(stored("old"), T0)
    log.append(stored("new"), T0 + 30)
    assert log.next_expiry() == T0 + 60
    assert log.trim(T0 + 59.9) == 0
    assert log.trim(T0 + 60) == 1
    assert bodies(log) == ["new"] and log.first_offset == 1
    assert log.next_expiry() == T0 + 90
    # Appending also applies retention.
    log.append(stored("newest"), T0 + 200)
    assert bodies(log) == ["newest"] and log.first_offset == 2
    assert log.trim(T0 + 260) == 1
    assert log.count == 0 and log.next_expiry() is None
    assert log.start("first") == log.start("next") == log.start("last") == 3


def test_compaction_keeps_offsets_and_frees_dropped_messages() -> None:
    log = StreamLog(StreamOptions(max_bytes=len(stored("00000").payload) * 10))
    for i in range(5000):
        log.append(stored(f"{i:05}"), T0 + i)
    assert (log.first_offset, log.next_offset) == (4990, 5000)
    assert bodies(log, 0, 3) == ["04990", "04991", "04992"]
    assert log.start(Instant(T0 + 4995)) == 4995
    # Compaction has cut the dropped prefix: the arrays hold far fewer slots than were appended.
    assert len(log._messages) < 2 * 1024 + 10
    assert all(m is not None for m in log._messages[log._head :])
    assert all(m is None for m in log._messages[: log._head])


def test_clear_keeps_offsets_going() -> None:
    log = StreamLog()
    for i in range(3):
        log.append(stored(i), T0)
    assert log.clear() == 3
    assert (log.first_offset, log.next_offset, log.count, log.bytes) == (3, 3, 0, 0)
    assert log.append(stored("a"), T0) == 3


def test_seek_is_a_binary_search_not_a_scan() -> None:
    log = StreamLog()
    message = stored("m")
    for i in range(100_000):
        log.append(message, T0 + i / 1000)

    class CountingTimes:
        """Wraps the time array and counts how many entries a seek reads."""

        def __init__(self, times: Any) -> None:
            self.times, self.reads = times, 0

        def __len__(self) -> int:
            return len(self.times)

        def __getitem__(self, index: int) -> float:
            self.reads += 1
            return float(self.times[index])

    counting = CountingTimes(log._times)
    log._times = counting  # type: ignore[assignment]
    assert log.start(Instant(T0 + 99.990)) == 99_990
    assert counting.reads <= 20  # log2(100,000) < 17


def test_memory_per_message_is_below_a_queue_entry() -> None:
    """A retained message costs its list slot and 8 bytes of time: less than a queue's Entry object alone."""
    log = StreamLog()
    message = stored("m")
    entry = Entry(1, message, 4, None)
    for _ in range(10_000):
        log.append(message, T0)
    per_message = (sys.getsizeof(log._messages) + sys.getsizeof(log._times)) / 10_000
    assert per_message < sys.getsizeof(entry)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("7D", 7 * 86400), ("12h", 43200), ("30m", 1800), ("5s", 5), ("1Y", 365 * 86400), ("2M", 60 * 86400)],
)
def test_intervals(text: str, seconds: int) -> None:
    assert interval_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "7", "D", "7d", "1.5h", "-1h", "first", "7D "])
def test_not_intervals(text: str) -> None:
    assert interval_seconds(text) is None


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="max_bytes must be a positive number"):
        StreamOptions(max_bytes=0)
    with pytest.raises(ValueError, match="max_age must be a positive number of seconds"):
        StreamOptions(max_age=-1)


class LogAgainstModel(RuleBasedStateMachine):
    """The log against a list of (offset, time, size): retention and seeks agree."""

    def __init__(self) -> None:
        super().__init__()
        self.max_bytes = 400
        self.max_age = 50.0
        self.log = StreamLog(StreamOptions(max_bytes=self.max_bytes, max_age=self.max_age))
        self.model: list[tuple[int, float, int]] = []
        self.now = T0
        self.next = 0

    def _retain(self) -> None:
        self.model = [m for m in self.model if m[1] > self.now - self.max_age]
        while len(self.model) > 1 and sum(m[2] for m in self.model) > self.max_bytes:
            self.model.pop(0)

    @rule(body=st.binary(max_size=120))
    def append(self, body: bytes) -> None:
        message = stored(body, self.now)
        assert self.log.append(message, self.now) == self.next
        self.model.append((self.next, self.now, len(message.payload)))
        self.next += 1
        self._retain()

    @rule(seconds=st.floats(min_value=0, max_value=40))
    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.log.trim(self.now)
        self._retain()

    @rule(back=st.floats(min_value=0, max_value=60))
    def seek_time(self, back: float) -> None:
        at = self.now - back
        expected = next((o for o, t, _s in self.model if t >= at), self.next)
        assert self.log.start(Instant(at)) == expected

    @rule(offset=st.integers(min_value=0, max_value=200))
    def seek_offset(self, offset: int) -> None:
        first = self.model[0][0] if self.model else self.next
        assert self.log.start(offset) == min(max(offset, first), self.next)

    @invariant()
    def agrees(self) -> None:
        assert [o for o, _t, _s in self.model] == [o for o, _m in self.log.read(0, 10_000)]
        assert self.log.bytes == sum(m[2] for m in self.model)
        assert self.log.next_offset == self.next


TestLogAgainstModel = LogAgainstModel.TestCase
TestLogAgainstModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
