"""Receive COUNT messages from ADDRESS, accepting them in transactions of BATCH messages each.

Usage: ``python tx_recv.py URL ADDRESS COUNT BATCH [--abort-first] [--timeout SECONDS]``

The receiver grants no credit of its own: for each declared transaction it
grants credit for one batch (in drain mode, so the broker hands back what
it cannot use), accepts each message with ``Transaction.accept`` and
discharges the transaction when the batch is complete.  With
``--abort-first`` the first batch is rolled back instead of committed
(proton then releases those deliveries), so those messages must come back
and be received again.  On exit one JSON line reports the bodies received,
committed and aborted, and any failures; the exit status is 0 only if
COUNT messages were committed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from batch_program import BatchProgram, batch_arguments
from proton.reactor import Container


class BatchReceiver(BatchProgram):
    def __init__(
        self, url: str, address: str, count: int, batch: int, abort_first: bool, timeout: float
    ) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.url, self.address, self.count, self.batch, self.timeout = url, address, count, batch, timeout
        self.abort_next = abort_first
        self.received: list[Any] = []  # every body, in arrival order (redeliveries included)
        self.committed: list[Any] = []
        self.aborted: list[Any] = []
        self.in_batch: list[Any] = []
        self.transactions = 0
        self.txn: Any = None

    def on_start(self, event: Any) -> None:
        self.container = event.container
        self.watchdog = self.container.schedule(self.timeout, self)  # calls on_timer_task
        self.connection = self.container.connect(self.url)
        self.receiver = self.container.create_receiver(self.connection, self.address)
        self.receiver.drain_mode = True
        self.begin()

    def begin(self) -> None:
        self.in_batch = []
        self.container.declare_transaction(self.connection, handler=self)

    def on_transaction_declared(self, event: Any) -> None:
        self.txn = event.transaction
        self.transactions += 1
        self.receiver.flow(min(self.batch, self.count - len(self.committed)))

    def on_message(self, event: Any) -> None:
        if self.txn is None:  # not expected: credit is only granted inside a transaction
            self.failures.append(f"message outside a transaction: {event.message.body!r}")
            return
        body = event.message.body
        self.received.append(body)
        self.in_batch.append(body)
        self.txn.accept(event.delivery)
        if len(self.in_batch) == min(self.batch, self.count - len(self.committed)):
            txn, self.txn = self.txn, None
            if self.abort_next:
                self.abort_next = False
                txn.abort()
            else:
                txn.commit()

    def on_transaction_committed(self, event: Any) -> None:
        self.committed.extend(self.in_batch)
        if len(self.committed) >= self.count:
            self.finish()
        else:
            self.begin()

    def on_transaction_aborted(self, event: Any) -> None:
        self.aborted.extend(self.in_batch)
        self.begin()


def main() -> int:
    parser = batch_arguments(__doc__.splitlines()[0])
    parser.add_argument("--abort-first", action="store_true")
    args = parser.parse_args()
    handler = BatchReceiver(args.url, args.address, args.count, args.batch, args.abort_first, args.timeout)
    Container(handler).run()
    report = {
        "received": handler.received,
        "committed": handler.committed,
        "aborted": handler.aborted,
        "transactions": handler.transactions,
        "failures": handler.failures,
    }
    print(json.dumps(report), flush=True)
    return 0 if len(handler.committed) == args.count and not handler.failures else 1


if __name__ == "__main__":
    sys.exit(main())
