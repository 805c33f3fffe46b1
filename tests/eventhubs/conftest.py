"""Fixtures for the Azure Event Hubs tests: a broker on a manual clock and SDK clients.

The manual clock starts at the real time (whole seconds, so enqueued times are
exact milliseconds) and tests move it on to tell events apart by time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from azure.eventhub import EventHubProducerClient
from eventhubs_helpers import CLIENT_OPTIONS, HUB

import minibroker
from minibroker.eventhubs import EventHubOptions, EventHubsOptions, connection_string


@pytest.fixture
def clock() -> minibroker.ManualClock:
    return minibroker.ManualClock(start=float(int(time.time())))


@pytest.fixture
def broker(clock: minibroker.ManualClock) -> Iterator[minibroker.ThreadedBroker]:
    options = EventHubsOptions(hubs=(EventHubOptions(HUB, partitions=2, consumer_groups=("audit",)),))
    with minibroker.ThreadedBroker(clock=clock, event_hubs=options) as running:
        yield running


@pytest.fixture
def conn_str(broker: minibroker.ThreadedBroker) -> str:
    return connection_string(broker.port, HUB)


@pytest.fixture
def producer(conn_str: str) -> Iterator[EventHubProducerClient]:
    with EventHubProducerClient.from_connection_string(conn_str, **CLIENT_OPTIONS) as client:
        yield client
