"""The server's ordered socket writer (``server._Sender``): what a socket does not take now is kept, in order.

A write to an idle socket is handed to the socket as it is (no copy into the queue); only what
a partial write leaves is queued, and what comes after it is written after it.  A real socket
pair whose peer does not read makes the writes partial; the peer then reads everything and the
bytes must be exactly what was written, in order.
"""

from __future__ import annotations

import socket

import trio

from minibroker import server


def _pair() -> tuple[socket.socket, socket.socket]:
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    return ours, peer


def _chunk(tag: int, size: int) -> bytes:
    return bytes([tag]) * size


def test_a_partial_write_keeps_the_rest_and_what_follows_in_order() -> None:
    ours, peer = _pair()
    sender = server._Sender(ours)
    first, second, third = _chunk(1, 1 << 20), _chunk(2, 1000), _chunk(3, 1 << 16)
    assert not sender.write_nowait(first), "a 1 MiB write to a 4 KiB socket buffer was taken whole"
    left = sender.backlog
    assert 0 < left < len(first)
    assert not sender.write_nowait(second)  # queued behind the rest of the first
    assert sender.backlog >= len(second)

    received = bytearray()

    async def main() -> None:
        async def drain() -> None:
            peer.setblocking(False)
            while len(received) < len(first) + len(second) + len(third):
                try:
                    received.extend(peer.recv(65536))
                except BlockingIOError:
                    await trio.lowlevel.wait_readable(peer)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            await sender.send(b"")  # writes the queue as the socket drains
            sender.write_nowait(third)
            await sender.send(b"")

    try:
        trio.run(main)
    finally:
        ours.close()
        peer.close()
    assert sender.backlog == 0
    assert bytes(received) == first + second + third


def test_a_write_the_socket_takes_whole_queues_nothing() -> None:
    ours, peer = _pair()
    try:
        sender = server._Sender(ours)
        assert sender.write_nowait(b"frame")
        assert sender.backlog == 0
        assert peer.recv(100) == b"frame"
    finally:
        ours.close()
        peer.close()
