"""Azure Service Bus on minibroker: the SDKs (``azure-servicebus``, ``@azure/service-bus``) work unchanged.

Connect with :func:`connection_string`; the layer turns on when the SDK
attaches ``$cbs``, or up front with ``BrokerConfig(servicebus=ServiceBusOptions(...))``
to declare queues and topic subscriptions or change the lock duration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..broker.config import CorrelationFilter as CorrelationFilter
from ..broker.config import EntityProperties as EntityProperties
from ..broker.config import ServiceBusOptions as ServiceBusOptions
from ..broker.config import SqlFilter as SqlFilter
from ..broker.config import SubscriptionRule as SubscriptionRule
from ..broker.extension import Extension, register_layer
from .addresses import CBS

if TYPE_CHECKING:
    from .host import ServiceBusHost

__all__ = ["CorrelationFilter", "EntityProperties", "ServiceBusOptions", "SqlFilter", "SubscriptionRule", "connection_string"]


def _layer(broker: ServiceBusHost) -> Extension:
    """The Service Bus layer for ``broker`` (imported only when a broker turns it on)."""
    from .layer import ServiceBusLayer

    return ServiceBusLayer(broker, broker.config.servicebus)


register_layer(CBS, _layer)


def connection_string(port: int, host: str = "127.0.0.1") -> str:
    """A Service Bus connection string for a broker on ``host:port`` (plain AMQP, any key accepted)."""
    return f"Endpoint=sb://{host}:{port};SharedAccessKeyName=minibroker;SharedAccessKey=minibroker;UseDevelopmentEmulator=true;"
