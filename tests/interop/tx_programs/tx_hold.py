"""Open a transaction, do some work in it and never discharge it (until killed).

Usage: ``python tx_hold.py URL --send ADDRESS:COUNT [--accept ADDRESS:COUNT] [--linger SECONDS]``

Declares one transaction, sends COUNT messages (bodies ``"held-1"`` ...) to
the ``--send`` address with ``Transaction.send``, receives COUNT messages
from the ``--accept`` address and accepts each with ``Transaction.accept``,
prints ``{"declared": <txn-id>}`` and then waits, neither committing nor
aborting, so that a test can kill the process mid-transaction.  It exits by
itself after ``--linger`` seconds so that it never outlives a failed test.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import Container


def _address_count(text: str) -> tuple[str, int]:
    address, _, count = text.rpartition(":")
    return address, int(count)


class Holder(MessagingHandler, TransactionHandler):  # type: ignore[misc]
    def __init__(
        self, url: str, send: tuple[str, int] | None, accept: tuple[str, int] | None, linger: float
    ) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.url, self.send, self.accept, self.linger = url, send, accept, linger
        self.txn: Any = None
        self.accepted = 0

    def on_start(self, event: Any) -> None:
        self.container = event.container
        self.container.schedule(self.linger, self)
        self.connection = self.container.connect(self.url)
        self.sender = self.container.create_sender(self.connection, self.send[0]) if self.send else None
        self.receiver = (
            self.container.create_receiver(self.connection, self.accept[0]) if self.accept else None
        )
        self.container.declare_transaction(self.connection, handler=self)

    def on_transaction_declared(self, event: Any) -> None:
        self.txn = event.transaction
        print(json.dumps({"declared": bytes(self.txn.id).decode("latin-1")}), flush=True)
        if self.send:
            for n in range(1, self.send[1] + 1):
                self.txn.send(self.sender, Message(body=f"held-{n}"))
        if self.accept:
            self.receiver.flow(self.accept[1])

    def on_message(self, event: Any) -> None:
        self.txn.accept(event.delivery)
        self.accepted += 1

    def on_timer_task(self, event: Any) -> None:
        self.container.stop()  # lingered long enough: nobody killed us


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--send", type=_address_count)
    parser.add_argument("--accept", type=_address_count)
    parser.add_argument("--linger", type=float, default=30.0)
    args = parser.parse_args()
    Container(Holder(args.url, args.send, args.accept, args.linger)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
