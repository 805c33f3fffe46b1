"""What the pika interop modules share: a broker that must end without errors, a pika connection
to it, and the URL with credentials and vhost that pika takes."""

from __future__ import annotations

from collections.abc import Iterator

import pika
import pytest

import minibroker

#: Seconds a test waits for pika (also pika's blocked-connection timeout).
TIMEOUT = 10


def pika_url(broker: minibroker.ThreadedBroker, user: str = "guest", password: str = "guest", vhost: str = "%2F") -> str:
    return f"amqp://{user}:{password}@127.0.0.1:{broker.port}/{vhost}?blocked_connection_timeout={TIMEOUT}"


@pytest.fixture
def broker() -> Iterator[minibroker.ThreadedBroker]:
    """A broker for the test; it must have logged no error by the end (``ThreadedBroker.errors``)."""
    with minibroker.ThreadedBroker() as running:
        yield running
        assert running.errors() == []


@pytest.fixture
def connection(broker: minibroker.ThreadedBroker) -> Iterator[pika.BlockingConnection]:
    """A pika ``BlockingConnection`` to ``broker``, closed after the test if still open."""
    opened = pika.BlockingConnection(pika.URLParameters(pika_url(broker)))
    try:
        yield opened
    finally:
        if opened.is_open:
            opened.close()
