"""Finding 5: a process-wide cache of decoded headers, filled with any header of any size.

Before the fix a message header of megabytes (five valid fields, then junk the decoder padded
past) was decoded, however long that took, and kept in a process-wide cache that ``reset()`` and
``stop()`` never emptied.  Now a header section is checked for size before any decoding
(``MAX_HEADER_SIZE``): a bigger one is a malformed message, and only small headers are cached.
"""

from __future__ import annotations

import struct

import pytest
from hostile_peer import Attacker, good_client_round_trip  # tests/hostile is on sys.path

import minibroker
from minibroker.amqp.messaging import Rejected
from minibroker.amqp.performatives import Disposition, End, Flow
from minibroker.broker import stored
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker

pytestmark = pytest.mark.interop


def bloated_header(junk: int, tag: int) -> bytes:
    """A header section whose five fields are valid, followed by ``junk`` symbols (list32, Part 1 §1.6.22)."""
    items = b"\x41\x50\x04\x40\x40\x40" + struct.pack(">BBI", 0xA3, 4, tag)[:2] + b"tag!" + b"\xa3\x05hello" * junk
    return b"\x00\x53\x70\xd0" + struct.pack(">II", len(items) + 4, 6 + junk) + items


def _largest_cached() -> int:
    return max((len(key) for key in stored._HEADERS), default=0)


def test_a_megabyte_header_is_refused_before_decoding_and_never_cached() -> None:
    with minibroker.ThreadedBroker() as broker:
        broker.declare_queue("small", max_bytes=1024 * 1024)
        attacker = Attacker(broker)
        attacker.start()
        attacker.send(attacker.peer.attach_sender("bloat", "small", 0))
        attacker.read_until(lambda frames: frames.of(Flow))
        body = b"\x00\x53\x75\xb0\x00\x00\x00\x01x"
        attacker.send(attacker.peer.transfer(0, None, None, bloated_header(100_000, 1) + body))
        # A malformed message rejects that transfer only; the session goes on (Part 3 §3.4.2).
        frames = attacker.read_until(lambda frames: frames.of(Disposition))
        state = frames.one(Disposition).state
        assert isinstance(state, Rejected) and state.error is not None
        assert state.error.condition == "amqp:decode-error"
        assert "header section" in str(state.error.description)
        assert not frames.of(End)
        good_client_round_trip(broker)
        assert broker._read(_largest_cached) <= stored.MAX_HEADER_SIZE
        assert broker.queue("small").depth == 0
        attacker.close()


def test_reset_empties_the_header_cache() -> None:
    broker = Broker(BrokerConfig())
    broker.publish_many("q", [b"\x00\x53\x70\xc0\x02\x01\x41" + b"\x00\x53\x77\xa1\x01x"])
    assert stored._HEADERS
    broker.reset()
    assert not stored._HEADERS
