"""The links a protocol layer owns (layers.py is the seam a layer plugs into).

A layer (``minibroker.broker.layers.Layer``) sees every link attach before the
broker and may take the link itself.  Links it takes are :class:`ExtensionLink`
(request/response nodes such as ``$cbs``) or :class:`ExtensionConsumer` (a
consumer that delivers and settles in its own way).  Plain AMQP never meets
any of them: the broker has no layer until one is turned on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .links import ConsumerLink
from .roles import Role

if TYPE_CHECKING:
    from ..protocol.endpoints import Delivery, Link

__all__ = ["ExtensionConsumer", "ExtensionLink"]


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
