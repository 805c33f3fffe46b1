"""Queues: ordered, prioritised, expiring message stores with competing consumers.

Semantics (OASIS AMQP 1.0 Part 3 §3.2.1, §3.3, §3.4; broker paper 2.2.2-2.2.5,
2.3.11-2.3.12; RabbitMQ semantics: ordering is kept on requeue):

* Available messages wait per priority level, ordered by arrival, so higher
  priorities go first and each level stays FIFO.  A level is a FIFO (a
  ``deque`` holding the entries themselves: O(1) each way, 8 bytes a message)
  for messages offered for the first time in arrival order, plus a heap of
  ``(arrival, token, entry)`` for the rest (released or modified messages, which
  return to their original place since their arrival number never changes,
  and scheduled messages enqueued later with a number reserved earlier); the
  next message of a level is the older of the two heads.  Entries that leave
  from the middle (expiry, selectors) are dropped lazily when they reach a
  head: a FIFO item is live while its entry is AVAILABLE and has never been
  taken (``token == 1``), a heap item while the entry's token still matches.
* An expiry index (``(expires_at, arrival, entry)`` sorted, holding only
  messages that can expire) finds expired messages without scanning; expired
  messages are never delivered.
* Only acquired entries are kept in a map by arrival number: available ones
  are reached through their level (and the indexes below hold entries, not
  numbers), so a queued message costs no map slot (docs/performance.md).
* Each message is AVAILABLE, ACQUIRED (by one consumer) or ARCHIVED (§3.3).
* Consumers with credit take turns; a consumer found without credit whose credit only a
  :meth:`Queue.wake` can bring back (``wakes_queue``: an AMQP 1.0 link, whose flow, session
  window and output room all pump it) leaves the turns until woken, so a message never walks
  consumers that cannot take it (1,000 idle receivers cost nothing per message, only once each
  when first found idle; bench ``scale``).  Browsers see every message without
  acquiring it, in arrival order.  While a browser is attached the queue keeps
  what it holds sorted by arrival number (a ``SortedKeyList``), and each
  browser holds only the last number it saw: a fetch seeks past it in
  O(log n) and then costs O(1) per message sent, however deep the queue.
* A snapshot of the contents costs nothing until read: every change first
  calls ``_changing``, which copies a pending :class:`Capture` still held by
  some snapshot (:mod:`minibroker.broker.capture`).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import weakref
from collections import deque
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from sortedcontainers import SortedList

from .bounds import refusal
from .browsing import Browsers
from .capture import Capture, Run
from .config import DEFAULT_DEAD_LETTER_SUFFIX, QueueOptions
from .duplicates import RecentIds
from .selective import SelectiveIndex
from .statistics import NodeCounters, QueuedMessages, QueueSnapshot
from .stored import ACQUIRED, ARCHIVED, AVAILABLE, Entry, OriginMessage, StoredMessage

if TYPE_CHECKING:
    from ..amqp.performatives import Error
    from .config import BrokerConfig
    from .consuming import ConsumerRequest, NodeConsumer

__all__ = ["Consumer", "Queue", "QueueServices", "priority_level", "DeadLetter"]

#: Callback moving an entry to the dead-letter address: (queue, entry, reason, description).
DeadLetter = Callable[["Queue", Entry, str, "str | None"], None]


def priority_level(priority: int, levels: int) -> int:
    """Map a header priority (0-255) onto one of ``levels`` distinct levels (Part 3 §3.2.1).

    With fewer than 10 levels, priorities 0..(5 - ceil(n/2)) are the lowest
    level and (4 + floor(n/2)) and above the highest; with 10 or more,
    priorities >= n are the highest level n - 1.
    """
    if levels >= 10:
        return min(priority, levels - 1)
    low = 5 - math.ceil(levels / 2)
    high = 4 + levels // 2
    return min(max(priority, low), high) - low


#: A run a consumer takes at once (:func:`_dispatch_runs`): at most this many messages, and
#: the bytes of payload after which no more are added (so the output bound is read often enough).
RUN = 1024
RUN_BYTES = 256 * 1024

#: The level of a message without a header (priority 4, Part 3 §3.2.1), by the number of levels
#: (1..256): read for most messages instead of computing it.
_DEFAULT_LEVELS = tuple(priority_level(4, levels) if levels else 0 for levels in range(257))


class Consumer(Protocol):
    """What a queue needs of a consumer (the broker's sending link).

    A consumer may also set ``wakes_queue = True`` when every way it gains credit ends in
    :meth:`Queue.wake`: the queue then leaves it out of the turns while it has none (read once,
    when it is added; one that does not say is never left out).  One that sets ``runs = True``
    (read once too) has ``run_room() -> int`` (how many messages it takes in one run now; 0 or 1:
    one at a time) and ``deliver_run(entries) -> int`` (sends them, returns how many went out),
    and may say ``takes_fresh = True`` (``accepts`` is true of every entry without a history):
    while it is alone in the turns it takes runs (:func:`_dispatch_runs`).
    """

    link_id: int
    browse: bool

    def credit(self) -> int: ...

    def accepts(self, entry: Entry) -> bool: ...

    def deliver(self, entry: Entry) -> None: ...


class QueueServices(Protocol):
    """What :meth:`Queue.make` takes of the router's ``node.NodeServices``.

    Named here because node.py names :class:`Queue` in the node contract: the dependency runs from
    node.py to this module, not back.
    """

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def dead_letter(self) -> DeadLetter: ...

    @property
    def expiry_added(self) -> Callable[[float], None]: ...


class Queue:
    """A queue node (a distribution node with ``move`` semantics, §3.5.3); a :class:`~.node.Node`."""

    KIND: ClassVar[str] = "queue"
    OPTIONS: ClassVar[type[Any] | None] = QueueOptions
    SNAPSHOT: ClassVar[type[Any]] = QueueSnapshot
    #: A queue keeps the dead letters routed to it (``keeps_expired``), so their copy carries no ttl.
    DEAD_LETTER_TTL: ClassVar[bool] = False
    KEEPS_READ: ClassVar[bool] = False  # an accepted message leaves (move semantics, §3.5.3)
    HOLDS_MESSAGES: ClassVar[bool] = True
    REFUSES_WHEN_FULL: ClassVar[bool] = True  # ``max_depth``/``max_bytes`` with ``overflow`` (limits.py)
    EXPIRES_BY_TTL: ClassVar[bool] = True  # header ttl, ``default_ttl``, ``max_ttl`` (Part 3 §3.2.1)
    KEEPS_TRANSIENT: ClassVar[bool] = False  # a restart loses what was not sent durable (Part 3 §3.2.1)

    @classmethod
    def make(
        cls, name: str, services: QueueServices, counters: NodeCounters, options: QueueOptions | None,
        temporary: bool = False,
    ) -> Queue:
        """A queue (``options`` None: ``BrokerConfig.queue_defaults``); one named
        ``<queue>/$DeadLetterQueue`` keeps what it gets and dead-letters nothing."""
        dead_letters = name.endswith(DEFAULT_DEAD_LETTER_SUFFIX)
        if options is None:
            options = services.config.queue_defaults
            if dead_letters:
                options = dataclasses.replace(options, dead_letter_address="")
        queue = cls(name, options, counters, services.dead_letter, temporary, services.expiry_added)
        queue.keeps_expired = dead_letters
        return queue

    def __init__(
        self,
        name: str,
        options: QueueOptions,
        counters: NodeCounters,
        dead_letter: DeadLetter | None = None,
        temporary: bool = False,
        on_expiry: Callable[[float], None] | None = None,
    ) -> None:
        self.name = name
        self.options = options
        self.counters = counters
        self.dead_letter = dead_letter
        self.temporary = temporary
        self.on_expiry = on_expiry  # told of each new expiry time, so a timer can be rescheduled
        #: A dead-letter queue keeps what it receives: its messages no longer expire.
        self.keeps_expired = False
        # Per priority level, a FIFO of first-time entries in arrival order and a heap of
        # (seq, token, entry) for the others (see the module docstring for which are live).
        # Both grow to a level when its first message comes (``_entry``): an empty queue holds
        # none (ten empty deques were 7.8 KB of the 10 KB an empty queue cost; bench ``scale``).
        self._fifos: list[deque[Entry]] = []
        self._levels: list[list[tuple[int, int, Entry]]] = []
        self._available_count = 0
        #: No level above this one holds an available entry (nor a stale item): where
        #: ``_first_available`` starts, rather than at the highest of ``priorities`` levels.
        self._top = -1
        self._acquired: dict[int, Entry] = {}  # seq -> Entry, every ACQUIRED entry
        #: Built when a consumer first skips a message it does not accept (selective.py).
        self._selective: SelectiveIndex | None = None
        #: (expires_at, seq, entry) of every available entry that can expire; made for the first.
        self._expiry: SortedList | None = None
        self._seq = 0
        self.consumers: list[Consumer] = []
        #: The consumers that take turns (attach order, those woken since at the end): every one
        #: but the idle ones parked in ``_parked`` until :meth:`wake` (see the module docstring).
        self._ready: list[Consumer] = []
        self._parked: set[Consumer] | None = None  # made when the first is parked
        self._waking = 0  # how many consumers say ``wakes_queue`` (none: nothing is ever parked)
        self._runners: set[Consumer] = set()  # those that say ``runs`` (see _dispatch_runs)
        self._browsers: Browsers | None = None  # made when the first browser attaches (browsing.py)
        self._turn = 0
        self._capture: weakref.ref[Capture] | None = None  # contents promised to a snapshot
        #: Encoded bytes of the messages held (``max_bytes``, see limits.py).
        self.bytes = 0
        #: The largest message offered to a bounded queue so far (limits.py sizes credit by it).
        self.largest = 0
        #: Told when a message leaves, while producers wait for room (limits.py, withhold-credit).
        self.on_removed: Callable[[Queue], None] | None = None
        #: The ids taken recently, with ``duplicate_window`` (duplicates.py; set again by :meth:`configure`).
        self.duplicates: RecentIds | None = RecentIds(options.duplicate_window) if options.duplicate_window else None

    @property
    def limited(self) -> bool:
        """Whether ``max_depth`` or ``max_bytes`` bounds this queue (limits.py)."""
        return self.options.max_depth is not None or self.options.max_bytes is not None

    # ------------------------------------------------------- Node protocol

    def admit(self, message: StoredMessage, staged: Collection[StoredMessage] | None = None) -> Error | None:
        """The error to refuse ``message`` with when the queue is bounded and full (bounds.py), or None."""
        options = self.options
        if options.max_depth is None and options.max_bytes is None:
            return None  # the common case, on every message: no bound (``limited``, inlined)
        return refusal(self, message, staged)

    def configure(self, options: QueueOptions, now: float) -> None:
        """Declared again with ``options``: they apply from now on (what is held stays, and so do
        the ids remembered while a duplicate window is set)."""
        if options == self.options:
            return
        self.options = options
        window = options.duplicate_window
        if not window:
            self.duplicates = None
        elif self.duplicates is None:
            self.duplicates = RecentIds(window)
        else:
            self.duplicates.window = window

    def put(self, message: StoredMessage, now: float, seq: int | None = None) -> None:
        """Enqueue a message (publish.py is the only caller) and hand it to a consumer with credit."""
        entry = self._entry(message, now, seq)
        if entry is None:
            return
        consumers = self._ready
        if self._available_count or self._browsers is not None or not consumers:
            self._push(entry)
            if consumers or self._browsers is not None:
                self._dispatch(now)
            elif self._expiry and self._expiry[0][0] <= now:
                self.expire(now)  # what dispatch would do when no consumer takes turns (all idle)
            return
        # Nothing else is waiting (so nothing is due to expire either) and no browser needs to
        # see it: the next consumer in turn with credit that takes it gets it straight away,
        # acquired without passing through the available set (its FIFO, expiry index and
        # selector index).  What dispatch would do, in the same turn order.
        count = len(consumers)
        turn = self._turn
        idle = False
        for _ in range(count):
            consumer = consumers[turn % count]
            turn += 1
            if consumer.credit() > 0:
                if consumer.accepts(entry):
                    self._turn = turn % count
                    entry.state = ACQUIRED
                    self._acquired[entry.seq] = entry
                    entry.owner = consumer
                    self.counters.delivered += 1
                    consumer.deliver(entry)
                    if idle and self._waking:
                        self._park_idle()
                    return
            else:
                idle = True
        # Whose turn is next, as dispatch leaves it after walking every consumer (a consumer
        # removed since the last turn may have left ``_turn`` past the end of the turns).
        self._turn = turn % count
        self._push(entry)  # no consumer takes it now: it waits (dispatch would find none either)
        if idle and self._waking:
            self._park_idle()

    def open_consumer(self, request: ConsumerRequest) -> NodeConsumer:
        """Consumers compete for the queue's messages; a ``copy`` source browses them (2.3.12)."""
        return request.queue_consumer(self, browse=request.copy)

    def producer_credit_queue(self) -> Queue | None:
        """Itself when its overflow is ``withhold-credit``: producers get credit only for the room."""
        return self if self.limited and self.options.overflow == "withhold-credit" else None

    def queues(self) -> Iterator[Queue]:
        yield self

    def snapshot(self, now: float, run: Run | None = None) -> QueueSnapshot:
        """Counters now; messages copied only when read (``run`` runs that copy in the broker's thread)."""
        return QueueSnapshot(
            name=self.name,
            depth=self.depth,
            available=self.available_count,
            acquired=self.depth - self.available_count,
            consumers=len(self.consumers),
            messages=QueuedMessages(self.capture(run), now),
            statistics=self.counters.freeze(),
        )

    # ----------------------------------------------------------- contents

    @property
    def depth(self) -> int:
        """Messages held: available plus acquired but not yet settled."""
        return self._available_count + len(self._acquired)

    @property
    def available_count(self) -> int:
        return self._available_count

    def _available_in_order(self) -> Iterator[Entry]:
        """Available entries in delivery order (sorts each level: for selectors and snapshots)."""
        for fifo, heap in zip(reversed(self._fifos), reversed(self._levels), strict=True):
            fresh = [entry for entry in fifo if entry.token == 1 and entry.state == AVAILABLE]
            back = [entry for _seq, token, entry in sorted(heap, key=_first) if entry.token == token and entry.state == AVAILABLE]  # fmt: skip
            yield from heapq.merge(fresh, back, key=_seq) if back else fresh

    def entries(self) -> Iterator[Entry]:
        """Entries in delivery order: available ones by priority then arrival, then acquired ones."""
        yield from self._available_in_order()
        yield from sorted(self._acquired.values(), key=_seq)

    def capture(self, run: Run | None = None) -> Capture:
        """The contents as they are now, copied only when read or before the queue next changes."""
        pending = self._capture() if self._capture is not None else None
        if pending is not None:
            return pending  # nothing changed since it was taken: snapshots share one copy
        capture = Capture(self, run)
        self._capture = weakref.ref(capture)
        return capture

    def _changing(self) -> None:
        """The contents are about to change: copy them for a snapshot still holding a capture."""
        ref, self._capture = self._capture, None
        pending = ref() if ref is not None else None
        if pending is not None:
            pending.fill()

    def enqueue(self, message: StoredMessage, now: float, seq: int | None = None) -> Entry | None:
        """Add a message (§3.3: it becomes AVAILABLE); None if it had already expired.

        ``seq`` places it by a number :meth:`reserve_seq` gave out earlier (a scheduled message).
        """
        entry = self._entry(message, now, seq)
        if entry is not None:
            self._push(entry)
        return entry

    def _entry(self, message: StoredMessage, now: float, seq: int | None) -> Entry | None:
        """The entry of a message being added, counted and held, not yet available; None if expired."""
        if self._capture is not None:
            self._changing()
        options = self.options
        expires_at = None if self.keeps_expired else message.expiry(options.default_ttl, options.max_ttl)
        if seq is None:
            self._seq += 1
            seq = self._seq
        levels, header = options.priorities, message.header
        level = _DEFAULT_LEVELS[levels] if header is None else priority_level(header.priority, levels)
        entry = Entry(seq, message, level, expires_at)
        self.counters.enqueued += 1
        if expires_at is not None:
            if expires_at <= now:
                self._expired(entry)
                return None
        if self._browsers is not None:
            self._browsers.arrived(entry)
        # StoredMessage.size, inlined: a property call per message costs the AMQP 1.0 path 1 %
        # (bench/replay_bench.py under callgrind); an OriginMessage's needs no conversion.
        self.bytes += message.size if type(message) is OriginMessage else len(message.payload)
        if entry.level >= len(self._levels):  # the first message at this level (or more levels declared since)
            self._fifos.extend(deque() for _ in range(entry.level + 1 - len(self._fifos)))
            self._levels.extend([] for _ in range(entry.level + 1 - len(self._levels)))
        return entry

    def reserve_seq(self) -> int:
        """The next arrival number, for a message that will be enqueued later with it."""
        self._seq += 1
        return self._seq

    def _push(self, entry: Entry) -> None:
        if self._capture is not None:
            self._changing()
        if entry.state == ACQUIRED:
            del self._acquired[entry.seq]
        entry.state = AVAILABLE
        token = entry.token = entry.token + 1
        level = entry.level
        if level > self._top:
            self._top = level
        fifo = self._fifos[level]
        if token == 1 and (not fifo or fifo[-1].seq < entry.seq):
            fifo.append(entry)  # the common case: a new message, newest of its level
        else:
            heapq.heappush(self._levels[entry.level], (entry.seq, token, entry))
        self._available_count += 1
        expires_at = entry.expires_at
        if expires_at is not None:
            expiry = self._expiry
            if expiry is None:
                expiry = self._expiry = SortedList()
            if self.on_expiry is not None and (not expiry or expires_at < expiry[0][0]):
                self.on_expiry(expires_at)
            expiry.add((expires_at, entry.seq, entry))
        if self._selective is not None:
            self._selective.available(entry)

    def _take(self, entry: Entry, state: int) -> None:
        """An available entry leaves the available set (its heap item goes stale)."""
        if self._capture is not None:
            self._changing()
        entry.state = state
        if state == ACQUIRED:
            self._acquired[entry.seq] = entry
        self._available_count -= 1
        if entry.expires_at is not None and self._expiry is not None:
            # Only available messages expire (an acquired one is judged when it comes back).
            self._expiry.discard((entry.expires_at, entry.seq, entry))
        if self._selective is not None:
            self._selective.taken(entry)

    def _first_available(self) -> Entry | None:
        """The next entry in delivery order, dropping stale FIFO and heap items on the way."""
        levels = self._levels
        fifos = self._fifos
        for level in range(self._top, -1, -1):
            fifo = fifos[level]
            while fifo:
                entry = fifo[0]
                if entry.token == 1 and entry.state == AVAILABLE:
                    break
                fifo.popleft()
            heap = levels[level]
            while heap:
                _seq, token, back = heap[0]
                if back.token == token and back.state == AVAILABLE:
                    if not fifo or back.seq < fifo[0].seq:
                        return back
                    break
                heapq.heappop(heap)
            if fifo:
                return fifo[0]
            if level == self._top:
                self._top = level - 1  # this level is empty now, and every one above it
        return None

    def purge(self) -> int:
        """Remove every available message; return how many."""
        return _remove(self, list(self._available_in_order()), clear=True)

    def drop_transient(self) -> int:
        """Remove every message whose header is not ``durable`` (a broker restart); return how many.

        "Durable messages MUST NOT be lost even if an intermediary is
        unexpectedly terminated and restarted" (Part 3 §3.2.1); others may be.
        """
        held = [*self._available_in_order(), *self._acquired.values()]
        return _remove(self, [entry for entry in held if entry.message.header is None or not entry.message.header.durable])

    # ---------------------------------------------------------- consumers

    def add_consumer(self, consumer: Consumer) -> None:
        if consumer.browse:
            if self._browsers is None:
                self._browsers = Browsers(self.entries())
            self._browsers.add(consumer)
        else:
            self.consumers.append(consumer)
            self._ready.append(consumer)
            if getattr(consumer, "wakes_queue", False):
                self._waking += 1
            if getattr(consumer, "runs", False):
                self._runners.add(consumer)

    def wake(self, consumer: Consumer, now: float) -> None:
        """``consumer`` may have credit again (a flow, a session window or output room): back in
        the turns if it was parked, then dispatch."""
        parked = self._parked
        if parked and consumer in parked:
            parked.discard(consumer)
            self._ready.append(consumer)
        self._dispatch(now)

    def _park_idle(self) -> None:
        """Leave the consumers without credit that a :meth:`wake` brings back out of the turns
        (after a walk met one: walking it is paid for by the wake that puts it back)."""
        if self._parked is None:
            self._parked = set()
        self._ready, self._turn = _parked_out(self._ready, self._turn, self._parked)

    def _unpark_all(self) -> None:
        """Every consumer back in the turns, in attach order (something changed what any may take)."""
        self._parked = None
        self._ready = list(self.consumers)

    def remove_consumer(self, consumer: Consumer) -> None:
        if self._browsers is not None and self._browsers.remove(consumer):
            self._browsers = None  # rebuilt when a browser attaches again
        if self._selective is not None and self._selective.forget(consumer):
            self._selective = None  # rebuilt when a selective consumer needs it again
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            self._runners.discard(consumer)
            if getattr(consumer, "wakes_queue", False):
                self._waking -= 1
            # Who may take a message can depend on who else is attached (a single active
            # consumer): every consumer takes turns again.
            self._unpark_all()

    def dispatch(self, now: float) -> None:
        """Send what consumers have credit for; browsers first see what is new.

        Called from outside the queue when anything may have changed what its consumers can
        take (an outcome, a timer, a prefetch window with room), so every parked consumer
        takes turns again first; a consumer that gained credit itself calls :meth:`wake`.
        """
        if self._parked:
            self._unpark_all()
        self._dispatch(now)

    def dispatch_new(self, now: float) -> None:
        """Messages were added (:meth:`enqueue`, a topic's copies): send them to consumers in turn.

        New messages change no consumer's credit, so the consumers parked without it stay parked
        (:meth:`dispatch` would bring them all back, once per copy of a fan-out).
        """
        self._dispatch(now)

    def _dispatch(self, now: float) -> None:
        if self._expiry and self._expiry[0][0] <= now:
            self.expire(now)
        if self._browsers is not None:
            self._browsers.send(self._seq)
        consumers = self._ready
        if not consumers or not self._available_count:
            return
        if len(consumers) == 1 and consumers[0] in self._runners:
            if _dispatch_runs(self, consumers[0]) or not self._ready:
                return
            consumers = self._ready
        count = len(consumers)
        turn = self._turn
        idle = 0
        dry = False
        while self._available_count and idle < count:
            consumer = consumers[turn % count]
            turn += 1
            if consumer.credit() <= 0:
                idle += 1
                dry = True
                continue
            entry = self._next_for(consumer)
            if entry is None:
                idle += 1
                continue
            idle = 0
            self._acquire(entry, consumer)
            consumer.deliver(entry)
            if consumers is not self._ready or len(consumers) != count:  # a consumer went away while delivering
                consumers = self._ready
                count = len(consumers)
                if not count:
                    break
        self._turn = turn % count if count else 0
        if dry and self._waking:
            self._park_idle()

    def take(self, owner: Any, now: float) -> Entry | None:
        """Acquire the next message for a reader that asks for one at a time (AMQP 0-9-1
        ``basic.get``, §1.8.3.10), outside the consumers' turns; None when none is available."""
        if self._expiry and self._expiry[0][0] <= now:
            self.expire(now)
        entry = self._first_available()
        if entry is not None:
            self._acquire(entry, owner)
        return entry

    def _next_for(self, consumer: Consumer) -> Entry | None:
        first = self._first_available()
        if first is None or consumer.accepts(first):
            return first
        selective = self._selective
        if selective is None:
            selective = self._selective = SelectiveIndex(self._available_in_order())
        return selective.next_for(consumer)

    def _acquire(self, entry: Entry, consumer: Consumer) -> None:
        self._take(entry, ACQUIRED)
        entry.owner = consumer
        self.counters.delivered += 1

    # ------------------------------------------------------------ outcomes

    def accept(self, entry: Entry) -> None:
        """``accepted``: the message is done with (§3.4.2)."""
        if entry.state == ARCHIVED:
            return
        self.counters.acknowledged += 1
        self._archive(entry)

    def accept_all(self, entries: list[Entry]) -> None:
        """:meth:`accept` each of ``entries`` (one disposition's range, a pre-settled run), in order."""
        _accept_all(self, entries)

    def reject(self, entry: Entry, condition: str | None, description: str | None) -> None:
        """``rejected``: remove it, dead-lettering it with the error when configured (§3.4.3)."""
        if entry.state == ARCHIVED:
            return
        self.counters.rejected += 1
        self._archive(entry)
        if self.dead_letter is not None:
            self.dead_letter(self, entry, condition or "amqp:rejected", description)

    def release(self, entry: Entry, now: float) -> None:
        """``released``: back to its original place, delivery-count unchanged (§3.4.4)."""
        if entry.state != ACQUIRED:
            return
        self.counters.released += 1
        self._make_available(entry, now)

    def modify(
        self,
        entry: Entry,
        now: float,
        delivery_failed: bool,
        undeliverable_here: bool,
        annotations: dict[Any, Any] | None,
        link_id: int | None,
    ) -> None:
        """``modified`` (§3.4.5): count a failed delivery, remember where it may not go, merge annotations."""
        if entry.state != ACQUIRED:
            return
        if self._capture is not None:
            self._changing()
        self.counters.modified += 1
        if annotations:
            entry.annotate(annotations)
        if undeliverable_here and link_id is not None:
            if entry.undeliverable is None:
                entry.undeliverable = set()
            entry.undeliverable.add(link_id)
        if delivery_failed:
            entry.delivery_count += 1
            # Not enforced in a dead-letter queue: what it keeps, it keeps.  Elsewhere the
            # message goes to the dead-letter address, or is dropped when that is off.
            if entry.delivery_count > self.options.max_delivery_count and not self.keeps_expired:
                self._archive(entry)
                if self.dead_letter is not None:
                    self.dead_letter(
                        self,
                        entry,
                        "MaxDeliveryCountExceeded",
                        f"delivery-count {entry.delivery_count} exceeds max_delivery_count "
                        f"{self.options.max_delivery_count}",
                    )
                return
        self._make_available(entry, now)

    def _make_available(self, entry: Entry, now: float) -> None:
        entry.owner = None
        entry.returned()
        if entry.expires_at is not None and entry.expires_at <= now:
            self._archive(entry)
            self._expired(entry)
            return
        self._push(entry)

    def _archive(self, entry: Entry) -> None:
        if self._capture is not None:
            self._changing()
        state = entry.state
        if state == AVAILABLE:
            self._take(entry, ARCHIVED)
        elif state == ACQUIRED:
            del self._acquired[entry.seq]
        entry.state = ARCHIVED
        entry.owner = None
        if state != ARCHIVED:  # it was held until now
            message = entry.message  # its size as _entry counted it
            self.bytes -= message.size if type(message) is OriginMessage else len(message.payload)
            if self._browsers is not None:
                self._browsers.left(entry)
        if entry.expires_at is not None and self._expiry is not None:
            self._expiry.discard((entry.expires_at, entry.seq, entry))
        if self.on_removed is not None:
            self.on_removed(self)

    def drop_head(self, reason: str, description: str) -> bool:
        """Drop the next available message to make room (overflow ``drop-head``); False if none is available."""
        entry = self._first_available()
        if entry is None:
            return False
        self.counters.dropped += 1
        self._archive(entry)
        if self.dead_letter is not None:
            self.dead_letter(self, entry, reason, description)
        return True

    # -------------------------------------------------------------- expiry

    def next_expiry(self) -> float | None:
        return self._expiry[0][0] if self._expiry else None

    def expire(self, now: float) -> int:
        """Drop (or dead-letter) available messages whose time has come (broker paper 2.2.5).

        An acquired message is judged again when it comes back (``_make_available``).
        """
        expired = 0
        if self._expiry is None:
            return 0
        due: list[Entry] = [entry for _at, _seq, entry in self._expiry.irange(maximum=(now, math.inf))]
        for entry in due:
            if entry.state == AVAILABLE:
                self._archive(entry)
                self._expired(entry)
                expired += 1
        return expired

    def _expired(self, entry: Entry) -> None:
        self.counters.expired += 1
        if self.options.dead_letter_on_expiry and self.dead_letter is not None:
            self.dead_letter(self, entry, "TTLExpiredException", "message expired before delivery")


def _first(item: tuple[int, int, Entry]) -> int:
    return item[0]


def _seq(entry: Entry) -> int:
    return entry.seq


def _parked_out(ready: list[Consumer], turn: int, parked: set[Consumer]) -> tuple[list[Consumer], int]:
    """The consumers of ``ready`` still taking turns, and whose turn is next, once those whose
    credit only a wake brings back (``wakes_queue``) and who have none are moved to ``parked``.

    Each is parked once per time it runs dry, not walked by every message (bench ``scale``).
    """
    turn = turn % len(ready) if ready else 0
    next_turn = turn
    keep: list[Consumer] = []
    for i, consumer in enumerate(ready):
        if getattr(consumer, "wakes_queue", False) and consumer.credit() <= 0:
            parked.add(consumer)
            if i < turn:
                next_turn -= 1  # the consumer whose turn is next keeps it
        else:
            keep.append(consumer)
    return keep, next_turn


def _dispatch_runs(queue: Queue, consumer: Consumer) -> bool:
    """The one consumer in ``queue``'s turns takes runs: what its ``run_room`` allows, at most
    :data:`RUN` messages and about :data:`RUN_BYTES` bytes a run, acquired in one loop and sent in
    one call (``deliver_run``).  False to leave the rest to the message-by-message walk: room for
    one message or none (the walk parks a consumer without credit), a message it does not take
    (the walk looks past it with the selector index), other consumers in the turns.

    The output bound, read by ``run_room`` before each run, is passed by at most one run (as one
    message at a time passes it by one).  What a run did not send goes back as it was: acquired
    for no one, its place and first-acquirer kept (``Queue._push``, not ``_make_available``).
    """
    run_room = consumer.run_room  # type: ignore[attr-defined]  # a runner (Queue.add_consumer)
    deliver_run = consumer.deliver_run  # type: ignore[attr-defined]
    while queue.available_count:
        room = run_room()
        if room <= 1:
            return False
        run = _take_run(queue, consumer, min(room, RUN))
        if not run:
            return False
        sent = deliver_run(run)
        for entry in run[sent:]:  # not sent after all (a message of several frames took the window)
            queue._push(entry)
            entry.owner = None
            queue.counters.delivered -= 1
        ready = queue._ready
        if len(ready) != 1 or ready[0] is not consumer or sent < len(run):
            return False  # it went away while sending, others joined, or it is full: the walk goes on
    return True


def _take_run(queue: Queue, consumer: Consumer, count: int) -> list[Entry]:
    """Acquire for ``consumer`` up to ``count`` entries of ``queue`` in delivery order while it
    takes each, until their bytes pass :data:`RUN_BYTES`.

    Entries going out for the first time (the highest level's FIFO, its heap empty, no expiry,
    no snapshot pending, no selector index) are taken in a loop of their own: what ``_take`` does
    for each, the count of available ones lowered once.  Anything else, one by one through
    ``_first_available`` and ``_take``.
    """
    run: list[Entry] = []
    append = run.append
    accepts = consumer.accepts
    fresh = getattr(consumer, "takes_fresh", False)  # it takes every entry with no history (links.py)
    acquired = queue._acquired
    budget = RUN_BYTES
    while queue._available_count and len(run) < count and budget > 0:
        top = queue._top
        fifo = queue._fifos[top]
        if fifo and not queue._levels[top] and queue._capture is None and queue._selective is None:
            room = count - len(run)
            taken = 0
            while fifo and taken < room and budget > 0:
                entry = fifo[0]
                if entry.token != 1 or entry.state != AVAILABLE or entry.expires_at is not None:
                    break  # a stale head, or one in the expiry index: the way below
                if (entry._rare is not None or not fresh) and not accepts(entry):
                    break
                fifo.popleft()  # no stale head left behind
                entry.state = ACQUIRED
                acquired[entry.seq] = entry
                entry.owner = consumer
                append(entry)
                taken += 1
                message = entry.message  # its size as _entry counted it
                budget -= message.size if type(message) is OriginMessage else len(message.payload)
            if taken:
                queue._available_count -= taken
                continue
        first = queue._first_available()
        if first is None or not accepts(first):
            break
        queue._take(first, ACQUIRED)  # first: a snapshot's pending capture copies the contents before
        if fifo and fifo[0] is first:
            fifo.popleft()
        first.owner = consumer
        append(first)
        message = first.message
        budget -= message.size if type(message) is OriginMessage else len(message.payload)
    queue.counters.delivered += len(run)
    return run


def _accept_all(queue: Queue, entries: list[Entry]) -> None:
    """``Queue.accept_all``: while nothing watches what leaves (no snapshot's pending capture,
    browser or waiting producer) acquired entries leave in one loop (what ``_archive`` does for
    each); anything else goes through ``Queue.accept``."""
    if queue._capture is not None or queue._browsers is not None or queue.on_removed is not None:
        for entry in entries:
            queue.accept(entry)
        return
    acquired = queue._acquired
    expiry = queue._expiry
    done = size = 0
    for entry in entries:
        if entry.state != ACQUIRED:
            queue.accept(entry)
            continue
        del acquired[entry.seq]
        entry.state = ARCHIVED
        entry.owner = None
        message = entry.message  # its size as _entry counted it
        size += message.size if type(message) is OriginMessage else len(message.payload)
        if entry.expires_at is not None and expiry is not None:
            expiry.discard((entry.expires_at, entry.seq, entry))
        done += 1
    queue.counters.acknowledged += done
    queue.bytes -= size


def _remove(queue: Queue, entries: list[Entry], clear: bool = False) -> int:
    """Archive ``entries`` (``Queue.purge``: every available one, and then its levels are cleared;
    ``Queue.drop_transient``); return how many."""
    for entry in entries:
        queue._archive(entry)
    if clear:
        for fifo in queue._fifos:
            fifo.clear()
        for heap in queue._levels:
            heap.clear()
    if queue._selective is not None:
        queue._selective.reset()
    return len(entries)
