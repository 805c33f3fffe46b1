"""The engine's one hook for frames: what a connection reads and what it writes.

A :class:`~minibroker.protocol.connection.Connection` whose ``hook`` is set
calls it for every frame it decodes (``frame_in``, before acting on it) and
every frame it writes (``frame_out``, with the encoded bytes, which the hook
may pass on, replace, or withhold).  With no hook set the engine does nothing
more than test ``hook is None``; a hook never changes how a frame is encoded.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["FrameHook"]


class FrameHook(Protocol):
    """Sees every frame of one connection (Part 2 §2.3: frames; Part 5 §5.3: SASL frames)."""

    def frame_in(self, channel: int, performative: Any) -> None:
        """A frame was read: ``performative`` is the decoded AMQP performative or SASL frame body."""

    def frame_out(self, channel: int, performative: Any, frame: bytes) -> bytes:
        """A frame is about to be queued: return the bytes to queue instead (``b""``: none).

        ``performative`` is what ``frame`` encodes, or None for an empty frame
        (a keep-alive, §2.4.5).  ``frame`` is the whole frame, header included.
        """
