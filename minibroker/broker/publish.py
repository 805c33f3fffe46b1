"""The one way a message enters a node, with where it came from; and what a client's delivery carries.

Every message that enters a node goes through :meth:`Publisher.publish`,
which names its :class:`Source`: a client's transfer (``CLIENT``), a
committed transactional transfer (``COMMIT``), the Python API (``API``), a
message dead-lettered by a queue (``DEAD_LETTER``) or a scheduled message
coming due (``SCHEDULE``), an Event Hubs event included.  So the observers
(``Publisher.observers``), limits and counters see every message once,
whatever brought it.

Which sources limits apply to (``max_depth``, ``max_bytes``, ``overflow``;
limits.py) is decided here, once, in :data:`LIMITED_SOURCES`: what clients
send, directly or in a transaction, is limited (a client can be told no: the
transfer is rejected, Part 3 §3.4.2, or the discharge fails, Part 4 §4.4);
what the broker moves on its own (dead letters, scheduled messages whose
sender was answered long ago) and what a test puts there through the Python
API is not, so that a test can fill a queue past its bounds on purpose and
no message the broker already took is lost for want of room.

A delivery of message-format 0 is one AMQP message (Part 3 §3.2); a batch
(:data:`BATCH_FORMAT`, as Azure Service Bus and Event Hubs clients send)
carries one encoded message in each data section of its body.  Other
formats are rejected with ``amqp:not-implemented``.  Each message is routed
by the producer's address, or by its ``to`` on the anonymous relay; the
delivery's outcome is the first rejection, else accepted.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..amqp import errors as conditions
from ..amqp.errors import AMQPDecodeError
from ..amqp.message import decode_message
from ..amqp.messaging import Accepted, Rejected
from ..amqp.performatives import Error, amqp_error
from ..protocol.endpoints import Delivery
from .duplicates import message_key
from .permissions import Permissions
from .stored import StoredMessage

if TYPE_CHECKING:
    from .node import Node

__all__ = [
    "ACCEPTED", "BATCH_FORMAT", "LIMITED_SOURCES", "Publisher", "Source", "format_refusal", "messages_of", "relay_refusal",
    "route_all",
]  # fmt: skip


class Source(enum.Enum):
    """Where a message entering a node comes from, and whether limits apply to it (the one decision)."""

    CLIENT = ("client", True)  #: a transfer on a client's sending link
    COMMIT = ("commit", True)  #: a transactional transfer, published when its transaction commits (Part 4 §4.4.1)
    API = ("api", False)  #: ``Broker.publish`` / ``publish_many`` (the Python API)
    DEAD_LETTER = ("dead-letter", False)  #: a queue gave up on a message (expired, rejected, delivery limit, dropped)
    SCHEDULE = ("schedule", False)  #: a scheduled message came due (the Service Bus layer)
    FORWARD = ("forward", False)  #: an entity passed a message on (Service Bus auto-forwarding, after its limits)

    def __init__(self, label: str, limited: bool) -> None:
        self.label = label
        #: Limits apply (a plain attribute: read for every message on the hot path).
        self.limited = limited


#: The sources limits apply to: what a client sends, directly or committed (see the module docstring).
LIMITED_SOURCES = frozenset(source for source in Source if source.limited)

#: Finds the node for a message sent to an address (None: the anonymous relay, by ``to``), or the error.
NodeFinder = Callable[[str | None, StoredMessage], "Node | Error"]


class Publisher:
    """Puts messages on nodes: the only caller of ``Node.put``."""

    def __init__(self) -> None:
        #: Told of every message a node receives: (node name, message).  A list anyone registers
        #: into (the pytest plugin's recorder and failure report, a test's own), empty by default.
        self.observers: list[Callable[[str, StoredMessage], None]] = []

    def publish(
        self, node: Node, message: StoredMessage, now: float, source: Source, seq: int | None = None
    ) -> Error | None:
        """Put ``message`` on ``node``; for a limited source, the error refusing it instead (limits.py).

        ``seq``: a number the node gave out earlier for this message (a scheduled one).
        """
        duplicates = node.duplicates
        key = None
        if duplicates is not None and source.limited:  # what clients send (duplicates.py)
            properties = message.properties
            key = message_key(properties.message_id if properties is not None else None)
            if key is not None and duplicates.repeats(key, now):
                return None  # accepted and dropped: a repeat within the queue's duplicate_window
        if source.limited:
            refused = node.admit(message)  # max_depth, max_bytes; drop-head makes room (bounds.py)
            if refused is not None:
                return refused
        if self.observers:  # observation point: every message a node receives (one test when none)
            for observer in self.observers:
                observer(node.name, message)
        node.put(message, now, seq)
        if key is not None and duplicates is not None:
            duplicates.remember(key, now)  # only once kept: a refused message is no repeat later
        return None

#: The outcome of every accepted delivery: it has no fields, so one instance serves them all (§3.4.2).
ACCEPTED = Accepted()

#: Message format of a batch: the body's data sections each hold one encoded message
#: (the format Azure Service Bus and Event Hubs clients send batches in).
BATCH_FORMAT = 0x80013700


def format_refusal(delivery: Delivery) -> Rejected | None:
    """The rejection for a message format this broker does not take, or None."""
    if delivery.message_format in (0, BATCH_FORMAT):
        return None
    return Rejected(
        error=amqp_error(
            conditions.NOT_IMPLEMENTED,
            f"message-format {delivery.message_format:#x} is not supported; this broker takes "
            f"0 (AMQP, Part 3 §3.2) and {BATCH_FORMAT:#x} (a batch of AMQP messages)",
        )
    )


def messages_of(delivery: Delivery, now: float) -> list[StoredMessage]:
    """The messages a delivery carries: itself, or for a batch each of its data sections.

    Raises :class:`AMQPDecodeError` (or ``IndexError``) for a message whose sections are misrepresented.
    """
    if delivery.message_format != BATCH_FORMAT:
        message = StoredMessage(delivery.payload, now)
        message.check_sections()  # what _checked does (inlined: once per message)
        return [message]
    outer = decode_message(delivery.payload)
    if outer.body_kind != "data":
        raise AMQPDecodeError(
            f"a batch (message-format {BATCH_FORMAT:#x}) carries each message in a data section, "
            f"got a body of kind {outer.body_kind!r}"
        )
    body = outer.body
    return [_checked(StoredMessage(payload, now)) for payload in (body if isinstance(body, list) else [body])]


def _checked(message: StoredMessage) -> StoredMessage:
    """``message``, once the sections the broker reads later are known to decode.

    A stored message's sections are placed by their sizes and decoded on first use; the
    properties, application-properties and message-annotations (Part 3 §3.2.4, §3.2.5,
    §3.2.3) are read later by selectors, expiry and dead-lettering, far from the producer's
    transfer.  Decoding them here (the first two are kept) turns a section that does not
    decode into this transfer's ``rejected`` with ``amqp:decode-error`` (§3.4.2) instead of
    an error in another client's link or in the broker's timers.
    """
    message.check_sections()
    return message


def route_all(
    find: NodeFinder, publisher: Publisher, address: str | None, messages: list[StoredMessage], now: float
) -> Any:
    """Publish each message a client sent; the outcome for their delivery: the first rejection, else accepted."""
    first: Any = None
    for message in messages:
        node = find(address, message)
        if isinstance(node, Error):
            refused: Error | None = node
        else:
            refused = publisher.publish(node, message, now, Source.CLIENT)
        if refused is not None and first is None:
            first = Rejected(error=refused)
    return ACCEPTED if first is None else first


def relay_refusal(permissions: Permissions, user: str | None, messages: list[StoredMessage]) -> Error | None:
    """The first anonymous-relay message ``user`` may not send to its ``to``, as an error."""
    for message in messages:
        to = message.properties.to if message.properties is not None else None
        denied = permissions.relay_refusal(user, to)
        if denied is not None:
            return denied
    return None
