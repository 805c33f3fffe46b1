"""TLS for the server (``amqps``, Part 5 §5.2.1: TLS first, then the AMQP or SASL header).

The server keeps its non-blocking stdlib sockets: an accepted socket is
wrapped with :meth:`ssl.SSLContext.wrap_socket` and its handshake is driven
here under ``trio.lowlevel``.  After that the server's read and write loops
are the same as for plain TCP; they also treat ``ssl.SSLWantReadError`` /
``SSLWantWriteError`` as "would block".  A plain connection never touches
this module.
"""

from __future__ import annotations

import socket
import ssl

import trio

from .certificates import ThrowawayTLS, server_context, throwaway_tls

# server_context is re-exported: ``minibroker.tls.server_context(certfile, keyfile)`` is the documented name.
__all__ = ["HANDSHAKE_TIMEOUT", "close_notify", "handshake", "resolve", "server_context", "wrap"]

#: Seconds a client may take to complete the TLS handshake before its socket is closed;
#: bounds the slot a silent or plain-TCP client holds on a TLS port.
HANDSHAKE_TIMEOUT = 10.0


def resolve(
    ssl_context: ssl.SSLContext | None, tls: bool
) -> tuple[ssl.SSLContext | None, ThrowawayTLS | None]:
    """The server context a broker handle serves with, and the throwaway CA behind it when
    ``tls=True`` asked for one (``ThreadedBroker(tls=True)``, ``open_broker(tls=True)``)."""
    if not isinstance(tls, bool):
        raise TypeError(f"tls must be True or False, got {tls!r}; to serve your own certificate pass ssl_context=")
    if ssl_context is not None and not isinstance(ssl_context, ssl.SSLContext):
        raise TypeError(
            f"ssl_context must be a server-side ssl.SSLContext, got {type(ssl_context).__name__}; "
            "build one with minibroker.tls.server_context(certfile, keyfile), or pass tls=True for a throwaway CA"
        )
    if not tls:
        return ssl_context, None
    if ssl_context is not None:
        raise TypeError("pass either tls=True (a throwaway CA) or ssl_context= (your own certificate), not both")
    throwaway = throwaway_tls()
    return throwaway.server_context, throwaway


def wrap(context: ssl.SSLContext, sock: socket.socket) -> ssl.SSLSocket:
    """The server side of TLS on an accepted non-blocking socket; the handshake is not yet done."""
    return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)


async def handshake(sock: ssl.SSLSocket, timeout: float = HANDSHAKE_TIMEOUT) -> bool:
    """Complete the TLS handshake; False if it failed or took longer than ``timeout`` seconds."""
    with trio.move_on_after(timeout):
        while True:
            try:
                sock.do_handshake()
                return True
            except ssl.SSLWantReadError:
                await trio.lowlevel.wait_readable(sock)
            except ssl.SSLWantWriteError:
                await trio.lowlevel.wait_writable(sock)
            except OSError:  # ssl.SSLError included: not TLS, a certificate the client refused, a reset
                return False
    return False


def close_notify(sock: ssl.SSLSocket) -> None:
    """Send TLS close_notify so the client sees a clean end of the stream, not a truncation."""
    try:
        sock.unwrap()
    except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
        pass  # ours is sent; the peer's reply is drained by the caller as plain bytes
    except OSError:
        pass
