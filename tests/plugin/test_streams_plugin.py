"""Streams in the pytest plugin: the ``streams=`` keyword, the failure report and the HTML picture."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_the_marker_and_config_declare_streams(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def amqp_broker_config():
            return {"streams": ["audit"]}
        """
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.amqp_broker(streams=["events", ("recent", {"max_age": 60})], clock="manual")
        def test_marked(amqp_broker):
            assert amqp_broker.streams() == ["audit", "events", "recent"]
            amqp_broker.publish("recent", "x")
            amqp_broker.clock.advance(60)
            amqp_broker.assert_stream("recent", [], first_offset=1)

        @pytest.mark.amqp_broker(streams=[("bad", {"max_size": 1})])
        def test_bad_option(amqp_broker):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*unknown option(s) max_size for stream 'bad'; stream options are: max_bytes, max_age*"])


FAILING = """
import pytest

@pytest.mark.amqp_broker(streams=["events"])
def test_events(amqp_broker):
    amqp_broker.publish_many("events", [f"event {i}" for i in range(30)])
    amqp_broker.assert_stream("events", count=31)
"""


def test_a_failing_test_shows_the_newest_messages_of_its_streams(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(FAILING)
    out_dir = tmp_path / "pictures"
    result = pytester.runpytest(f"--minibroker-html={out_dir}")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "StreamMismatch: stream 'events' has count 30, expected 31: it holds 30 message(s) at offsets 0..29" in out
    assert "stream events: 30 message(s) at offsets 0..29, the newest 20:\n    @10 'event 10'\n" in out
    assert "    @29 'event 29'" in out and "@9 'event 9'" not in out
    (page,) = out_dir.glob("*.html")
    assert "stream events: 30 message(s) at offsets 0..29" in page.read_text()
