"""Events the engine reports to its user (the broker) after reading bytes.

Each is a frozen record: an observer on the broker's tap may replace one, never change it.
The session, link and delivery they name are the engine's live endpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..amqp.performatives import Error
    from .endpoints import Delivery, Link, Session

__all__ = [
    "ConnectionClosed", "ConnectionOpened", "CreditChanged", "DeliveryUpdated", "Event",
    "LinkAttached", "LinkDetached", "MessageReceived", "SessionBegun", "SessionEnded",
    "SessionWindowOpened",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class ConnectionOpened:
    """The peer's ``open`` arrived and ours was sent (§2.4.1)."""

    container_id: str
    hostname: str | None
    user: str | None


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The connection is over: the peer closed it, or we did (``error`` says why)."""

    error: Error | None
    by_peer: bool


@dataclass(frozen=True, slots=True)
class SessionBegun:
    """A session was begun by the peer and confirmed (§2.5.1)."""

    session: Session


@dataclass(frozen=True, slots=True)
class SessionEnded:
    """A session ended; its links are gone with it (§2.5.7)."""

    session: Session
    error: Error | None


@dataclass(frozen=True, slots=True)
class LinkAttached:
    """The peer attached a link; answer with ``accept_link`` or ``refuse_link`` (§2.6.3)."""

    link: Link


@dataclass(frozen=True, slots=True)
class LinkDetached:
    """The peer detached a link (``closed`` false: it may come back, §2.6.5)."""

    link: Link
    closed: bool
    error: Error | None


@dataclass(frozen=True, slots=True)
class MessageReceived:
    """A whole, non-aborted message arrived on a receiving link (§2.6.12)."""

    link: Link
    delivery: Delivery


@dataclass(frozen=True, slots=True)
class DeliveryUpdated:
    """The peer changed the state of, or settled, a delivery (``disposition``, §2.7.6)."""

    link: Link
    delivery: Delivery
    state: Any
    settled: bool


@dataclass(frozen=True, slots=True)
class CreditChanged:
    """The peer's ``flow`` changed a sending link's credit or asked to drain (§2.6.7)."""

    link: Link
    drain: bool
    properties: dict[Any, Any] | None


@dataclass(frozen=True, slots=True)
class SessionWindowOpened:
    """The peer's incoming window grew, so blocked transfers may go on (§2.5.6)."""

    session: Session


Event = (
    ConnectionOpened | ConnectionClosed | SessionBegun | SessionEnded | LinkAttached | LinkDetached
    | MessageReceived | DeliveryUpdated | CreditChanged | SessionWindowOpened
)  # fmt: skip
