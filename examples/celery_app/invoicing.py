"""A small Celery app: invoices are totalled, formatted, charged and archived by tasks.

Nothing here knows about tests: the broker comes from ``broker_url`` (``CELERY_BROKER_URL`` in
production, the ``amqp_broker`` fixture's ``amqp091_url`` in the tests next to it).
"""

from __future__ import annotations

from typing import Any

from celery import Celery, group

app = Celery("invoicing")
app.conf.update(task_serializer="json", accept_content=["json"], result_serializer="json")


class GatewayDown(Exception):
    """The payment gateway did not answer; worth trying again."""


class Gateway:
    """The payment gateway (the tests put a fake one in its place)."""

    def charge(self, invoice_id: str, amount: float) -> str:
        raise NotImplementedError("no payment gateway configured")


class Archive:
    """Where paid invoices are kept (the tests put a fake one in its place)."""

    def store(self, invoice: dict[str, Any], redelivered: bool) -> None:
        raise NotImplementedError("no archive configured")


gateway = Gateway()
archive = Archive()


@app.task
def total(lines: list[dict[str, Any]]) -> float:
    """The invoice total: quantity times unit price, summed, in cents precision."""
    return round(sum(line["quantity"] * line["price"] for line in lines), 2)


@app.task
def format_total(amount: float, currency: str = "EUR") -> str:
    return f"{amount:.2f} {currency}"


def totals(invoices: list[list[dict[str, Any]]]) -> Any:
    """The totals of many invoices at once, as a group."""
    return group(total.s(lines) for lines in invoices)


@app.task(bind=True, max_retries=3)
def charge(self: Any, invoice_id: str, amount: float) -> str:
    """Charge an invoice; a gateway outage is retried after a short countdown."""
    try:
        return gateway.charge(invoice_id, amount)
    except GatewayDown as exc:
        raise self.retry(exc=exc, countdown=0.2) from exc


@app.task(bind=True, acks_late=True)
def store(self: Any, invoice: dict[str, Any]) -> None:
    """Archive a paid invoice, acknowledged only once stored: a worker lost mid-task leaves the
    message to the broker, which delivers it again (``redelivered``), so storing is idempotent."""
    archive.store(invoice, bool(self.request.delivery_info.get("redelivered")))
