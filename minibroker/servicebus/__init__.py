"""Azure Service Bus on minibroker: the SDKs (``azure-servicebus``, ``@azure/service-bus``) work unchanged.

Connect with :func:`connection_string`; the layer turns on when the SDK
attaches ``$cbs`` (inside the Event Hubs layer, which hands it everything
that is not Event Hubs: ``minibroker.eventhubs.build_layer``), or up front
with ``BrokerConfig(servicebus=ServiceBusOptions(...))`` to declare queues
and topic subscriptions or change the lock duration.
"""

from __future__ import annotations

from ..broker.config import CorrelationFilter as CorrelationFilter
from ..broker.config import EntityProperties as EntityProperties
from ..broker.config import ServiceBusOptions as ServiceBusOptions
from ..broker.config import SqlFilter as SqlFilter
from ..broker.config import SubscriptionRule as SubscriptionRule

__all__ = ["CorrelationFilter", "EntityProperties", "ServiceBusOptions", "SqlFilter", "SubscriptionRule", "connection_string"]


def connection_string(port: int, host: str = "127.0.0.1") -> str:
    """A Service Bus connection string for a broker on ``host:port`` (plain AMQP, any key accepted)."""
    return f"Endpoint=sb://{host}:{port};SharedAccessKeyName=minibroker;SharedAccessKey=minibroker;UseDevelopmentEmulator=true;"
