"""Password guessing: failed SASL PLAIN logins slow down the address they come from.

A connection gets one SASL exchange (Part 5 §5.3.2: it ends with the
``sasl-outcome``) and a failed one closes it, so a guesser opens a
connection per password.  What the brokers we imitate do then:

* RabbitMQ 4 (``rabbit_amqp_reader``) waits ``SILENT_CLOSE_DELAY``, 3 s,
  before it sends a refused login its ``sasl-outcome`` ("so they can't DOS us
  with repeated failed logins"), then closes; it keeps no count, and each
  connection waits on its own, so parallel connections guess in parallel.
* ActiveMQ Artemis (``ProtonHandler.checkServerSASL``) answers ``auth`` at once
  and closes; limiting guesses is left to its JAAS login modules.

A test suite logs in wrongly on purpose, then rightly, and must not wait 3 s
each time; a guesser makes hundreds of attempts.  So here nothing changes
until an address has failed ``max_login_failures`` times within
:data:`WINDOW` seconds.  From then on a SASL PLAIN login on a new connection
from that address is judged in its turn: one per ``login_delay`` seconds, in
arrival order, right password or wrong (a guesser that could skip the queue
with a right answer would learn from the delay alone, and parallel
connections gain nothing).  ANONYMOUS logins have nothing to guess and are
not held.  A turn further away than :data:`MAX_WAIT` is not waited for: the
connection is closed unanswered, so piling up connections gains nothing.
The penalty ends once the failures age out of the window; ``reset()``
forgets them.  This module is told the time (``now``, the server's clock)
and reads none.
"""

from __future__ import annotations

from collections import deque

from ..records import record

__all__ = ["LoginGuard", "MAX_WAIT", "WINDOW"]

#: Seconds within which ``max_login_failures`` failures put an address in the penalty.
WINDOW = 60.0
#: The longest a connection waits for its turn; one whose turn is further is closed unanswered
#: (``handshake_timeout``'s default: it would be closed by then anyway).
MAX_WAIT = 10.0
#: Addresses remembered at once (the least recently failed go first): bounds the memory a spray
#: of source addresses can take.
MAX_ADDRESSES = 4096


@record
class LoginGuard:
    """Failed logins per peer address, and the turns of a penalised address's connections."""

    max_failures: int | None
    delay: float
    #: Logins that waited for their turn, and connections closed because their turn was too far.
    slowed: int = 0
    cut_off: int = 0

    def __post_init__(self) -> None:
        self._failures: dict[str, deque[float]] = {}
        self._next_turn: dict[str, float] = {}

    def failed(self, address: str, now: float) -> None:
        """A SASL login from ``address`` failed at ``now``."""
        if self.max_failures is None:
            return
        times = self._failures.pop(address, None)  # re-inserted last: the most recently failed
        if times is None:
            times = deque(maxlen=max(1, self.max_failures))
            if len(self._failures) >= MAX_ADDRESSES:
                oldest = next(iter(self._failures))
                del self._failures[oldest]
                self._next_turn.pop(oldest, None)
        times.append(now)
        self._failures[address] = times

    def penalised(self, address: str, now: float) -> bool:
        """Whether ``address`` failed ``max_failures`` times within the last :data:`WINDOW` seconds."""
        times = self._failures.get(address)
        if self.max_failures is None or times is None:
            return False
        return len(times) >= self.max_failures and now - times[0] < WINDOW

    def turn(self, address: str, now: float) -> float | None:
        """Seconds a held PLAIN login from ``address`` waits before it is judged (0: none),
        or None when its turn is more than :data:`MAX_WAIT` away (close it unanswered)."""
        if not self.penalised(address, now):
            self._next_turn.pop(address, None)
            return 0.0
        at = max(now, self._next_turn.get(address, now)) + self.delay
        if at - now > MAX_WAIT:
            self.cut_off += 1
            return None
        self._next_turn[address] = at
        self.slowed += 1
        return at - now

    def clear(self) -> None:
        self._failures.clear()
        self._next_turn.clear()
        self.slowed = self.cut_off = 0
