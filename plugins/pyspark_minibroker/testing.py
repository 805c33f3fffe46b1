"""Spark in tests and examples: :func:`local_session`, and a pytest plugin with a ``spark`` fixture.

:func:`local_session` (from :mod:`.session`) builds a ``local[2]`` session on 127.0.0.1 whose
workers run this interpreter, with ``amqp`` registered; it needs only the spark extra, so
``from pyspark_minibroker.testing import local_session`` works without pytest installed.

As a pytest plugin (``pytest -p pyspark_minibroker.testing``, or ``addopts``) it offers the
session-scoped ``spark`` fixture (one JVM for the run; skipped when pyspark is not installed)
and skips tests marked ``spark`` under pytest-xdist workers: run them in a serial call
(``pytest -m spark``).  Those hooks come from :mod:`.pytest_plugin` when pytest is importable.
"""

from __future__ import annotations

from .session import local_session

__all__ = ["local_session"]

try:
    from .pytest_plugin import pytest_collection_modifyitems, pytest_configure, spark
except ModuleNotFoundError as exc:
    # The spark extra installs no pytest, and the docs' example imports this module outside any test run.
    if exc.name != "pytest":
        raise
else:
    __all__ += ["pytest_collection_modifyitems", "pytest_configure", "spark"]
