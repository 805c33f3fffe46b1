"""Extension points for a protocol layer on top of the broker (the Service Bus layer uses them).

An :class:`Extension` sees every link attach first and may take the link
itself; it owns its own timers.  Links it takes are :class:`ExtensionLink`
(request/response nodes such as ``$cbs``) or :class:`ExtensionConsumer` (a
consumer that delivers and settles in its own way).  Plain AMQP never meets
any of them: the broker has no extension until one is enabled.

A layer is not imported by the broker: the layer's package registers a
factory with :func:`register_layer` under the address whose attach turns it on
(``minibroker.servicebus`` registers ``$cbs``), and the broker looks it up
with :func:`layer_for`.  So the dependency runs one way, from the layer down.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .links import ConsumerLink

if TYPE_CHECKING:
    from ..protocol.endpoints import Delivery, Link
    from .client_connection import BrokerConnection

__all__ = ["Extension", "ExtensionConsumer", "ExtensionLink", "LayerFactory", "layer_for", "register_layer"]


class Extension(Protocol):
    """A layer the broker consults on attach and on its timers."""

    def attach(self, connection: BrokerConnection, link: Link) -> bool:
        """Take (accept or refuse) a link the peer attached; False leaves it to the broker."""

    def next_deadline(self) -> float | None:
        """The clock time of the layer's next timer (a lock expiring, a scheduled message)."""

    def run_timers(self, now: float) -> None:
        """Do what is due at ``now``."""

    def reset(self) -> None:
        """Forget everything (the broker was reset)."""


class ExtensionLink:
    """A link an extension owns: the broker hands it the messages and credit that arrive on it.

    One that takes messages for a node (``publishes``) names it in ``address``,
    so publish and transfer faults aimed at that address fire on it too.
    """

    address: str | None = None
    publishes = False

    def on_message(self, delivery: Delivery) -> None:
        raise NotImplementedError

    def on_credit(self) -> None:
        """The peer granted credit on this (sending) link."""


class ExtensionConsumer(ConsumerLink):
    """A consumer that settles deliveries its own way (the broker still dispatches to it)."""

    def on_outcome(self, delivery: Delivery, state: Any, settled: bool) -> None:
        raise NotImplementedError


#: Builds a layer for a broker (called with the broker, in its thread).
LayerFactory = Callable[[Any], Extension]

_layers: dict[str, LayerFactory] = {}


def register_layer(address: str, factory: LayerFactory) -> None:
    """Make a client's attach to ``address`` turn on the layer ``factory`` builds."""
    _layers[address] = factory


def layer_for(address: str | None) -> LayerFactory | None:
    """The factory of the layer that ``address`` turns on, if one is registered."""
    return _layers.get(address) if address is not None else None
