"""RabbitMQ 4 on minibroker: its official AMQP 1.0 client works unchanged.

Start the broker with ``BrokerConfig(rabbitmq=RabbitMQOptions())`` (or the
pytest marker's ``rabbitmq=RabbitMQOptions()``) and connect with :func:`uri`.
The layer also turns on, without the RabbitMQ identity in ``open``, when a
client attaches ``/management``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .addresses import exchange_address as exchange_address
from .addresses import queue_address as queue_address
from .options import RabbitMQOptions as RabbitMQOptions
from .snapshots import BindingSnapshot as BindingSnapshot
from .snapshots import ExchangeSnapshot as ExchangeSnapshot

if TYPE_CHECKING:
    from ..broker.layers import Layer, LayerHost

__all__ = [
    "RabbitMQOptions", "BindingSnapshot", "ExchangeSnapshot", "build_layer", "exchange_address", "queue_address", "uri",
]  # fmt: skip


def build_layer(broker: LayerHost, options: Any) -> Layer:
    """The RabbitMQ layer for ``broker`` with ``options`` (None: turned on by ``/management``, the
    defaults and the broker's own identity), imported only now; registered as ``rabbitmq``
    (``minibroker.layers``), which cannot run beside the Azure layers."""
    from .layer import RabbitMQLayer

    return RabbitMQLayer(broker, options)


def uri(port: int, host: str = "127.0.0.1", user: str = "guest", password: str = "guest") -> str:
    """The URI RabbitMQ's client connects with to a broker on ``host:port`` (the default virtual host)."""
    return f"amqp://{user}:{password}@{host}:{port}/"
