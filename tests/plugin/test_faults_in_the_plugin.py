"""Faults through the pytest plugin: the marker declares them, teardown checks ``must_fire``."""

from __future__ import annotations

import pytest


def test_marker_faults_are_installed_fresh_for_each_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from proton import Message
        from proton.utils import BlockingConnection, SendException
        from minibroker.testing import faults

        pytestmark = pytest.mark.amqp_broker(faults=[faults.reject_publish(address="orders")])

        @pytest.mark.parametrize("run", [1, 2])
        def test_first_publish_is_rejected(amqp_broker, run):
            conn = BlockingConnection(amqp_broker.url, timeout=5)
            sender = conn.create_sender("orders")
            with pytest.raises(SendException):
                sender.send(Message(body="first"))
            sender.send(Message(body="second"))
            conn.close()
            [fault] = amqp_broker.faults
            assert fault.fired == 1  # a fresh copy each test: the first test's firing does not count
            assert amqp_broker.queue("orders").bodies == ["second"]
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)


def test_a_must_fire_fault_that_never_fired_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_never_reaches_the_fault(amqp_broker):
            amqp_broker.faults.detach_link(address="orderz", must_fire=True)
            amqp_broker.publish("orders", "x")
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*FaultNotFired: 1 fault(s) declared must_fire=True never fired:",
            "*faults.detach_link(address='orderz', must_fire=True): 0 matching event(s)",
        ]
    )


def test_the_marker_refuses_what_is_not_a_fault(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.amqp_broker(faults=["release"])
        def test_typo(amqp_broker):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*faults must be Fault objects, e.g. faults=?faults.release(address='jobs')?*got 'release'"])
