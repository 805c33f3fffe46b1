"""A loopback TCP proxy that holds back a broker's AMQP 0-9-1 ``connection.close-ok``.

A development tool, not part of CI. It shows that aio-pika's
``test_reconnect_channel_snapshot.py::test_create_channels_during_reconnect`` turns on how soon the
broker answers the client's ``connection.close`` (AMQP 0-9-1 §1.4.2.9 and §1.4.2.10), not on what
it answers. aiormq 7.2.4 closes a connection from two tasks at once: the one that asked for the
close, with ``CancelledError``, and the reader's done-callback, with ``None`` once close-ok has been
read. Whichever sets the connection's closing future first gives every channel its close reason,
and aio-pika's robust channel restores itself only for ``CancelledError``. When close-ok arrives
before aiormq's writer has finished draining its own close (within about one event-loop turn),
the reader's task wins, the channels see ``None``, try to restore on the closed connection, and
log the errors the test counts. RabbitMQ 3.10 on this machine answers later than that;
``minibroker serve`` answers sooner.

Usage (then point the suite's ``AMQP_URL`` at the proxy's port)::

    python tests/client_suites/close_ok_delay.py --listen 5694 --broker 5672 --delay 0.002

With ``--delay 0`` the same frames pass straight through.
"""

from __future__ import annotations

import argparse
import asyncio

#: A method frame on channel 0 carrying connection.close-ok (class 10, method 51): frame type 1,
#: channel 0, payload size 4, then the class and method ids (§4.2.3, §4.2.4).
CLOSE_OK = b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x33"


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy bytes one way; with ``delay``, hold a chunk carrying close-ok back that long."""
    try:
        while data := await reader.read(65536):
            if delay and CLOSE_OK in data:
                await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _serve(listen: int, broker: int, delay: float) -> None:
    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        broker_reader, broker_writer = await asyncio.open_connection("127.0.0.1", broker)
        await asyncio.gather(_pump(reader, broker_writer, 0.0), _pump(broker_reader, writer, delay))

    server = await asyncio.start_server(client, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--listen", type=int, required=True, help="the port the client connects to")
    parser.add_argument("--broker", type=int, required=True, help="the broker's port on 127.0.0.1")
    parser.add_argument("--delay", type=float, default=0.002, help="seconds to hold close-ok back (default 0.002)")
    options = parser.parse_args()
    asyncio.run(_serve(options.listen, options.broker, options.delay))


if __name__ == "__main__":
    main()
