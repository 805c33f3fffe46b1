"""RabbitMQ 4 on minibroker: its official AMQP 1.0 client works unchanged.

Start the broker with ``BrokerConfig(rabbitmq=RabbitMQOptions())`` (or the
pytest marker's ``rabbitmq=RabbitMQOptions()``) and connect with :func:`uri`.
The layer also turns on, without the RabbitMQ identity in ``open``, when a
client attaches ``/management``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..broker.config import RabbitMQOptions as RabbitMQOptions
from ..broker.extension import Extension, register_layer
from .addresses import MANAGEMENT
from .addresses import exchange_address as exchange_address
from .addresses import queue_address as queue_address
from .snapshots import BindingSnapshot as BindingSnapshot
from .snapshots import ExchangeSnapshot as ExchangeSnapshot

if TYPE_CHECKING:
    from ..broker.engine import Broker

__all__ = ["RabbitMQOptions", "BindingSnapshot", "ExchangeSnapshot", "exchange_address", "queue_address", "uri"]


def _layer(broker: Broker) -> Extension:
    """The RabbitMQ layer for ``broker`` (imported only when a broker turns it on)."""
    from .layer import RabbitMQLayer

    return RabbitMQLayer(broker, broker.config.rabbitmq)


register_layer(MANAGEMENT, _layer)


def uri(port: int, host: str = "127.0.0.1", user: str = "guest", password: str = "guest") -> str:
    """The URI RabbitMQ's client connects with to a broker on ``host:port`` (the default virtual host)."""
    return f"amqp://{user}:{password}@{host}:{port}/"
