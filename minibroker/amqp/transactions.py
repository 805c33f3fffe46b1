"""Transaction coordination types (OASIS AMQP 1.0 Part 4, §4.5)."""

from __future__ import annotations

from typing import Any

from .composite import Composite, composite, field

__all__ = [
    "Coordinator", "Declare", "Declared", "Discharge", "TransactionalState",
    "LOCAL_TRANSACTIONS", "DISTRIBUTED_TRANSACTIONS", "PROMOTABLE_TRANSACTIONS",
    "MULTI_TXNS_PER_SSN", "MULTI_SSNS_PER_TXN",
]  # fmt: skip

# txn-capability (§4.5.7)
LOCAL_TRANSACTIONS = "amqp:local-transactions"
DISTRIBUTED_TRANSACTIONS = "amqp:distributed-transactions"
PROMOTABLE_TRANSACTIONS = "amqp:promotable-transactions"
MULTI_TXNS_PER_SSN = "amqp:multi-txns-per-ssn"
MULTI_SSNS_PER_TXN = "amqp:multi-ssns-per-txn"


@composite(0x30, "amqp:coordinator:list")
class Coordinator(Composite):
    """Target of a link to the transaction controller (§4.5.1)."""

    capabilities: list[str] | None = field("symbol*", default=None)


@composite(0x31, "amqp:declare:list")
class Declare(Composite):
    """Message body asking the coordinator for a new transaction (§4.5.2)."""

    global_id: Any = field("*", default=None)


@composite(0x32, "amqp:discharge:list")
class Discharge(Composite):
    """Message body asking the coordinator to commit or roll back (§4.5.3)."""

    txn_id: bytes = field("binary", default=None, mandatory=True)
    fail: bool = field("boolean", default=False)


@composite(0x33, "amqp:declared:list")
class Declared(Composite):
    """Outcome carrying the new transaction's id (§4.5.4)."""

    txn_id: bytes = field("binary", default=None, mandatory=True)


@composite(0x34, "amqp:transactional-state:list")
class TransactionalState(Composite):
    """Delivery state of work done inside a transaction (§4.5.5)."""

    txn_id: bytes = field("binary", default=None, mandatory=True)
    outcome: Any = field("*", default=None)
