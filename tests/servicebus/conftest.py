"""Fixtures for the Azure Service Bus tests: a broker on a manual clock and SDK clients.

The SDK compares a message's locked-until with the real time before it
settles, so the manual clock starts at the real time and tests move it on.
Client options keep the SDK quick: no keep-alive thread (its 1 s sleep would
hold every close), short socket reads, no retries unless a test wants them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient
from servicebus_helpers import CLIENT_OPTIONS, LOCK_DURATION

import minibroker
from minibroker.servicebus import ServiceBusOptions, connection_string


@pytest.fixture
def clock() -> minibroker.ManualClock:
    return minibroker.ManualClock(start=float(int(time.time())))  # whole seconds: exact millisecond times


@pytest.fixture
def broker(clock: minibroker.ManualClock) -> Iterator[minibroker.ThreadedBroker]:
    options = ServiceBusOptions(lock_duration=LOCK_DURATION, max_delivery_count=3, topics={"events": ("audit", "billing")})
    with minibroker.ThreadedBroker(clock=clock, servicebus=options) as running:
        yield running


@pytest.fixture
def client(broker: minibroker.ThreadedBroker) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(connection_string(broker.port), **CLIENT_OPTIONS) as sb:
        yield sb
