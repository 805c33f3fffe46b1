"""What a :class:`~.connection.Connection` offers in ``open``/``begin`` and how it authenticates (Part 2 §2.7.1-§2.7.3, Part 5 §5.3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any

from ..amqp.performatives import Error
from ..records import record

__all__ = ["ConnectionConfig"]


@record(slots=True)
class ConnectionConfig:
    """What the engine offers in ``open``/``begin`` and how it authenticates."""

    container_id: str = "minibroker"
    #: Largest frame we take (§2.7.1): room for a 256 KiB message in one transfer.
    max_frame_size: int = 256 * 1024
    #: Sessions per connection and links per session we allow (§2.7.1, §2.7.2): a test's
    #: clients use a handful; the bound keeps a misbehaving peer's tables small.
    channel_max: int = 255
    handle_max: int = 1023
    #: Seconds of silence from the peer after which the connection is closed
    #: (advertised as idle-time-out, §2.4.5); None disables it.
    idle_timeout: float | None = 60.0
    #: Seconds from the first :meth:`Connection.tick` (the transport's start) to the peer's
    #: ``open``, SASL included, before the connection is closed; None: no bound.  Unlike the
    #: idle time-out, bytes trickling in do not extend it.
    handshake_timeout: float | None = 10.0
    #: SASL PLAIN users, name -> password (never shown in repr).
    users: dict[str, str] = field(default_factory=dict, repr=False)
    allow_anonymous: bool = True
    #: Largest message accepted from the peer, advertised in attach (§2.7.3); None: no limit.
    max_message_size: int | None = None
    #: Deliveries the peer sent on one link that it has not settled yet (rcv-settle-mode ``second``,
    #: §2.6.12: we keep each until the peer settles): at this many the link gets no more credit, and
    #: credit comes back as the peer settles.  The default matches the broker's ``link_credit``.
    max_unsettled_incoming: int = 1000
    #: The same over all links of the connection together (each kept delivery is ~0.4 KiB of
    #: bookkeeping, never the message: 16,384 of them ~6 MiB).
    max_unsettled_incoming_total: int = 16384
    offered_capabilities: tuple[str, ...] = ()
    properties: dict[str, Any] = field(default_factory=dict)
    #: Asked about the peer's ``open`` (its hostname) before we answer it: an error ends the
    #: connection there, with no ``open`` and no ``close`` of ours (the transport just closes), as
    #: RabbitMQ 4 refuses an ``open`` naming a virtual host it does not have.  None accepts any.
    open_refusal: Callable[[str | None], Error | None] | None = field(default=None, repr=False)
    #: With ``receive_data(..., max_frames)``, a receiving peer's attach ends the batch, so its
    #: answer is written before the flow read with it turns into transfers: RabbitMQ 4's order,
    #: which rabbitmq-amqp-python-client 0.6.0's consumer relies on.  It costs a write and a
    #: scheduler pass per such attach (500 pipelined in one read: ~40 -> ~80 ms), so only the
    #: RabbitMQ identity turns it on.
    attach_answer_alone: bool = False
    #: Report the whole messages read in a row on one link as one ``MessagesReceived`` (and a
    #: disposition's deliveries on one link as one ``DeliveriesUpdated``) instead of an event
    #: each: one call into the broker per batch (``runs.py``).  Only while no hook watches frames,
    #: so a hook's observers still see an event per message.  The broker turns it on.
    batch_events: bool = False
