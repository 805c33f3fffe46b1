"""An ``open`` naming a virtual host the broker does not have, refused as RabbitMQ 4 refuses it.

RabbitMQ's ``rabbit_amqp_reader`` checks the virtual host before it answers the
``open`` and, failing, closes the socket with no frame: its client then raises
``ConnectionException`` rather than recovering from a ``close``.  No socket here: the
in-memory peer reads what the broker writes.
"""

from __future__ import annotations

from minibroker import ManualClock
from minibroker.amqp import errors as conditions
from minibroker.broker.engine import Broker
from minibroker.broker.tap import Observer, TapConnection
from minibroker.config import BrokerConfig
from minibroker.protocol import events as ev
from minibroker.rabbitmq.options import RabbitMQOptions
from minibroker.testing import Peer, connect


class Closings(Observer):
    """Keeps the ``ConnectionClosed`` events the broker handles."""

    def __init__(self) -> None:
        self.closed: list[ev.ConnectionClosed] = []

    def event_in(self, connection: TapConnection, event: ev.Event) -> ev.Event | None:
        if isinstance(event, ev.ConnectionClosed):
            self.closed.append(event)
        return event


def test_an_unknown_virtual_host_gets_no_open_and_no_close() -> None:
    broker = Broker(BrokerConfig(rabbitmq=RabbitMQOptions(vhosts=("/", "tenant-a"))), ManualClock())
    closings = broker.tap.install(Closings())
    peer = Peer()
    pump = connect(broker, peer)
    frames = pump.send(peer.start(hostname="vhost:elsewhere"))
    assert frames.names() == ["ProtocolHeader"]  # the header exchange only (§2.2), as RabbitMQ
    assert pump.finished and not broker.connections
    (closed,) = closings.closed
    assert closed.error is not None and closed.error.condition == conditions.UNAUTHORIZED_ACCESS
    assert "virtual host 'elsewhere' does not exist" in str(closed.error.description)


def test_known_virtual_hosts_and_other_hostnames_are_answered() -> None:
    broker = Broker(BrokerConfig(rabbitmq=RabbitMQOptions(vhosts=("/", "tenant-a"))), ManualClock())
    for hostname in ("vhost:tenant-a", "vhost:%2F", "localhost", None):
        peer = Peer()
        frames = connect(broker, peer).send(peer.start(hostname=hostname))
        assert frames.names() == ["ProtocolHeader", "Open", "Begin"], hostname
