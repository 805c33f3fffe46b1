"""Session, link and delivery bookkeeping (Part 2 §2.5-§2.6).

These objects belong to the engine; the broker reads them and hangs its own
state on ``context``.  Sequence numbers follow RFC-1982 serial arithmetic
modulo 2**32 (§2.8.9).  :func:`attach_frame` and :func:`flow_frame` are the
one place each where the engine's ``attach`` and ``flow`` are built from an
endpoint's state.
"""

from __future__ import annotations

from typing import Any

from ..amqp.performatives import RCV_FIRST, ROLE_RECEIVER, ROLE_SENDER, SND_MIXED, Attach, Flow
from ._state import Input, LinkState, SessionState, advance

__all__ = ["Delivery", "Link", "Session", "SERIAL_MOD", "SERIAL_HALF", "INCOMING_WINDOW", "attach_frame", "flow_frame"]

SERIAL_MOD = 2**32
#: Serial-number distances at or beyond half the space are "behind", not "ahead" (RFC-1982, §2.8.9).
SERIAL_HALF = 2**31
#: The session incoming window we advertise; replenished when half is used (§2.5.6).
#: The largest a serial number allows (RFC-1982, §2.8.9): flow control is link credit's job.
INCOMING_WINDOW = 2**31 - 1


class Delivery:
    """One message in flight on a link, in either direction (§2.6.12)."""

    __slots__ = (
        "delivery_id", "tag", "link", "settled", "state", "payload", "remote_settled",
        "message_format", "context", "frames", "sent",
    )  # fmt: skip

    def __init__(self, delivery_id: int, tag: bytes, link: Link, settled: bool) -> None:
        self.delivery_id = delivery_id
        self.tag = tag
        self.link = link
        self.settled = settled  # settled by us
        self.remote_settled = False
        self.state: Any = None
        self.payload: bytes = b""
        self.message_format = 0
        self.context: Any = None
        self.frames: bytearray | None = None  # an incoming delivery still being assembled
        #: Outgoing multi-frame delivery: payload bytes written so far; incoming: frames taken so far.
        self.sent = 0

    def __repr__(self) -> str:
        return f"<Delivery {self.delivery_id} on {self.link.name!r} settled={self.settled}>"


class Link:
    """A link endpoint; ``is_sender`` means the broker sends on it (the peer receives)."""

    __slots__ = (
        "session", "name", "handle", "remote_handle", "is_sender", "state", "attach",
        "source", "target", "snd_settle_mode", "rcv_settle_mode", "delivery_count",
        "credit", "drain", "available", "unsettled", "incoming", "context", "max_message_size",
        "flow_properties", "outgoing", "wanted_credit", "attach_size", "receive_limit", "settles_at_once",
    )  # fmt: skip

    def __init__(self, session: Session, attach: Attach, handle: int) -> None:
        self.session = session
        self.attach = attach
        self.name: str = attach.name
        self.remote_handle: int = attach.handle
        self.handle = handle
        # The peer's role is given; ours is the opposite (§2.6.3).
        self.is_sender: bool = bool(attach.role)
        self.state = advance(LinkState.DETACHED, Input.RECV_ATTACH, repr(self.name))
        self.source: Any = attach.source
        self.target: Any = attach.target
        self.snd_settle_mode: int = attach.snd_settle_mode
        self.rcv_settle_mode: int = attach.rcv_settle_mode
        self.delivery_count = 0 if self.is_sender else (attach.initial_delivery_count or 0)
        self.credit = 0
        self.drain = False
        self.available = 0
        #: By delivery-id: what we sent and the peer has not settled, or (receiver side) what the
        #: peer sent and has not settled.
        self.unsettled: dict[int, Delivery] = {}
        self.incoming: Delivery | None = None  # receiver side: a multi-frame delivery in progress
        self.context: Any = None
        #: The peer's own limit: the largest message it will take on this link (§2.7.3).
        self.max_message_size: int | None = attach.max_message_size or None
        self.flow_properties: dict[Any, Any] | None = None
        self.outgoing: Delivery | None = None  # sender side: a multi-frame delivery not yet all written
        #: Receiver side: the credit last granted, part of which may be held back until the peer
        #: settles (``ConnectionConfig.max_unsettled_incoming``).
        self.wanted_credit = 0
        #: Bytes of the attach frame that made this link (``Connection.attach_bytes``).
        self.attach_size = 0
        #: Receiver side: our own limit, the max-message-size we advertise on this link (§2.7.3);
        #: the connection's unless the attach answer names a smaller one (a service's quota).
        self.receive_limit: int | None = None
        #: Receiver side: the broker settles (rcv-settle-mode first, §2.6.12) each message of format 0
        #: the peer sends with no state while it handles the event that reports it (a producer's link
        #: into a node): such a delivery is not kept in the unsettled tables while no hook watches.
        #: A peer's disposition settling it first finds nothing then, and the broker's outcome follows.
        self.settles_at_once = False

    @property
    def address(self) -> Any:
        """The address the link names: the source's for a sender, the target's for a receiver."""
        terminus = self.source if self.is_sender else self.target
        return getattr(terminus, "address", None)

    def __repr__(self) -> str:
        role = "sender" if self.is_sender else "receiver"
        return f"<Link {self.name!r} {role} handle={self.handle} {self.state.value}>"


class Session:
    """A session endpoint and its transfer windows (§2.5.6)."""

    __slots__ = (
        "channel", "remote_channel", "state", "next_outgoing_id", "next_incoming_id", "next_delivery_id",
        "incoming_window", "outgoing_window", "remote_incoming_window", "remote_outgoing_window",
        "handle_max", "links_by_remote", "links_by_handle", "outgoing_unsettled",
        "incoming_unsettled", "context",
    )  # fmt: skip

    def __init__(self, channel: int, remote_channel: int, handle_max: int) -> None:
        self.channel = channel
        self.remote_channel = remote_channel
        self.state = SessionState.UNMAPPED
        self.next_outgoing_id = 0  # transfer-id of our next transfer frame
        self.next_delivery_id = 0  # delivery-id of our next delivery
        self.next_incoming_id = 0
        self.incoming_window = 0
        self.outgoing_window = 2**31 - 1
        self.remote_incoming_window = 0
        self.remote_outgoing_window = 0
        self.handle_max = handle_max
        self.links_by_remote: dict[int, Link] = {}
        self.links_by_handle: dict[int, Link] = {}
        self.outgoing_unsettled: dict[int, Delivery] = {}  # deliveries we sent, by delivery-id
        self.incoming_unsettled: dict[int, Delivery] = {}  # deliveries we received, unsettled
        self.context: Any = None

    def __repr__(self) -> str:
        return f"<Session channel={self.channel} {self.state.value}>"


def attach_frame(
    link: Link,
    source: Any,
    target: Any,
    *,
    snd_settle_mode: int = SND_MIXED,
    rcv_settle_mode: int = RCV_FIRST,
    max_message_size: int | None = None,
    offered_capabilities: list[Any] | None = None,
    properties: dict[Any, Any] | None = None,
) -> Attach:
    """Our attach answering the peer's for ``link`` (§2.6.3, §2.7.3), in the role opposite to its.

    A sender states its initial delivery-count (§2.6.7: 0, as nothing is sent before the answer);
    a receiver leaves it out.  The settle modes left at their defaults are encoded as absent.
    """
    return Attach(
        name=link.name,
        handle=link.handle,
        role=ROLE_SENDER if link.is_sender else ROLE_RECEIVER,
        snd_settle_mode=snd_settle_mode,
        rcv_settle_mode=rcv_settle_mode,
        source=source,
        target=target,
        initial_delivery_count=link.delivery_count if link.is_sender else None,
        max_message_size=max_message_size,
        offered_capabilities=offered_capabilities,
        properties=properties,
    )


def flow_frame(session: Session, link: Link | None = None, echo: bool = False) -> Flow:
    """Our flow (§2.7.4): the session's windows, and with ``link`` that link's flow state too.

    ``available`` is ours to state only as the sender (§2.6.7); as the receiver the peer states it.
    """
    if link is None:
        return Flow(
            next_incoming_id=session.next_incoming_id,
            incoming_window=session.incoming_window,
            next_outgoing_id=session.next_outgoing_id,
            outgoing_window=session.outgoing_window,
        )
    return Flow(
        next_incoming_id=session.next_incoming_id,
        incoming_window=session.incoming_window,
        next_outgoing_id=session.next_outgoing_id,
        outgoing_window=session.outgoing_window,
        handle=link.handle,
        delivery_count=link.delivery_count,
        link_credit=link.credit,
        available=link.available if link.is_sender else None,
        drain=link.drain,
        echo=echo,
    )
