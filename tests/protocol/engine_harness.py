"""An engine opened by an in-memory peer: what the protocol tests start from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from minibroker.protocol import Connection
from minibroker.testing import Frames, Peer, Pump


@dataclass
class Opened:
    """A protocol ``Connection`` after header, open and begin from ``peer``."""

    conn: Connection
    peer: Peer
    pump: Pump
    handshake: Frames

    def send(self, data: bytes) -> Frames:
        return self.pump.send(data)


OpenEngine = Callable[..., Opened]
