"""Extension points for a protocol layer on top of the broker (the Service Bus layer uses them).

An :class:`Extension` sees every link attach first and may take the link
itself; it owns its own timers.  Links it takes are :class:`ExtensionLink`
(request/response nodes such as ``$cbs``) or :class:`ExtensionConsumer` (a
consumer that delivers and settles in its own way).  Plain AMQP never meets
any of them: the broker has no extension until one is enabled.

A layer is not imported by the broker: :func:`layer_for` finds the factory
registered under the address whose attach turns the layer on.  minibroker's own
layers are registered here by name only (``module:function``) and imported the
first time a broker turns one on, so a broker that speaks plain AMQP never loads
them; another package registers its factory with :func:`register_layer`.  So the
dependency runs one way, from the layer down.  The Event Hubs layer wraps the
Service Bus layer (both begin at ``$cbs``) and hands it everything that is not
Event Hubs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .links import ConsumerLink
from .roles import Role

if TYPE_CHECKING:
    from ..amqp.performatives import Error
    from ..protocol.endpoints import Delivery, Link
    from .client_connection import BrokerConnection

__all__ = ["Extension", "ExtensionConsumer", "ExtensionLink", "LayerFactory", "layer_for", "register_layer"]


class Extension(Protocol):
    """A layer the broker consults on attach and on its timers."""

    def opened(self, connection: BrokerConnection, hostname: str | None) -> Error | None:
        """The client's ``open`` arrived naming ``hostname``: the error to refuse it with, or None.

        Asked before the ``open`` is answered; a refused connection gets no frame back (the
        transport closes, as RabbitMQ 4 does), and the error goes to the broker's observers.
        """

    def attach(self, connection: BrokerConnection, link: Link) -> bool:
        """Take (accept or refuse) a link the peer attached; False leaves it to the broker."""

    def next_deadline(self) -> float | None:
        """The clock time of the layer's next timer (a lock expiring, a scheduled message)."""

    def run_timers(self, now: float) -> None:
        """Do what is due at ``now``."""

    def reset(self) -> None:
        """Forget everything (the broker was reset)."""


class ExtensionLink(Role):
    """A link an extension owns: the broker hands it the messages and credit that arrive on it.

    One that takes messages for a node (``message_point = "publish"``) names it in ``address``,
    so publish and transfer faults aimed at that address fire on it too; one
    that sends a node's messages names it there and reports each delivery to
    the tap (``BrokerConnection.delivered``), so transfer faults fire on those
    (only faults that end its link or connection: it settles its own way).
    """

    #: The link it owns.
    link: Link
    address: str | None = None

    def on_message(self, delivery: Delivery) -> None:
        raise NotImplementedError

    def on_credit(self, properties: dict[Any, Any] | None = None, drain: bool = False) -> None:
        """The peer granted credit on this (sending) link, or its session window opened."""

    def on_window(self, now: float) -> None:
        self.on_credit()  # e.g. an Event Hubs reader waiting for the window

    def end(self, closed: bool, now: float) -> None:
        self.on_detach()

    def on_detach(self) -> None:
        """The link ended (detached by either side, or its session or connection ended)."""


class ExtensionConsumer(ConsumerLink):
    """A consumer that settles deliveries its own way (the broker still dispatches to it)."""

    def on_outcome(self, delivery: Delivery, state: Any, settled: bool) -> None:
        raise NotImplementedError


#: Builds a layer for a broker (called with the broker, in its thread).
LayerFactory = Callable[[Any], Extension]

#: Address -> the factory of the layer its attach turns on, or the ``module:function`` naming it.
_layers: dict[str, LayerFactory | str] = {
    "$cbs": "minibroker.eventhubs:build_layer",  # Event Hubs, with the Service Bus layer inside
    "/management": "minibroker.rabbitmq:build_layer",
}


def register_layer(address: str, factory: LayerFactory | str) -> None:
    """Make a client's attach to ``address`` turn on the layer ``factory`` builds (a callable, or
    ``"package.module:function"`` naming one, imported when a broker first turns the layer on)."""
    _layers[address] = factory


def layer_for(address: str | None) -> LayerFactory | None:
    """The factory of the layer that ``address`` turns on, if one is registered (imported now if
    it was registered by name)."""
    factory = _layers.get(address) if address is not None else None
    if isinstance(factory, str):
        # Looked up again each time (a dict lookup once imported), not kept: what sys.modules holds
        # stays the one copy, also after pytester's in-process runs drop the modules they imported.
        module, _, name = factory.partition(":")
        factory = getattr(importlib.import_module(module), name)
    return factory
