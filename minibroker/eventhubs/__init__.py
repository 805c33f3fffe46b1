"""Azure Event Hubs on minibroker: ``azure-eventhub`` works unchanged.

Connect with :func:`connection_string`; the layer turns on when the SDK
attaches ``$cbs`` (with the Service Bus layer, beside it), or up
front with ``BrokerConfig(event_hubs=EventHubsOptions(...))`` to declare
hubs.  A partition is a stream; see :mod:`.hub` for where events go and who
owns a partition, :mod:`.events` for what each event carries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .options import EventHubOptions as EventHubOptions
from .options import EventHubsOptions as EventHubsOptions

if TYPE_CHECKING:
    from ..broker.layers import Layer, LayerHost

__all__ = ["EventHubOptions", "EventHubsOptions", "build_layer", "connection_string"]


def build_layer(broker: LayerHost, options: Any) -> Layer:
    """The Event Hubs layer for ``broker`` with ``options`` (None: the defaults), imported only now;
    registered as ``event_hubs`` (``minibroker.layers``), beside and before the Service Bus layer."""
    from .layer import EventHubsLayer

    return EventHubsLayer(broker, options)


def connection_string(port: int, event_hub: str | None = None, host: str = "127.0.0.1") -> str:
    """An Event Hubs connection string for a broker on ``host:port`` (plain AMQP, any key accepted).

    ``event_hub`` adds ``EntityPath``, which ``EventHubProducerClient.from_connection_string``
    and ``EventHubConsumerClient.from_connection_string`` take instead of ``eventhub_name``.
    """
    entity = f"EntityPath={event_hub};" if event_hub is not None else ""
    return (
        f"Endpoint=sb://{host}:{port};SharedAccessKeyName=minibroker;SharedAccessKey=minibroker;"
        f"{entity}UseDevelopmentEmulator=true"
    )
