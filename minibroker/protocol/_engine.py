"""What the handler modules see of a connection: its tables, counters and output, not its framing.

Theory of operation.  :class:`~.connection.Connection` reads frames and
dispatches each performative to a handler: its own for ``open`` and
``close``, and plain functions beside the endpoints they change for the
rest (:mod:`.sessions`, :mod:`.links`, :mod:`.flow`, :mod:`.deliveries`,
:mod:`.dispositions`), each taking the connection as its first argument.
The broker's calls (``accept_link``, ``send_transfer``, ``settle``, ...) are
those same functions, bound as methods of ``Connection``.

:class:`Engine` is the part of a connection those functions may use, typed
structurally so that they never import ``connection.py`` (which imports
them): a handler module reads and changes these fields and queues frames
through ``_send``/``_write``, and nothing else.  mypy checks that
``Connection`` has every member wherever a function is bound to it.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..amqp.composite import Composite
from . import events as ev
from .config import ConnectionConfig
from .endpoints import Link, Session
from .errors import AMQPProtocolError
from .hooks import FrameHook

__all__ = ["Engine"]


class Engine(Protocol):
    """A connection as its session, link and delivery handlers see it."""

    config: ConnectionConfig
    hook: FrameHook | None
    #: Closed or failed: nothing more is read.
    finished: bool
    #: The peer's max-frame-size (§2.7.1): what an outgoing transfer is split to.
    remote_max_frame_size: int
    #: Sessions by the peer's channel, and by ours.
    sessions: dict[int, Session]
    _sessions_local: dict[int, Session]
    #: Links answered and not yet forgotten (``max_links``), bytes of the links' attach frames
    #: (``links.MAX_ATTACH_BYTES``) and of the deliveries being assembled (``max_message_size``).
    links_answered: int
    attach_bytes: int
    assembling: int
    #: The size of the frame being handled.
    _frame_size: int
    #: Receiving links whose credit is held back until the peer settles (``flow.grant_credit``).
    _starved: dict[Link, None]
    #: Frames queued for the peer, their size, and the events for the broker.
    _out: list[bytes]
    output_size: int
    _events: list[ev.Event]
    #: Dispositions not yet written (``dispositions.settle``).
    _dispositions: dict[tuple[int, bool, bool, type], list[Any]]
    _disposition_ranges: list[list[Any]]
    _last_disposition: list[Any] | None

    def _send(self, channel: int, performative: Composite, payload: bytes = b"") -> None:
        """Queue a frame after the dispositions still pending."""

    def _write(self, channel: int, performative: Composite, payload: bytes = b"") -> None:
        """Queue a frame now (a transfer or a disposition: nothing need go before it)."""

    def _fail(self, exc: AMQPProtocolError) -> None:
        """End what the error's scope names: a link, a session, or the connection."""

    def _session(self, channel: int) -> Session:
        """The session on the peer's ``channel``, or a connection error."""

    def _link(self, session: Session, handle: int | None, what: str) -> Link:
        """The link on the peer's ``handle``, or a session error ``amqp:unattached-handle``."""
