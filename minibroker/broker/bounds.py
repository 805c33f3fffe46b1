"""A bounded queue's arithmetic: is it full, what may be admitted, how much room is left.

The policies (``reject-publish``, ``drop-head``, ``withhold-credit``) are
described in :mod:`minibroker.broker.limits`; this module holds the sums
behind them, for :class:`~minibroker.broker.queue.Queue` (which admits) and
the credit gate (which sizes credit by the room).  It knows a queue only by
the :class:`Bounded` protocol, so that it sits below both.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from typing import Protocol

from ..amqp import errors as conditions
from ..amqp.performatives import Error, amqp_error
from .config import QueueOptions
from .stored import StoredMessage

__all__ = ["Bounded", "StagedMessages", "refusal", "room"]


class Bounded(Protocol):
    """What the limits need of a queue."""

    name: str
    options: QueueOptions
    bytes: int
    #: The largest message offered so far (credit is sized by it).
    largest: int

    @property
    def depth(self) -> int: ...

    def drop_head(self, reason: str, description: str) -> bool: ...


class StagedMessages(Collection[StoredMessage]):
    """Messages open transactions hold for one node, in arrival order, their encoded bytes summed
    as they come.

    :func:`refusal` reads ``bytes`` instead of summing the payloads, and a discharge takes its
    messages out by identity: each costs what it touches, however many are staged.
    """

    __slots__ = ("_messages", "bytes")

    def __init__(self, messages: Iterable[StoredMessage] = ()) -> None:
        self._messages: dict[int, StoredMessage] = {}  # by id(): a staged message is alive, its id unique
        self.bytes = 0
        for message in messages:
            self.add(message)

    def add(self, message: StoredMessage) -> None:
        self._messages[id(message)] = message
        self.bytes += message.size

    def discard(self, message: StoredMessage) -> None:
        if self._messages.pop(id(message), None) is not None:
            self.bytes -= message.size

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[StoredMessage]:
        return iter(self._messages.values())

    def __contains__(self, message: object) -> bool:
        return id(message) in self._messages


def _full(queue: Bounded, count: int, size: int) -> bool:
    """Whether ``count`` more messages of ``size`` bytes in all would pass a bound."""
    options = queue.options
    return (options.max_depth is not None and queue.depth + count > options.max_depth) or (
        options.max_bytes is not None and queue.bytes + size > options.max_bytes
    )


def refusal(queue: Bounded, message: StoredMessage, staged: Collection[StoredMessage] | None) -> Error | None:
    """The error to refuse ``message`` with on a bounded queue, or None (see ``Node.admit``).

    ``staged=None``: the message goes in now, and ``drop-head`` makes room.
    Otherwise nothing changes: would it fit after ``staged`` (what open transactions hold
    for this queue, each published at its commit)?  A ``drop-head``
    queue can make room at commit, so it refuses only what could never fit.
    """
    size = message.size
    queue.largest = max(queue.largest, size)
    options = queue.options
    if staged is None:
        count, total = 1, size
        if options.overflow == "drop-head":
            while _full(queue, count, total) and queue.drop_head("MaxLengthExceeded", "the queue was full"):
                pass
        full = _full(queue, count, total)
    else:
        staged_bytes = staged.bytes if isinstance(staged, StagedMessages) else sum(m.size for m in staged)
        count, total = len(staged) + 1, size + staged_bytes
        if options.overflow == "drop-head":
            full = (options.max_depth is not None and count > options.max_depth) or (
                options.max_bytes is not None and total > options.max_bytes
            )
        else:
            full = _full(queue, count, total)
    if not full:
        return None
    held = f"holding {queue.depth} messages / {queue.bytes} bytes"
    if staged:
        held += f", and {len(staged)} more staged in open transactions"
    return amqp_error(
        conditions.RESOURCE_LIMIT_EXCEEDED,
        f"queue {queue.name!r} is full (max_depth={options.max_depth}, max_bytes={options.max_bytes}, "
        f"{held}; overflow={options.overflow})",
    )


def room(queue: Bounded) -> int:
    """How many more messages fit: by depth, and by bytes counting each as the largest seen so far
    (one at a time before any is seen: sizes are not known ahead)."""
    options = queue.options
    free_count = options.max_depth - queue.depth if options.max_depth is not None else 2**31
    if options.max_bytes is not None:
        free = options.max_bytes - queue.bytes
        free_count = min(free_count, free // queue.largest if queue.largest else (1 if free > 0 else 0))
    return max(0, free_count)
