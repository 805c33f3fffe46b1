"""Settings and helpers shared by the Azure Event Hubs tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from azure.eventhub import EventData, EventHubConsumerClient, PartitionContext

#: The hub every test's broker declares (partitions "0" and "1"; consumer groups $Default and audit).
HUB = "telemetry"
#: What every test's client is created with: no retries unless a test wants them, short socket reads.
CLIENT_OPTIONS: dict[str, Any] = {"retry_total": 0, "socket_timeout": 0.05}
#: The most a test waits for events it expects (a bound, not a timing assertion).
WAIT = 20.0


def wait_until(condition: Callable[[], bool], what: str | Callable[[], str], timeout: float = WAIT) -> None:
    """Wait for ``condition`` (polling, since the SDK's callbacks run on its own thread), at most ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what if isinstance(what, str) else what()}")
        time.sleep(0.01)


def receive(client: EventHubConsumerClient, count: int, **options: Any) -> list[EventData]:
    """Run ``client.receive`` until ``count`` events arrived, then close the client; returns them."""
    events: list[EventData] = []
    errors: list[Exception] = []

    def on_event(_context: PartitionContext, event: EventData | None) -> None:
        if event is not None:
            events.append(event)

    def on_error(_context: PartitionContext | None, error: Exception) -> None:
        errors.append(error)

    thread = threading.Thread(target=client.receive, kwargs={"on_event": on_event, "on_error": on_error, **options})
    thread.start()
    try:
        wait_until(lambda: len(events) >= count or bool(errors), lambda: f"{count} events (got {len(events)})")
    finally:
        client.close()
        thread.join(WAIT)
    if errors:
        raise errors[0]
    return events
