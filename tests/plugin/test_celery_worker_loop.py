"""``amqp_celery_worker``'s worker loop: what it schedules for itself runs within a turn.

kombu's hub (the worker's event loop) runs the callbacks scheduled before a turn, then polls its
sockets: for 1 s when it has no timers (``broker_heartbeat = 0``).  A worker that reads a task in
one of those callbacks (its first, ``_quick_drain``, as the loop starts; the re-read after a
delivery) schedules the task's ``basic.ack`` from the loop's own thread, which wakes nothing: the
ack waited for the poll's whole timeout, a second per first task (RabbitMQ 3.10 the same).  The
fixture's worker has a timer every ``LOOP_TURN`` seconds, so no poll is longer than that.  The
tests record the timeouts the loop polls with (counting, not timing).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery, group
from kombu.asynchronous import hub as kombu_hub
from pytest_minibroker.celery_worker import LOOP_TURN

app = Celery("loop_turns")


@app.task
def add(x: int, y: int) -> int:
    return x + y


class RecordingPoller:
    """The hub's poller, noting each timeout it is asked to wait."""

    def __init__(self, poller: Any, timeouts: list[float]) -> None:
        self._poller = poller
        self._timeouts = timeouts

    def poll(self, timeout: float) -> Any:
        self._timeouts.append(timeout)
        return self._poller.poll(timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._poller, name)


@pytest.fixture
def poll_timeouts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    timeouts: list[float] = []
    create_loop = kombu_hub.Hub.create_loop

    def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(self.poller, RecordingPoller):
            self.poller = RecordingPoller(self.poller, timeouts)
        return create_loop(self, *args, **kwargs)

    monkeypatch.setattr(kombu_hub.Hub, "create_loop", recording)
    yield timeouts


def test_the_first_tasks_ack_waits_no_longer_than_a_turn(
    amqp_broker: Any, amqp_celery_worker: Any, poll_timeouts: list[float]
) -> None:
    app.conf.update(broker_url=amqp_broker.amqp091_url, result_backend="rpc://")
    add.delay(1, 1)  # waiting in the queue: the worker reads it in its loop's first callbacks
    amqp_celery_worker(app)
    assert add.delay(2, 3).get(timeout=30) == 5
    amqp_broker.wait_for(lambda broker: broker.statistics().nodes["celery"].acknowledged == 2, timeout=30)
    assert poll_timeouts and max(poll_timeouts) <= LOOP_TURN


def test_a_bursts_last_ack_waits_no_longer_than_a_turn(
    amqp_broker: Any, amqp_celery_worker: Any, poll_timeouts: list[float]
) -> None:
    amqp_celery_worker(app)
    assert group(add.s(n, n) for n in range(5)).delay().get(timeout=30) == [0, 2, 4, 6, 8]
    amqp_broker.wait_for(lambda broker: broker.statistics().nodes["celery"].acknowledged == 5, timeout=30)
    assert poll_timeouts and max(poll_timeouts) <= LOOP_TURN
