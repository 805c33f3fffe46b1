"""The AMQP 0-9-1 front end: pika, kombu (py-amqp), aio-pika and amqplib clients on the broker's port.

A connection that starts with the 0-9-1 protocol header (``AMQP 0 0 9 1``, §4.2.2) is served by
:class:`~.connection.Connection091` over the same nodes as AMQP 1.0, as RabbitMQ serves both
protocols on 5672: a queue declared with pika is the queue a python-qpid-proton client reads.
Importing this package registers the front end (``minibroker.server`` does); its modules, and
the RabbitMQ layer's exchanges they use, are imported on the first 0-9-1 connection only.

Modules: :mod:`.connection` (the glue between the sans-I/O engine and the broker),
:mod:`.channel` (per-channel state: delivery tags, acknowledgements, confirms, transactions),
:mod:`.consumers` (``basic.consume`` as a queue consumer with a prefetch window),
:mod:`.vhost` (exchanges, queue declarations, exclusive queues, dead-lettering) and
:mod:`.conversion` (messages between 0-9-1 and AMQP 1.0).  See ``docs/amqp091.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..amqp091 import PROTOCOL_HEADER
from ..broker.frontends import ServedConnection, register_front_end

if TYPE_CHECKING:
    from ..broker.engine import Broker

__all__ = ["PROTOCOL_HEADER", "connect"]


def connect(broker: Broker, notify: Callable[[], None], peer: str) -> ServedConnection:
    """The front end's factory: a :class:`~.connection.Connection091` for a new 0-9-1 transport."""
    from .connection import Connection091

    return Connection091(broker, notify, peer)


register_front_end(PROTOCOL_HEADER, connect)
