"""The JavaScript Service Bus SDK (``@azure/service-bus``) against minibroker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import minibroker
from minibroker.servicebus import connection_string

pytestmark = pytest.mark.interop


def test_js_sdk_sends_and_receives_with_peek_lock(broker: minibroker.ThreadedBroker, rhea: Callable[..., Any]) -> None:
    result = rhea(
        "servicebus", connection_string=connection_string(broker.port), queue="orders", bodies=["a", "b"], timeout_ms=20000
    )
    assert result["error"] is None
    assert result["received"] == [
        {"body": "a", "sequence_number": 1, "delivery_count": 0},
        {"body": "b", "sequence_number": 2, "delivery_count": 0},
    ]
    assert broker.queue("orders").depth == 0
    assert broker.statistics().nodes["orders"].acknowledged == 2
