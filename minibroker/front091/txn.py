"""A channel's local transaction: AMQP 0-9-1's ``tx`` class as RabbitMQ (>= 2.8) runs it.

``003_*`` ("Semantics of tx"): publishes, acks and rejects on a ``tx.select``-ed channel are held
until ``tx.commit`` applies them (in order) or ``tx.rollback`` drops them; consuming and ``basic.get``
are not transactional; an error such as an unknown exchange is found at once, not at commit.  What
a transaction holds is bounded: past :data:`MAX_TX_BYTES` of publishes the publish is refused
(406) and the client is told to commit more often.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from ..amqp091 import errors as codes
from ..amqp091.errors import AMQP091Error
from ..amqp091.methods import BasicPublish
from ..amqp091.properties import BasicProperties
from ..broker.stored import StoredMessage

__all__ = ["MAX_TX_BYTES", "Publish", "Transaction"]

#: The message bytes one 0-9-1 transaction may hold until ``tx.commit`` (each publish counted
#: with 1 KiB of bookkeeping besides), as ``max_transaction_bytes`` bounds an AMQP 1.0 one: past
#: it the channel is closed with 406, the transaction's publishes dropped (limits-and-security.md).
MAX_TX_BYTES = 8 * 1024 * 1024
#: What a held publish costs besides its payload (the method, properties and bookkeeping).
_TX_OVERHEAD = 1024

S = TypeVar("S")


class Publish:
    """A publish held by a transaction until ``tx.commit``: routed already (errors come at once)."""

    __slots__ = ("body", "message", "method", "properties", "queues")

    def __init__(
        self, method: BasicPublish, properties: BasicProperties, body: bytes, queues: list[str], message: StoredMessage
    ) -> None:
        self.method = method
        self.properties = properties
        self.body = body
        self.queues = queues
        self.message = message


class Transaction(Generic[S]):
    """What a transactional channel holds: publishes and settlements (``S``, the channel's own record)."""

    __slots__ = ("_bytes", "publishes", "settles")

    def __init__(self) -> None:
        self.publishes: list[Publish] = []
        self.settles: list[S] = []
        self._bytes = 0

    def hold(self, publish: Publish) -> None:
        """Hold ``publish`` until commit, refusing it (406, the channel closes) past :data:`MAX_TX_BYTES`."""
        self._bytes += publish.message.size + _TX_OVERHEAD
        if self._bytes > MAX_TX_BYTES:
            raise AMQP091Error(
                codes.PRECONDITION_FAILED,
                f"the transaction holds more than {MAX_TX_BYTES} bytes of publishes; commit more often",
                60, 40,
            )  # fmt: skip
        self.publishes.append(publish)

    def take(self) -> tuple[list[Publish], list[S]]:
        """Everything held, in order, for ``tx.commit`` (or a rollback's settlements); empty afterwards."""
        publishes, settles = self.publishes, self.settles
        self.publishes, self.settles, self._bytes = [], [], 0
        return publishes, settles
