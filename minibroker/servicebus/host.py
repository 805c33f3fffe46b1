"""What the Service Bus layer needs of the broker it runs on: a narrow, typed view.

The layer is handed the broker (``minibroker.broker.engine.Broker`` fits this
protocol) but depends only on these members, so it can be tested and read
without the whole engine, and the engine never imports the layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..amqp.performatives import Error
from ..broker.client_connection import BrokerConnection
from ..broker.config import BrokerConfig, QueueOptions
from ..broker.links import ConsumerLink
from ..broker.node import Node
from ..broker.permissions import Permissions
from ..broker.queue import Queue
from ..broker.router import Router
from ..broker.topic import Topic
from ..protocol.endpoints import Link

if TYPE_CHECKING:
    from ..broker.engine import Broker

__all__ = ["ServiceBusHost"]


class ServiceBusHost(Protocol):
    """The broker as the Service Bus layer uses it."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def router(self) -> Router: ...

    @property
    def topics(self) -> dict[str, Topic]: ...

    def timers_changed(self) -> None:
        """A timer of the layer's (a lock, a scheduled message) may now come first: the server's timer wakes."""

    #: Per-user rights (``BrokerConfig.permissions``), or None: everyone may do everything.
    permissions: Permissions | None

    def now(self) -> float:
        """The broker's clock."""

    def declare_queue(self, name: str, options: QueueOptions | None = None, temporary: bool = False) -> Queue: ...

    def declare_topic(self, name: str) -> Topic: ...

    def resolve(self, address: str, capabilities: frozenset[str] = frozenset()) -> Node | None: ...

    def add_consumer(self, consumer: ConsumerLink) -> None: ...

    def detach_link(self, connection: BrokerConnection, link: Link, error: Error) -> None: ...


if TYPE_CHECKING:  # the type checker proves the broker fits, with no import at run time

    def _broker_is_a_host(broker: Broker) -> ServiceBusHost:
        return broker
