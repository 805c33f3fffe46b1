"""Subscription rules with the Python SDK: SQL and correlation filters, actions, ``$Default``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from servicebus_helpers import CLIENT_OPTIONS

import minibroker
from minibroker.servicebus import (
    CorrelationFilter,
    ServiceBusOptions,
    SqlFilter,
    SubscriptionRule,
    connection_string,
)

pytestmark = pytest.mark.interop

RULES = {
    "shop/big": (SubscriptionRule("big-orders", SqlFilter("amount > 100 AND sys.Label = 'order'")),),
    "shop/red": (
        SubscriptionRule(
            "red", CorrelationFilter(subject="order", properties={"color": "red"}),
            action="SET user.seen = 'yes'; REMOVE amount; SET sys.Label = 'tagged'",
        ),
    ),  # fmt: skip
    "shop/none": (SubscriptionRule("nothing", SqlFilter("1=0")),),
    "shop/twice": (
        SubscriptionRule("plain-1", SqlFilter("amount > 0")),
        SubscriptionRule("plain-2", SqlFilter("missing IS NULL")),
        SubscriptionRule("copy", SqlFilter("1=1"), action="SET copy = amount * 2"),
    ),
}


@pytest.fixture
def shop() -> Iterator[minibroker.ThreadedBroker]:
    options = ServiceBusOptions(topics={"shop": ("big", "red", "all", "none", "twice")}, rules=RULES)
    clock = minibroker.ManualClock(start=float(int(time.time())))
    with minibroker.ThreadedBroker(clock=clock, servicebus=options) as running:
        yield running


def _receive_all(client: ServiceBusClient, subscription: str) -> list[tuple[str, dict[str, object], str | None]]:
    with client.get_subscription_receiver("shop", subscription, prefetch_count=10) as receiver:
        messages = receiver.receive_messages(max_message_count=10, max_wait_time=1)
        for message in messages:
            receiver.complete_message(message)
    decoded = []
    for m in messages:
        properties = {k.decode(): v.decode() if isinstance(v, bytes) else v for k, v in (m.application_properties or {}).items()}
        decoded.append((str(m), properties, m.subject))
    return decoded


def test_sql_and_correlation_filters_and_actions_pick_and_change_copies(shop: minibroker.ThreadedBroker) -> None:
    with ServiceBusClient.from_connection_string(connection_string(shop.port), **CLIENT_OPTIONS) as client:
        with client.get_topic_sender("shop") as sender:
            sender.send_messages(
                [
                    ServiceBusMessage("big red", subject="order", application_properties={"amount": 150, "color": "red"}),
                    ServiceBusMessage("small blue", subject="order", application_properties={"amount": 50, "color": "blue"}),
                    ServiceBusMessage("refund", subject="refund", application_properties={"amount": 500}),
                ]
            )
        assert [body for body, _, _ in _receive_all(client, "big")] == ["big red"]
        assert _receive_all(client, "red") == [("big red", {"color": "red", "seen": "yes"}, "tagged")]
        assert [body for body, _, _ in _receive_all(client, "all")] == ["big red", "small blue", "refund"]  # $Default
        assert _receive_all(client, "none") == []
        twice = _receive_all(client, "twice")
        # Two matching rules without actions give one copy; the rule with an action its own.
        assert [(body, props.get("copy")) for body, props, _ in twice] == [
            ("big red", None), ("big red", 300), ("small blue", None), ("small blue", 100), ("refund", None),
            ("refund", 1000),
        ]  # fmt: skip
    assert shop.topic("shop").statistics.filtered_out == 7  # per subscription a message skipped: big 2, red 2, none 3
