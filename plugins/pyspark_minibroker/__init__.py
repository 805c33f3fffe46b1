"""PySpark data source ``amqp`` for AMQP 1.0 queues (minibroker or any AMQP 1.0 broker).

Installed normally (``pip install '.[spark]'`` from a clone), Spark finds it by itself:
it imports top-level ``pyspark_*`` modules and registers their ``DefaultSource``::

    df = spark.read.format("amqp").option("url", url).option("address", "orders").load()

Registering by hand works everywhere (also from a source checkout or an editable install)::

    from pyspark_minibroker import AmqpDataSource
    spark.dataSource.register(AmqpDataSource)

Importing this package does not import pyspark; ``DefaultSource`` and
``AmqpDataSource`` are loaded on first use.

PYTEST_DONT_REWRITE: pytest leaves this package's asserts as they are (they are the package's
own invariants, not a test's); see ``pytest_minibroker.plugin._leave_unrewritten``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AmqpDataSource", "DefaultSource"]


def __getattr__(name: str) -> Any:
    if name in ("AmqpDataSource", "DefaultSource"):
        from .source import AmqpDataSource

        return AmqpDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
