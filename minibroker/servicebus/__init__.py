"""Azure Service Bus on minibroker: the SDKs (``azure-servicebus``, ``@azure/service-bus``) work unchanged.

Connect with :func:`connection_string`; the layer turns on when the SDK
attaches ``$cbs`` (with the Event Hubs layer beside it, which takes the
event hubs' addresses first; both use the claims component, :mod:`.claims`),
or up front with ``BrokerConfig(servicebus=ServiceBusOptions(...))`` to
declare queues and topic subscriptions or change the lock duration.  The layer
is registered as ``servicebus`` (``minibroker.layers``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .options import CorrelationFilter as CorrelationFilter
from .options import EntityProperties as EntityProperties
from .options import ServiceBusOptions as ServiceBusOptions
from .options import SqlFilter as SqlFilter
from .options import SubscriptionRule as SubscriptionRule

if TYPE_CHECKING:
    from ..broker.layers import Layer, LayerHost

__all__ = [
    "CorrelationFilter", "EntityProperties", "ServiceBusOptions", "SqlFilter", "SubscriptionRule", "build_layer",
    "connection_string",
]  # fmt: skip


def build_layer(host: LayerHost, options: Any) -> Layer:
    """The Service Bus layer for ``host`` with ``options`` (None: the defaults), imported only now."""
    from .layer import ServiceBusLayer

    return ServiceBusLayer(host, options)


def connection_string(port: int, host: str = "127.0.0.1") -> str:
    """A Service Bus connection string for a broker on ``host:port`` (plain AMQP, any key accepted)."""
    return f"Endpoint=sb://{host}:{port};SharedAccessKeyName=minibroker;SharedAccessKey=minibroker;UseDevelopmentEmulator=true;"
