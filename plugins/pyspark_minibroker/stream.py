"""The streaming reader's state for a queue: which messages each micro-batch holds and when they are settled.

An offset is ``{"n": messages handed to Spark so far, "ids": fingerprints of the last batch,
"pending": fingerprints of earlier messages not known to be settled, "backlog": the messages the
broker said were waiting after the batch}``, the fingerprints packed (:func:`pack`: 48 bits each,
base64: 8 characters a message, about 80 KB for a batch of 10,000 where a JSON list of hex
strings took 240 KB).  Recognising any redelivered message among them needs one fingerprint per
message: AMQP 1.0 queues give messages no sequence number a reader could keep instead, so what an
offset holds grows with ``maxBatch``.  ``backlog`` (the ``available`` of the last fetch's drain
answer, Part 2 §2.7.4; absent when the broker leaves it out) is the queue's lag: PySpark 4.3 does
not ask a simple stream reader for ``reportLatestOffset`` nor lets a source add metrics, so the
progress event's ``endOffset`` is where it shows.  Messages of a batch stay
acquired (unsettled) until Spark commits the batch, then they are accepted.  Spark may skip
``commit`` for the last batch of an ``availableNow`` run, so a ``read(start)`` first accepts
everything up to ``start``.

When the connection is lost (the query ended, the driver died, the broker dropped it) the broker
returns what it held with a delivery-count above zero; a reader recognises such a message by its
fingerprint among those it receives: one Spark already has is not handed out again, it is
accepted (batch committed) or held for the batch's commit.  An acceptance is only known to have
reached the broker once the broker answered a later request on the same connection (it handles a
connection's frames in order, and a settled disposition gets no answer of its own): until then its
message's fingerprint stays in memory and in every offset (``pending``), so neither a dropped
connection nor a restart after a driver crash can hand it out again under new message-ids.

``availableNow`` (:meth:`StreamState.freeze`) reads as many messages as the queue held when the
query started, learned from the broker's answer to the first fetch (a drain's flow carries
``available``, Part 2 §2.7.4: the messages no one has acquired; minibroker and RabbitMQ 4 send
it), one micro-batch at a time: the driver holds at most one batch and one fetch, whatever the
backlog.  A broker that leaves ``available`` out is read until a fetch finds the queue empty.
"""

from __future__ import annotations

import base64
import time
from collections import deque
from typing import Any

from minibroker.client import Client, ClientError, Delivery, Receiver

from .options import Options
from .ranges import FetchWindow
from .rows import FINGERPRINT_DIGITS, fingerprint, redelivered

__all__ = ["StreamState", "pack", "unpack"]

#: Fingerprints of unsettled earlier messages kept (in memory and in an offset), in micro-batches of
#: ``maxBatch``: a message lost with a connection that never comes back (consumed by another
#: reader, expired, purged) is forgotten after this many batches' worth of newer ones.
PENDING_BATCHES = 10


def pack(fingerprints: list[str]) -> str:
    """Fingerprints as one base64 string of their bytes (what an offset keeps)."""
    return base64.b64encode(bytes.fromhex("".join(fingerprints))).decode()


def unpack(packed: str | list[str]) -> list[str]:
    """The fingerprints :func:`pack` packed; a list is an offset written before they were packed
    (longer hex fingerprints: their first digits are today's)."""
    if isinstance(packed, list):
        return [fp[:FINGERPRINT_DIGITS] for fp in packed]
    raw = base64.b64decode(packed).hex()
    return [raw[i : i + FINGERPRINT_DIGITS] for i in range(0, len(raw), FINGERPRINT_DIGITS)]


class StreamState:
    """One stream reader's connection, buffer and unsettled batches (driver side, never pickled)."""

    def __init__(self, options: Options, desired_capabilities: tuple[str, ...] = ()) -> None:
        self.options = options
        #: What its receiver's attach asks for (Part 2 §2.7.3): ``x-opt-enqueued-time`` when the
        #: query reads the position columns (each message's arrival time at the broker).
        self.desired_capabilities = desired_capabilities
        self.client: Client | None = None
        self.receiver: Receiver | None = None
        self.buffer: deque[Delivery] = deque()
        #: Acquired deliveries handed to Spark and their fingerprints, by their position ``n``
        #: (1-based), until committed.
        self.held: dict[int, tuple[Delivery, str]] = {}
        #: Accepted on the current connection, not yet known to have reached the broker: (position, fingerprint).
        self.settling: list[tuple[int, str]] = []
        #: Positions handed to Spark whose delivery was lost with a connection, by fingerprint
        #: (position 0: an earlier run's, settled when it comes back).
        self.lost: dict[str, list[int]] = {}
        self.committed = 0
        #: The position before the first this reader hands out (the first ``read``'s start).
        self.base: int | None = None
        #: ``availableNow``: how many more of the messages the queue held at the trigger to take
        #: (None: not frozen, or the broker did not say).
        self.remaining: int | None = None
        #: What sizes the next fetch: the deliveries fetched so far and their bytes.
        self.window = FetchWindow()

    @property
    def _pending_limit(self) -> int:
        return PENDING_BATCHES * self.options.max_batch

    # ------------------------------------------------------------------ connection

    def _receiver(self) -> Receiver:
        if self.receiver is None:
            self.client = self.options.connect()
            self.receiver = self.client.receiver(self.options.address, credit=self.options.max_batch,
                                                 desired_capabilities=self.desired_capabilities)  # fmt: skip
        return self.receiver

    def _lose(self, fp: str, n: int) -> None:
        """Expect the message ``fp`` at position ``n`` back redelivered; forget the oldest beyond the bound."""
        self.lost.setdefault(fp, []).append(n)
        excess = sum(len(p) for p in self.lost.values()) - self._pending_limit
        for oldest in list(self.lost):
            if excess <= 0:
                break
            excess -= len(self.lost.pop(oldest))

    def _reconnect(self) -> int:
        """The connection died: everything acquired on it comes back redelivered, including what
        was accepted on it but not known to have reached the broker.  Returns how many that is."""
        for n, (_, fp) in self.held.items():
            self._lose(fp, n)
        for n, fp in self.settling:
            self._lose(fp, n)
        returning = len(self.held) + len(self.settling)
        self.held.clear()
        self.settling.clear()
        self.buffer.clear()
        if self.client is not None:
            self.client.close(timeout=0.5)
        self.client = self.receiver = None
        return returning

    def _fetch(self, limit: int) -> list[Delivery]:
        for attempt in range(2):
            try:
                got = self._receiver().fetch(limit)
            except ClientError:
                if attempt:
                    raise
                limit += self._reconnect()  # fetch what comes back as well
                time.sleep(0.05)  # let the broker notice the old connection is gone
                continue
            # The broker answered the drain sent after every acceptance so far on this connection,
            # so it has applied them (a fetch always sends a flow: the receiver buffers nothing between fetches).
            self.settling.clear()
            self.window.took(got)
            return got
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ batches

    def freeze(self) -> None:
        """``availableNow``: take as many messages as the queue holds now (later arrivals wait for
        the next query), learned from the first fetch's drain answer; nothing more is fetched ahead."""
        got = self._fetch(self.window.size(self.options.max_batch, self.options.max_batch_bytes))
        self.buffer.extend(got)
        available = self._receiver().available
        self.remaining = None if available is None else len(got) + available

    def _adopt(self, delivery: Delivery) -> int | None:
        """A redelivery of a message Spark already has: settle or hold it; its position if adopted."""
        if not self.lost or not redelivered(delivery):
            return None
        fp = fingerprint(delivery)
        positions = self.lost.get(fp)
        if not positions:
            return None
        n = positions.pop(0)
        if not positions:
            del self.lost[fp]
        if n <= self.committed:
            self._settle([(n, delivery, fp)])
        else:
            self.held[n] = (delivery, fp)
        return n

    def next_batch(self, start: dict[str, Any]) -> tuple[list[Delivery], dict[str, Any]]:
        """The deliveries after ``start`` and the end offset: at most ``maxBatch``, and no more once
        they make ``maxBatchBytes`` (fetched a window at a time, sized by the mean message so far)."""
        first = int(start["n"])
        if self.base is None:
            # A new query (or a restarted one): the previous run's unsettled messages may come back.
            self.base = first
            ids = unpack(start.get("ids", []))
            for i, fp in enumerate(ids):
                self._lose(fp, first - len(ids) + 1 + i)
            for fp in unpack(start.get("pending", [])):
                self._lose(fp, 0)
        self.settle_through(first)
        want, budget = self.options.max_batch, self.options.max_batch_bytes
        batch: list[Delivery] = []
        size = 0
        while len(batch) < want and size < budget and (self.remaining is None or self.remaining > 0):
            if not self.buffer:
                limit = self.window.size(want - len(batch), budget - size) + sum(len(p) for p in self.lost.values())
                got = self._fetch(limit if self.remaining is None else min(limit, self.remaining))
                if not got:
                    break
                self.buffer.extend(got)
            delivery = self.buffer.popleft()
            n = self._adopt(delivery)
            if n is not None and n > self.base:
                continue  # handed out by this reader already: counted when it was
            if self.remaining is not None:
                self.remaining -= 1  # in the queue at the trigger (an earlier run's redelivery too)
            if n is None:
                batch.append(delivery)
                size += len(delivery.payload)
        if not batch:
            return [], start
        ids = [fingerprint(d) for d in batch]
        for i, delivery in enumerate(batch):
            self.held[first + 1 + i] = (delivery, ids[i])
        end: dict[str, Any] = {"n": first + len(batch), "ids": pack(ids)}
        pending = [fp for _, fp in self.settling] + [fp for fp, ns in self.lost.items() for _ in ns]
        if pending:
            end["pending"] = pack(pending[-self._pending_limit :])
        backlog = self._receiver().available if self.receiver is not None else None
        if backlog is not None:
            end["backlog"] = backlog + len(self.buffer)  # fetched ahead but not in a batch yet: still waiting
        return batch, end

    def settle_through(self, n: int) -> None:
        """Accept every held delivery at position ``n`` or before (Spark committed those batches)."""
        self.committed = max(self.committed, n)
        done = [(k, d, fp) for k, (d, fp) in self.held.items() if k <= n]
        if not done:
            return
        self.held = {k: held for k, held in self.held.items() if k > n}
        self._settle(done)

    def _settle(self, deliveries: list[tuple[int, Delivery, str]]) -> None:
        try:
            self._receiver().settle([d for _, d, _ in deliveries])
        except ClientError:
            # Lost with the connection: they come back redelivered and are recognised then.
            self._reconnect()
            for n, _, fp in deliveries:
                self._lose(fp, n)
            return
        self.settling += [(n, fp) for n, _, fp in deliveries]

    # ------------------------------------------------------------------ replay

    @staticmethod
    def replay(options: Options, end: dict[str, Any], desired_capabilities: tuple[str, ...] = ()) -> list[Delivery]:
        """The messages of a batch Spark replays after a restart, found by browsing (nothing acquired,
        the browser's attach asking for ``desired_capabilities`` as the reader's does): the first
        messages whose fingerprints match ``end["ids"]``.  The next ``read`` settles them."""
        wanted: dict[str, int] = {}
        for fp in unpack(end.get("ids", [])):
            wanted[fp] = wanted.get(fp, 0) + 1
        found: list[Delivery] = []
        window = FetchWindow()
        with options.connect() as client, client.receiver(
            options.address, browse=True, desired_capabilities=desired_capabilities
        ) as browser:
            while wanted:
                chunk = browser.fetch(window.size(options.max_batch, options.max_batch_bytes))
                if not chunk:
                    break
                window.took(chunk)
                for delivery in chunk:
                    fp = fingerprint(delivery)
                    if wanted.get(fp):
                        wanted[fp] -= 1
                        found.append(delivery)
                        if not wanted[fp]:
                            del wanted[fp]
        return found
