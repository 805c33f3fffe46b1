"""Test helpers: an in-memory AMQP 1.0 client peer that drives the engine or the broker without sockets.

See :mod:`minibroker.testing.peer`::

    from minibroker.testing import Peer, connect

    peer = Peer()
    pump = connect(broker, peer)  # a Broker, BrokerConnection or protocol Connection
    frames = pump.send(peer.start())  # header + open + begin
"""

from typing import Any

from ..broker.faults import AMQP091_KINDS as AMQP091_KINDS
from ..broker.faults import Fault as Fault
from ..broker.faults import FaultBuilder
from ..broker.faults import FaultNotFired as FaultNotFired
from ..broker.faults import FaultPlan as FaultPlan
from ..broker.faults import Firing as Firing
from .assertions import QueueMismatch as QueueMismatch
from .assertions import StreamMismatch as StreamMismatch
from .assertions import assert_queue as assert_queue
from .assertions import assert_stream as assert_stream
from .peer import Frame as Frame
from .peer import FrameReader as FrameReader
from .peer import Frames as Frames
from .peer import Peer as Peer
from .peer import PeerLink as PeerLink
from .peer import PeerSession as PeerSession
from .peer import ProtocolHeader as ProtocolHeader
from .peer import Pump as Pump
from .peer import Transport as Transport
from .peer import auto_accept as auto_accept
from .peer import connect as connect
from .peer import exchange as exchange
from .peer import parse_frames as parse_frames
from .tls import ThrowawayTLS as ThrowawayTLS
from .tls import throwaway_tls as throwaway_tls

#: Builds faults to declare later: ``@pytest.mark.amqp_broker(faults=[faults.release(address="jobs")])``.
faults = FaultBuilder()


def __getattr__(name: str) -> Any:
    """``fault_plans`` is imported on first use: it needs Hypothesis, an optional dependency."""
    if name == "fault_plans":
        try:
            from .plans import fault_plans
        except ModuleNotFoundError as exc:
            if exc.name != "hypothesis":
                raise
            raise ImportError(
                "minibroker.testing.fault_plans is a Hypothesis strategy and needs Hypothesis, which is not "
                "installed: `pip install hypothesis` (minibroker's `test` extra has it: pip install -e '.[test]')"
            ) from exc
        return fault_plans
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AMQP091_KINDS", "Fault", "FaultNotFired", "FaultPlan", "Firing", "Frame", "FrameReader", "Frames", "Peer", "PeerLink",
    "PeerSession", "ProtocolHeader", "Pump", "QueueMismatch", "StreamMismatch", "ThrowawayTLS", "Transport",
    "assert_queue", "assert_stream", "auto_accept", "connect", "exchange", "fault_plans",
    "faults", "parse_frames", "throwaway_tls",
]  # fmt: skip
