"""The invoicing app's tasks on a real worker and a real broker: ``amqp_celery_worker(app)`` runs
a worker in the test process on the ``amqp_broker`` fixture (AMQP 0-9-1), results come back
through the ``rpc://`` backend, and every wait is bounded."""

from __future__ import annotations

import threading
from typing import Any

import invoicing
import pytest
from celery import chain
from celery.exceptions import TaskRevokedError
from invoicing import GatewayDown, app, charge, format_total, store, total, totals

LINES = [{"quantity": 2, "price": 1.25}, {"quantity": 1, "price": 7.5}]


def test_a_task_round_trip(amqp_broker: Any, amqp_celery_worker: Any) -> None:
    amqp_celery_worker(app)
    assert total.delay(LINES).get(timeout=30) == 10.0
    # The result can come before the ack: the worker's loop sends an ack on its next turn.
    amqp_broker.wait_for(lambda broker: broker.statistics().nodes["celery"].acknowledged == 1, timeout=30)
    amqp_broker.assert_queue("celery", [])


def test_a_task_waits_in_the_queue_for_a_worker(amqp_broker: Any, amqp_celery_worker: Any) -> None:
    app.conf.update(broker_url=amqp_broker.amqp091_url, result_backend="rpc://")
    result = total.delay(LINES)  # no worker yet: the message waits on the broker
    (message,) = amqp_broker.wait_for(
        lambda broker: broker.queue("celery", missing_ok=True).messages, timeout=15
    )
    assert message.application_properties["task"] == "invoicing.total"  # Celery's headers
    amqp_celery_worker(app)
    assert result.get(timeout=30) == 10.0


def test_a_chain(amqp_celery_worker: Any) -> None:
    amqp_celery_worker(app)
    assert chain(total.s(LINES), format_total.s()).delay().get(timeout=30) == "10.00 EUR"


def test_a_group(amqp_celery_worker: Any) -> None:
    amqp_celery_worker(app)
    result = totals([LINES, [{"quantity": 3, "price": 2.0}]]).delay()
    assert result.get(timeout=30) == [10.0, 6.0]


class FlakyGateway:
    """Down for the first ``failures`` charges."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[str] = []

    def charge(self, invoice_id: str, amount: float) -> str:
        self.calls.append(invoice_id)
        if len(self.calls) <= self.failures:
            raise GatewayDown("gateway timed out")
        return f"paid {invoice_id}"


def test_a_retry_with_countdown(
    amqp_broker: Any, amqp_celery_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = FlakyGateway(failures=2)
    monkeypatch.setattr(invoicing, "gateway", gateway)
    amqp_celery_worker(app)
    assert charge.delay("inv-1", 10.0).get(timeout=30) == "paid inv-1"
    assert gateway.calls == ["inv-1"] * 3
    # Each retry is a new message through the broker, held by the worker until its countdown ends.
    assert amqp_broker.statistics().nodes["celery"].enqueued == 3


def test_retries_give_up_after_max_retries(amqp_celery_worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = FlakyGateway(failures=10)
    monkeypatch.setattr(invoicing, "gateway", gateway)
    amqp_celery_worker(app)
    with pytest.raises(GatewayDown):
        charge.delay("inv-2", 10.0).get(timeout=30)
    assert len(gateway.calls) == 1 + charge.max_retries


def test_a_revoked_task_does_not_run(amqp_celery_worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = FlakyGateway(failures=0)
    monkeypatch.setattr(invoicing, "gateway", gateway)
    worker = amqp_celery_worker(app)
    # Revoked before it is sent: once the worker has answered, its revoked set has the id.  On a
    # connection of its own: remote control does not retry on the app's pooled connection, which
    # the broker's reset between tests dropped.
    with app.connection_for_write() as connection:
        replies = app.control.revoke("charge-inv-3", connection=connection, reply=True, limit=1, timeout=15)
    assert [list(reply) for reply in replies] == [[worker.hostname]]
    result = charge.apply_async(("inv-3", 10.0), task_id="charge-inv-3")
    with pytest.raises(TaskRevokedError):
        result.get(timeout=30)
    assert gateway.calls == []


class SlowArchive:
    """Holds its first store until released; records whether each came redelivered."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.redelivered: list[bool] = []

    def store(self, invoice: dict[str, Any], redelivered: bool) -> None:
        self.redelivered.append(redelivered)
        if len(self.redelivered) == 1:
            self.started.set()
            self.release.wait(10)


def test_an_acks_late_task_is_delivered_again_when_its_worker_connection_drops(
    amqp_broker: Any, amqp_celery_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = SlowArchive()
    monkeypatch.setattr(invoicing, "archive", archive)
    amqp_celery_worker(app)
    store.delay({"id": "inv-4"})
    assert archive.started.wait(10)
    assert amqp_broker.queue("celery").acquired == 1  # delivered, not acknowledged yet
    # The broker drops every connection as in a crash (the worker's among them) while the task
    # runs: its late ack cannot come, so the broker delivers the message again.
    amqp_broker.restart()
    archive.release.set()
    amqp_broker.wait_for(
        lambda broker: broker.queue("celery").depth == 0 and len(archive.redelivered) == 2, timeout=30
    )
    assert archive.redelivered == [False, True]


class RecordingArchive:
    """Records whether each store came redelivered; stores at once."""

    def __init__(self) -> None:
        self.redelivered: list[bool] = []

    def store(self, invoice: dict[str, Any], redelivered: bool) -> None:
        self.redelivered.append(redelivered)


def test_an_acks_late_task_is_delivered_again_when_the_broker_drops_its_worker(
    amqp_broker: Any, amqp_celery_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = RecordingArchive()
    monkeypatch.setattr(invoicing, "archive", archive)
    # On the delivery of the task (a consumer's: the client's publish to "celery" has no consumer
    # tag), the broker drops the worker's connection as a crash would: its late ack cannot come.
    dropped = amqp_broker.faults.drop_connection(address="celery", link=lambda consumer_tag: True, must_fire=True)
    amqp_celery_worker(app)
    store.delay({"id": "inv-5"})
    amqp_broker.wait_for(
        lambda broker: broker.queue("celery").depth == 0 and True in archive.redelivered, timeout=30
    )
    assert archive.redelivered == [False, True]
    [firing] = amqp_broker.faults.history
    assert (dropped.fired, firing.frame) == (1, "basic.deliver channel=1 delivery-tag=1")
