"""The marker's RabbitMQ keywords (``exchanges=``, ``bindings=``) and exchanges in the failure report."""

from __future__ import annotations

from pathlib import Path

import pytest

ROUTING = """
from pathlib import Path

import pytest

pytestmark = pytest.mark.amqp_broker(
    queues=["all", "errors"],
    exchanges=[("logs", "topic"), ("audit", {"type": "fanout"})],
    bindings=[("logs", "all", "#"), ("logs", "errors", "*.error"), {"source": "logs", "exchange": "audit", "key": "#"}],
)

def test_topic_routing(amqp_broker):
    assert amqp_broker.exchange("logs").type == "topic"
    assert [b.destination for b in amqp_broker.exchange("logs").bindings] == ["all", "errors", "audit"]
    amqp_broker.publish("/exchanges/logs/kern.error", "disk full")
    amqp_broker.publish("/exchanges/logs/kern.info", "booted")
    amqp_broker.assert_queue("all", ["disk full", "booted"])
    amqp_broker.assert_queue("errors", ["disk full"])

def test_the_next_test_starts_from_the_marker_again(amqp_broker):
    assert amqp_broker.queue("all").depth == 0
    assert amqp_broker.exchange("logs").published == 0

def test_failing_shows_exchanges(amqp_broker):
    amqp_broker.publish("/exchanges/logs/app.warn", "slow")
    amqp_broker.publish("/exchanges/audit/x", "nobody")
    amqp_broker.assert_queue("errors", ["slow"])
"""


def test_exchanges_and_bindings_keywords(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(ROUTING)
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    section = out[out.index("minibroker: amqp_broker (call)") :]
    assert "exchanges (RabbitMQ):" in section
    assert "'logs' topic: 1 published" in section
    assert "-> queue 'errors' key '*.error'" in section
    assert "-> exchange 'audit' key '#'" in section
    assert "'audit' fanout: 1 published, 1 unroutable" in section


def test_a_bad_binding_entry_says_the_forms(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.amqp_broker(bindings=[("logs",)])
        def test_it(amqp_broker):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*bindings entries are (exchange, queue) or (exchange, queue, key) tuples*"])


def test_the_picture_names_the_exchange_and_key(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.amqp_broker(queues=["errors"], exchanges=[("logs", "topic")], bindings=[("logs", "errors", "*.error")])
        def test_routed(amqp_broker):
            amqp_broker.publish("/exchanges/logs/kern.error", "disk full")
            assert amqp_broker.queue("errors").depth == 2
        """
    )
    result = pytester.runpytest(f"--minibroker-html={tmp_path}")
    result.assert_outcomes(failed=1)
    (page,) = tmp_path.glob("*.html")
    assert "routed to errors: (exchange &#x27;logs&#x27;, key &#x27;kern.error&#x27;) &#x27;disk full&#x27;" in page.read_text()
