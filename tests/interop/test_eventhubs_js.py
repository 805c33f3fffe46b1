"""The JavaScript Event Hubs SDK (``@azure/event-hubs``) against minibroker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import minibroker
from minibroker.eventhubs import connection_string

pytestmark = pytest.mark.interop


def test_js_sdk_sends_and_receives_a_partition(rhea: Callable[..., Any]) -> None:
    hubs = minibroker.EventHubsOptions(hubs=(minibroker.EventHubOptions("telemetry", partitions=2),))
    with minibroker.ThreadedBroker(event_hubs=hubs) as broker:
        result = rhea(
            "eventhubs", connection_string=connection_string(broker.port, "telemetry"), bodies=["a", "b"],
            key="device-1", timeout_ms=20000,
        )  # fmt: skip
        assert result["error"] is None
        assert result["partition_ids"] == ["0", "1"]
        assert [(r["body"], r["sequence_number"], r["offset"]) for r in result["received"]][:2] == [
            ("a", 0, "0"),
            ("b", 1, "1"),
        ]
        keyed = [p for p in broker.event_hub("telemetry").partitions if "device-1" in p.partition_keys]
        assert len(keyed) == 1 and keyed[0].bodies[-1] == b'"keyed"'  # the JS SDK sends a string body as JSON
        assert result["keyed_partition"] in (None, keyed[0].id)  # None: the key hashed to partition 0
