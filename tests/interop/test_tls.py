"""amqps: TLS from an ssl.SSLContext or a cert/key pair, tested with proton, rhea and the stdlib."""

from __future__ import annotations

import re
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from proton import Message, SSLDomain
from proton.utils import BlockingConnection

import minibroker
from minibroker.protocol.framing import AMQP_HEADER, SASL_HEADER
from minibroker.testing import ThrowawayTLS, throwaway_tls

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def tls() -> ThrowawayTLS:
    return throwaway_tls()


@pytest.fixture
def tls_broker(tls: ThrowawayTLS) -> Iterator[minibroker.ThreadedBroker]:
    with minibroker.ThreadedBroker(ssl_context=tls.server_context, users={"alice": "secret"}) as broker:
        yield broker


def _connect(url: str, ca_file: str | None, **options: Any) -> BlockingConnection:
    """A proton connection that trusts ``ca_file`` and checks the server's name (the URL's host)."""
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    if ca_file is not None:
        domain.set_trusted_ca_db(ca_file)
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    return BlockingConnection(url, timeout=10, ssl_domain=domain, **options)


def test_url_says_amqps(tls_broker: minibroker.ThreadedBroker) -> None:
    assert tls_broker.url == f"amqps://127.0.0.1:{tls_broker.port}"


def test_proton_sends_and_receives_over_tls_with_peer_name_checked(
    tls: ThrowawayTLS, tls_broker: minibroker.ThreadedBroker
) -> None:
    conn = _connect(tls_broker.url, tls.ca_file)
    conn.create_sender("secure").send(Message(body="over tls", id="m-1"))
    assert tls_broker.queue("secure").bodies == ["over tls"]
    receiver = conn.create_receiver("secure")
    assert receiver.receive(timeout=10).body == "over tls"
    receiver.accept()
    conn.close()
    tls_broker.wait_for(lambda b: b.queue("secure").depth == 0 and b.statistics().connections == 0)
    assert tls_broker.errors() == []


def test_proton_sasl_plain_over_tls(tls: ThrowawayTLS, tls_broker: minibroker.ThreadedBroker) -> None:
    conn = _connect(tls_broker.url, tls.ca_file, user="alice", password="secret", allowed_mechs="PLAIN")
    conn.create_sender("plain-over-tls").send(Message(body=1))
    conn.close()
    assert tls_broker.queue("plain-over-tls").depth == 1


def test_a_client_that_does_not_trust_the_ca_is_refused_and_the_broker_carries_on(
    tls: ThrowawayTLS, tls_broker: minibroker.ThreadedBroker
) -> None:
    with pytest.raises(Exception, match=r"(?i)ssl|certificate|verify"):
        _connect(tls_broker.url, None)
    conn = _connect(tls_broker.url, tls.ca_file)
    conn.close()
    assert tls_broker.errors() == []


def test_a_plain_amqp_client_on_the_tls_port_gets_nothing_and_costs_nothing(
    tls_broker: minibroker.ThreadedBroker,
) -> None:
    with socket.create_connection(("127.0.0.1", tls_broker.port), timeout=10) as sock:
        sock.sendall(AMQP_HEADER)
        reply = b""
        try:
            while chunk := sock.recv(4096):
                reply += chunk
        except ConnectionResetError:
            pass  # the failed handshake closes the socket with the header unread
    assert AMQP_HEADER not in reply  # no AMQP spoken before TLS
    assert tls_broker.statistics().connections_total == 0
    assert tls_broker.errors() == []


def test_stdlib_client_context_from_the_helper(tls: ThrowawayTLS, tls_broker: minibroker.ThreadedBroker) -> None:
    raw = socket.create_connection(("127.0.0.1", tls_broker.port), timeout=10)
    with tls.client_context().wrap_socket(raw, server_hostname="localhost") as sock:
        sock.sendall(SASL_HEADER)
        assert sock.recv(8) == SASL_HEADER
        assert sock.version() in ("TLSv1.2", "TLSv1.3")


def test_proton_default_peer_name_check_accepts_the_url_as_given(
    tls: ThrowawayTLS, tls_broker: minibroker.ThreadedBroker
) -> None:
    """proton's client domain checks the peer name by default (VERIFY_PEER_NAME) and matches the
    URL's host ``127.0.0.1`` as a DNS name: no ``virtual_host="localhost"`` is needed."""
    domain = SSLDomain(SSLDomain.MODE_CLIENT)  # the default verify mode, not set here
    domain.set_trusted_ca_db(tls.ca_file)
    conn = BlockingConnection(tls_broker.url, timeout=10, ssl_domain=domain)
    conn.create_sender("by-address").send(Message(body="named 127.0.0.1"))
    conn.close()
    assert tls_broker.queue("by-address").bodies == ["named 127.0.0.1"]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_stdlib_checks_the_address_and_the_name(tls: ThrowawayTLS, tls_broker: minibroker.ThreadedBroker, host: str) -> None:
    """Python's ssl matches an address against the iPAddress entries only: the certificate has both."""
    raw = socket.create_connection(("127.0.0.1", tls_broker.port), timeout=10)
    with tls.client_context().wrap_socket(raw, server_hostname=host) as sock:
        sock.sendall(SASL_HEADER)
        assert sock.recv(8) == SASL_HEADER


def test_plain_broker_is_unchanged() -> None:
    with minibroker.ThreadedBroker() as broker:
        assert broker.url.startswith("amqp://")
        conn = BlockingConnection(broker.url, timeout=10)
        conn.close()


def test_rhea_over_tls(tls: ThrowawayTLS, tls_broker: minibroker.ThreadedBroker, rhea: Any) -> None:
    sent = rhea("send", port=tls_broker.port, address="rhea-tls", count=5, body_prefix="t-", ca_file=tls.ca_file)
    assert sent["errors"] == [] and sent["outcomes"] == ["accepted"] * 5
    received = rhea("receive", port=tls_broker.port, address="rhea-tls", count=5, ca_file=tls.ca_file)
    assert received["errors"] == []
    assert [m["body"] for m in received["messages"]] == [f"t-{i}" for i in range(5)]
    tls_broker.wait_for(lambda b: b.queue("rhea-tls").depth == 0)


def test_open_broker_serves_tls_in_a_trio_run(tls: ThrowawayTLS) -> None:
    async def main() -> bytes:
        async with minibroker.open_broker(ssl_context=tls.server_context) as broker:
            assert broker.url.startswith("amqps://")
            stream = await trio.open_ssl_over_tcp_stream(
                "127.0.0.1", broker.port, ssl_context=tls.client_context(), https_compatible=True
            )
            await stream.send_all(AMQP_HEADER)
            reply = await stream.receive_some(8)
            await stream.aclose()
            return bytes(reply)

    assert trio.run(main) == AMQP_HEADER


def test_cli_serves_amqps_from_cert_and_key_files(tls: ThrowawayTLS) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "minibroker", "serve", "--port", "0", "--queue", "q",
         "--ssl-certfile", tls.cert_file, "--ssl-keyfile", tls.key_file],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        match = re.fullmatch(r"minibroker listening on (amqps://127\.0\.0\.1:\d+)", first)
        assert match, first
        conn = _connect(match.group(1), tls.ca_file)
        conn.create_sender("q").send(Message(body="cli"))
        receiver = conn.create_receiver("q")
        assert receiver.receive(timeout=10).body == "cli"
        receiver.accept()
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_cli_rejects_a_missing_certificate_with_a_usage_error(tmp_path: Any) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "minibroker", "serve", "--ssl-certfile", str(tmp_path / "missing.pem")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "cannot load the TLS certificate" in proc.stderr


def test_server_context_from_a_combined_pem(tls: ThrowawayTLS, tmp_path: Any) -> None:
    combined = tmp_path / "both.pem"
    combined.write_bytes(open(tls.cert_file, "rb").read() + open(tls.key_file, "rb").read())
    context = minibroker.tls.server_context(str(combined))
    assert isinstance(context, ssl.SSLContext)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_restart_keeps_serving_tls_on_the_same_port(tls: ThrowawayTLS, tls_broker: minibroker.ThreadedBroker) -> None:
    url = tls_broker.url
    tls_broker.publish("kept", "durable", durable=True)
    tls_broker.restart()
    assert tls_broker.url == url
    conn = _connect(url, tls.ca_file)
    receiver = conn.create_receiver("kept")
    assert receiver.receive(timeout=10).body == "durable"
    receiver.accept()
    conn.close()
