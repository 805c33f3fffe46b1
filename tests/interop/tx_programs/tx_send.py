"""Send COUNT messages to ADDRESS in transactions of BATCH messages each (the last may be shorter).

Usage: ``python tx_send.py URL ADDRESS COUNT BATCH [--timeout SECONDS]``

Each transaction is declared on the connection's coordinator, its batch is
sent with ``Transaction.send`` and committed; the next transaction is declared
when proton reports the commit.  Message ``n`` (from 1) has message-id
``n`` and body ``{"sequence": n}``.  On exit one JSON line reports what
happened: ``{"committed": ..., "transactions": ..., "failures": [...]}``;
the exit status is 0 only if every message was committed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from batch_program import BatchProgram, batch_arguments
from proton import Message
from proton.reactor import Container


class BatchSender(BatchProgram):
    def __init__(self, url: str, address: str, count: int, batch: int, timeout: float) -> None:
        super().__init__()
        self.url, self.address, self.count, self.batch, self.timeout = url, address, count, batch, timeout
        self.committed = 0  # messages in committed transactions
        self.in_batch = 0  # messages sent in the open transaction
        self.transactions = 0
        self.txn: Any = None

    def on_start(self, event: Any) -> None:
        self.container = event.container
        self.connection = self.container.connect(self.url)
        self.sender = self.container.create_sender(self.connection, self.address)
        self.watchdog = self.container.schedule(self.timeout, self)  # calls on_timer_task
        self.begin()

    def begin(self) -> None:
        self.in_batch = 0
        self.container.declare_transaction(self.connection, handler=self)

    def on_transaction_declared(self, event: Any) -> None:
        self.txn = event.transaction
        self.transactions += 1
        self.fill()

    def on_sendable(self, event: Any) -> None:
        self.fill()

    def fill(self) -> None:
        """Send the rest of this transaction's batch as credit allows; commit once it is all sent."""
        if self.txn is None:
            return
        size = min(self.batch, self.count - self.committed)
        while self.in_batch < size and self.sender.credit:
            sequence = self.committed + self.in_batch + 1
            self.txn.send(self.sender, Message(id=sequence, body={"sequence": sequence}))
            self.in_batch += 1
        if self.in_batch == size:
            txn, self.txn = self.txn, None
            txn.commit()

    def on_transaction_committed(self, event: Any) -> None:
        self.committed += self.in_batch
        if self.committed >= self.count:
            self.finish()
        else:
            self.begin()


def main() -> int:
    parser = batch_arguments(__doc__.splitlines()[0])
    args = parser.parse_args()
    handler = BatchSender(args.url, args.address, args.count, args.batch, args.timeout)
    Container(handler).run()
    report = {
        "committed": handler.committed,
        "transactions": handler.transactions,
        "failures": handler.failures,
    }
    print(json.dumps(report), flush=True)
    return 0 if handler.committed == args.count and not handler.failures else 1


if __name__ == "__main__":
    sys.exit(main())
