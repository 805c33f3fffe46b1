"""The fixtures in a real pytest run (pytester): reuse that a test cannot notice, errors re-raised,
the factory, the config fixture, restart, asyncio and trio tests."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def test_a_test_gets_a_running_broker_it_can_assert_on(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from proton import Message
        from proton.utils import BlockingConnection

        def test_publish(amqp_broker):
            conn = BlockingConnection(amqp_broker.url, timeout=5)
            conn.create_sender("orders").send(Message(body={"id": 1}))
            conn.close()
            amqp_broker.assert_queue("orders", bodies=[{"id": 1}])
            assert amqp_broker.url == f"amqp://127.0.0.1:{amqp_broker.port}"
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_the_reused_broker_looks_new_to_the_next_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from proton import Message
        from proton.utils import BlockingConnection

        PORTS = []

        @pytest.mark.parametrize("round", [1, 2, 3])
        def test_dirty_then_clean(amqp_broker, round):
            PORTS.append(amqp_broker.port)
            assert amqp_broker.queues() == [] and amqp_broker.topics() == []
            stats = amqp_broker.statistics()
            assert stats.connections == 0 and stats.connections_total == 0 and stats.nodes == {}
            assert amqp_broker.frames() == [] and amqp_broker.errors() == []
            # Leave everything dirty: nodes, messages, counters, frames, and a connection left open.
            amqp_broker.declare_topic("news")
            conn = BlockingConnection(amqp_broker.url, timeout=5)
            conn.create_sender("orders").send(Message(body=round))
            amqp_broker.publish("other", "x")
            assert amqp_broker.statistics().connections == 1

        def test_one_broker_served_them_all():
            assert len(set(PORTS)) == 1, PORTS
        """
    )
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=4)


def test_the_manual_clock_starts_again_for_each_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.amqp_broker(clock="manual")
        @pytest.mark.parametrize("round", [1, 2])
        def test_clock(amqp_broker, round):
            assert amqp_broker.clock.now() == 1_700_000_000.0
            amqp_broker.clock.advance(60)
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)


def test_an_error_inside_the_broker_fails_the_test_with_its_traceback(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        def pytest_minibroker_message(broker, address, message):
            if address == "boom":
                explode(message)

        def explode(message):
            raise ZeroDivisionError(f"cannot route {message.body!r}")
        """
    )
    pytester.makepyfile(
        """
        from proton import Message
        from proton.utils import BlockingConnection

        def test_boom(amqp_broker):
            conn = BlockingConnection(amqp_broker.url, timeout=5)
            try:
                conn.create_sender("boom").send(Message(body="payload"))
            except Exception:
                pass  # the broker closed this connection with amqp:internal-error

        def test_next_is_clean(amqp_broker):
            assert amqp_broker.errors() == []
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_boom*",
            "*def explode(message):*",
            "*ZeroDivisionError: cannot route 'payload'",
            "*raised inside the amqp_broker broker*amqp:internal-error*",
        ]
    )


@pytest.mark.amqp_broker("outer")
def test_each_test_gets_its_own_marker_also_asked_mid_test_and_in_a_run_inside_a_test(
    amqp_broker: object, pytester: pytest.Pytester
) -> None:
    """``amqp_broker`` knows its test without pytest's ``request`` (the plugin notes the test at
    setup): a fixture asked for in the middle of a test, and a pytest run inside a test (its own
    plugin state on top), each read the marker of their own test; the outer broker is untouched."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.amqp_broker("first")
        def test_first(amqp_broker):
            assert set(amqp_broker.statistics().nodes) == {"first"}

        @pytest.mark.amqp_broker("second")
        def test_second(request):
            broker = request.getfixturevalue("amqp_broker")
            assert set(broker.statistics().nodes) == {"second"}

        def test_plain(amqp_broker):
            assert amqp_broker.statistics().nodes == {}
        """
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=3)
    assert set(amqp_broker.statistics().nodes) == {"outer"}  # type: ignore[attr-defined]


def test_the_config_fixture_sets_defaults_for_every_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def amqp_broker_config():
            return {"queues": ["orders", ("jobs", {"max_delivery_count": 2})], "topics": ["news"],
                    "auto_create": False, "clock": "manual"}
        """
    )
    pytester.makepyfile(
        """
        import pytest
        import minibroker

        def test_defaults(amqp_broker):
            assert amqp_broker.queues() == ["jobs", "orders"]
            assert amqp_broker.topics() == ["news"]
            with pytest.raises(minibroker.NodeError):
                amqp_broker.publish("unknown", "x")
            amqp_broker.clock.advance(1)  # manual

        @pytest.mark.amqp_broker(queues=["extra"], auto_create=True)
        def test_marker_adds_to_and_overrides_defaults(amqp_broker):
            assert amqp_broker.queues() == ["extra", "jobs", "orders"]
            amqp_broker.publish("unknown", "x")
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)


def test_the_default_config_is_set_up_once_and_read_only(pytester: pytest.Pytester) -> None:
    """The plugin's own ``amqp_broker_config`` is session-scoped (pytest does not set it up per
    test), so it is read-only: a test that wrote to it would configure the tests after it.  An
    override that builds on it (``{**amqp_broker_config, ...}``) still works."""
    pytester.makepyfile(
        """
        import pytest

        def test_scope(request):
            assert request._fixturemanager.getfixturedefs("amqp_broker_config", request.node)[-1].scope == "session"

        def test_read_only(amqp_broker_config, amqp_broker):
            assert amqp_broker_config == {}
            with pytest.raises(TypeError):
                amqp_broker_config["queues"] = ["leak"]

        class TestOverride:
            @pytest.fixture
            def amqp_broker_config(self, amqp_broker_config):
                return {**amqp_broker_config, "queues": ["mine"]}

            def test_builds_on_the_default(self, amqp_broker):
                assert amqp_broker.queues() == ["mine"]

        def test_after(amqp_broker):
            assert amqp_broker.queues() == []
        """
    )
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=4)


def test_the_config_fixture_must_return_a_dict(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def amqp_broker_config():
            return ["orders"]
        """
    )
    pytester.makepyfile("def test_x(amqp_broker):\n    pass\n")
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*amqp_broker_config fixture must return a dict*"])
    assert result.ret != 0


def test_the_factory_starts_more_brokers_with_options(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import minibroker

        SEEN = []

        def test_two_sites(amqp_broker, amqp_broker_factory):
            east = amqp_broker_factory("orders", auto_create=False)
            west = amqp_broker_factory(queues={"orders": {"max_delivery_count": 1}}, clock="manual")
            assert len({amqp_broker.port, east.port, west.port}) == 3
            assert east.queues() == ["orders"] and west.queues() == ["orders"]
            with pytest.raises(minibroker.NodeError):
                east.publish("elsewhere", "x")
            west.clock.advance(1)
            SEEN.extend([east, west])

        def test_factory_brokers_are_stopped_afterwards():
            assert SEEN and not any(broker.running for broker in SEEN)

        def test_factory_refuses_unknown_options(amqp_broker_factory):
            amqp_broker_factory(colour="red")
        """
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*amqp_broker_factory(...): unknown keyword(s) colour; valid keywords are: clock, queues, topics,*"])


def test_restart_through_the_fixture_keeps_durable_messages(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_restart(amqp_broker):
            port = amqp_broker.port
            amqp_broker.publish("jobs", "kept", durable=True)
            amqp_broker.publish("jobs", "lost")
            amqp_broker.restart()
            assert amqp_broker.port == port
            amqp_broker.assert_queue("jobs", bodies=["kept"])
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_asyncio_tests_wait_without_blocking_their_loop(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import asyncio
        import pytest

        def test_wait_for_async(amqp_broker):
            async def main():
                seen = asyncio.Event()

                async def connect():
                    reader, writer = await asyncio.open_connection("127.0.0.1", amqp_broker.port)
                    await seen.wait()  # connected until the broker has been seen counting it
                    writer.close()
                client = asyncio.create_task(connect())
                # The client task only runs if this wait leaves the loop free.
                await amqp_broker.wait_for_async(lambda b: b.statistics().connections == 1, timeout=5)
                seen.set()
                await client

            asyncio.run(main())

        def test_blocking_wait_in_a_loop_says_what_to_do(amqp_broker):
            async def main():
                amqp_broker.wait_for(lambda b: True)

            with pytest.raises(RuntimeError, match="await broker.wait_for_async"):
                asyncio.run(main())
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)


def test_trio_tests_get_a_broker_in_their_own_run_driven_by_the_mock_clock(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import trio

        @pytest.mark.trio
        async def test_ttl_on_trio_time(amqp_broker_trio, autojump_clock):
            amqp_broker_trio.declare_queue("jobs", dead_letter_on_expiry=True)
            amqp_broker_trio.publish("jobs", "stale soon", ttl=30)
            await trio.sleep(29)
            assert amqp_broker_trio.queue("jobs").depth == 1
            await trio.sleep(2)  # jumps at once: the broker's timer fires on trio's clock
            assert amqp_broker_trio.queue("jobs").depth == 0
            assert amqp_broker_trio.queue("jobs/$DeadLetterQueue").bodies == ["stale soon"]

        @pytest.mark.trio
        @pytest.mark.amqp_broker("orders")
        async def test_marker_and_async_wait(amqp_broker_trio):
            stream = await trio.open_tcp_stream("127.0.0.1", amqp_broker_trio.port)
            await amqp_broker_trio.wait_for(lambda b: b.statistics().connections == 1)
            assert amqp_broker_trio.queues() == ["orders"]
            await stream.aclose()

        @pytest.mark.trio
        async def test_threaded_broker_in_a_trio_test(amqp_broker):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.open_tcp_stream, "127.0.0.1", amqp_broker.port)
                await amqp_broker.wait_for_async(lambda b: b.statistics().connections_total == 1)
        """
    )
    pytester.runpytest().assert_outcomes(passed=3)


def test_the_threaded_handle_works_from_a_trio_test(pytester: pytest.Pytester) -> None:
    # trio.from_thread refuses any caller inside a trio run; a trio test's run is not the broker's.
    pytester.makepyfile(
        """
        import pytest
        import trio
        from minibroker import Client
        from minibroker.testing import faults

        @pytest.mark.trio
        @pytest.mark.amqp_broker(queues=[("jobs", {"dead_letter_on_expiry": True})], clock="manual")
        async def test_every_call(amqp_broker):
            amqp_broker.publish("jobs", "soon stale", ttl=30)
            amqp_broker.publish_many("orders", [1, 2])
            assert amqp_broker.queue("orders").bodies == [1, 2]
            amqp_broker.assert_queue("orders", bodies=[1, 2])
            assert amqp_broker.statistics().nodes["orders"].enqueued == 2
            amqp_broker.clock.advance(31)
            amqp_broker.assert_queue("jobs/$DeadLetterQueue", bodies=["soon stale"])
            amqp_broker.faults.add(faults.release(address="nowhere"))
            assert amqp_broker.purge("orders") == 2

            def send():  # a blocking client in a worker thread, the test's run waiting for it
                with Client(amqp_broker.url, timeout=5) as client, client.sender("orders") as sender:
                    sender.send("from a client")

            await trio.to_thread.run_sync(send)
            await amqp_broker.wait_for_async(lambda b: b.queue("orders").depth == 1)
            amqp_broker.restart()
            amqp_broker.assert_queue("orders", bodies=[])  # not durable: lost in the crash
            amqp_broker.reset()
            assert amqp_broker.queues() == []

        @pytest.mark.trio
        async def test_a_client_in_the_same_run_keeps_working(amqp_broker):
            stream = await trio.open_tcp_stream("127.0.0.1", amqp_broker.port)
            await stream.send_all(b"AMQP\\x00\\x01\\x00\\x00")
            assert await stream.receive_some(8) == b"AMQP\\x00\\x01\\x00\\x00"
            assert amqp_broker.statistics().connections == 1
            amqp_broker.restart()
            assert await stream.receive_some(1) == b""  # dropped by the restart
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)


def test_the_threaded_handle_works_from_an_asyncio_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import asyncio
        import pytest

        @pytest.mark.amqp_broker(clock="manual")
        def test_every_call(amqp_broker):
            async def main():
                amqp_broker.publish("jobs", "soon stale", ttl=30)
                amqp_broker.assert_queue("jobs", bodies=["soon stale"])
                assert amqp_broker.queue("jobs").messages[0].body == "soon stale"
                amqp_broker.clock.advance(31)
                amqp_broker.assert_queue("jobs", bodies=[])
                reader, writer = await asyncio.open_connection("127.0.0.1", amqp_broker.port)
                await amqp_broker.wait_for_async(lambda b: b.statistics().connections == 1)
                amqp_broker.restart()
                assert await reader.read(1) == b""  # dropped by the restart
                writer.close()

            asyncio.run(main())
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)
