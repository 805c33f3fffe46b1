"""The Python examples of the README and of every docs/ page run as written."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import minibroker

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: The front page, then every page of the documentation site (mkdocs.yml), in a stable order.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


# Blocks that use the pytest fixture run as a test suite in tests/plugin/test_readme_plugin.py.
RUNNABLE = [
    (page, index, block)
    for page in PAGES
    for index, block in enumerate(python_blocks(page.read_text()))
    if "..." not in block and "amqp_broker" not in block
]


def test_readme_has_runnable_examples() -> None:
    assert sum(1 for page, _, _ in RUNNABLE if page == README) >= 1
    assert len(RUNNABLE) >= 5


def _example(page: Path, index: int, block: str) -> Any:
    """A Spark example runs with the Spark tests (serially, never under xdist; skipped without pyspark)."""
    marks = [pytest.mark.spark, pytest.mark.timeout(300)] if "pyspark" in block else []
    return pytest.param(page, index, block, marks=marks, id=f"{page_id(page)}-{index}")


@pytest.mark.parametrize(("page", "index", "block"), [_example(*example) for example in RUNNABLE])
def test_readme_example_runs(page: Any, index: int, block: str) -> None:
    if "pyspark" in block:
        pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install -e '.[spark]'")
    namespace: dict[str, Any] = {}
    exec(compile(block, str(page), "exec"), namespace)
    for name, value in namespace.items():
        if name.startswith("test_") and callable(value):
            if "amqp_broker" in inspect.signature(value).parameters:  # the pytest plugin's fixture
                with minibroker.ThreadedBroker() as broker:
                    value(amqp_broker=broker)
            else:
                value()


#: Characters of a code line the docs site shows without scrolling sideways on a 1,400 px window,
#: with a margin (docs/stylesheets/extra.css widens a code block there to 944 px, about 110).
CODE_COLUMNS = 100


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_python_examples_fit_the_content_column(page: Any) -> None:
    """A pasted example is read on the site first: no line of it hides past the column's edge."""
    long = [line for block in python_blocks(page.read_text()) for line in block.splitlines() if len(line) > CODE_COLUMNS]
    assert not long, f"{page_id(page)}: lines over {CODE_COLUMNS} characters scroll sideways on the site: {long}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_relative_links_name_existing_files(page: Any) -> None:
    """The README's links into docs/ (which the site build does not see) and every page's links to
    files of the repository point at files that exist."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (page.parent / target).resolve().exists(), f"{page_id(page)} links to missing {target}"
    assert ROOT.exists()


def test_install_instructions_agree_and_need_no_package_index() -> None:
    """minibroker is installed from a clone: no page may tell a user to install it by name from an
    index, and the Install section gives the first set-up command's install."""
    for page in PAGES:
        assert "install 'minibroker[" not in page.read_text(), f"{page_id(page)} installs minibroker from an index"
    readme = README.read_text()
    setup = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "pip install -e . &&" in setup and "`pip install -e .`" in install
