"""Fixtures of the server tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from minibroker import server


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """Every chunk the server hands to a socket, in order (both of ``_Sender``'s write paths)."""
    written: list[bytes] = []
    send, write_nowait = server._Sender.send, server._Sender.write_nowait

    async def recording_send(self: server._Sender, data: bytes) -> None:
        if data:  # b"": write what a partial write left, already recorded
            written.append(bytes(data))
        await send(self, data)

    def recording_write_nowait(self: server._Sender, data: bytes) -> bool:
        written.append(bytes(data))
        return write_nowait(self, data)

    monkeypatch.setattr(server._Sender, "send", recording_send)
    monkeypatch.setattr(server._Sender, "write_nowait", recording_write_nowait)
    yield written
