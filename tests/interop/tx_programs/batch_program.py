"""What the batch programs (tx_send.py, tx_recv.py) share: their command line and failure handling."""

from __future__ import annotations

import argparse
from typing import Any

from proton.handlers import MessagingHandler, TransactionHandler


def batch_arguments(description: str) -> argparse.ArgumentParser:
    """``URL ADDRESS COUNT BATCH [--timeout SECONDS]``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("url")
    parser.add_argument("address")
    parser.add_argument("count", type=int)
    parser.add_argument("batch", type=int)
    parser.add_argument("--timeout", type=float, default=20.0)
    return parser


class BatchProgram(MessagingHandler, TransactionHandler):  # type: ignore[misc]
    """Records every failure, stops on a watchdog timer, and closes cleanly when done."""

    timeout: float
    container: Any
    connection: Any
    watchdog: Any

    def __init__(self, **handler_options: Any) -> None:
        super().__init__(**handler_options)
        self.failures: list[str] = []

    def on_transaction_declare_failed(self, event: Any) -> None:
        self.failures.append(f"declare failed: {event.delivery.remote.condition}")
        self.finish()

    def on_transaction_commit_failed(self, event: Any) -> None:
        self.failures.append(f"commit failed: {event.delivery.remote.condition}")
        self.finish()

    def on_transport_error(self, event: Any) -> None:
        self.failures.append(f"transport error: {event.transport.condition}")

    def on_timer_task(self, event: Any) -> None:
        self.failures.append(f"timed out after {self.timeout} s")
        self.container.stop()

    def finish(self) -> None:
        """Close the connection; the container's run() returns once the close is answered."""
        self.watchdog.cancel()
        self.connection.close()
