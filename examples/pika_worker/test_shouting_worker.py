"""The pika worker against the ``amqp_broker`` fixture: the happy path, and the broker dropping
the worker's connection in the middle of a job (``amqp_broker.restart()``, as a crash does)."""

from __future__ import annotations

from typing import Any

import pytest
from shouting_worker import work

JOBS = pytest.mark.amqp_broker(queues=["jobs", "results"])


@JOBS
def test_jobs_become_results(amqp_broker: Any) -> None:
    for body in (b"a", b"b", b"c"):
        amqp_broker.publish("jobs", body, durable=True)
    assert work(amqp_broker.amqp091_url, results=3) == [False, False, False]
    amqp_broker.assert_queue("results", [b"A", b"B", b"C"])
    amqp_broker.assert_queue("jobs", [])


@JOBS
def test_a_job_whose_connection_drops_is_done_again(amqp_broker: Any) -> None:
    amqp_broker.publish("jobs", b"a", durable=True)
    drops: list[bytes] = []

    def crash_once(body: bytes) -> None:
        if not drops:
            drops.append(body)
            amqp_broker.restart()  # every connection dropped: the job is neither published nor acked

    assert work(amqp_broker.amqp091_url, results=1, before_publish=crash_once) == [False, True]
    amqp_broker.assert_queue("results", [b"A"])  # once: the first attempt never published
    amqp_broker.assert_queue("jobs", [])
