"""The consumer side of a node: what a receiving link's attach asks, and what the broker drives.

A receiving link attached to a node is served by a :class:`NodeConsumer` the
node builds from a :class:`ConsumerRequest` (``Node.open_consumer``, node.py):
the broker registers it, tells it of credit and outcomes and ends it with its
link, without knowing which kind of node it reads from.  Kept apart from
node.py so that nodes can name these types without naming each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..records import record
from .roles import LinkRole

if TYPE_CHECKING:
    from ..protocol.connection import Connection
    from ..protocol.endpoints import Delivery, Link
    from .selector import Selector
    from .stored import Entry
    from .streamfilters import StreamFilter

__all__ = ["Client", "ConsumerRegistry", "ConsumerRequest", "NodeConsumer"]


class Client(Protocol):
    """What a link needs of the client connection it belongs to."""

    @property
    def protocol(self) -> Connection:
        """The connection's protocol state machine: sessions, links and the calls that send frames."""

    @property
    def engine(self) -> Connection:
        """The older name of ``protocol``."""

    @property
    def open(self) -> bool: ...

    def mark_dirty(self) -> None:
        """Output was queued for this client by work done for another: have it written."""

    def output_full(self) -> bool:
        """Whether the output queued for this client is over its bound: route nothing more to it for now."""

    def delivered(self, consumer: LinkRole, entry: Entry | None, delivery: Delivery) -> None:
        """Tell the broker's tap (``delivery_out``) that ``consumer`` was sent a message.

        Called only while ``protocol.hook`` is set (the tap has observers): free otherwise.
        """


class ConsumerRegistry(Protocol):
    """The broker's consumer registry (consumers.py), as a started consumer reports to it.

    A consumer's link events go through the registry because only the registry
    knows whether the consumer still reads: one whose node was deleted is
    finished at once, while its link waits for the peer's detach, and must
    send nothing more nor give back twice.
    """

    def credit(self, consumer: NodeConsumer, properties: dict[Any, Any] | None, drain: bool) -> None:
        """The client's flow granted ``consumer`` credit."""

    def pump(self, consumer: NodeConsumer, now: float) -> None:
        """The session's window opened: ``consumer`` sends what it may, if it still reads."""

    def end(self, consumer: NodeConsumer, closed: bool) -> None:
        """``consumer``'s link ended: finish it (once)."""


class NodeConsumer(LinkRole, Protocol):
    """The broker's side of a receiving link, as the broker drives it (built by ``Node.open_consumer``).

    The broker registers it, tells it of credit and of the client's outcomes,
    and ends it with its link; what it reads and how it settles is its own.
    It is its link's role (roles.py) too: as a role it hands credit, the
    session window and its link's end to the registry it was started by.
    """

    connection: Client
    link: Link
    #: It reads without acquiring (the client asked for ``copy`` and the node browses): echoed in the attach.
    browse: bool
    #: Capabilities the broker's attach offers back (Part 2 §2.7.3), e.g. a stream reader's
    #: ``x-opt-enqueued-time`` when it asked for it; empty for most.
    offered_capabilities: tuple[str, ...]
    #: The link properties the broker's attach carries (Part 2 §2.7.3 ``properties``), e.g. a
    #: stream reader's first and next offsets; None for most.
    attach_properties: dict[Any, Any] | None

    def start(self, registry: ConsumerRegistry) -> None:
        """Begin reading: join the node's readers (the registry calls it once, after the attach is answered)."""

    def reads_from(self, node: object) -> bool:
        """Whether it reads from ``node`` (deleting the node detaches it)."""

    def pump(self, now: float) -> None:
        """Credit or session window opened: send what it may now."""

    def on_outcome(self, delivery: Delivery, state: Any, settled: bool) -> None:
        """The client gave a delivery an outcome (Part 3 §3.4), or settled it."""

    def on_flow(self, properties: dict[Any, Any] | None) -> None:
        """A flow arrived (before any credit is used): ``properties`` may name a transaction (Part 4 §4.4.3)."""

    def available(self) -> int:
        """What a drain is answered with in the flow's ``available`` (§2.7.4: advisory)."""

    def finish(self, closed: bool, now: float) -> None:
        """Its link ended (``closed``: detached with closed=true): give back what it held (the registry calls it once)."""


@record(frozen=True, slots=True)
class ConsumerRequest:
    """What a receiving link's attach asks of the node its source names (attach.py fills it in)."""

    connection: Client
    link: Link
    #: The client asked for ``copy`` distribution (browse, broker paper 2.3.12).
    copy: bool
    selector: Selector | None
    #: Durable (source durability and expiry-policy ``never``, Part 3 §3.5.3): a topic keeps its subscription.
    durable: bool
    #: Names a durable subscription: ``container-id:link-name``.
    durable_name: str
    #: Builds the broker's consuming link on a queue: ``(queue, browse=, subscription=, topic=)``;
    #: it refuses a request that carries a ``stream_filter`` (those filters apply to streams only).
    queue_consumer: Callable[..., NodeConsumer]
    #: Where a stream reader starts and what it reads (RabbitMQ's ``rabbitmq:stream-*`` filters,
    #: streamfilters.py), or None when the source carries none of them.
    stream_filter: StreamFilter | None = None

