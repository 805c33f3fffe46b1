"""The pytest side of :mod:`.testing`: the ``spark`` marker and the session-scoped ``spark`` fixture.

Imported by :mod:`.testing` only when pytest is installed (the spark extra does not install it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from .session import local_session

__all__ = ["pytest_collection_modifyitems", "pytest_configure", "spark"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: runs real PySpark (serially, never under pytest-xdist)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        skip = pytest.mark.skip(reason="Spark tests run serially, not under xdist: pytest -m spark")
        for item in items:
            if item.get_closest_marker("spark") is not None:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local SparkSession (``local[2]``) with the ``amqp`` data source registered."""
    pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install -e '.[spark]' in minibroker's clone")
    session = local_session()
    try:
        yield session
    finally:
        session.stop()
