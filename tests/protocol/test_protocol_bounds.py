"""Per-frame work is bounded by the frame, never by history or by numbers the peer picks.

Counted, not timed: ids looked up per disposition, bytes held per reassembled delivery.
"""

from __future__ import annotations

from engine_harness import OpenEngine

from minibroker.amqp import errors as conditions
from minibroker.amqp.performatives import Detach, Transfer
from minibroker.protocol.connection import MAX_FRAGMENTS


def test_reassembly_holds_one_buffer_and_counts_empty_frames(open_engine: OpenEngine) -> None:
    h = open_engine()
    h.send(h.peer.attach_sender("in", "q", 0))
    h.pump.take_events()
    h.send(h.peer.transfer(0, None, None, b"ab", more=True))
    link = h.conn.sessions[0].links_by_remote[0]
    empty = h.peer.frame(0, Transfer(handle=0, more=True))
    h.send(empty * 10 + h.peer.frame(0, Transfer(handle=0, more=True), b"cd"))
    delivery = link.incoming
    assert delivery is not None and delivery.frames == bytearray(b"abcd") and delivery.sent == 12
    frames = h.send(empty * (MAX_FRAGMENTS - 12 + 1))
    detach = frames.one(Detach)
    assert detach.error is not None and detach.error.condition == conditions.RESOURCE_LIMIT_EXCEEDED
    assert link.incoming is None
