"""Events the engine reports to its user (the broker) after reading bytes.

Each is an immutable record (a named tuple, as cheap to build as a plain object): an
observer on the broker's tap may replace one, never change it.
The session, link and delivery they name are the engine's live endpoints.

The field annotations are evaluated (no ``from __future__ import annotations`` here): given a
string, ``typing.NamedTuple`` compiles it into a ``ForwardRef``, which made declaring these twelve
records cost a sixth more (docs/performance.md).
"""

from typing import Any, NamedTuple

from ..amqp.performatives import Error
from .endpoints import Delivery, Link, Session

__all__ = [
    "ConnectionClosed", "ConnectionOpened", "CreditChanged", "DeliveriesUpdated", "DeliveryUpdated", "Event",
    "LinkAttached", "LinkDetached", "MessageReceived", "MessagesReceived", "SessionBegun", "SessionEnded",
    "SessionWindowOpened",
]  # fmt: skip


class ConnectionOpened(NamedTuple):
    """The peer's ``open`` arrived and ours was sent (§2.4.1)."""

    container_id: str
    hostname: str | None
    user: str | None


class ConnectionClosed(NamedTuple):
    """The connection is over: the peer closed it, or we did (``error`` says why)."""

    error: Error | None
    by_peer: bool


class SessionBegun(NamedTuple):
    """A session was begun by the peer and confirmed (§2.5.1)."""

    session: Session


class SessionEnded(NamedTuple):
    """A session ended; its links are gone with it (§2.5.7)."""

    session: Session
    error: Error | None


class LinkAttached(NamedTuple):
    """The peer attached a link; answer with ``accept_link`` or ``refuse_link`` (§2.6.3)."""

    link: Link


class LinkDetached(NamedTuple):
    """The peer detached a link (``closed`` false: it may come back, §2.6.5)."""

    link: Link
    closed: bool
    error: Error | None


class MessageReceived(NamedTuple):
    """A whole, non-aborted message arrived on a receiving link (§2.6.12)."""

    link: Link
    delivery: Delivery


class MessagesReceived(NamedTuple):
    """Whole messages read in a row on one receiving link, in order (§2.6.12): what
    ``ConnectionConfig.batch_events`` reports instead of a :class:`MessageReceived` each."""

    link: Link
    deliveries: list[Delivery]


class DeliveryUpdated(NamedTuple):
    """The peer changed the state of, or settled, a delivery (``disposition``, §2.7.6)."""

    link: Link
    delivery: Delivery
    state: Any
    settled: bool


class DeliveriesUpdated(NamedTuple):
    """A disposition's deliveries on one link, in order, all given ``state`` (or settled): what
    ``ConnectionConfig.batch_events`` reports instead of a :class:`DeliveryUpdated` each."""

    link: Link
    deliveries: list[Delivery]
    state: Any
    settled: bool


class CreditChanged(NamedTuple):
    """The peer's ``flow`` changed a sending link's credit or asked to drain (§2.6.7)."""

    link: Link
    drain: bool
    properties: dict[Any, Any] | None


class SessionWindowOpened(NamedTuple):
    """The peer's incoming window grew, so blocked transfers may go on (§2.5.6)."""

    session: Session


Event = (
    ConnectionOpened | ConnectionClosed | SessionBegun | SessionEnded | LinkAttached | LinkDetached
    | MessageReceived | MessagesReceived | DeliveryUpdated | DeliveriesUpdated | CreditChanged | SessionWindowOpened
)  # fmt: skip
