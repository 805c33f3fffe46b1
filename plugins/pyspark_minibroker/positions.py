"""Rows with the position columns (:data:`.rows.POSITION_SCHEMA`): address, offset, timestamp.

Kafka's source gives each row its topic, partition, offset and timestamp; this source's rows get
the address they were read from, the stream offset (``x-stream-offset``, Part 3 §3.2.3 message
annotations as RabbitMQ 4 streams send it; null from a queue) and the time the broker took the
message when it says so (the ``x-opt-enqueued-time`` annotation, a timestamp: the arrival at a
Service Bus entity or a minibroker queue, or the append to a minibroker stream, whose readers get
it by desiring the capability of that name; null when the broker sends none).

:class:`PositionRows` is used only when a read asks for those columns, so a read that does not
pays nothing per message for them.
"""

from __future__ import annotations

from typing import Any

from minibroker.amqp.message import decode_message

from .columns import Rows, _microseconds
from .rows import READ_FIELDS

__all__ = ["PositionRows", "enqueued_time"]

#: The annotation's key as it is encoded (sym8 of 19 bytes): a message without these bytes has
#: no such annotation, found without decoding it.
_ENQUEUED_KEY = b"\xa3\x13x-opt-enqueued-time"


def enqueued_time(payload: bytes) -> int | None:
    """The message's ``x-opt-enqueued-time`` in milliseconds since the epoch, or None."""
    if _ENQUEUED_KEY not in payload:
        return None
    value = (decode_message(payload).message_annotations or {}).get("x-opt-enqueued-time")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


class PositionRows(Rows):
    """:class:`~.columns.Rows` that also keep each row's offset and timestamp; ``address`` names
    the queue read (a stream range's rows take the address :meth:`read_stream` names)."""

    __slots__ = ("_positions", "_queue")

    #: minibroker's streams and queues annotate a reader's deliveries with ``x-opt-enqueued-time``
    #: (a stream's append time, a queue's arrival time) only when its attach desires it, so only
    #: reads with these columns pay for it; a broker that does not know the capability ignores it
    #: (Part 2 §2.7.3).
    DESIRED_CAPABILITIES = ("x-opt-enqueued-time",)

    def __init__(self, address: str = "") -> None:
        super().__init__()
        self._queue = address
        #: (offset, enqueued time in ms) of each row, in order.
        self._positions: list[tuple[int | None, int | None]] = []

    def clear(self) -> None:
        super().clear()
        self._positions = []

    def add(self, payload: bytes) -> int | None:
        offset = super().add(payload)
        self._positions.append((offset, enqueued_time(payload)))
        return offset

    def take(self, delivery_id: int, settled: bool, payload: bytes) -> None:
        before = len(self)
        super().take(delivery_id, settled, payload)
        if len(self) > before:  # added (not past the range's end): its offset is the one before next
            self._positions.append((self.next - 1, enqueued_time(payload)))

    def arrow(self, schema: Any, columns: tuple[int, ...] | None = None) -> Any:
        """The batch of ``columns`` (indices into READ_FIELDS and then the position columns)."""
        import pyarrow as pa  # type: ignore[import-untyped]  # no stubs

        picked = tuple(range(len(READ_FIELDS))) if columns is None else columns
        base = [at for at in picked if at < len(READ_FIELDS)]
        base_fields = [schema.field(i) for i, at in enumerate(picked) if at < len(READ_FIELDS)]
        made: Any = super().arrow(pa.schema(base_fields), tuple(base)) if base else None
        count = len(self)
        address = self._address or self._queue
        arrays: list[Any] = []
        for i, at in enumerate(picked):
            if at < len(READ_FIELDS):
                arrays.append(made.column(base.index(at)))
            elif at == len(READ_FIELDS):
                arrays.append(pa.repeat(pa.scalar(address, schema.field(i).type), count))
            elif at == len(READ_FIELDS) + 1:
                arrays.append([offset for offset, _ in self._positions])
            else:
                arrays.append([None if ms is None else _microseconds(ms) for _, ms in self._positions])
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
