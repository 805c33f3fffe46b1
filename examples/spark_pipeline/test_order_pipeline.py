"""The order pipeline on real Spark against the ``amqp_broker`` fixture: exact results, with faults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

# Skipped only where the optional spark extra is absent; CI installs it, so these run there.
pytest.importorskip("pyspark", reason="the Spark pipeline needs the spark extra: pip install -e '.[test,spark]'")

from order_pipeline import Addresses, run, run_until_done  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

ADDRESSES = Addresses()


def order(order_id: str | None, customer: str | None = "acme", lines: Any = None) -> str:
    data: dict[str, Any] = {"customer": customer, "lines": lines if lines is not None else [{"sku": "a", "qty": 2, "price": 1.25}]}
    if order_id is not None:
        data["order_id"] = order_id
    return json.dumps(data)


#: Valid orders and the result each must produce.
VALID = {
    "o-1": (order("o-1", "acme", [{"sku": "a", "qty": 2, "price": 1.25}, {"sku": "b", "qty": 1, "price": 10.0}]),
            {"order_id": "o-1", "customer": "acme", "lines": 2, "units": 3, "total": 12.5}),
    "o-2": (order("o-2", "globex", [{"sku": "c", "qty": 4, "price": 0.1}]),
            {"order_id": "o-2", "customer": "globex", "lines": 1, "units": 4, "total": 0.4}),
}  # fmt: skip
#: Invalid orders and the reason each must be dead-lettered with.
INVALID = {
    "bad-json": ("{not json", "not a JSON order"),
    "no-id": (order(None), "missing order_id"),
    "no-customer": (order("o-9", None), "missing customer"),
    "no-lines": (order("o-8", lines=[]), "no lines"),
    "zero-qty": (order("o-7", lines=[{"sku": "a", "qty": 0, "price": 1.0}]),
                 "a line has a missing or non-positive quantity or a negative price"),
}  # fmt: skip


def publish_orders(broker: Any, count: int = 0) -> dict[str, dict[str, Any]]:
    """The fixed valid and invalid orders, plus ``count`` generated valid ones; returns the expected results."""
    expected = {oid: result for oid, (_, result) in VALID.items()}
    for oid, (body, _) in VALID.items():
        broker.publish(ADDRESSES.orders, body, message_id=f"src-{oid}")
    for name, (body, _) in INVALID.items():
        broker.publish(ADDRESSES.orders, body, message_id=name)
    for i in range(count):
        oid = f"g-{i}"
        broker.publish(ADDRESSES.orders, order(oid, "initech", [{"sku": "z", "qty": i + 1, "price": 2.0}]),
                       message_id=f"src-{oid}")
        expected[oid] = {"order_id": oid, "customer": "initech", "lines": 1, "units": i + 1, "total": 2.0 * (i + 1)}
    return expected


def results(broker: Any) -> dict[str, dict[str, Any]]:
    """The results queue by message-id; a repeated message-id must repeat the same result."""
    out: dict[str, dict[str, Any]] = {}
    for queued in broker.queue(ADDRESSES.results).messages:
        message = queued.message
        value = json.loads(message.body)
        key = message.properties.message_id
        assert key == f"total-{value['order_id']}"
        assert out.setdefault(value["order_id"], value) == value
    return out


def dead_letters(broker: Any) -> dict[str, str]:
    return {
        q.message.properties.message_id: q.message.application_properties["error"]
        for q in broker.queue(ADDRESSES.dead_letter).messages
    }


def expected_dead_letters() -> dict[str, str]:
    return {f"invalid-{name}": reason for name, (_, reason) in INVALID.items()}


def test_valid_orders_are_totalled_and_invalid_ones_dead_lettered(spark: Any, amqp_broker: Any, tmp_path: Path) -> None:
    expected = publish_orders(amqp_broker)
    run(spark, amqp_broker.url, str(tmp_path / "ck"))
    assert results(amqp_broker) == expected
    assert amqp_broker.queue(ADDRESSES.results).depth == len(expected)  # exactly once without faults
    assert dead_letters(amqp_broker) == expected_dead_letters()
    assert amqp_broker.queue(ADDRESSES.orders).depth == 0


def test_a_second_run_takes_only_new_orders(spark: Any, amqp_broker: Any, tmp_path: Path) -> None:
    expected = publish_orders(amqp_broker, count=5)
    run(spark, amqp_broker.url, str(tmp_path / "ck"), max_batch=4)
    amqp_broker.publish(ADDRESSES.orders, order("late", "acme", [{"sku": "q", "qty": 3, "price": 1.0}]))
    run(spark, amqp_broker.url, str(tmp_path / "ck"), max_batch=4)
    expected["late"] = {"order_id": "late", "customer": "acme", "lines": 1, "units": 3, "total": 3.0}
    assert results(amqp_broker) == expected
    assert amqp_broker.queue(ADDRESSES.results).depth == len(expected)
    assert len(dead_letters(amqp_broker)) == amqp_broker.queue(ADDRESSES.dead_letter).depth == len(INVALID)
    assert amqp_broker.queue(ADDRESSES.orders).depth == 0


# ----------------------------------------------------------------------------- with faults


def assert_exact_output(broker: Any, expected: dict[str, dict[str, Any]]) -> None:
    """The results hold exactly the expected ones (a repeat, if any, has the same message-id and
    content: a consumer deduplicating by message-id sees exactly ``expected``), likewise the dead
    letters, and no order is left behind."""
    assert results(broker) == expected
    assert dead_letters(broker) == expected_dead_letters()
    assert broker.queue(ADDRESSES.orders).depth == 0


def test_a_dropped_output_link_is_reattached_and_nothing_is_lost(spark: Any, amqp_broker: Any, tmp_path: Path) -> None:
    expected = publish_orders(amqp_broker, count=6)
    fault = amqp_broker.faults.detach_link(ADDRESSES.results, after=2, times=1, must_fire=True)
    assert run_until_done(spark, amqp_broker.url, str(tmp_path / "ck"), max_batch=5) == 1  # the writer re-attached
    assert fault.fired == 1
    assert_exact_output(amqp_broker, expected)


def test_a_rejected_publish_fails_the_run_and_the_rerun_completes_it(spark: Any, amqp_broker: Any, tmp_path: Path) -> None:
    expected = publish_orders(amqp_broker, count=6)
    fault = amqp_broker.faults.reject_publish(ADDRESSES.results, after=1, times=1, must_fire=True)
    # The rejection fails the write task, the micro-batch and the run; the second run replays the
    # batch from the checkpoint (same message-ids) and goes on.
    assert run_until_done(spark, amqp_broker.url, str(tmp_path / "ck"), max_batch=5) == 2
    assert fault.fired == 1
    assert_exact_output(amqp_broker, expected)


def test_the_source_connection_dropped_mid_stream_repeats_nothing(spark: Any, amqp_broker: Any, tmp_path: Path) -> None:
    expected = publish_orders(amqp_broker, count=10)
    fault = amqp_broker.faults.drop_connection(ADDRESSES.orders, after=7, times=1, must_fire=True)
    assert run_until_done(spark, amqp_broker.url, str(tmp_path / "ck"), max_batch=4) == 1
    assert fault.fired == 1
    assert_exact_output(amqp_broker, expected)
    assert amqp_broker.queue(ADDRESSES.results).depth == len(expected)  # not even a repeat
