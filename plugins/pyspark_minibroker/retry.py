"""Riding out a broker outage: a lost or refused connection is tried again with backoff, for at
most option ``reconnectTimeout`` seconds, before the task (or the driver's call) fails.

A broker restart drops every connection (AMQP 1.0 Part 2 §2.4: the transport ends, no ``close``
frame) and serves the same port again; while it is down a connect is refused.  So the source
treats the loss of a connection, and a refused or abandoned connect, as passing: what it was
doing is done again on a new connection (a stream range goes on from the next offset it had not
read; a write resends its unconfirmed chunk under the same message-ids; the queue reader on the
driver takes back what the broker returned, see :mod:`.stream`).  A SASL refusal is no outage and
fails at once.
"""

from __future__ import annotations

import time

from minibroker.client import ClientTimeout, ConnectionClosed, ConnectionFailed

__all__ = ["FIRST_PAUSE", "LONGEST_PAUSE", "LOST", "Backoff", "passing"]

#: The first pause after a lost connection, doubled after each failed try up to LONGEST_PAUSE (seconds).
FIRST_PAUSE = 0.1
LONGEST_PAUSE = 5.0
#: What a lost connection raises while it is used (a link's detach is the broker's answer, not an outage).
LOST = (ConnectionClosed, ClientTimeout)


def passing(exc: ConnectionFailed) -> bool:
    """Whether a failed connect is what an outage gives: refused or reset, or the broker ending the
    handshake (starting or stopping); not a SASL refusal."""
    return isinstance(exc.__cause__, (OSError, ConnectionClosed))


class Backoff:
    """Pauses between tries, for at most ``budget`` seconds from the first failure of a run of them."""

    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.pause = FIRST_PAUSE
        self.since: float | None = None

    def wait(self) -> bool:
        """Pause before the next try; False (no pause) once the budget would be spent."""
        now = time.monotonic()
        if self.since is None:
            self.since = now
        if now + self.pause - self.since > self.budget:
            return False
        self._pause(self.pause)
        self.pause = min(self.pause * 2, LONGEST_PAUSE)
        return True

    @staticmethod
    def _pause(seconds: float) -> None:
        time.sleep(seconds)

    def reset(self) -> None:
        """A try succeeded: the next failure starts a new run with the whole budget."""
        self.pause = FIRST_PAUSE
        self.since = None
