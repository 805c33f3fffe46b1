"""Stream nodes: an append-only log many readers read, each from its own position.

A stream (RabbitMQ semantics, streams; DESIGN "one spine for messages") keeps
what is published to it in a :class:`~minibroker.broker.streamlog.StreamLog`
and hands it to every reader: a reader is a link whose whole state here is
the offset it reads next, set at attach from its ``rabbitmq:stream-offset-spec``
filter (:mod:`.streamfilters`).  Nothing is acquired and nothing is removed
by reading, so the outcome a reader gives a delivery (accepted, released,
rejected, modified: Part 3 §3.4) settles it on that link and changes nothing
for anyone else; only retention (``max_bytes``, ``max_age``) drops messages.
A reader whose position was dropped goes on from the first retained offset.

Each delivery carries the message annotation ``x-stream-offset`` (a long), as
RabbitMQ's do, so a client can resume from where it stopped.  The rest of the
message goes out as it came in (Part 3 §3.2: the bare message is immutable);
delivery-annotations, meant for one hop only, are not passed on.

Credit is honoured exactly: a reader is sent at most what its credit allows,
one message per unit, and a reader without credit costs nothing per append.

The broker's attach answering a reader carries, in its link ``properties``
(Part 2 §2.7.3: fields describing the link), the stream's first retained
offset (``x-stream-first-offset``) and the offset the next append gets
(``x-stream-next-offset``), both longs, as they are when the link is attached:
equal when the stream retains nothing.  Deliveries tell a reader the offsets
of messages; only this tells one the offsets of a stream with no message to
deliver, such as one whose retention (or a purge) dropped everything: a
reader resuming at offset N of such a stream learns from it whether offsets
from N on were dropped (the Spark source's ``failOnDataLoss``).  RabbitMQ 4's
attach carries no properties; its stream protocol's ``StreamStats`` answers
with first and committed chunk ids instead, none for an empty stream.

A reader with a filter visits at most :data:`SCAN` log entries per dispatch,
whether they match or not: a filter that matches nothing over a long log
would otherwise make one dispatch walk the whole log on the event loop while
every other client waits.  A reader stopped by that budget, with credit left,
is *pending*: the stream's :meth:`Stream.next_expiry` is then "now", so the
server's timer task (which other tasks get to run before) dispatches the
stream again for the next slice, and so on to the end of the log.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..amqp.message import decode_message
from ..amqp.messaging import Accepted, Modified, Rejected, Released
from ..amqp.performatives import SND_SETTLED
from ..amqp.transactions import TransactionalState
from ..amqp.types import symbol
from ..protocol.endpoints import Delivery, Link
from .config import StreamOptions
from .consuming import Client, ConsumerRegistry
from .duplicates import RecentIds
from .enqueued import ENQUEUED_TIME, asks_enqueued_time
from .roles import Role
from .statistics import NodeCounters, StreamMessages, StreamSnapshot
from .stored import StoredMessage
from .streamfilters import StreamFilter
from .streamlog import OFFSET_ANNOTATION as OFFSET_ANNOTATION
from .streamlog import OFFSET_LEAD, OffsetSpec, StreamLog, delivery_payload, timed_payload

if TYPE_CHECKING:
    from ..amqp.performatives import Error
    from .capture import Run
    from .consuming import ConsumerRequest, NodeConsumer
    from .node import NodeServices
    from .queue import Queue

__all__ = [
    "FIRST_OFFSET_PROPERTY", "NEXT_OFFSET_PROPERTY", "OFFSET_ANNOTATION", "SCAN", "Reader", "Stream", "StreamConsumer",
    "delivery_payload",
]  # fmt: skip

#: The most log entries a filtering reader visits in one dispatch (module docstring): a slice is
#: about a millisecond of selector work, so other clients wait at most that long for it.
SCAN = 1024
#: What :meth:`Stream.next_expiry` says while a reader waits for its next slice: already due.
NOW = -math.inf
#: The link properties of the attach answering a reader (module docstring): the stream's first
#: retained offset and its next offset (equal when it retains nothing), both longs.
FIRST_OFFSET_PROPERTY = symbol("x-stream-first-offset")
NEXT_OFFSET_PROPERTY = symbol("x-stream-next-offset")

class Reader(Protocol):
    """What a stream needs of a reading link: its position, its filter, its credit, a way to send."""

    #: The offset it reads next (all the state a reader has in the stream).
    position: int
    stream_filter: StreamFilter

    def credit(self) -> int: ...

    def deliver_offset(self, offset: int, message: StoredMessage) -> bool:
        """Send ``message`` (at ``offset``); False if this reader cannot take it (too large for it)."""

    def deliver_run(self, log: StreamLog, position: int, end: int) -> int | None:
        """Send what credit allows of ``log`` from ``position`` up to ``end`` (no filter applies)
        in one loop; return the position it stopped at, or None to be sent one message at a time."""


class Stream:
    """A stream node (a :class:`~.node.Node`): messages appended to a log, read by any number of
    readers from their own offsets."""

    KIND: ClassVar[str] = "stream"
    OPTIONS: ClassVar[type[Any] | None] = StreamOptions
    SNAPSHOT: ClassVar[type[Any]] = StreamSnapshot
    #: A dead-lettered copy routed here keeps its header as it was (a stream expires nothing by ttl).
    DEAD_LETTER_TTL: ClassVar[bool] = True
    KEEPS_READ: ClassVar[bool] = True  # a reader moves its own position; the log stays
    HOLDS_MESSAGES: ClassVar[bool] = True
    REFUSES_WHEN_FULL: ClassVar[bool] = False  # retention (``max_bytes``) drops the oldest instead
    EXPIRES_BY_TTL: ClassVar[bool] = False  # retention is by ``max_age``, not by a message's ttl
    KEEPS_TRANSIENT: ClassVar[bool] = True  # a stream is a durable log: a restart keeps it whole

    @classmethod
    def make(cls, name: str, services: NodeServices, counters: NodeCounters, options: StreamOptions | None) -> Stream:
        """A stream (``options`` None: unbounded retention)."""
        return cls(name, options or StreamOptions(), counters, services.expiry_added)

    def __init__(
        self,
        name: str,
        options: StreamOptions,
        counters: NodeCounters,
        on_expiry: Callable[[float], None] | None = None,
    ) -> None:
        self.name = name
        self.counters = counters
        self.log = StreamLog(options)
        self.readers: list[Reader] = []
        #: Readers stopped by :data:`SCAN` with credit left: their next slice is due (insertion-ordered set).
        self.pending: dict[Reader, None] = {}
        self.on_expiry = on_expiry  # told of a new retention deadline, so a timer can be rescheduled
        #: The ids appended recently, with ``duplicate_window`` (duplicates.py; ``Publisher.publish`` reads it).
        self.duplicates: RecentIds | None = RecentIds(options.duplicate_window) if options.duplicate_window else None

    @property
    def options(self) -> StreamOptions:
        return self.log.options

    @options.setter
    def options(self, options: StreamOptions) -> None:
        self.log.options = options
        window = options.duplicate_window
        if not window:
            self.duplicates = None
        elif self.duplicates is None:
            self.duplicates = RecentIds(window)
        else:
            self.duplicates.window = window  # the ids remembered stay

    # ----------------------------------------------------------- contents

    @property
    def depth(self) -> int:
        """Messages retained."""
        return self.log.count

    @property
    def bytes(self) -> int:
        return self.log.bytes

    def messages(self) -> Iterator[tuple[int, StoredMessage]]:
        """Every retained message with its offset, oldest first."""
        return self.log.read(self.log.first_offset, self.log.count)

    def append(self, message: StoredMessage, now: float) -> int:
        """Append ``message`` (retention then drops what it must); return its offset."""
        log = self.log
        first_expiry, dropped = log.next_expiry(), log.dropped
        offset = log.append(message, now)
        self.counters.enqueued += 1
        self.counters.expired += log.dropped - dropped  # retention made room (max_bytes) or found some too old
        self._retained(first_expiry)
        return offset

    def purge(self) -> int:
        """Drop every retained message; offsets go on from where they were."""
        return self.log.clear()

    # ------------------------------------------------------- Node protocol

    def admit(self, message: StoredMessage, staged: Collection[StoredMessage] | None = None) -> Error | None:
        """A stream takes every message: retention (``max_bytes``, ``max_age``) drops the oldest instead."""
        return None

    @property
    def limited(self) -> bool:
        return False  # nothing to count: :meth:`admit` never refuses

    def configure(self, options: StreamOptions, now: float) -> None:
        """Declared again with ``options``: a smaller retention limit drops what it no longer keeps at once."""
        if options != self.options:
            self.options = options
            self.expire(now)

    def reserve_seq(self) -> int | None:
        return None  # a stream numbers by offset, given when a message is appended

    def put(self, message: StoredMessage, now: float, seq: int | None = None) -> None:
        """Append (publish.py is the only caller; a stream numbers by offset, so ``seq`` means nothing
        here) and send it to every reader waiting at the end with credit."""
        self.append(message, now)
        self.dispatch(now)

    def open_consumer(self, request: ConsumerRequest) -> NodeConsumer:
        """A reader: its position from ``rabbitmq:stream-offset-spec`` (none: ``next``), its filters, its credit."""
        stream_filter = request.stream_filter or StreamFilter(selector=request.selector)
        timed = asks_enqueued_time(request.link.attach.desired_capabilities)
        return StreamConsumer(request.connection, request.link, self, stream_filter, timed)

    def producer_credit_queue(self) -> Queue | None:
        return None  # a stream never refuses a message, so producers are never held back

    def drop_transient(self) -> int:
        """A restart keeps a stream whole: a stream is a durable log (RabbitMQ streams are always persistent)."""
        return 0

    def queues(self) -> Iterator[Queue]:
        return iter(())

    def snapshot(self, now: float, run: Run | None = None) -> StreamSnapshot:
        """Offsets and counters now, and references to the retained messages (immutable: no bytes copied)."""
        log = self.log
        return StreamSnapshot(
            name=self.name,
            first_offset=log.first_offset,
            last_offset=log.next_offset - 1,
            count=log.count,
            bytes=log.bytes,
            readers=len(self.readers),
            options=self.options,
            messages=StreamMessages(tuple(self.messages())),
            statistics=self.counters.freeze(),
        )

    # ------------------------------------------------------------- readers

    def add_reader(self, reader: Reader, spec: OffsetSpec | None = None) -> int:
        """Attach ``reader`` at ``spec`` (default: its filter's offset spec); return its first offset."""
        reader.position = self.log.start(reader.stream_filter.offset if spec is None else spec)
        self.readers.append(reader)
        return reader.position

    def remove_reader(self, reader: Reader) -> None:
        if reader in self.readers:
            self.readers.remove(reader)
        self.pending.pop(reader, None)

    def dispatch(self, now: float) -> None:
        """Send every reader what its credit allows, from its position on."""
        expiry = self.log.next_expiry()
        if expiry is not None and expiry <= now:
            self.expire(now)
        if not self.readers:
            return
        self.pending.clear()  # each gets its next slice now, and is pending again if it needs another
        for reader in list(self.readers):
            if reader.position < self.log.next_offset:
                self.feed(reader)

    def feed(self, reader: Reader) -> None:
        """Send ``reader`` what its credit allows, from its position on."""
        credit = reader.credit()
        if credit <= 0:
            return
        log = self.log
        position = max(reader.position, log.first_offset)  # dropped by retention: on from the first retained
        end = log.next_offset
        stream_filter = reader.stream_filter
        selects = stream_filter.selects
        counters = self.counters
        if not selects:
            stopped = reader.deliver_run(log, position, end)
            if stopped is not None:
                reader.position = stopped
                return
        stop = min(end, position + SCAN)  # a filtering reader's slice (module docstring)
        while credit > 0 and position < stop:
            message = log.get(position)
            assert message is not None  # first_offset <= position < next_offset
            offset = position
            position += 1
            if selects and not stream_filter.matches(message):
                counters.filtered_out += 1
                continue
            reader.position = position  # before sending: a reader that ends while sending keeps its place
            if reader.deliver_offset(offset, message):
                counters.delivered += 1
                credit = reader.credit()
        reader.position = position
        if credit > 0 and position < end and reader not in self.pending:
            self.pending[reader] = None
            if self.on_expiry is not None:
                self.on_expiry(NOW)  # wake the timer: the next slice is due

    # ----------------------------------------------------------- retention

    def next_expiry(self) -> float | None:
        """When ``max_age`` next drops a message, or None; :data:`NOW` while a reader waits for its next slice."""
        if self.pending:
            return NOW
        return self.log.next_expiry()

    def expire(self, now: float) -> int:
        """Drop what ``max_age`` (or ``max_bytes``) no longer keeps; return how many."""
        first_expiry = self.log.next_expiry()
        dropped = self.log.trim(now)
        self.counters.expired += dropped
        self._retained(first_expiry)
        return dropped

    def _retained(self, previous_expiry: float | None) -> None:
        """Tell the timer of the new first retention deadline, if it changed."""
        expiry = self.log.next_expiry()
        if expiry is not None and expiry != previous_expiry and self.on_expiry is not None:
            self.on_expiry(expiry)

    def __repr__(self) -> str:
        return f"<Stream {self.name!r} {self.log!r}, {len(self.readers)} readers>"


#: Tags are a 4-byte big-endian counter per link (Part 2 §2.8.7 allows up to 32 bytes).
_TAG = struct.Struct(">I")
#: What a bare stored message gains in front in a delivery: the offset annotation and its long.
_LEAD_SIZE = len(OFFSET_LEAD) + 8
#: A reader's run is written in passes of at most this many messages and (about) this many bytes
#: of payload, so the output bound is checked often enough and a pass's list stays small.
RUN = 1024
RUN_BYTES = 256 * 1024


class StreamConsumer(Role):
    """A link on which the broker sends one reader a stream's messages: the stream's :class:`Reader`,
    and the broker's :class:`~.consuming.NodeConsumer` for it.

    It holds the reader's position and filter, and settles what the client
    settles: the outcome of a delivery is counted and echoed, and is
    otherwise the reader's own business (nothing to requeue, nothing to
    remove).
    """

    def __init__(
        self, connection: Client, link: Link, stream: Stream, stream_filter: StreamFilter, timed: bool = False
    ) -> None:
        self.connection = connection
        self.link = link
        self.stream = stream
        self.stream_filter = stream_filter
        #: The reader's attach desired ``x-opt-enqueued-time`` (streamlog.ENQUEUED_TIME): each of its
        #: deliveries carries the message's append time too.  Chosen once here, so a reader that did
        #: not ask makes its deliveries as before, with no test per message.
        self.timed = timed
        self._payload: Callable[[StoredMessage, int], bytes] = self._timed_payload if timed else delivery_payload
        #: What the broker's attach offers back (the reader knows its deliveries carry the time).
        self.offered_capabilities: tuple[str, ...] = (str(ENQUEUED_TIME),) if timed else ()
        #: The stream's offsets as the attach finds them (module docstring): once per link.
        log = stream.log
        self.attach_properties: dict[Any, Any] | None = {
            FIRST_OFFSET_PROPERTY: log.first_offset, NEXT_OFFSET_PROPERTY: log.next_offset,
        }  # fmt: skip
        self.position = 0
        self.presettled = link.snd_settle_mode == SND_SETTLED
        #: Reading moves nothing: the attach is answered with distribution-mode ``copy``.
        self.browse = True
        self._tags = 0
        self._registry: ConsumerRegistry | None = None

    # NodeConsumer protocol ---------------------------------------------

    def start(self, registry: ConsumerRegistry) -> None:
        self._registry = registry
        self.stream.add_reader(self)

    def reads_from(self, node: object) -> bool:
        return node is self.stream

    def pump(self, now: float) -> None:
        self.stream.feed(self)

    def on_outcome(self, delivery: Delivery, state: Any, settled: bool) -> None:
        self.outcome(delivery, state, settled)

    def on_flow(self, properties: dict[Any, Any] | None) -> None:
        pass  # a txn-id on its credit changes nothing: reading a stream acquires nothing (see outcome)

    def available(self) -> int:
        return 0  # a reader's position is its own: nothing waits for it in particular

    # Link role (roles.py): its link's events go to the registry that started it --------

    def on_credit(self, properties: dict[Any, Any] | None, drain: bool) -> None:
        if self._registry is not None:
            self._registry.credit(self, properties, drain)

    def on_window(self, now: float) -> None:
        if self._registry is not None:
            self._registry.pump(self, now)

    def end(self, closed: bool, now: float) -> None:
        if self._registry is not None:
            self._registry.end(self, closed)

    def finish(self, closed: bool, now: float) -> None:
        """The link ended: the reader leaves (it held nothing but its position)."""
        self.stream.remove_reader(self)

    # Faults (roles.py): they act on this reader's link only, the stream is unchanged ----

    @property
    def address(self) -> str:
        return self.stream.name

    def sent_message(self, delivery_id: int) -> Callable[[], Any] | None:
        delivery = self.link.unsettled.get(delivery_id)
        if delivery is None:
            return None  # pre-settled: sent and done with, nothing a fault can settle
        return lambda: decode_message(delivery.payload) if delivery.payload else None

    def fault_outcome(self, delivery_id: int, delivery: Delivery | None, outcome: Released | Modified) -> None:
        assert delivery is not None  # sent_message found it unsettled
        self.outcome(delivery, outcome, False)  # counted and settled: nothing to put back in a stream

    # Reader protocol ---------------------------------------------------

    def credit(self) -> int:
        link = self.link
        if link.session.remote_incoming_window <= 0 or link.outgoing is not None:
            return 0  # no room in the session window, or a large message still going out
        if self.connection.output_full():
            return 0  # a reader that does not read holds no more than its output bound (client_connection.py)
        return link.credit

    def _timed_payload(self, message: StoredMessage, offset: int) -> bytes:
        appended_at = self.stream.log.appended_at(offset)
        assert appended_at is not None  # the message at offset is retained: it is being sent
        return timed_payload(message, offset, appended_at)

    def deliver_offset(self, offset: int, message: StoredMessage) -> bool:
        limit = self.link.max_message_size
        payload = self._payload(message, offset)
        if limit is not None and len(payload) > limit:
            return False  # larger than this receiver takes (Part 2 §2.7.3): it reads on past it
        self._tags = tags = (self._tags + 1) & 0xFFFFFFFF
        connection = self.connection
        connection.mark_dirty()
        if self.presettled and connection.protocol.send_settled(self.link, _TAG.pack(tags), payload):
            return True  # the usual read: no Delivery object, nothing watching
        delivery = connection.protocol.send_transfer(self.link, _TAG.pack(tags), payload, self.presettled)
        if connection.protocol.hook is not None:  # the tap's delivery_out (tap.py): a reader holds no entry
            connection.delivered(self, None, delivery)
        return True

    def deliver_run(self, log: StreamLog, position: int, end: int) -> int | None:
        """The usual read (pre-settled, nothing watching): runs of messages written as one string of
        frames each (``Connection.send_settled_run``), no Delivery objects.

        Sends at most the link's credit and session window, in passes of at most :data:`RUN`
        messages and :data:`RUN_BYTES` of payload, stopping when the client's output is full (as
        :meth:`credit` would; checked between passes, so a pass may go past the bound by at most
        one pass) or a message needs several frames.  A pass of messages with nothing before their
        bare message (:meth:`StreamLog.bare_payloads`) sends them as stored, the offset annotation
        packed with each frame's header; others get theirs from :meth:`StreamLog.delivery_payloads`.
        A pass with a message that does not fit one frame or the link's max-message-size goes
        message by message.
        """
        connection = self.connection
        protocol = connection.protocol
        room = protocol.settled_run_room()
        if not self.presettled or room is None:
            return None
        link = self.link
        session = link.session
        limit = link.max_message_size
        fits = room if limit is None else min(room, limit)
        tags = sent = self._tags
        while position < end and link.outgoing is None and not connection.output_full():
            credit = min(link.credit, session.remote_incoming_window, RUN)
            if credit <= 0:
                break
            stop = min(end, position + credit)
            bare = log.bare_payloads(position, stop, RUN_BYTES) if not self.timed else None
            if bare and max(map(len, bare)) <= fits - _LEAD_SIZE:
                # The usual stream message: sent as stored, its offset annotation packed in front.
                protocol.send_settled_run(link, (tags + 1) & 0xFFFFFFFF, bare, OFFSET_LEAD, position)
                tags = (tags + len(bare)) & 0xFFFFFFFF
                position += len(bare)
                continue
            payloads = log.delivery_payloads(position, stop, RUN_BYTES, self.timed)
            if max(map(len, payloads)) <= fits:
                protocol.send_settled_run(link, (tags + 1) & 0xFFFFFFFF, payloads)
                tags = (tags + len(payloads)) & 0xFFFFFFFF
                position += len(payloads)
                continue
            for payload in payloads:
                # A message of several frames took window; one still going out holds the rest back.
                if link.outgoing is not None or min(link.credit, session.remote_incoming_window) <= 0:
                    break
                position += 1
                if limit is not None and len(payload) > limit:
                    continue  # larger than this receiver takes (Part 2 §2.7.3): it reads on past it
                tags = (tags + 1) & 0xFFFFFFFF
                if not protocol.send_settled(link, _TAG.pack(tags), payload):
                    protocol.send_transfer(link, _TAG.pack(tags), payload, True)  # several frames
        if tags != sent:
            self.stream.counters.delivered += (tags - sent) & 0xFFFFFFFF
            connection.mark_dirty()
        self._tags = tags
        return position

    # Outcomes and ending -----------------------------------------------

    def outcome(self, delivery: Delivery, state: Any, settled: bool) -> None:
        """The client settled (or gave an outcome for) a delivery: count it, settle it, nothing else.

        Within a transaction (Part 4 §4.5.3) the outcome is the same no-op:
        reading a stream acquires nothing for a discharge to undo.
        """
        counters = self.stream.counters
        outcome = state.outcome if isinstance(state, TransactionalState) else state
        if isinstance(outcome, Accepted):
            counters.acknowledged += 1
        elif isinstance(outcome, Released):
            counters.released += 1
        elif isinstance(outcome, Modified):
            counters.modified += 1
        elif isinstance(outcome, Rejected):
            counters.rejected += 1
        elif not settled:
            return  # a non-terminal state (received): wait for the outcome
        if not settled:
            self.connection.engine.settle(delivery, state)

    def __repr__(self) -> str:
        return f"<StreamConsumer {self.link.name!r} on {self.stream.name!r} at {self.position}>"
