"""The "pytest plugin" page's examples run as a test suite: its conftest block as conftest.py,
its test blocks as test files, with nothing else configured."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "pytest-plugin.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_section_has_a_test_file_and_a_conftest() -> None:
    assert any(block.startswith("# conftest.py") for block in BLOCKS)
    assert any("def test_" in block for block in BLOCKS)


def test_readme_plugin_examples_pass(pytester: pytest.Pytester) -> None:
    conftest = [block for block in BLOCKS if block.startswith("# conftest.py")]
    tests = [block for block in BLOCKS if "def test_" in block]
    pytester.makeconftest("\n".join(conftest))
    pytester.makepyfile(**{f"test_readme_{index}": block for index, block in enumerate(tests)})
    expected = sum(block.count("\ndef test_") for block in tests)
    result = pytester.runpytest()
    result.assert_outcomes(passed=expected)
