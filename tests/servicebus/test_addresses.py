"""Service Bus entity addresses reduced to broker nodes (no SDK involved)."""

from __future__ import annotations

import pytest

from minibroker.servicebus.addresses import Entity, node_name, parse_address


@pytest.mark.parametrize(
    ("address", "node"),
    [
        ("amqps://127.0.0.1:5671/orders", "orders"),
        ("amqps://ns.servicebus.windows.net/orders/$DeadLetterQueue", "orders/$DeadLetterQueue"),
        ("orders/$management", "orders/$management"),
        ("sb://host", ""),
    ],
)
def test_node_name_strips_scheme_and_host(address: str, node: str) -> None:
    assert node_name(address) == node


@pytest.mark.parametrize(
    ("address", "entity", "node"),
    [
        ("amqps://h:1/orders", Entity("orders", None, False, False), "orders"),
        ("amqps://h:1/orders/$DeadLetterQueue", Entity("orders", None, True, False), "orders/$DeadLetterQueue"),
        ("events/Subscriptions/audit", Entity("events", "audit", False, False), "events/Subscriptions/audit"),
        (
            "amqps://h:1/events/Subscriptions/audit/$DeadLetterQueue",
            Entity("events", "audit", True, False),
            "events/Subscriptions/audit/$DeadLetterQueue",
        ),
        ("events/Subscriptions/audit/$management", Entity("events", "audit", False, True), "events/Subscriptions/audit"),
        ("orders/$management", Entity("orders", None, False, True), "orders"),
    ],
)
def test_parse_address_names_entity_subscription_dead_letters_and_management(
    address: str, entity: Entity, node: str
) -> None:
    parsed = parse_address(address)
    assert parsed == entity
    assert parsed.node == node
