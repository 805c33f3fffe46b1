"""Azure Service Bus on minibroker: the SDKs (``azure-servicebus``, ``@azure/service-bus``) work unchanged.

Connect with :func:`connection_string`; the layer turns on when the SDK
attaches ``$cbs``, or up front with ``BrokerConfig(servicebus=ServiceBusOptions(...))``
to declare queues and topic subscriptions or change the lock duration.
"""

from .options import ServiceBusOptions as ServiceBusOptions

__all__ = ["ServiceBusOptions", "connection_string"]


def connection_string(port: int, host: str = "127.0.0.1") -> str:
    """A Service Bus connection string for a broker on ``host:port`` (plain AMQP, any key accepted)."""
    return f"Endpoint=sb://{host}:{port};SharedAccessKeyName=minibroker;SharedAccessKey=minibroker;UseDevelopmentEmulator=true;"
