"""What the wheel installs: pyproject.toml's package discovery, checked without building."""

from __future__ import annotations

import subprocess
import sys
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


def test_the_spark_helpers_import_without_pytest() -> None:
    """The docs' example (``from pyspark_minibroker.testing import local_session``) runs after
    ``pip install -e '.[spark]'``, which installs no pytest."""
    script = (
        "import sys; sys.modules['pytest'] = None\n"  # what an environment without pytest gives: ImportError
        "from pyspark_minibroker.testing import local_session\n"
        "import pyspark_minibroker.testing as t\n"
        "assert callable(local_session) and not hasattr(t, 'spark'), sorted(vars(t))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
