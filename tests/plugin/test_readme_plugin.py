"""The documentation's examples that use the pytest plugin run as a test suite, as a reader would
paste them: per page, its ``# conftest.py`` blocks as conftest.py and its fixture-using blocks, in
order, as one test file, with nothing else configured."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


def _suite(page: Path) -> tuple[list[str], list[str]]:
    """(conftest blocks, test blocks) of a page; blocks with a ``...`` placeholder are sketches."""
    blocks = [block for block in _blocks(page) if "..." not in block]
    conftest = [block for block in blocks if block.startswith("# conftest.py")]
    tests = [block for block in blocks if "amqp_broker" in block and block not in conftest]
    return conftest, tests


SUITES = [page for page in PAGES if any(_suite(page))]


def test_the_plugin_page_has_a_test_file_and_a_conftest() -> None:
    conftest, tests = _suite(ROOT / "docs" / "pytest-plugin.md")
    assert conftest and tests
    assert {page.name for page in SUITES} >= {"pytest-plugin.md", "faults.md", "servicebus.md"}


@pytest.mark.parametrize("page", SUITES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_plugin_examples_pass(pytester: pytest.Pytester, page: Path) -> None:
    conftest, tests = _suite(page)
    pytester.makeconftest("\n".join(conftest))
    pytester.makepyfile(**{f"test_{page.stem.replace('-', '_')}_examples": "\n\n".join(tests)})
    expected = sum(len(re.findall(r"^(?:async )?def test_", block, flags=re.M)) for block in tests)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=expected)


def test_the_quoted_fault_search_failure_is_what_hypothesis_prints(pytester: pytest.Pytester) -> None:
    """docs/faults.md quotes a shrunk plan as the installed Hypothesis prints it (the words changed
    in Hypothesis 6.159.0: "Falsifying example:" became "Failing test case:")."""
    text = (ROOT / "docs" / "faults.md").read_text()
    quote = text.split("the failure shows the shrunk plan", 1)[1].split("```\n", 2)[1].split("```", 1)[0]
    pytester.makepyfile(
        """
        from hypothesis import HealthCheck, given, settings
        from minibroker.testing import fault_plans

        @settings(max_examples=200, derandomize=True, database=None, deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(plan=fault_plans(addresses="orders"))
        def test_every_order_is_shipped(amqp_broker, plan):
            assert "release" not in repr(plan)  # shrinks to the smallest plan with a release
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    patterns = [line.replace("0x...", "0x*").replace("[", "[[]") for line in quote.splitlines()]
    result.stdout.fnmatch_lines(patterns)  # in order; the explain phase may add a comment line


def test_the_recommended_timeout_ends_a_hung_client_call(pytester: pytest.Pytester) -> None:
    """docs/pytest-plugin.md's pytest-timeout setting, as pasted (with a 2 s bound): a receive that
    never returns fails its test, and the next test still runs."""
    section = (ROOT / "docs" / "pytest-plugin.md").read_text().split("## Bounding test time", 1)[1]
    setting = section.split("```toml\n", 1)[1].split("```", 1)[0]
    assert re.search(r"^timeout = \d+$", setting, flags=re.M)
    # The 2 s bound covers the test calls only: on a loaded machine importing the client and
    # starting the broker in setup can take longer than that by itself, which is not what is tested.
    bounded = re.sub(r"^timeout = \d+$", "timeout = 2\ntimeout_func_only = true", setting, flags=re.M)
    pytester.makefile(".toml", pyproject=bounded)
    pytester.makepyfile(
        """
        from proton.utils import BlockingConnection

        def test_hangs(amqp_broker):
            BlockingConnection(amqp_broker.url).create_receiver("orders").receive()  # no timeout: forever

        def test_next(amqp_broker):
            amqp_broker.publish("orders", 1)
        """
    )
    # In a subprocess: pytest-timeout's alarm in this process would replace the outer run's own.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*Failed: Timeout*", "*test_hangs*"])
