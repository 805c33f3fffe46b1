"""Fixtures for the protocol-engine tests: an engine opened by an in-memory peer, no sockets."""

from __future__ import annotations

from typing import Any

import pytest
from engine_harness import Opened, OpenEngine

from minibroker.protocol import Connection, ConnectionConfig
from minibroker.testing import Peer, auto_accept, connect


@pytest.fixture
def open_engine() -> OpenEngine:
    """Factory: ``open_engine(config=None, *, auto=True, credit=100, **open_fields)``.

    ``auto`` accepts every link and grants ``credit`` to links the peer sends on.
    """

    def factory(
        config: ConnectionConfig | None = None,
        *,
        auto: bool = True,
        credit: int = 100,
        trickle: bool = False,
        **open_fields: Any,
    ) -> Opened:
        conn = Connection(config)
        peer = Peer()
        pump = connect(conn, peer, trickle=trickle, on_event=auto_accept(conn, credit) if auto else None)
        frames = pump.send(peer.start(**open_fields))
        assert frames.names() == ["ProtocolHeader", "Open", "Begin"]
        return Opened(conn, peer, pump, frames)

    return factory
