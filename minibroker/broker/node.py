"""Nodes: what every kind of node (queue, topic, and whatever comes next) offers the broker.

An address names a node (broker paper 2.1); a node is where messages go and
where consumers read from.  The broker talks to every node through the
:class:`Node` protocol below and never asks which kind it has: only the
node modules themselves (``queue.py``, ``topic.py``, ...) know their kind.

The contract a node kind fulfils
--------------------------------

``KIND``
    the address kind that names it (``"queue"``, ``"topic"``); the address
    forms for a kind (``queue://name``, terminus capabilities) are one row of
    :data:`minibroker.broker.addresses.ADDRESS_KINDS`, and the class is one
    entry of :data:`minibroker.broker.kinds.NODE_KINDS`.  Every kind shares one
    name space: a name is one node.
``OPTIONS``, ``make(name, services, counters, options)``, ``configure(options, now)``
    the options dataclass it is declared with (None: it takes none), how the
    router builds one (``options`` None: the defaults), and what declaring an
    existing node again with ``options`` does.  ``Broker.declare(kind, name,
    options)`` goes through these for every kind.
``SNAPSHOT``
    the frozen type ``snapshot`` returns (statistics.py); each has ``depth``.
``KEEPS_READ``, ``HOLDS_MESSAGES``, ``REFUSES_WHEN_FULL``, ``EXPIRES_BY_TTL``, ``KEEPS_TRANSIENT``
    how the kind differs from a plain queue, as data (the node conformance
    suite, ``tests/broker/test_node_conformance.py``, reads them): a read
    message stays (a stream); it holds messages itself (a topic does not, its
    subscriptions do); a full node refuses (a stream drops its oldest instead);
    a message's ttl expires it (a stream keeps by ``max_age``); a restart keeps
    non-durable messages (a stream's log).
``name``, ``counters``
    its name and its :class:`~minibroker.broker.statistics.NodeCounters`
    (``enqueued`` counts every message :meth:`Node.put` takes).
``admit(message, staged)``
    limits (``max_depth``, ``max_bytes``, ``overflow``; limits.py): the error to
    refuse ``message`` with, or None.  With ``staged=None`` the message is about
    to be put, and the node may make room (``drop-head``).  With a collection,
    nothing changes: the question is whether ``message`` would still fit after
    the ``staged`` messages (what open transactions hold for it) went in.
``put(message, now, seq)``
    store a message and hand it to readers that have credit.  Called only by
    :mod:`minibroker.broker.publish` (the one way into a node).  ``seq`` is a
    number a queue gave out earlier (``Queue.reserve_seq``, a scheduled
    message), or None for the next; kinds that number nothing ignore it.
``open_consumer(request)``
    the consumer side: build the :class:`~.consuming.NodeConsumer` that serves a receiving
    link attached to this node (a queue competes its consumers for messages, a
    topic gives each its own subscription queue, an append-only log would give
    each reader its own position).  May raise ``Refusal`` (attach.py).
``limited``, ``reserve_seq()``
    whether ``admit`` can refuse anything (False: skip asking); a number for a
    message that will be put later with it (a scheduled one), or None: the kind
    numbers nothing and ignores ``seq``.
``producer_credit_queue()``
    the queue whose free room bounds producers' credit (``withhold-credit``),
    or None: producers get ``link_credit`` as usual.
``DEAD_LETTER_TTL``
    whether a dead-lettered copy routed here keeps its ttl (a queue keeping
    dead letters never expires them, so the copy carries none).
``next_expiry()``, ``expire(now)``
    its timer: the clock time of its next expiry, and expiring what is due
    (the router then calls ``dispatch``).
``dispatch(now)``, ``purge()``, ``drop_transient()``, ``queues()``
    send what readers have credit for; remove what is available; lose
    non-durable messages after a restart; the queues it holds (for the Python
    API's ``queue_named`` and snapshots of subscriptions).
``snapshot(now, run)``
    a frozen view for the inspection API (statistics.py).

A node never imports the broker, the router or the links: time comes in as
``now``, the dead-letter path and timer notifications are
:class:`NodeServices` callbacks, and consumers are built through
``request.queue_consumer`` (the link class lives above the nodes).

Adding a kind is one class implementing :class:`Node`, whose ``open_consumer``
returns its own :class:`~.consuming.NodeConsumer`, one row in ``ADDRESS_KINDS``
and one entry in ``NODE_KINDS``: :class:`~.stream.Stream` (an append-only log
where each reader holds a position) was added that way.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..records import record

if TYPE_CHECKING:
    from ..amqp.performatives import Error
    from .capture import Run
    from .config import BrokerConfig
    from .consuming import ConsumerRequest, NodeConsumer
    from .duplicates import RecentIds
    from .queue import DeadLetter, Queue
    from .statistics import NodeCounters
    from .stored import StoredMessage

__all__ = ["Node", "NodeServices"]


@record(frozen=True, slots=True)
class NodeServices:
    """What the router gives the nodes it creates (they never see the router itself)."""

    config: BrokerConfig
    #: Moves an entry to its queue's dead-letter address (the router's, through the publish path).
    dead_letter: DeadLetter
    #: Told of each new expiry time, so that the server's timer can be moved earlier.
    expiry_added: Callable[[float], None]


class Node(Protocol):
    """A node of the broker (see the module docstring for the contract)."""

    KIND: ClassVar[str]
    OPTIONS: ClassVar[type[Any] | None]
    SNAPSHOT: ClassVar[type[Any]]
    DEAD_LETTER_TTL: ClassVar[bool]
    KEEPS_READ: ClassVar[bool]
    HOLDS_MESSAGES: ClassVar[bool]
    REFUSES_WHEN_FULL: ClassVar[bool]
    EXPIRES_BY_TTL: ClassVar[bool]
    KEEPS_TRANSIENT: ClassVar[bool]
    name: str
    counters: NodeCounters
    #: Duplicate detection (duplicates.py): the message-ids taken recently, None when off.
    duplicates: RecentIds | None

    @classmethod
    def make(cls, name: str, services: NodeServices, counters: NodeCounters, options: Any) -> Node: ...

    def configure(self, options: Any, now: float) -> None: ...

    @property
    def limited(self) -> bool: ...

    def reserve_seq(self) -> int | None: ...

    def admit(self, message: StoredMessage, staged: Collection[StoredMessage] | None = None) -> Error | None: ...

    def put(self, message: StoredMessage, now: float, seq: int | None = None) -> None: ...

    def open_consumer(self, request: ConsumerRequest) -> NodeConsumer: ...

    def producer_credit_queue(self) -> Queue | None: ...

    def next_expiry(self) -> float | None: ...

    def expire(self, now: float) -> int: ...

    def dispatch(self, now: float) -> None: ...

    def purge(self) -> int: ...

    def drop_transient(self) -> int: ...

    def queues(self) -> Iterable[Queue]: ...

    def snapshot(self, now: float, run: Run | None = None) -> Any: ...
