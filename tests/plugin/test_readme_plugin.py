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
