"""A payment worker, in two versions: one with the classic bugs, one that survives faults.

For each message on ``charges`` (``message_id`` = the charge id, body ``{"amount": ...}``)
the worker records the payment in a ledger (its database) and sends a receipt to
``receipts`` (``correlation_id`` = the charge id). Both versions reconnect and carry
on when the broker detaches a link, refuses one, or the connection goes.

* :func:`naive` acknowledges the charge first and records it unconditionally: a
  charge delivered twice is recorded twice, and a charge whose receipt fails is
  already gone. A happy-path test never notices.
* :func:`careful` records a charge only once (the ledger is keyed by charge id), sends
  the receipt and waits for the broker to take it, and only then accepts the charge.

It uses ``minibroker.Client``, a small blocking AMQP 1.0 client; any client works the
same way (``tests/interop/`` drives every fault with python-qpid-proton).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from minibroker import Client, build_message
from minibroker.client import ClientError, ClientTimeout, Delivery, Sender


class Ledger:
    """The worker's database: one row per recorded payment, in order."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float]] = []

    def record(self, charge_id: str, amount: float) -> None:
        self.rows.append((charge_id, amount))

    def has(self, charge_id: str) -> bool:
        return any(row[0] == charge_id for row in self.rows)


#: What a worker does with one charge.
Process = Callable[[Delivery, Sender, Ledger], None]


def naive(charge: Delivery, receipts: Sender, ledger: Ledger) -> None:
    charge_id, amount = charge.message.properties.message_id, charge.message.body["amount"]
    charge.accept()  # BUG: acknowledged before the work is done
    ledger.record(charge_id, amount)  # BUG: a redelivered charge is recorded again
    receipts.send(build_message({"paid": amount}, correlation_id=charge_id))


def careful(charge: Delivery, receipts: Sender, ledger: Ledger) -> None:
    charge_id, amount = charge.message.properties.message_id, charge.message.body["amount"]
    if not ledger.has(charge_id):  # idempotent: a redelivered charge is recorded once
        ledger.record(charge_id, amount)
    receipts.send(build_message({"paid": amount}, correlation_id=charge_id))  # waits for the broker; raises if not taken
    charge.accept()  # only now is the charge done; until then a failure brings it back


def run_worker(
    url: str,
    process: Process,
    ledger: Ledger,
    *,
    until: Callable[[], bool],
    max_reconnects: int = 20,
    timeout: float = 10.0,
) -> int:
    """Process charges until ``until()`` holds, reconnecting after failures; returns the reconnects."""
    reconnects = 0
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the worker did not finish within {timeout} s ({reconnects} reconnects)")
        try:
            with Client(url, timeout=timeout) as client:
                charges = client.receiver("charges", credit=10)
                receipts = client.sender("receipts")
                while not until():
                    try:
                        charge = charges.receive(timeout=0.01)
                    except ClientTimeout:
                        continue
                    process(charge, receipts, ledger)
        except ClientError:  # a link detached or refused, the connection closed or dropped, a send refused
            reconnects += 1
            if reconnects > max_reconnects:
                raise
    return reconnects
