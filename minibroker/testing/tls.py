"""A throwaway certificate authority for testing TLS clients against the broker (needs ``trustme``).

::

    tls = minibroker.testing.throwaway_tls()
    with minibroker.ThreadedBroker(ssl_context=tls.server_context) as broker:
        # broker.url is amqps://127.0.0.1:PORT; trust tls.ca_file in your client
        ...

The CA and a server certificate for ``127.0.0.1``, ``::1`` and ``localhost``
are made in memory by ``trustme`` and written as PEM files to a temporary
directory removed when the object is garbage-collected.  They live in
``minibroker.certificates``, below both the server and these helpers.
"""

from __future__ import annotations

from ..certificates import ThrowawayTLS as ThrowawayTLS
from ..certificates import throwaway_tls as throwaway_tls

__all__ = ["ThrowawayTLS", "throwaway_tls"]
