"""Spark in tests: a local session, and a pytest plugin with a ``spark`` fixture.

:func:`local_session` avoids failures seen with PySpark 4 data sources: workers otherwise
run ``python3`` from PATH (not your virtualenv), and Spark otherwise binds the machine's
external interface.  It registers the ``amqp`` data source by hand, so it also works from a
source checkout or an editable install, which Spark's own lookup cannot see.

As a pytest plugin (``pytest -p pyspark_minibroker.testing``, or ``addopts``) it offers the
session-scoped ``spark`` fixture (one JVM for the run; skipped when pyspark is not installed)
and skips tests marked ``spark`` under pytest-xdist workers: run them in a serial call
(``pytest -m spark``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["local_session", "spark"]


def local_session(master: str = "local[2]", app_name: str = "minibroker-tests", **conf: str) -> Any:
    """``SparkSession.builder...getOrCreate()`` for tests; ``conf`` adds Spark settings."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from .source import AmqpDataSource

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.dataSource.register(AmqpDataSource)
    return session


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
