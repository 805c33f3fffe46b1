"""Hostile peers beside a good one: a Hypothesis state machine over the in-memory broker.

Hypothesis interleaves the attacks of ``tests/hostile/`` (tiny and empty continuation frames,
wide disposition ranges, unsettled floods in rcv-settle-mode second, bloated headers, bursts of
attaches, a consumer that never reads its output) on any number of connections, and after every
step checks that what the broker holds for each connection is within its stated bounds and that a
fresh client is still served.  No socket, thread or clock: bytes in, bytes out.
"""

from __future__ import annotations

import os
import struct

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from minibroker.amqp import codec
from minibroker.amqp.message import decode_message
from minibroker.amqp.performatives import RCV_SECOND, SND_SETTLED, Transfer
from minibroker.broker.client_connection import OUTPUT_BOUND
from minibroker.broker.config import BrokerConfig
from minibroker.broker.engine import Broker
from minibroker.broker.stored import _HEADERS, MAX_HEADER_SIZE
from minibroker.testing import Peer, Pump, connect

MAX_MESSAGE = 64 * 1024
CREDIT = 20


def data_section(body: bytes) -> bytes:
    return b"\x00\x53\x75\xb0" + struct.pack(">I", len(body)) + body


class HostilePeers(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.broker = Broker(BrokerConfig(max_message_size=MAX_MESSAGE, link_credit=CREDIT, max_links=64))
        self.hostile: list[tuple[Peer, Pump]] = []
        self.readers: list[Pump] = []  # consumers that never read (their output is never collected)
        self.served = 0

    def _open(self, rcv_settle_mode: int = 0) -> tuple[Peer, Pump]:
        peer = Peer(container_id="hostile")
        pump = connect(self.broker, peer)
        pump.send(peer.start() + peer.attach_sender("h", "target", 0, rcv_settle_mode=rcv_settle_mode))
        return peer, pump

    @rule(second=st.booleans())
    def open_hostile(self, second: bool) -> None:
        self.hostile.append(self._open(RCV_SECOND if second else 0))

    @precondition(lambda self: self.hostile)
    @rule(index=st.integers(0, 100), count=st.integers(1, 3000), data=st.binary(max_size=64))
    def continuation_frames(self, index: int, count: int, data: bytes) -> None:
        peer, pump = self.hostile[index % len(self.hostile)]
        if pump.finished or 0 not in peer.session(0).links:
            return
        frame = Peer.raw_frame(0, codec.encode(Transfer(handle=0, more=True)) + data)
        if peer.link(0).credit > 0:
            pump.send(peer.transfer(0, None, None, b"start", more=True))
        pump.send(frame * count)

    @precondition(lambda self: self.hostile)
    @rule(index=st.integers(0, 100), count=st.integers(1, 200), last=st.integers(0, 2**31 - 1))
    def wide_dispositions(self, index: int, count: int, last: int) -> None:
        peer, pump = self.hostile[index % len(self.hostile)]
        if not pump.finished:
            pump.send(peer.disposition(0, last) * count)

    @precondition(lambda self: self.hostile)
    @rule(index=st.integers(0, 100))
    def unsettled_flood(self, index: int) -> None:
        peer, pump = self.hostile[index % len(self.hostile)]
        if pump.finished or 0 not in peer.session(0).links or peer.link(0).sending_more:
            return
        credit = peer.link(0).credit
        if credit > 0:
            pump.send(b"".join(peer.transfer(0, None, None, data_section(b"u" * 100)) for _ in range(credit)))

    @precondition(lambda self: self.hostile)
    @rule(index=st.integers(0, 100), junk=st.integers(1, 20_000))
    def bloated_header(self, index: int, junk: int) -> None:
        peer, pump = self.hostile[index % len(self.hostile)]
        if pump.finished or 0 not in peer.session(0).links or peer.link(0).credit <= 0 or peer.link(0).sending_more:
            return
        items = b"\x41\x50\x04\x40\x40\x40" + b"\xa3\x05hello" * junk
        header = b"\x00\x53\x70\xd0" + struct.pack(">II", len(items) + 4, 5 + junk) + items
        pump.send(peer.transfer(0, None, None, header + data_section(b"x")))

    @rule(count=st.integers(1, 100))
    def attach_burst(self, count: int) -> None:
        peer = Peer(container_id="burst")
        pump = connect(self.broker, peer)
        pump.send(peer.start() + b"".join(peer.attach_sender(f"b{i}", "burst", i) for i in range(count)))
        accepted = [a for a in pump.frames.performatives() if type(a).__name__ == "Attach" and a.target is not None]
        assert len(accepted) == min(count, 64)
        self.hostile.append((peer, pump))

    @rule(messages=st.integers(1, 300))
    def non_reader(self, messages: int) -> None:
        peer = Peer(container_id="non-reader")
        pump = connect(self.broker, peer)
        pump.send(
            peer.start()
            + peer.attach_receiver("sink", "flood", 0, snd_settle_mode=SND_SETTLED)
            + peer.flow(0, credit=1_000_000)
        )
        self.readers.append(pump)
        self.broker.publish_many("flood", [data_section(b"f" * 32 * 1024)] * messages)

    @precondition(lambda self: self.hostile or self.readers)
    @rule(index=st.integers(0, 100))
    def drop(self, index: int) -> None:
        pumps = [pump for _, pump in self.hostile] + self.readers
        pump = pumps[index % len(pumps)]
        pump.target.connection_lost()  # type: ignore[attr-defined]

    @invariant()
    def buffers_are_within_their_bounds(self) -> None:
        assert not self.broker.errors, self.broker.errors
        for connection in self.broker.connections:
            protocol = connection.protocol
            assert protocol.assembling <= MAX_MESSAGE
            assert protocol.output_size <= OUTPUT_BOUND + MAX_MESSAGE
            kept = sum(len(s.incoming_unsettled) for s in protocol.sessions.values())
            assert kept <= protocol.config.max_unsettled_incoming_total
            for session in protocol.sessions.values():
                for link in session.links_by_handle.values():
                    assert len(link.unsettled) <= CREDIT or link.is_sender
        assert max((len(key) for key in _HEADERS), default=0) <= MAX_HEADER_SIZE

    @invariant()
    def a_good_client_is_served(self) -> None:
        peer = Peer(container_id="good")
        pump = connect(self.broker, peer)
        body = data_section(b"good %d" % self.served)
        address = f"good-{self.served}"
        pump.send(peer.start() + peer.attach_sender("s", address, 0))  # credit comes with the answer
        pump.send(peer.transfer(0, None, None, body, settled=True))
        frames = pump.send(peer.attach_receiver("r", address, 1) + peer.flow(1, credit=1))
        transfers = [f for f in frames if isinstance(f.performative, Transfer)]
        assert transfers and decode_message(transfers[-1].payload).body == b"good %d" % self.served
        pump.target.connection_lost()  # type: ignore[attr-defined]
        self.served += 1


TestHostilePeers = HostilePeers.TestCase
TestHostilePeers.settings = settings(
    max_examples=int(os.environ.get("MINIBROKER_FUZZ_EXAMPLES", "25")),
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
