"""Fixtures of the in-memory AMQP 0-9-1 front-end tests: a broker on a manual clock, and a client
(``test_front_end.Client``) that has opened channel 1 on it, and a count of 0-9-1 publishes
converted to AMQP 1.0."""

from __future__ import annotations

from typing import Any

import pytest
from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.front091 import conversion


@pytest.fixture
def broker() -> Broker:
    return Broker(BrokerConfig(), clock=ManualClock())


@pytest.fixture
def client(broker: Broker) -> Client:
    opened = Client(broker)
    opened.open()
    return opened


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The routing key of each 0-9-1 publish converted to AMQP 1.0 from now on."""
    converted: list[str] = []
    real = conversion.to_amqp10

    def counting(exchange: str, routing_key: str, *rest: Any) -> bytes:
        converted.append(routing_key)
        return real(exchange, routing_key, *rest)

    monkeypatch.setattr(conversion, "to_amqp10", counting)
    return converted
