"""The public broker options: the core's :class:`~minibroker.broker.config.BrokerConfig` plus one
keyword per protocol layer minibroker ships.

The core keeps every layer's options in ``layers`` (by layer name) and names none of them; this
class adds the keywords users write, ``servicebus=``, ``event_hubs=`` and ``rabbitmq=``, and fills
``layers`` from them.  The option classes stay in their layers' packages and are not imported
here at run time, so a plain broker loads none of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import layers as _registered  # noqa: F401 - importing it registers the built-in layers
from .broker import config as core
from .records import record

if TYPE_CHECKING:
    from .eventhubs.options import EventHubsOptions
    from .rabbitmq.options import RabbitMQOptions
    from .servicebus.options import ServiceBusOptions

__all__ = ["BrokerConfig", "LAYER_KEYWORDS", "config_from_keywords"]

#: The keywords that carry a layer's options, each the name the layer is registered under.
LAYER_KEYWORDS = ("servicebus", "rabbitmq", "event_hubs")


@record(slots=True)
class BrokerConfig(core.BrokerConfig):
    """Options for the whole broker (see :class:`minibroker.broker.config.BrokerConfig` for the rest)."""

    #: The Azure Service Bus layer's options; it also turns on (with defaults) when a client attaches ``$cbs``.
    servicebus: ServiceBusOptions | None = None
    #: Present the broker as RabbitMQ 4 (exchanges, ``/management``, its client's checks); see RabbitMQOptions.
    rabbitmq: RabbitMQOptions | None = None
    #: The Azure Event Hubs layer's options (it turns on the same way, beside the Service Bus layer).
    event_hubs: EventHubsOptions | None = None

    def __post_init__(self) -> None:
        core.BrokerConfig.__post_init__(self)
        layers = dict(self.layers)
        for name in LAYER_KEYWORDS:
            value = getattr(self, name)
            if value is not None:
                layers[name] = value
            elif layers.get(name) is not None:  # given as layers={name: ...}: the keyword reads it too
                setattr(self, name, layers[name])
        self.layers = layers


def config_from_keywords(
    config: core.BrokerConfig | None, fields: Mapping[str, Any], caller: str, own: Sequence[str]
) -> core.BrokerConfig:
    """``config``, or a :class:`BrokerConfig` of the ``fields`` a broker handle (``caller``) was
    given as keywords; a keyword that is neither one of its ``own`` nor a field names them all
    (``BrokerConfig(**fields)`` alone would say only ``__init__() got an unexpected keyword``)."""
    if config is not None:
        if fields:
            raise TypeError("pass either config=BrokerConfig(...) or its fields as keywords, not both")
        return config
    known = [f.name for f in dataclasses.fields(BrokerConfig)]
    unknown = sorted(set(fields) - set(known))
    if unknown:
        raise TypeError(
            f"{caller}: unknown keyword(s) {', '.join(unknown)}; valid keywords are: {', '.join(own)}, "
            f"and the BrokerConfig fields {', '.join(known)}"
        )
    return BrokerConfig(**fields)
