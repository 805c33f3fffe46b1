"""``minibroker.Client`` over TLS (``amqps://``, Part 5 §5.2.1), against brokers serving amqps."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator

import pytest

from minibroker import Client, ThreadedBroker
from minibroker.client import ConnectionFailed, parse_url


@pytest.fixture(scope="module")
def tls_broker() -> Iterator[ThreadedBroker]:
    # 1 s: the client beats every quarter to half of it, which leaves a loaded machine half a
    # second per beat (0.2 s left a starved heartbeat thread 0.1 s before the broker hung up).
    with ThreadedBroker(tls=True, idle_timeout=1.0) as broker:
        yield broker


def test_client_speaks_tls_to_an_amqps_url(tls_broker: ThreadedBroker) -> None:
    assert tls_broker.tls is not None
    with Client(tls_broker.url, ssl_context=tls_broker.tls.client_context(), timeout=5) as client:
        assert repr(client).startswith("<Client amqps://")
        with client.sender("tls-orders") as sender:
            sender.send_many([{"id": n} for n in range(300)])  # many TLS records, read in pieces
        with client.receiver("tls-orders", credit=50) as receiver:
            got = []
            while len(got) < 300:
                batch = receiver.fetch(100)
                receiver.settle(batch)
                got.extend(batch)
    assert [d.message.body["id"] for d in got] == list(range(300))
    assert tls_broker.queue("tls-orders").depth == 0


def test_heartbeats_and_reads_share_the_tls_connection(tls_broker: ThreadedBroker) -> None:
    """The broker asks for heartbeats every 0.5 s: the client's heartbeat thread writes while the
    caller's thread waits in a read, over one TLS connection, and the connection stays up."""
    assert tls_broker.tls is not None
    with Client(tls_broker.url, ssl_context=tls_broker.tls.client_context(), timeout=5) as client:
        receiver = client.receiver("tls-idle")
        for round_ in range(2):
            # Published 0.6 s from now, so the read below waits across at least one heartbeat
            # (waiting is what is tested: this delay is the subject, not a stand-in for a condition).
            publisher = threading.Timer(0.6, tls_broker.publish, args=("tls-idle", round_))
            publisher.start()
            try:
                delivery = receiver.receive(timeout=5)
            finally:
                publisher.cancel()
            delivery.accept()
            assert delivery.message.body == round_
        assert tls_broker.statistics().connections == 1


def test_an_untrusted_certificate_fails_with_what_to_pass(tls_broker: ThreadedBroker) -> None:
    with pytest.raises(ConnectionFailed, match=r"TLS handshake .* failed: .*ssl_context=broker\.tls\.client_context\(\)"):
        Client(tls_broker.url, timeout=5)


def test_a_context_for_a_plain_url_says_to_use_amqps() -> None:
    with pytest.raises(ValueError, match=r"connect to amqps://127\.0\.0\.1:5672"):
        Client("amqp://127.0.0.1:5672", ssl_context=ssl.create_default_context())


def test_amqps_defaults_to_port_5671() -> None:
    assert parse_url("amqps://h") == ("h", 5671, None, None)
    assert parse_url("amqp://h") == ("h", 5672, None, None)


def test_broker_tls_keywords_are_checked() -> None:
    with pytest.raises(TypeError, match="either tls=True .* or ssl_context="):
        ThreadedBroker(tls=True, ssl_context=ssl.create_default_context(ssl.Purpose.CLIENT_AUTH))
    with pytest.raises(TypeError, match="ssl_context must be a server-side ssl.SSLContext, got str"):
        ThreadedBroker(ssl_context="cert.pem")  # type: ignore[arg-type]
