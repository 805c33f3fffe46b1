"""The ``amqp`` PySpark data source: batch and streaming reads and writes of AMQP 1.0 queues.

Readers and writers keep only plain values (:class:`~.options.Options`) so Spark
can pickle them; connections are opened inside ``read``/``write`` (or lazily by
the driver-side stream reader) and never pickled.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    SimpleDataSourceStreamReader,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from minibroker.amqp.message import Message
from minibroker.client import Client, ClientTimeout, ConnectionClosed, Delivery, LinkDetached, Sender

from .options import Options, parse_options
from .rows import READ_SCHEMA, WRITE_COLUMNS, message_from_row, row_from_delivery
from .stream import StreamState

try:  # Spark 4.2+: without it, trigger(availableNow=True) reads one batch only
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older Spark
    SupportsTriggerAvailableNow = object  # type: ignore[misc,assignment]

__all__ = ["AmqpDataSource"]

#: Messages sent per pipelined batch by a writer before it waits for their outcomes.
SEND_CHUNK = 500


class AmqpDataSource(DataSource):
    """``spark.read.format("amqp")`` / ``df.write.format("amqp")``, batch and streaming.

    Options: ``url`` (``amqp://[user:password@]host:port``) and ``address`` (required),
    ``mode`` (``browse`` default, or ``consume``; batch reads), ``maxBatch`` (messages per
    fetch and per micro-batch, default 1000), ``timeout`` (seconds, default 10), ``retries``
    (writes: resends after a lost link or connection, default 3), ``user``, ``password``.
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed = parse_options(options)

    @classmethod
    def name(cls) -> str:
        return "amqp"

    def schema(self) -> str:
        return READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _BatchReader(self.parsed)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _BatchWriter(self.parsed, _columns(schema), uuid.uuid4().hex[:12])

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        return _StreamReader(self.parsed)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return _StreamWriter(self.parsed, _columns(schema), uuid.uuid4().hex[:12])


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


class _BatchReader(DataSourceReader):
    def __init__(self, options: Options) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]  # one queue, one reader: order is kept

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """Every message available now; ``browse`` leaves them, ``consume`` accepts each fetched chunk
        once its rows were taken (a failed task's unaccepted messages go back to the queue)."""
        options = self.options
        browse = options.mode == "browse"
        with options.connect() as client:
            receiver = client.receiver(options.address, credit=options.max_batch, browse=browse)
            while True:
                chunk = receiver.fetch(options.max_batch)
                if not chunk:
                    break
                for delivery in chunk:
                    yield row_from_delivery(delivery)
                if not browse:
                    receiver.settle(chunk)
            receiver.close()


# --------------------------------------------------------------------------- writes


@dataclass
class SentCount(WriterCommitMessage):
    """What one write task sent (all accepted by the broker)."""

    partition: int
    count: int


def _send_rows(options: Options, columns: list[str], rows: Iterator[Any], id_prefix: str) -> SentCount:
    """Send every row and wait for acceptance (message-ids ``{id_prefix}-{partition}-{row}``).

    A lost link or connection resends the unconfirmed chunk on a new connection (up to
    ``retries`` times: at-least-once, same message-ids); a rejection fails the task, and Spark's
    retry resends the partition with the same ids.
    """
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    count = 0
    with _Outbox(options) as outbox:
        chunk = []
        for row in rows:
            values = dict(zip(columns, row, strict=True))
            chunk.append(message_from_row(values, f"{id_prefix}-{partition}-{count}"))
            count += 1
            if len(chunk) >= SEND_CHUNK:
                outbox.send(chunk)
                chunk = []
        if chunk:
            outbox.send(chunk)
    return SentCount(partition, count)


class _Outbox:
    """A sender that reconnects when its link or connection is lost."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.client: Client | None = None
        self.sender: Sender | None = None

    def send(self, messages: list[Message]) -> None:
        for attempt in range(self.options.retries + 1):
            try:
                if self.sender is None:
                    self.client = self.options.connect()
                    self.sender = self.client.sender(self.options.address)
                self.sender.send_many(messages)
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


class _BatchWriter(DataSourceWriter):
    def __init__(self, options: Options, columns: list[str], job: str) -> None:
        self.options, self.columns, self.job = options, columns, job

    def write(self, iterator: Iterator[Any]) -> SentCount:
        return _send_rows(self.options, self.columns, iterator, self.job)


class _StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: Options, columns: list[str], fallback: str) -> None:
        self.options, self.columns, self.fallback = options, columns, fallback

    def write(self, iterator: Iterator[Any]) -> SentCount:
        # The query id (kept in the checkpoint) and the batch id make message-ids that a replayed
        # batch repeats exactly, so consumers can drop duplicates.
        context = TaskContext.get()
        query = batch = None
        if context is not None:
            query = context.getLocalProperty("sql.streaming.queryId")
            batch = context.getLocalProperty("streaming.sql.batchId")
        prefix = f"{query or self.fallback}-{batch or 0}"
        return _send_rows(self.options, self.columns, iterator, prefix)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every row was accepted before its task ended."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: accepted messages stay; a retried batch resends with the same message-ids."""


# --------------------------------------------------------------------------- streaming read


class _StreamReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Micro-batches from a queue, settled when Spark commits them (see :class:`.stream.StreamState`).

    Runs on the driver; its connection lives in ``state`` and is not pickled.
    """

    def __init__(self, options: Options) -> None:
        self.options = options
        self.state: StreamState | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "state": None}

    def _state(self) -> StreamState:
        if self.state is None:
            self.state = StreamState(self.options)
        return self.state

    def initialOffset(self) -> dict[str, Any]:
        return {"n": 0, "ids": []}

    def prepareForTriggerAvailableNow(self) -> None:
        self._state().freeze()

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        batch, end = self._state().next_batch(start)
        return iter([row_from_delivery(d) for d in batch]), end  # a list iterator: Spark copies it

    def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
        deliveries: list[Delivery] = StreamState.replay(self.options, end)
        return iter([row_from_delivery(d) for d in deliveries])

    def commit(self, end: dict[str, Any]) -> None:
        self._state().settle_through(int(end["n"]))
