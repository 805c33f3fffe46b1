"""TLS through the plugin (``tls=True`` and ``ssl_context=`` wherever broker keywords are taken), and
what the marker says when it is misused (once, and also when it would silently do nothing)."""

from __future__ import annotations

import pytest


def test_tls_true_serves_amqps_with_a_throwaway_ca_for_every_client(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import minibroker
        from proton import Message, SSLDomain
        from proton.utils import BlockingConnection

        @pytest.mark.amqp_broker("secure", tls=True)
        def test_marker(amqp_broker):
            assert amqp_broker.url.startswith("amqps://127.0.0.1:")
            with minibroker.Client(amqp_broker.url, ssl_context=amqp_broker.tls.client_context(), timeout=5) as client:
                client.sender("secure").send("over TLS")
            domain = SSLDomain(SSLDomain.MODE_CLIENT)
            domain.set_trusted_ca_db(amqp_broker.tls.ca_file)
            conn = BlockingConnection(amqp_broker.url, ssl_domain=domain, timeout=5)  # default: VERIFY_PEER_NAME
            conn.create_sender("secure").send(Message(body="from proton"))
            conn.close()
            amqp_broker.assert_queue("secure", bodies=["over TLS", "from proton"])

        def test_plain_by_default(amqp_broker):
            assert amqp_broker.url.startswith("amqp://") and amqp_broker.tls is None

        def test_factory(amqp_broker_factory):
            broker = amqp_broker_factory("jobs", tls=True)
            with minibroker.Client(broker.url, ssl_context=broker.tls.client_context(), timeout=5) as client:
                client.sender("jobs").send(1)
            assert broker.queue("jobs").bodies == [1]
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_ssl_context_is_taken_by_the_factory_the_marker_and_the_config_fixture(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest
        from minibroker.testing import throwaway_tls

        TLS = throwaway_tls()

        @pytest.fixture
        def amqp_broker_config(request):
            return {"ssl_context": TLS.server_context} if request.node.name == "test_configured" else {}
        """
    )
    pytester.makepyfile(
        """
        import pytest
        import minibroker
        from conftest import TLS

        def send_over_tls(broker):
            assert broker.url.startswith("amqps://")
            with minibroker.Client(broker.url, ssl_context=TLS.client_context(), timeout=5) as client:
                client.sender("q").send("x")
            assert broker.queue("q").bodies == ["x"]

        def test_factory(amqp_broker_factory):
            send_over_tls(amqp_broker_factory(ssl_context=TLS.server_context))

        @pytest.mark.amqp_broker(ssl_context=TLS.server_context)
        def test_marker(amqp_broker):
            send_over_tls(amqp_broker)

        def test_configured(amqp_broker):
            send_over_tls(amqp_broker)

        def test_not_configured(amqp_broker):
            assert amqp_broker.url.startswith("amqp://")
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_tls_for_the_trio_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import trio
        import minibroker

        @pytest.mark.trio
        @pytest.mark.amqp_broker(tls=True)
        async def test_trio(amqp_broker_trio):
            assert amqp_broker_trio.url.startswith("amqps://")

            def send():
                context = amqp_broker_trio.tls.client_context()
                with minibroker.Client(amqp_broker_trio.url, ssl_context=context, timeout=5) as client:
                    client.sender("q").send("x")

            await trio.to_thread.run_sync(send)
            assert amqp_broker_trio.queue("q").bodies == ["x"]
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "trio")
    result.assert_outcomes(passed=1)


def test_a_bad_tls_keyword_fails_set_up_saying_what_to_pass(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.amqp_broker(ssl_context="cert.pem")
        def test_marker(amqp_broker):
            pass

        def test_factory(amqp_broker_factory):
            amqp_broker_factory(tls="yes")
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-rN")
    result.assert_outcomes(failed=1, errors=1)
    output = result.stdout.str()
    assert "ssl_context must be a server-side ssl.SSLContext" in output and "tls=True" in output
    assert "amqp_broker_factory(...): tls must be True or False, got 'yes'" in output


def test_a_marker_error_is_printed_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.amqp_broker(bogus=1)
        def test_marker(amqp_broker):
            pass

        def test_factory(amqp_broker_factory):
            amqp_broker_factory(bogus=2)
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-rN")
    result.assert_outcomes(failed=1, errors=1)
    output = result.stdout.str()
    assert output.count("unknown keyword(s) bogus; valid keywords are") == 2  # one per test
    assert "During handling of the above exception" not in output


def test_a_marker_on_a_test_without_the_fixture_warns(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.amqp_broker("orders")
        def test_forgot_the_fixture():
            pass

        @pytest.mark.amqp_broker("orders")
        def test_with_the_factory(amqp_broker_factory):
            pass

        @pytest.mark.amqp_broker("orders")
        def test_uses_it(amqp_broker):
            pass

        @pytest.mark.amqp_broker("orders")
        class TestAClassMarkerCoversSomeTestsWithoutABroker:
            def test_no_broker_here(self):
                pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, warnings=2)
    output = result.stdout.str()
    assert "@pytest.mark.amqp_broker on test_forgot_the_fixture does nothing" in output
    assert "add amqp_broker (or amqp_broker_trio) to the test's arguments" in output
    assert "on test_with_the_factory does nothing" in output and "amqp_broker_factory(...) instead" in output
    assert "test_no_broker_here does nothing" not in output and "test_uses_it does nothing" not in output
