"""Reading streams by offset range: what the driver asks the broker, and what an executor task reads.

A stream (RabbitMQ 4 streams; minibroker's ``declare_stream``) is read over plain AMQP 1.0, with
nothing specific to minibroker: a receiving link whose source carries the filter
``rabbitmq:stream-offset-spec`` starts at an offset, and every delivery carries its offset in the
message annotation ``x-stream-offset``.  So:

* the driver learns a stream's bounds from the link properties of the broker's attach of a reader
  (``x-stream-first-offset``, ``x-stream-next-offset``: minibroker's, which tell them even for a
  stream that retains nothing), else by attaching at ``"first"`` and at ``"last"`` and reading
  one message's offset each (:func:`bounds`);
* a micro-batch from offset ``start`` to ``end`` (exclusive) is split into ranges of at most
  ``maxOffsetsPerPartition`` offsets, and into at least ``minPartitions`` ranges when given
  (:func:`plan`), each read by one task, anywhere;
* a task attaches at its range's first offset, grants credit for exactly what is left of its
  range, and stops at the range's end (:func:`read_range`).  Nothing is acknowledged (reading a
  stream removes nothing; the deliveries arrive settled), so a failed task is simply run again.

Spark's checkpoint holds the offsets (one next offset per address), so a restarted query reads
each range again exactly: every message once in the sink, with nothing held on the driver.
Offsets the stream no longer retains when a task reads its range (retention dropped them) fail
the task with :class:`DataLost`, as Kafka's ``failOnDataLoss`` does by default; with that
option false the range is read from the first retained offset.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from minibroker.client import Client, Delivery, LinkDetached, Receiver

from .columns import Rows
from .options import Options
from .retry import LOST, Backoff

__all__ = [
    "FIRST_OFFSET_PROPERTY", "NEXT_OFFSET_PROPERTY", "Bounds", "DataLost", "FetchWindow", "OffsetRange", "batch_spans",
    "bounds", "fetch_size", "is_stream", "plan", "read_range", "split", "starting_offsets", "went_back",
]  # fmt: skip

log = logging.getLogger("pyspark_minibroker")

#: Messages asked for per fetch while reading a range, at most (one Arrow batch each).
WINDOW = 1000
#: About how many bytes of messages one fetch brings: after the first fetch, of
#: :data:`FIRST_WINDOW` messages, the window is sized by the messages' mean size so far, so what
#: a task holds (a fetch's rows and the next fetch's messages) stays near this whatever their size.
WINDOW_BYTES = 8 * 1024 * 1024
FIRST_WINDOW = 64


def fetch_size(wanted: int, room: int, count: int, size: int) -> int:
    """How many messages to fetch next, at most ``wanted``: :data:`FIRST_WINDOW` before any came
    (``count`` 0), then as many as make ``room`` bytes at the mean size of the ``count`` messages
    of ``size`` bytes so far, at least one.  What bounds a reader's memory by bytes, whatever
    the messages' size (a fetch's messages all arrive before the reader sees any)."""
    if not count:
        return min(wanted, FIRST_WINDOW)
    return max(1, min(wanted, room * count // max(1, size)))


class FetchWindow:
    """The deliveries a reader fetched so far and their bytes, which size its next fetch."""

    def __init__(self) -> None:
        self.count = self.bytes = 0

    def size(self, wanted: int, room: int) -> int:
        """How many to fetch next: at most ``wanted``, about ``room`` bytes (:func:`fetch_size`)."""
        return fetch_size(wanted, room, self.count, self.bytes)

    def took(self, deliveries: list[Delivery]) -> None:
        self.count += len(deliveries)
        self.bytes += sum(len(d.payload) for d in deliveries)


#: The link properties in which minibroker's attach of a stream reader states the stream's first
#: retained offset and its next offset (Part 2 §2.7.3; docs/streams.md).
FIRST_OFFSET_PROPERTY = "x-stream-first-offset"
NEXT_OFFSET_PROPERTY = "x-stream-next-offset"


@dataclass(frozen=True)
class Bounds:
    """A stream's first retained offset and its next offset (what the next append gets), if known:
    both None when it retains nothing and the broker does not say its offsets; equal when the
    broker says them and the stream retains nothing."""

    first: int | None
    next: int | None


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``start`` (inclusive) to ``end`` (exclusive) of one address: one task's work."""

    address: str
    start: int
    end: int


def _stated(receiver: Receiver) -> Bounds | None:
    """The bounds the broker's attach states in its link properties, or None when it states none."""
    stated = receiver.properties
    first, after = stated.get(FIRST_OFFSET_PROPERTY), stated.get(NEXT_OFFSET_PROPERTY)
    if isinstance(first, int) and isinstance(after, int) and 0 <= first <= after:
        return Bounds(first, after)
    return None


def _one_offset(receiver: Receiver, timeout: float) -> int | None:
    try:
        got = receiver.fetch(1, timeout)
    finally:
        receiver.close(timeout)
    return got[0].offset if got else None


def bounds(options: Options, address: str) -> Bounds:
    """The stream's first retained offset and next offset: one attach when the broker states them
    (minibroker), else the offsets of the messages at ``first`` and ``last`` (RabbitMQ 4), each
    None when the stream retains nothing."""
    timeout = options.timeout
    with options.connect() as client:
        receiver = client.receiver(address, offset="first", credit=1, timeout=timeout)
        stated = _stated(receiver)
        if stated is not None:
            receiver.close(timeout)
            return stated
        first = _one_offset(receiver, timeout)
        last = _one_offset(client.receiver(address, offset="last", credit=1, timeout=timeout), timeout)
    return Bounds(first, None if last is None else last + 1)


def is_stream(options: Options, address: str) -> bool:
    """Whether ``address`` is a stream: the broker takes a reader with an offset spec there.

    minibroker refuses the ``rabbitmq:stream-*`` filters on a queue; a broker that would take
    them on a queue needs the ``kind`` option instead of this probe.
    """
    with options.connect() as client:
        try:
            client.receiver(address, offset="next", credit=1, timeout=options.timeout).close(options.timeout)
        except LinkDetached:
            return False
    return True


class DataLost(RuntimeError):
    """Offsets a task was to read are no longer retained, or a stream's offsets went backwards
    (option ``failOnDataLoss``, default true)."""


def went_back(options: Options, address: str, begin: int, found: Bounds, whose: str) -> int | None:
    """Where a read at offset ``begin`` of stream ``address`` goes on when the stream's next offset
    (``found``) is below ``begin``, else None.

    A stream's offsets only grow, so a next offset below one a reader already reached means
    the stream is another one now: deleted and declared again, or its broker restarted without
    its messages, its offsets restarting at 0.  Waiting for it to pass ``begin`` would skip its
    first offsets without a word, so this raises :class:`DataLost` naming both offsets, as
    Kafka's source reports a partition whose offsets went backwards ("offset was changed from X
    to Y, some data may have been missed"); with ``failOnDataLoss`` false it logs a warning and
    gives the stream's first retained offset, from which the read goes on.  ``whose`` says where
    ``begin`` came from.  A stream that retains nothing on a broker that does not state its
    offsets (``found.next`` None) cannot tell: nothing is flagged.
    """
    if found.next is None or found.next >= begin:
        return None
    first = found.first if found.first is not None else found.next
    what = (
        f"amqp data source: the offsets of stream {address!r} went backwards: its next offset is {found.next}, "
        f"below offset {begin} {whose}. It was likely deleted and declared again, or its broker restarted "
        f"without its messages, so messages may have been missed (any the old stream had from offset {begin} on)"
    )
    if options.fail_on_data_loss:
        raise DataLost(
            f"{what}; set option failOnDataLoss to 'false' to go on from its first retained offset ({first}) instead"
        )
    log.warning("%s; going on from its first retained offset (%d), as option failOnDataLoss is false", what, first)
    return first


def _given(spec: str | None) -> dict[str, Any]:
    """The offsets per address of a JSON ``startingOffsets``/``endingOffsets`` (none for a word)."""
    return {} if spec is None or spec in ("earliest", "latest") else dict(json.loads(spec))


def starting_offsets(options: Options) -> dict[str, int]:
    """Where a new query starts, per address: ``earliest`` (the first retained; the default),
    ``latest`` (the next to come) or a JSON object of offsets per address (``{"events": 120}``;
    others: earliest)."""
    spec = options.starting_offsets
    given = _given(spec)
    start: dict[str, int] = {}
    for address in options.addresses:
        if address in given:
            start[address] = int(given[address])
            continue
        found = bounds(options, address)
        if spec == "latest":
            start[address] = found.next if found.next is not None else 0
        else:
            start[address] = found.first if found.first is not None else 0
    return start


def batch_spans(options: Options) -> dict[str, tuple[int, int]]:
    """What a batch read of streams reads, per address: from ``startingOffsets`` (``earliest``, the
    default, or JSON) to before ``endingOffsets`` (``latest``, the default: the next offset when
    the read is planned, or JSON, at most that), as Kafka's batch queries are bounded.  A span
    whose start is at its end or past it is left out, except a start past the stream's next
    offset: the stream's offsets went backwards since that offset was read (:func:`went_back`:
    an error, or the first retained offset with ``failOnDataLoss`` false), where Kafka's batch
    query leaves such a partition out without a word."""
    if options.starting_offsets == "latest":
        raise ValueError(
            "option startingOffsets='latest' reads nothing in a batch read (as in Kafka's batch queries): "
            "use 'earliest' or a JSON object of offsets per address"
        )
    starts, ends = _given(options.starting_offsets), _given(options.ending_offsets)
    spans: dict[str, tuple[int, int]] = {}
    for address in options.addresses:
        found = bounds(options, address)
        if found.next is None:
            continue  # retains nothing: nothing to read
        start = int(starts[address]) if address in starts else found.first
        if start is None:
            continue
        restart = went_back(options, address, start, found, "at which option startingOffsets starts this read")
        start = start if restart is None else restart
        end = min(int(ends[address]), found.next) if address in ends else found.next
        if start < end:
            spans[address] = (start, end)
    return spans


def split(address: str, start: int, end: int, size: int) -> list[OffsetRange]:
    """``start``..``end`` in ranges of at most ``size`` offsets (none when the range is empty)."""
    return [OffsetRange(address, low, min(low + size, end)) for low in range(start, end, size)]


def plan(options: Options, spans: dict[str, tuple[int, int]]) -> list[OffsetRange]:
    """The tasks' ranges for ``start``..``end`` offsets per address: at most ``maxOffsetsPerPartition``
    offsets each, and smaller when that makes at least ``minPartitions`` ranges of the whole."""
    size = options.max_offsets_per_partition
    if options.min_partitions:
        total = sum(max(0, end - start) for start, end in spans.values())
        size = max(1, min(size, -(-total // options.min_partitions)))
    return [piece for address, (start, end) in spans.items() for piece in split(address, start, end, size)]


def _lost(options: Options, piece: OffsetRange, start: int, found: int) -> None:
    """Offsets ``start`` to ``found`` (exclusive) of the range were dropped by retention: fail
    with :class:`DataLost` unless ``failOnDataLoss`` is false."""
    if found > start and options.fail_on_data_loss:
        raise DataLost(
            f"amqp data source: offsets {start} to {found - 1} of stream {piece.address!r} are no longer retained "
            f"(its retention dropped them before this read of {piece.start} to {piece.end - 1} got to them); "
            "set option failOnDataLoss to 'false' to read on from the first retained offset instead"
        )


def read_range(options: Options, piece: OffsetRange, rows: Rows | None = None) -> Iterator[Rows]:
    """The rows of one range's messages in offset order, a fetch at a time.  The same
    :class:`Rows` (``rows``, or a new one) comes back each time, with the next rows.

    Offsets no longer retained (the broker starts a reader at an offset it dropped from its first
    retained one) raise :class:`DataLost`, or are skipped when ``failOnDataLoss`` is false: checked
    once, on the range's first fetch, not per message (retention drops a stream's head, and a
    stream's offsets are consecutive, so the first offset that came tells); and when a fetch
    brings nothing while offsets of the range are left (retention dropped them and nothing newer
    was appended, so no later offset comes to tell).

    A lost connection (a broker restart or outage) is not the end of the range: the read goes on
    from the next offset it has no row of, on a new connection, tried with backoff for
    ``reconnectTimeout`` seconds (:mod:`.retry`); the rows made before the loss are kept, so each
    message still gives one row."""
    rows = Rows() if rows is None else rows
    window = fetch_size(WINDOW, WINDOW_BYTES, 0, 0)
    taken = 0  # messages fetched (rows.taken_bytes: their bytes)
    backoff = Backoff(options.reconnect_timeout)
    client: Client | None = None
    receiver: Receiver | None = None
    rows.read_stream(piece.address, piece.start, piece.end)
    try:
        while rows.next < piece.end:
            try:
                if receiver is None:
                    client = options.connect(backoff)
                    receiver = client.receiver(piece.address, offset=rows.next, credit=window, timeout=options.timeout,
                                               desired_capabilities=rows.DESIRED_CAPABILITIES)
                # Exactly what is left of the range (a drain: the broker says when it has no more),
                # each message made a row as it arrives.
                got = receiver.fetch_into(min(window, piece.end - rows.next), rows.take, options.timeout)
            except LOST:
                if client is not None:
                    client.close(timeout=0.5)
                client = receiver = None
                if not backoff.wait():
                    raise
                continue
            backoff.reset()
            if not got:
                # Every offset of a range was appended before it was planned (a range ends at most at
                # the stream's next offset then), so a drain that brings none of the rest means
                # retention (or a purge) dropped them, with nothing newer to start from instead.
                _lost(options, piece, rows.next, piece.end)
                break
            if not taken:  # the first offset that came: how far the fetch moved less the rows it made
                _lost(options, piece, piece.start, min(rows.next, piece.end) - len(rows))
            taken += got
            window = fetch_size(WINDOW, WINDOW_BYTES, taken, rows.taken_bytes)
            if rows.next < piece.end:
                try:
                    # The next fetch's messages come while Spark takes these (at most what is left).
                    receiver.prefetch(min(window, piece.end - rows.next))
                except LOST:
                    receiver = None  # the next fetch finds out, on a new connection
            if rows:
                yield rows
                rows.clear()
        if rows:
            yield rows  # what a lost fetch had made before the range found its end
        if receiver is not None:
            try:
                receiver.close(options.timeout)
            except LOST:
                pass  # every row is made: the link's end no longer matters
    finally:
        if client is not None:
            client.close(timeout=1)
