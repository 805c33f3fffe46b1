"""``@pytest.mark.amqp_broker``, the ini keys and command-line options, all under "minibroker"."""

from __future__ import annotations

import pytest


def test_the_marker_sets_nodes_clock_users_and_any_config_field(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import minibroker
        from proton.utils import BlockingConnection

        @pytest.mark.amqp_broker(
            "orders",
            queues=[("jobs", {"max_delivery_count": 2, "priorities": 3})],
            topics=["news"],
            clock="manual",
            users={"alice": "secret"},
            allow_anonymous=False,
            auto_create=False,
            container_id="site-a",
        )
        def test_marked(amqp_broker):
            assert amqp_broker.queues() == ["jobs", "orders"]
            assert amqp_broker.topics() == ["news"]
            amqp_broker.clock.advance(10)
            with pytest.raises(minibroker.NodeError):
                amqp_broker.publish("elsewhere", "x")
            conn = BlockingConnection(amqp_broker.url.replace("amqp://", "amqp://alice:secret@"), timeout=5)
            assert conn.conn.remote_container == "site-a"
            conn.close()

        @pytest.mark.amqp_broker(queues={"a": {}, "b": {"default_ttl": 5}})
        class TestClassMarker:
            @pytest.mark.amqp_broker(queues=["c"])
            def test_markers_add_up(self, amqp_broker):
                assert amqp_broker.queues() == ["a", "b", "c"]
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)


def test_an_unknown_marker_keyword_fails_listing_the_valid_ones(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.amqp_broker(queue=["orders"])
        def test_typo(amqp_broker):
            pass

        @pytest.mark.amqp_broker(queues=[("jobs", {"ttl": 5})])
        def test_bad_queue_option(amqp_broker):
            pass

        @pytest.mark.amqp_broker(clock="fast")
        def test_bad_clock(amqp_broker):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.amqp_broker: unknown keyword(s) queue; valid keywords are: clock, queues, topics, streams, faults, ssl_context, tls, "
            "exchanges, bindings, container_id, auto_create, *, frame_log, servicebus, rabbitmq, event_hubs",
            "*unknown option(s) ttl for queue 'jobs'; queue options are: priorities, default_ttl, *",
            "*clock='fast'; use one of 'system', 'manual'",
        ]
    )


def test_advancing_a_system_clock_names_the_fixtures_way_to_a_manual_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        def test_fixture(amqp_broker):
            with pytest.raises(TypeError) as raised:
                amqp_broker.clock.advance(31)
            print("FIXTURE:", raised.value)

        def test_factory(amqp_broker_factory):
            with pytest.raises(TypeError) as raised:
                amqp_broker_factory().clock.advance(31)
            print("FACTORY:", raised.value)
        """
    )
    result = pytester.runpytest("-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*FIXTURE: advance() needs a manual clock, and this broker reads SystemClock: mark the test "
            '@pytest.mark.amqp_broker(clock="manual") (or return {"clock": "manual"} from amqp_broker_config)',
            '*FACTORY: advance() needs a manual clock, and this broker reads SystemClock: start the broker with '
            'amqp_broker_factory(clock="manual")',
        ]
    )
    assert "ManualClock()" not in result.stdout.str()


def test_a_differing_configuration_gets_its_own_broker_and_the_default_one_is_kept(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        PORTS = {}

        def test_default_first(amqp_broker):
            PORTS["default"] = amqp_broker.port

        @pytest.mark.amqp_broker(max_message_size=1024)
        def test_limited(amqp_broker):
            PORTS["limited"] = amqp_broker.port
            assert amqp_broker.port != PORTS["default"]

        @pytest.mark.amqp_broker("only-queues-differ")
        def test_default_again(amqp_broker):
            assert amqp_broker.port == PORTS["default"]  # nodes are declared per test: same broker

        @pytest.mark.amqp_broker(users={"alice": "one"})
        def test_users(amqp_broker):
            PORTS["alice-one"] = amqp_broker.port
            assert amqp_broker.port != PORTS["default"]

        @pytest.mark.amqp_broker(users={"alice": "two"})
        def test_other_password(amqp_broker):
            assert amqp_broker.port != PORTS["alice-one"]  # passwords count, though no repr shows them
        """
    )
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=5)


def test_fresh_starts_a_broker_per_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        BROKERS = []

        @pytest.mark.parametrize("n", range(3))
        def test_each(amqp_broker, n):
            BROKERS.append(amqp_broker)
            assert all(not b.running for b in BROKERS[:-1])
        """
    )
    pytester.runpytest("--minibroker-fresh").assert_outcomes(passed=3)
    pytester.makeini("[pytest]\nminibroker_fresh = true\n")
    pytester.runpytest().assert_outcomes(passed=3)


def test_ini_keys_give_every_test_its_queues_topics_and_frame_log(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        """
        [pytest]
        minibroker_queues =
            orders
            invoices
        minibroker_topics = news
        minibroker_frame_log = 0
        """
    )
    pytester.makepyfile(
        """
        import pytest

        def test_ini(amqp_broker):
            assert amqp_broker.queues() == ["invoices", "orders"]
            assert amqp_broker.topics() == ["news"]
            with pytest.raises(RuntimeError, match="frame log is off"):
                amqp_broker.frames()
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_options_are_listed_in_one_minibroker_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "minibroker: the in-process AMQP 1.0 broker:",
            "*--minibroker-html=DIR*",
            "*--minibroker-fresh*",
            "*--minibroker-report-frames=N*",
        ]
    )
    result.stdout.fnmatch_lines(["*minibroker_frame_log*", "*minibroker_queues*"])


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.amqp_broker(*queues*clock='manual'*"])
