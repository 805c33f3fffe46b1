"""Server certificates: a context from PEM files, and a throwaway CA for tests (the CA needs ``trustme``).

No trio and nothing of the broker here, so the server (``minibroker.tls``) and the testing
helpers (``minibroker.testing.tls``) both import it from below.

::

    tls = minibroker.testing.throwaway_tls()
    with minibroker.ThreadedBroker(ssl_context=tls.server_context) as broker:
        # broker.url is amqps://127.0.0.1:PORT; trust tls.ca_file in your client
        ...

The CA and a server certificate for ``127.0.0.1``, ``::1`` and ``localhost``
are made in memory by ``trustme`` and written as PEM files to a temporary
directory removed when the object is garbage-collected.
"""

from __future__ import annotations

import shutil
import ssl
import tempfile
import weakref
from pathlib import Path

__all__ = ["IDENTITIES", "ThrowawayTLS", "server_context", "throwaway_tls"]

IDENTITIES = ("127.0.0.1", "::1", "localhost")


def server_context(certfile: str, keyfile: str | None = None, password: str | None = None) -> ssl.SSLContext:
    """A server-side context from a PEM certificate (chain) and key, TLS 1.2 or later.

    ``keyfile`` may be omitted when ``certfile`` holds the key too, as with
    uvicorn's ``--ssl-certfile`` / ``--ssl-keyfile`` / ``--ssl-keyfile-password``.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_RENEGOTIATION  # the write loop never has to read (and vice versa)
    try:
        context.load_cert_chain(certfile, keyfile, password)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(
            f"cannot load the TLS certificate {certfile!r} / key {keyfile!r}: {exc} "
            "(expected PEM files; give the key's password if it is encrypted)"
        ) from exc
    return context


class ThrowawayTLS:
    """A CA, a server certificate signed by it, and the files and contexts built from them."""

    def __init__(self, identities: tuple[str, ...] = IDENTITIES) -> None:
        try:
            import trustme
        except ImportError:  # trustme is a test dependency, not a run-time one
            raise ImportError(
                "a throwaway CA (tls=True, throwaway_tls()) needs the trustme package: pip install trustme "
                "(minibroker's test extra has it: pip install -e '.[test]'); or serve your own certificate "
                "with ssl_context=minibroker.tls.server_context(certfile, keyfile)"
            ) from None
        self._ca = trustme.CA()
        self._cert = self._ca.issue_cert(*identities)
        self.directory = Path(tempfile.mkdtemp(prefix="minibroker-tls-"))
        weakref.finalize(self, shutil.rmtree, self.directory, True)
        #: The CA certificate (PEM): what a client must trust.
        self.ca_file = str(self.directory / "ca.pem")
        #: The server's certificate chain and private key (PEM), e.g. for ``minibroker serve --ssl-certfile``.
        self.cert_file = str(self.directory / "server.pem")
        self.key_file = str(self.directory / "server.key")
        self._ca.cert_pem.write_to_path(self.ca_file)
        self._cert.private_key_pem.write_to_path(self.key_file)
        with open(self.cert_file, "wb") as chain:
            for blob in self._cert.cert_chain_pems:
                chain.write(blob.bytes())
        #: A server context holding the certificate: ``ThreadedBroker(ssl_context=tls.server_context)``.
        self.server_context = server_context(self.cert_file, self.key_file)

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts the CA and checks the host name (stdlib clients)."""
        context = ssl.create_default_context(cafile=self.ca_file)
        return context


def throwaway_tls() -> ThrowawayTLS:
    """A fresh throwaway CA and a server certificate for loopback; see :class:`ThrowawayTLS`."""
    return ThrowawayTLS()
