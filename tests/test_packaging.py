"""What the wheel installs: pyproject.toml's package discovery, checked without building."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def discovered() -> set[str]:
    """The packages setuptools finds with pyproject.toml's ``[tool.setuptools.packages.find]``
    (its ``namespaces`` key defaults to true there, so directories without ``__init__.py`` count)."""
    setuptools = pytest.importorskip("setuptools")
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    finder = setuptools.find_namespace_packages if find.get("namespaces", True) else setuptools.find_packages
    found: set[str] = set()
    for where in find["where"]:
        found |= set(finder(where=str(ROOT / where), include=find.get("include", ["*"]), exclude=find.get("exclude", ())))
    return found


def test_the_wheel_installs_only_our_three_top_level_packages() -> None:
    packages = discovered()
    assert {name.split(".")[0] for name in packages} == {"minibroker", "pyspark_minibroker", "pytest_minibroker"}
    # Spark finds the data source only as a top-level module, and the plugins/ directory that holds
    # it in the source tree must not become a package of its own.
    assert "pyspark_minibroker" in packages and "minibroker.broker" in packages
