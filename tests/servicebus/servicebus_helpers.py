"""Settings shared by the Service Bus tests."""

from __future__ import annotations

from typing import Any

#: What every test's client is created with: no keep-alive thread (its 1 s sleep would hold
#: every close), short socket reads, no retries unless a test wants them.
CLIENT_OPTIONS: dict[str, Any] = {"retry_total": 0, "socket_timeout": 0.05, "keep_alive": 0}
#: The lock duration of the test broker (seconds on its manual clock).
LOCK_DURATION = 60.0
