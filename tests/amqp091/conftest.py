"""Fixtures of the in-memory AMQP 0-9-1 front-end tests: a broker on a manual clock, and a client
(``test_front_end.Client``) that has opened channel 1 on it."""

from __future__ import annotations

import pytest
from test_front_end import Client  # tests/amqp091 is on sys.path

from minibroker.broker.clock import ManualClock
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker


@pytest.fixture
def broker() -> Broker:
    return Broker(BrokerConfig(), clock=ManualClock())


@pytest.fixture
def client(broker: Broker) -> Client:
    opened = Client(broker)
    opened.open()
    return opened
