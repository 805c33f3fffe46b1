"""The protocol layers minibroker ships, registered with the broker core (``minibroker.broker.layers``).

Registered by name (``module:function``), so nothing of a layer is imported until a broker turns
it on; the public :class:`~minibroker.config.BrokerConfig` imports this module, so every way of
building a broker (``ThreadedBroker``, ``open_broker``, ``serve``, the CLI, the pytest plugin)
has them.  Order matters: a broker offers each attach to its layers in this order.

* ``claims``: the ``$cbs`` node (claims-based security) that Azure SDKs attach first; a component
  the two Azure layers require and share, which tells them which connections authenticated.
* ``event_hubs``: hubs, partitions, consumer groups (before ``servicebus``, which takes every
  other address of an authenticated connection).
* ``servicebus``: queues, topics, subscriptions, sessions, ``$management``.
* ``rabbitmq``: RabbitMQ 4's ``/management``, ``/queues``, ``/exchanges``; not beside the Azure layers.
"""

from __future__ import annotations

from .broker.layers import register_layer

__all__ = ["CBS_ADDRESS", "MANAGEMENT_ADDRESS"]

#: The claims-based-security node Azure Service Bus and Event Hubs clients attach first.
CBS_ADDRESS = "$cbs"
#: RabbitMQ 4's management node (its client attaches it first).
MANAGEMENT_ADDRESS = "/management"

register_layer("claims", "minibroker.servicebus.claims:build_layer", addresses=(CBS_ADDRESS,))
register_layer("event_hubs", "minibroker.eventhubs:build_layer", addresses=(CBS_ADDRESS,), requires=("claims",))
register_layer("servicebus", "minibroker.servicebus:build_layer", addresses=(CBS_ADDRESS,), requires=("claims",))
register_layer(
    "rabbitmq",
    "minibroker.rabbitmq:build_layer",
    addresses=(MANAGEMENT_ADDRESS,),
    conflicts=("claims", "servicebus", "event_hubs"),
)
