"""The ``amqp`` PySpark data source: batch and streaming reads and writes of AMQP 1.0 queues and streams.

A stream is read by offset ranges on executors (:mod:`.ranges`: ``DataSourceStreamReader``, with
Spark's checkpoint holding the offsets); a queue by the driver-side simple reader (:mod:`.stream`).

Readers and writers keep only plain values (:class:`~.options.Options`) so Spark
can pickle them; connections are opened inside ``read``/``write`` (or lazily by
the driver-side stream reader) and never pickled.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    SimpleDataSourceStreamReader,
    WriterCommitMessage,
)

# Spark 4.2+ (the spark extra's floor): without SupportsTriggerAvailableNow, trigger(availableNow=True)
# reads one batch only; read limits (maxOffsetsPerTrigger) came in the same release.
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from minibroker.amqp.message import Message
from minibroker.client import Client, ClientTimeout, ConnectionClosed, Delivery, LinkDetached, Sender

from .columns import Rows
from .options import Options, parse_options
from .positions import PositionRows
from .ranges import (
    FetchWindow,
    OffsetRange,
    batch_spans,
    bounds,
    is_stream,
    plan,
    read_range,
    starting_offsets,
    went_back,
)
from .rows import (
    POSITION_SCHEMA,
    READ_FIELDS,
    READ_SCHEMA,
    WRITE_COLUMNS,
    bad_record_message,
    message_from_row,
    plain_row,
    projection,
    row_digest,
)
from .stream import StreamState

__all__ = ["AmqpDataSource"]

#: Messages sent per pipelined batch by a writer before it waits for their outcomes, and about
#: how many bytes of them (a batch ends after the message that reaches it): what a lost
#: connection makes it resend.  Each wait is a round trip to the broker, which on a busy machine
#: costs a scheduling delay of both processes: 500 messages a batch cost a 200,000-row write 400
#: of them; 5,000 cost 40, and the bytes bound keeps a batch of large rows small.
SEND_CHUNK = 5000
SEND_CHUNK_BYTES = 4 * 1024 * 1024

log = logging.getLogger("pyspark_minibroker")


class AmqpDataSource(DataSource):
    """``spark.read.format("amqp")`` / ``df.write.format("amqp")``, batch and streaming.

    Options (:data:`.options.OPTIONS`, documented in docs/spark.md; any other is refused):
    ``url`` (``amqp://[user:password@]host:port``) and ``address`` (required), ``mode``
    (``browse`` default, or ``consume``; batch reads), ``maxBatch`` and ``maxBatchBytes``
    (queues), ``timeout``, ``retries``, ``user``, ``password``, ``kind``, and for streams
    ``startingOffsets``, ``endingOffsets`` (batch reads), ``failOnDataLoss`` and the
    partitioning options; ``includePosition`` (reads: the position columns),
    ``reconnectTimeout`` (outages, :mod:`.retry`); ``onBadRecord`` and ``deadLetterAddress`` for writes.
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed = parse_options(options)

    @classmethod
    def name(cls) -> str:
        return "amqp"

    def schema(self) -> str:
        return f"{READ_SCHEMA}, {POSITION_SCHEMA}" if self.parsed.include_position else READ_SCHEMA

    def _kind(self) -> str:
        """``stream`` or ``queue``: the ``kind`` option, else learned by attaching (driver side).
        A queue read refuses the options that bound streams by offset."""
        options = self.parsed
        kind = options.kind or ("stream" if is_stream(options, options.addresses[0]) else "queue")
        if kind == "queue" and len(options.addresses) > 1:
            raise ValueError(f"option 'address' lists several addresses {options.addresses}; only streams read several")
        if kind == "queue" and (options.starting_offsets is not None or options.ending_offsets is not None):
            raise ValueError(
                f"options startingOffsets and endingOffsets bound reads of streams; {options.address!r} is a queue "
                "(a queue has no offsets): leave them out, or read a stream"
            )
        return kind

    def reader(self, schema: StructType) -> DataSourceReader:
        if self._kind() == "stream":
            return _StreamBatchReader(self.parsed, _shape(schema))
        return _BatchReader(self.parsed, _shape(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A stream is read by offset ranges on executors; for a queue Spark falls back to the
        driver-side :meth:`simpleStreamReader` (it does so only on ``PySparkNotImplementedError``)."""
        if self.parsed.ending_offsets is not None:
            raise ValueError(
                "option 'endingOffsets' bounds batch reads only (as in Kafka); a streaming query reads on: "
                "use .trigger(availableNow=True) to stop at what is there when it starts"
            )
        if self._kind() == "queue":
            raise PySparkNotImplementedError(errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "streamReader"})
        return _OffsetStreamReader(self.parsed, _shape(schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        columns = _columns(schema)
        return (_BodyBatchWriter if columns == ["body"] else _BatchWriter)(self.parsed, columns)

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        return _StreamReader(self.parsed, _shape(schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        columns = _columns(schema)
        return (_BodyStreamWriter if columns == ["body"] else _StreamWriter)(self.parsed, columns, uuid.uuid4().hex[:12])


def _columns(schema: StructType) -> list[str]:
    names = [f.name for f in schema.fields]
    unknown = sorted(set(names) - set(WRITE_COLUMNS))
    if "body" not in names or unknown:
        raise ValueError(
            f"the amqp data source writes rows with a 'body' column (string or binary) and optional "
            f"{list(WRITE_COLUMNS[1:])}; got columns {names}"
            + (f" (unknown: {unknown}; select or rename them first)" if unknown else "")
        )
    return names


# --------------------------------------------------------------------------- batch read


@dataclass(frozen=True)
class _Shape:
    """What reads hand Spark for the schema it asked for: ``pyarrow.RecordBatch``es of ``arrow``
    holding the READ_SCHEMA columns at ``columns`` (None: all of them, READ_SCHEMA itself)."""

    arrow: Any
    columns: tuple[int, ...] | None

    @property
    def positions(self) -> bool:
        """Whether it has a position column: only then is each message's position kept."""
        return self.columns is not None and max(self.columns, default=0) >= len(READ_FIELDS)

    @property
    def desired_capabilities(self) -> tuple[str, ...]:
        """What a reader filling its rows asks the broker for in its attach (Part 2 §2.7.3)."""
        return PositionRows.DESIRED_CAPABILITIES if self.positions else Rows.DESIRED_CAPABILITIES

    def rows(self, address: str) -> Rows:
        """Rows for this shape (:class:`.positions.PositionRows` when it has a position column),
        for messages read from ``address``."""
        return PositionRows(address) if self.positions else Rows()


def _shape(schema: StructType) -> _Shape:
    """The shape of rows for ``schema``: READ_SCHEMA, or some of its columns given with ``.schema(...)``
    (any order; another column or type raises ``ValueError`` naming it).

    Executor reads hand Spark one Arrow batch per fetch (:meth:`.columns.Rows.arrow`) instead of a
    tuple per message that Spark's worker converts value by value; fewer columns are also less
    for Spark to convert.  Spark compares a batch's schema with ``to_arrow_schema(schema,
    timezone="UTC")``, so it is made the same way.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    columns = projection([(field.name, field.dataType.simpleString()) for field in schema.fields])
    return _Shape(to_arrow_schema(schema, timezone="UTC"), columns)


def _hand_over(rows: Rows, shape: _Shape) -> Iterator[Any]:
    """What ``read`` yields for some rows: one Arrow batch of them (none for no rows)."""
    if rows:
        yield rows.arrow(shape.arrow, shape.columns)


def _batches(deliveries: list[Delivery], shape: _Shape, address: str) -> Iterator[Any]:
    """A list iterator (Spark copies it) of the Arrow batch of ``deliveries``' rows (none for none):
    what a stream reader on the driver returns, so Spark's runner sends it on as it is instead of
    converting a tuple per message value by value."""
    rows = shape.rows(address)
    for delivery in deliveries:
        rows.add(delivery.payload)
    return iter(list(_hand_over(rows, shape)))


class _BatchReader(DataSourceReader):
    def __init__(self, options: Options, shape: _Shape) -> None:
        self.options = options
        self.shape = shape

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]  # one queue, one reader: order is kept

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """Every message available now; ``browse`` leaves them, ``consume`` accepts them all once the
        task has taken every row: a task that fails before that removes nothing (its connection
        ends, and the broker puts what it held back in the queue)."""
        options = self.options
        browse = options.mode == "browse"
        taken: list[Delivery] = []
        window = FetchWindow()  # a fetch brings about maxBatchBytes
        with options.connect() as client:
            receiver = client.receiver(options.address, credit=options.max_batch, browse=browse,
                                       desired_capabilities=self.shape.desired_capabilities)  # fmt: skip
            rows = self.shape.rows(options.address)
            while True:
                chunk = receiver.fetch(window.size(options.max_batch, options.max_batch_bytes))
                if not chunk:
                    break
                window.took(chunk)
                rows.clear()
                for delivery in chunk:
                    rows.add(delivery.payload)
                yield from _hand_over(rows, self.shape)
                if not browse:
                    for delivery in chunk:
                        delivery.drop_payload()  # kept only to be settled, without its bytes
                    taken += chunk
            if taken:
                receiver.settle(taken)
            receiver.close()


class _Range(InputPartition):  # type: ignore[misc]
    """One task's offsets of one stream: plain values, pickled to the executor."""

    def __init__(self, address: str, start: int, end: int) -> None:
        super().__init__((address, start, end))
        self.address, self.start, self.end = address, start, end


def _ranges(pieces: list[OffsetRange]) -> list[InputPartition]:
    return [_Range(p.address, p.start, p.end) for p in pieces]


def _read(options: Options, partition: InputPartition, shape: _Shape) -> Iterator[Any]:
    """The rows of one task's range; none for the partition Spark makes up when a plan has no range
    (``InputPartition(None)``: an empty stream, or a bounded read with nothing in its bounds)."""
    if not isinstance(partition, _Range):
        if partition.value is None:
            return
        raise TypeError(f"the amqp data source reads stream ranges, not {partition!r}")
    piece = OffsetRange(partition.address, partition.start, partition.end)
    for rows in read_range(options, piece, shape.rows(partition.address)):
        yield from _hand_over(rows, shape)


class _StreamBatchReader(DataSourceReader):
    """A stream's retained messages (or those within ``startingOffsets`` and ``endingOffsets``),
    split into offset ranges that tasks read in parallel."""

    def __init__(self, options: Options, shape: _Shape) -> None:
        self.options = options
        self.shape = shape

    def partitions(self) -> list[InputPartition]:
        return _ranges(plan(self.options, batch_spans(self.options)))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, partition, self.shape)


# --------------------------------------------------------------------------- writes


@dataclass
class SentCount(WriterCommitMessage):
    """What one write task sent (all accepted by the broker), and the rows it could not send."""

    partition: int
    count: int
    skipped: int = 0
    dead_lettered: int = 0


def _send_rows(options: Options, columns: list[str], rows: Iterator[Any], id_prefix: str | None) -> SentCount:
    """Send every row and wait for acceptance.

    A row without a ``message_id`` gets ``{id_prefix}-{partition}-{row}`` (streaming: the prefix
    names the query and batch), or with no prefix (batch writes) ``{digest}-{partition}-{row}``
    where the digest hashes the row's values: a rerun of the same job, or Spark's retry of a task,
    gives every row the id it had, so consumers can drop what a failed run already sent.
    A lost link or connection resends the unconfirmed chunk on a new connection (up to
    ``retries`` times: at-least-once, same message-ids); a rejection fails the task.
    """
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    count = skipped = 0
    bad: list[Message] = []
    # A body alone (the usual write) is encoded straight from the row (rows.plain_row).
    plain = columns == ["body"]
    with _Outbox(options) as outbox:
        chunk: list[bytes] = []
        size = 0  # the chunk's bytes
        for row in rows:
            if plain and isinstance(row[0], (str, bytes)):
                # The usual row: no row dict, its body encoded once for its id and its message.
                payload = plain_row(row[0], id_prefix, f"{partition}-{count}")
                count += 1
                chunk.append(payload)
                size += len(payload)
                if len(chunk) >= SEND_CHUNK or size >= SEND_CHUNK_BYTES:
                    outbox.send(chunk)
                    chunk = []
                    size = 0
                continue
            values = dict(zip(columns, row, strict=True))
            if values.get("message_id") is not None:
                message_id = str(values["message_id"])
            elif id_prefix is None:
                message_id = f"{row_digest(values)}-{partition}-{count}"
            else:
                message_id = f"{id_prefix}-{partition}-{count}"
            count += 1  # bad rows keep their number: the ids of the others do not depend on them
            try:
                chunk.append(message_from_row(values, message_id).encode())
            except (ValueError, TypeError) as exc:
                if options.on_bad_record == "fail":
                    raise ValueError(
                        f"row {count - 1} of partition {partition} cannot become a message: {exc}; set option "
                        "onBadRecord to 'skip' or 'deadletter' (with deadLetterAddress) to let such rows pass"
                    ) from exc
                if options.on_bad_record == "skip":
                    skipped += 1
                else:
                    bad.append(bad_record_message(values, message_id, str(exc)))
                continue
            size += len(chunk[-1])
            if len(chunk) >= SEND_CHUNK or size >= SEND_CHUNK_BYTES:
                outbox.send(chunk)
                chunk = []
                size = 0
        if chunk:
            outbox.send(chunk)
        outbox.flush()
    if bad:
        assert options.dead_letter_address is not None  # parse_options requires it for deadletter
        with _Outbox(dataclasses.replace(options, address=options.dead_letter_address)) as dead_letters:
            dead_letters.send([message.encode() for message in bad])
            dead_letters.flush()
    return SentCount(partition, count - skipped - len(bad), skipped, len(bad))


class _Outbox:
    """A sender that keeps one chunk in flight and reconnects when its link or connection is lost.

    :meth:`send` sends a chunk and then waits for the outcomes of the chunk before it, so the
    broker takes a chunk while the writer encodes the next (no round trip per chunk); :meth:`flush`
    waits for the last.  What is lost with a connection is sent again, in order, on the next.
    """

    def __init__(self, options: Options) -> None:
        self.options = options
        self.client: Client | None = None
        self.sender: Sender | None = None
        #: Chunks sent and not yet confirmed, oldest first, each with its delivery-ids on the
        #: current connection (None: not sent on it yet).
        self._in_flight: list[tuple[list[bytes], list[int] | None]] = []

    def send(self, payloads: list[bytes]) -> None:
        """Send encoded messages; return once every chunk sent before them is accepted."""
        self._in_flight.append((payloads, None))
        self._settle(keep=1)

    def flush(self) -> None:
        """Wait until every chunk sent is accepted."""
        self._settle(keep=0)

    def _settle(self, keep: int) -> None:
        """Send what is not sent on this connection, then confirm the oldest chunks until ``keep``
        remain; a lost link or connection sends them all again on a new one (up to ``retries``
        times: at-least-once, same message-ids); a rejection raises."""
        for attempt in range(self.options.retries + 1):
            try:
                if self.sender is None:
                    self.client = self.options.connect()
                    self.sender = self.client.sender(self.options.address)
                    self._in_flight = [(chunk, None) for chunk, _ in self._in_flight]
                sender = self.sender
                self._in_flight = [
                    (chunk, sender.post_encoded(chunk) if ids is None else ids) for chunk, ids in self._in_flight
                ]
                while len(self._in_flight) > keep:
                    sender.confirm(self._in_flight[0][1] or [])
                    del self._in_flight[0]
                return
            except (LinkDetached, ConnectionClosed, ClientTimeout):
                self.close()
                if attempt == self.options.retries:
                    raise

    def close(self) -> None:
        if self.client is not None:
            self.client.close(timeout=1)
        self.client = self.sender = None

    def __enter__(self) -> _Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _report(options: Options, messages: list[WriterCommitMessage | None], what: str) -> None:
    """Log, on the driver, the rows ``onBadRecord`` let pass in one write job or micro-batch.

    PySpark 4.3's Python data sources cannot add metrics to a query's progress (a Python write
    reports only Spark's fixed Python data-size metrics), so the driver's log is where these counts
    show; each dead-lettered row is also a message on ``deadLetterAddress``, with its reason."""
    sent = [m for m in messages if isinstance(m, SentCount)]
    skipped, dead = sum(m.skipped for m in sent), sum(m.dead_lettered for m in sent)
    if skipped or dead:
        log.warning(
            "amqp data source, %s to %r: %d row(s) sent, %d skipped and %d dead-lettered to %r (onBadRecord=%s)",
            what, options.address, sum(m.count for m in sent), skipped, dead, options.dead_letter_address,
            options.on_bad_record,
        )  # fmt: skip


def _bodies(batches: Iterator[Any]) -> Iterator[tuple[Any]]:
    """The rows of Arrow record batches of one column (``body``), as 1-tuples: each batch's column
    becomes Python strings or bytes in one call (``to_pylist``), where Spark's rows for a
    :class:`DataSourceWriter` cost a converter call and a ``Row`` per row (about 5x the CPU)."""
    return itertools.chain.from_iterable(zip(batch.column(0).to_pylist()) for batch in batches)


class _BatchWriter(DataSourceWriter):
    def __init__(self, options: Options, columns: list[str]) -> None:
        self.options, self.columns = options, columns

    def write(self, iterator: Iterator[Any]) -> SentCount:
        return _send_rows(self.options, self.columns, iterator, None)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _report(self.options, messages, "write")


class _BodyBatchWriter(_BatchWriter, DataSourceArrowWriter):  # type: ignore[misc]
    """A batch write of a ``body`` column alone (the usual one): Spark hands it Arrow record batches
    (PySpark 4.0+ ``DataSourceArrowWriter``), read as :func:`_bodies`; the same messages and ids."""

    def write(self, iterator: Iterator[Any]) -> SentCount:
        return _send_rows(self.options, self.columns, _bodies(iterator), None)


class _StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: Options, columns: list[str], fallback: str) -> None:
        self.options, self.columns, self.fallback = options, columns, fallback

    def write(self, iterator: Iterator[Any]) -> SentCount:
        return _send_rows(self.options, self.columns, iterator, self._prefix())

    def _prefix(self) -> str:
        """The message-id prefix of this task's rows: the query id (kept in the checkpoint) and the
        batch id make message-ids that a replayed batch repeats exactly, so consumers can drop duplicates."""
        context = TaskContext.get()
        query = batch = None
        if context is not None:
            query = context.getLocalProperty("sql.streaming.queryId")
            batch = context.getLocalProperty("streaming.sql.batchId")
        return f"{query or self.fallback}-{batch or 0}"

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every row was accepted before its task ended: only the rows ``onBadRecord`` let pass are logged."""
        _report(self.options, messages, f"micro-batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: accepted messages stay; a retried batch resends with the same message-ids."""


class _BodyStreamWriter(_StreamWriter, DataSourceStreamArrowWriter):  # type: ignore[misc]
    """:class:`_BodyBatchWriter`'s Arrow batches for a streaming write (PySpark 4.1+ ``DataSourceStreamArrowWriter``)."""

    def write(self, iterator: Iterator[Any]) -> SentCount:
        return _send_rows(self.options, self.columns, _bodies(iterator), self._prefix())


# --------------------------------------------------------------------------- streaming read


class _OffsetStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Micro-batches of a stream as offset ranges (:mod:`.ranges`); an offset is ``{address: next offset}``.

    ``initialOffset``, ``latestOffset``, ``partitions`` and ``commit`` run on the driver and ask
    the broker only for a stream's bounds; ``read`` runs in executor tasks, on a pickled copy,
    and opens its own connection.  Nothing is acknowledged and nothing is held: Spark's
    checkpoint of the offsets is the whole state.
    """

    def __init__(self, options: Options, shape: _Shape) -> None:
        self.options = options
        self.shape = shape
        #: The offsets an ``availableNow`` run stops at (set by ``prepareForTriggerAvailableNow``).
        self.target: dict[str, int] | None = None
        #: Each stream's next offset as the last ``latestOffset`` found it (``reportLatestOffset``).
        self.latest: dict[str, int] = {}

    def initialOffset(self) -> dict[str, int]:
        return starting_offsets(self.options)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {address: self._next(address, 0) for address in self.options.addresses}

    def _next(self, address: str, otherwise: int) -> int:
        found = bounds(self.options, address).next
        return found if found is not None else otherwise

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        """Each stream's next offset, at most ``availableNow``'s target and ``maxOffsetsPerTrigger``
        over all addresses.  A stream whose next offset is below ``start``'s went backwards (deleted
        and declared again): :func:`.ranges.went_back` fails the micro-batch, or with
        ``failOnDataLoss`` false ends it at the stream's first retained offset, below its start, so
        it plans nothing of that stream and the next micro-batch reads the stream from there."""
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end: dict[str, int] = {}
        for address in self.options.addresses:
            begin = int(start.get(address, 0))  # an address added since the checkpoint starts at 0: the first retained
            found = bounds(self.options, address)
            latest = self.latest[address] = found.next if found.next is not None else begin
            whose = "at which this query goes on (its checkpoint's, or startingOffsets' on a first micro-batch)"
            restart = went_back(self.options, address, begin, found, whose)
            if restart is not None:
                end[address] = restart  # takes nothing of maxOffsetsPerTrigger's budget
                continue
            if self.target is not None:
                latest = min(latest, self.target.get(address, latest))
            latest = max(begin, latest)
            if budget is not None:  # maxOffsetsPerTrigger: over all addresses, in the order given
                latest = begin + min(latest - begin, budget)
                budget -= latest - begin
            end[address] = latest
        return end

    def reportLatestOffset(self) -> dict[str, int] | None:
        """Each stream's next offset when the micro-batch was planned, whatever ``maxOffsetsPerTrigger``
        or ``availableNow`` took: the query's progress shows it as ``latestOffset`` beside
        ``endOffset``, their difference being the lag (as Kafka's source reports it).  Spark asks
        after ``latestOffset``, so its answer is reused: no extra trip to the broker."""
        return dict(self.latest) or None

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return _ranges(plan(self.options, {address: (int(start.get(address, 0)), int(stop)) for address, stop in end.items()}))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, partition, self.shape)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to settle: reading a stream removes nothing, and the checkpoint holds the offsets."""


class _StreamReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Micro-batches from a queue, settled when Spark commits them (see :class:`.stream.StreamState`).

    Runs on the driver; its connection lives in ``state`` and is not pickled.
    """

    def __init__(self, options: Options, shape: _Shape) -> None:
        self.options = options
        self.shape = shape
        self.state: StreamState | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "shape": self.shape, "state": None}

    def _state(self) -> StreamState:
        if self.state is None:
            self.state = StreamState(self.options, self.shape.desired_capabilities)
        return self.state

    def initialOffset(self) -> dict[str, Any]:
        return {"n": 0, "ids": []}

    def prepareForTriggerAvailableNow(self) -> None:
        self._state().freeze()

    def read(self, start: dict[str, Any]) -> tuple[Iterator[Any], dict[str, Any]]:
        batch, end = self._state().next_batch(start)
        return _batches(batch, self.shape, self.options.address), end

    def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[Any]:
        replayed = StreamState.replay(self.options, end, self.shape.desired_capabilities)
        return _batches(replayed, self.shape, self.options.address)

    def commit(self, end: dict[str, Any]) -> None:
        self._state().settle_through(int(end["n"]))
