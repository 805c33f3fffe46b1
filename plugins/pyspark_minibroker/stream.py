"""The streaming reader's state: which messages each micro-batch holds and when they are settled.

An offset is ``{"n": messages handed to Spark so far, "ids": fingerprints of the last batch}``.
Messages of a batch stay acquired (unsettled) until Spark commits the batch, then they are
accepted.  Spark may skip ``commit`` for the last batch of an ``availableNow`` run, so a
``read(start)`` first accepts everything up to ``start``.  When the connection is lost (the
query ended, the driver died, the broker dropped it) the broker returns those messages with a
delivery-count above zero; a new connection recognises them by fingerprint among the first
messages it receives: those of batches Spark already has are not handed out again, they are
accepted (batch committed) or held for the batch's commit.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from minibroker.client import Client, ClientError, Delivery, Receiver

from .options import Options
from .rows import fingerprint, redelivered

__all__ = ["StreamState"]


class StreamState:
    """One stream reader's connection, buffer and unsettled batches (driver side, never pickled)."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.client: Client | None = None
        self.receiver: Receiver | None = None
        self.buffer: deque[Delivery] = deque()
        #: Acquired deliveries handed to Spark, by their position ``n`` (1-based), until committed.
        self.held: dict[int, Delivery] = {}
        #: Positions handed to Spark whose delivery was lost with a connection, by fingerprint.
        self.lost: dict[str, list[int]] = {}
        self.committed = 0
        self.frozen = False
        self.started = False

    # ------------------------------------------------------------------ connection

    def _receiver(self) -> Receiver:
        if self.receiver is None:
            self.client = self.options.connect()
            self.receiver = self.client.receiver(self.options.address, credit=self.options.max_batch)
        return self.receiver

    def _reconnect(self) -> None:
        """The connection died: everything acquired on it comes back redelivered."""
        for n, delivery in self.held.items():
            self.lost.setdefault(fingerprint(delivery), []).append(n)
        self.held.clear()
        self.buffer.clear()
        if self.client is not None:
            self.client.close(timeout=0.5)
        self.client = self.receiver = None

    def _fetch(self, limit: int) -> list[Delivery]:
        for attempt in range(2):
            try:
                return self._receiver().fetch(limit)
            except ClientError:
                if attempt:
                    raise
                self._reconnect()
                time.sleep(0.05)  # let the broker notice the old connection is gone
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ batches

    def freeze(self) -> None:
        """``availableNow``: take what the queue holds now; later arrivals wait for the next query."""
        while True:
            got = self._fetch(self.options.max_batch)
            if not got:
                break
            self.buffer.extend(got)
        self.frozen = True

    def _adopt(self, delivery: Delivery) -> bool:
        """A redelivery of a message Spark already has: settle or hold it; True if adopted."""
        if not self.lost or not redelivered(delivery):
            return False
        positions = self.lost.get(fingerprint(delivery))
        if not positions:
            return False
        n = positions.pop(0)
        if not positions:
            del self.lost[fingerprint(delivery)]
        if n <= self.committed:
            self._settle([delivery])
        else:
            self.held[n] = delivery
        return True

    def next_batch(self, start: dict[str, Any]) -> tuple[list[Delivery], dict[str, Any]]:
        """The deliveries after ``start`` (at most ``maxBatch``) and the end offset."""
        first = int(start["n"])
        if not self.started:
            # A new query (or a restarted one): the previous run's last batch may come back.
            self.started = True
            ids = list(start.get("ids", []))
            for i, fp in enumerate(ids):
                self.lost.setdefault(fp, []).append(first - len(ids) + 1 + i)
        self.settle_through(first)
        want = self.options.max_batch
        batch: list[Delivery] = []
        while len(batch) < want:
            if not self.buffer:
                if self.frozen:
                    break
                got = self._fetch(want - len(batch) + sum(len(p) for p in self.lost.values()))
                if not got:
                    break
                self.buffer.extend(got)
            delivery = self.buffer.popleft()
            if not self._adopt(delivery):
                batch.append(delivery)
        if not batch:
            return [], start
        for i, delivery in enumerate(batch):
            self.held[first + 1 + i] = delivery
        return batch, {"n": first + len(batch), "ids": [fingerprint(d) for d in batch]}

    def settle_through(self, n: int) -> None:
        """Accept every held delivery at position ``n`` or before (Spark committed those batches)."""
        self.committed = max(self.committed, n)
        done = [d for k, d in self.held.items() if k <= n]
        if not done:
            return
        self.held = {k: d for k, d in self.held.items() if k > n}
        self._settle(done)

    def _settle(self, deliveries: list[Delivery]) -> None:
        try:
            self._receiver().settle(deliveries)
        except ClientError:
            # Lost with the connection: they come back redelivered and are recognised then.
            self._reconnect()
            for delivery in deliveries:
                self.lost.setdefault(fingerprint(delivery), []).append(0)

    # ------------------------------------------------------------------ replay

    @staticmethod
    def replay(options: Options, end: dict[str, Any]) -> list[Delivery]:
        """The messages of a batch Spark replays after a restart, found by browsing (nothing acquired):
        the first messages whose fingerprints match ``end["ids"]``.  The next ``read`` settles them."""
        wanted: dict[str, int] = {}
        for fp in end.get("ids", []):
            wanted[fp] = wanted.get(fp, 0) + 1
        found: list[Delivery] = []
        with options.connect() as client, client.receiver(options.address, browse=True) as browser:
            while wanted:
                chunk = browser.fetch(options.max_batch)
                if not chunk:
                    break
                for delivery in chunk:
                    fp = fingerprint(delivery)
                    if wanted.get(fp):
                        wanted[fp] -= 1
                        found.append(delivery)
                        if not wanted[fp]:
                            del wanted[fp]
        return found
