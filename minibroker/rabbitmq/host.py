"""What the RabbitMQ layer's links and management node need of the layer: a narrow, typed host.

``links.py`` and ``management.py`` sit below ``layer.py`` and are handed the
layer at run time; they see it only through :class:`RabbitMQHost`, so the
package has no import circle (the same shape as ``servicebus/host.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..broker.publish import Source as MessageSource
from ..broker.stored import StoredMessage
from .addresses import Destination
from .arguments import QueueSpec
from .exchanges import Exchanges

if TYPE_CHECKING:
    from ..broker.layers import LayerHost

__all__ = ["RabbitMQHost"]


class RabbitMQHost(Protocol):
    """The RabbitMQ layer as its links and its management node use it."""

    @property
    def broker(self) -> LayerHost: ...

    @property
    def exchanges(self) -> Exchanges: ...

    def is_queue(self, name: str) -> bool:
        """Whether ``name`` is what RabbitMQ calls a queue (a queue or a stream node)."""

    def publish(
        self, destination: Destination | None, message: StoredMessage, now: float, source: MessageSource = ...
    ) -> Any:
        """Route one message; the outcome to settle it with."""

    def declare_queue(self, spec: QueueSpec) -> None:
        """``PUT /queues/{name}``."""

    def delete_queue(self, name: str) -> int:
        """``DELETE /queues/{name}``: the ready-message count."""

    def queue_info(self, name: str) -> dict[str, Any]:
        """What ``GET /queues/{name}`` answers."""

    def used(self, name: str) -> None:
        """``name`` was declared or read (an ``x-expires`` queue's idle time starts again)."""
