"""The link-role protocol: what the broker's side of a link answers, whatever its class.

Every link the broker serves carries a role in ``link.context`` (Part 2 §2.6: a link
endpoint with the broker's state attached): a producer (links.ProducerLink), a
consumer of a node (consuming.NodeConsumer: links.ConsumerLink, stream.StreamConsumer),
the transaction coordinator (links.CoordinatorLink, Part 4 §4.2), or a layer's link
(extension.ExtensionLink).  The event policy (policy.py) hands each link event to
its role as a method call, and the fault injector (injection.py) asks the role
where faults aim and what it delivered, so neither tests a role's class: a new
kind of link is one class answering these, not a branch in each of them.

:class:`Role` gives the defaults (a role ignores what does not concern it), so a
class names only what it does.  Kept apart from links.py so that any module can
name the protocol without importing the classes that implement it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..amqp.messaging import Modified, Released
    from ..protocol.endpoints import Delivery, Link

__all__ = ["LinkRole", "ReplySink", "Role"]


class ReplySink(Protocol):
    """A receiving link of the client's that a request/response node answers on (replies.ReplyLink)."""

    link: Link
    address: str | None

    def send(self, payload: bytes) -> None:
        """Send one response, pre-settled, as credit allows."""


class LinkRole(Protocol):
    """The broker's side of one link, as the event policy and the fault injector drive it."""

    link: Link

    @property
    def address(self) -> str | None:
        """The node faults aimed at an address fire on for this link (None: faults by address miss it)."""

    @property
    def message_point(self) -> str | None:
        """The fault point a message arriving on it meets: ``"publish"`` (it goes into a node),
        ``"discharge"`` (a transaction's control message), or None (faults leave it alone)."""

    @property
    def credit_stalls(self) -> bool:
        """Whether a ``stall_credit`` fault may withhold the broker's flows granting it credit."""

    @property
    def outcome_faults(self) -> bool:
        """Whether a delivery fault may wait for the client's outcome and replace it (``at="outcome"``)."""

    def on_message(self, delivery: Delivery) -> None:
        """A message arrived on it (the client sends on this link)."""

    def on_messages(self, deliveries: list[Delivery]) -> None:
        """Messages read together arrived on it, in order (``MessagesReceived``): each an ``on_message``."""

    def on_credit(self, properties: dict[Any, Any] | None, drain: bool) -> None:
        """The client's flow granted credit (§2.7.4; ``properties``: the flow's, e.g. a txn-id)."""

    def on_window(self, now: float) -> None:
        """The session's window opened: send what credit allows."""

    def on_outcome(self, delivery: Delivery, state: Any, settled: bool) -> None:
        """The client gave a delivery on this link an outcome (Part 3 §3.4), or settled it."""

    def on_outcomes(self, deliveries: list[Delivery], state: Any, settled: bool) -> None:
        """One disposition gave these deliveries on this link, in order, the same outcome (``DeliveriesUpdated``)."""

    def end(self, closed: bool, now: float) -> None:
        """The link ended (detached by either side, or its session or connection ended)."""

    def sent_message(self, delivery_id: int) -> Callable[[], Any] | None:
        """What it delivered as ``delivery_id``: a function decoding the message (for a fault's
        ``when=``) when it keeps one, so delivery faults may act on it; None when only faults
        on the transfer itself may (it keeps no message)."""

    def fault_outcome(self, delivery_id: int, delivery: Delivery | None, outcome: Released | Modified) -> None:
        """A delivery fault settles ``delivery_id`` with ``outcome`` (released or modified)."""


class Role:
    """The defaults of :class:`LinkRole`: a role ignores the events that do not concern it."""

    link: Link
    #: Itself, when it is the link a request/response node answers on (management requests look
    #: for it among their connection's links); None for every other role.
    reply_sink: ReplySink | None = None
    message_point: str | None = None
    credit_stalls = False
    outcome_faults = False
    #: What the broker's attach offers back for it (Part 2 §2.7.3): nothing unless it says so.
    offered_capabilities: tuple[str, ...] = ()
    #: The link properties of the broker's attach for it (Part 2 §2.7.3): none unless it says so.
    attach_properties: dict[Any, Any] | None = None

    def on_message(self, delivery: Delivery) -> None:
        pass  # the protocol has already counted it against credit; a role with no node keeps nothing

    def on_messages(self, deliveries: list[Delivery]) -> None:
        for delivery in deliveries:
            self.on_message(delivery)

    def on_credit(self, properties: dict[Any, Any] | None, drain: bool) -> None:
        pass

    def on_window(self, now: float) -> None:
        pass

    def on_outcome(self, delivery: Delivery, state: Any, settled: bool) -> None:
        pass

    def on_outcomes(self, deliveries: list[Delivery], state: Any, settled: bool) -> None:
        for delivery in deliveries:
            self.on_outcome(delivery, state, settled)

    def end(self, closed: bool, now: float) -> None:
        pass

    def sent_message(self, delivery_id: int) -> Callable[[], Any] | None:
        return None

    def fault_outcome(self, delivery_id: int, delivery: Delivery | None, outcome: Released | Modified) -> None:
        raise ValueError(
            f"{self!r} settles its deliveries its own way: a delivery fault on it can detach, close or drop, "
            f"not settle with {type(outcome).__name__.lower()}"
        )
