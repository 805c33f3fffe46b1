"""Server certificates: a context from PEM files, and a throwaway CA for tests (the CA needs ``trustme``).

No trio and nothing of the broker here, so the server (``minibroker.tls``) and the testing
helpers (``minibroker.testing.tls``) both import it from below.

::

    tls = minibroker.testing.throwaway_tls()
    with minibroker.ThreadedBroker(ssl_context=tls.server_context) as broker:
        # broker.url is amqps://127.0.0.1:PORT; trust tls.ca_file in your client
        ...

The CA (``trustme``) and a server certificate for ``127.0.0.1``, ``::1`` and
``localhost`` are made in memory and written as PEM files to a temporary
directory removed when the object is garbage-collected.  The certificate names
each address twice, as an IP address and as a DNS name, so both ways clients
check a peer name accept ``amqps://127.0.0.1:PORT``: Python's ``ssl`` (and
Node's ``tls``) match an address only against iPAddress entries (RFC 6125
§6.2.1 keeps addresses out of DNS-ID matching), while python-qpid-proton's
default ``VERIFY_PEER_NAME`` matches the URL's host as a DNS name against the
dNSName entries, then the common name, and never reads iPAddress entries
(qpid-proton ``c/src/ssl/openssl.c``, ``verify_callback``).
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import ssl
import tempfile
import weakref
from pathlib import Path
from typing import Any

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
        self.directory = Path(tempfile.mkdtemp(prefix="minibroker-tls-"))
        weakref.finalize(self, shutil.rmtree, self.directory, True)
        #: The CA certificate (PEM): what a client must trust.
        self.ca_file = str(self.directory / "ca.pem")
        #: The server's certificate chain and private key (PEM), e.g. for ``minibroker serve --ssl-certfile``.
        self.cert_file = str(self.directory / "server.pem")
        self.key_file = str(self.directory / "server.key")
        self._ca.cert_pem.write_to_path(self.ca_file)
        key_pem, cert_pem = _leaf(self._ca, identities)
        Path(self.key_file).write_bytes(key_pem)
        Path(self.cert_file).write_bytes(cert_pem)
        #: A server context holding the certificate: ``ThreadedBroker(ssl_context=tls.server_context)``.
        self.server_context = server_context(self.cert_file, self.key_file)

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts the CA and checks the host name (stdlib clients)."""
        context = ssl.create_default_context(cafile=self.ca_file)
        return context


def _names(identities: tuple[str, ...]) -> list[Any]:
    """Subject alternative names: a host name as a dNSName; an address as an iPAddress and also
    as a dNSName (its text), the one Python's ``ssl`` checks and the one proton checks."""
    from cryptography import x509

    names: list[Any] = []
    for identity in identities:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(identity)))
        except ValueError:
            pass  # a host name
        names.append(x509.DNSName(identity))
    return names


def _leaf(ca: Any, identities: tuple[str, ...]) -> tuple[bytes, bytes]:
    """A server key and certificate (PEM) for ``identities``, signed by the trustme ``ca``.

    Built here rather than with ``ca.issue_cert``: trustme turns an address into an iPAddress
    entry only, which proton's peer-name check never matches (see the module's docstring).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_key = serialization.load_pem_private_key(ca.private_key_pem.bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)  # validity is wall-clock time (not the broker's clock)
    ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "minibroker throwaway")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))  # a client's clock a little behind
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .add_extension(x509.SubjectAlternativeName(_names(identities)), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=True, data_encipherment=False,
                key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]  # trustme's CA key is an EC or RSA key
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    return key_pem, certificate.public_bytes(serialization.Encoding.PEM)


def throwaway_tls() -> ThrowawayTLS:
    """A fresh throwaway CA and a server certificate for loopback; see :class:`ThrowawayTLS`."""
    return ThrowawayTLS()
