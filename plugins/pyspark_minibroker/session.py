"""A local SparkSession for the ``amqp`` data source, importing nothing beyond the spark extra.

:func:`local_session` avoids failures seen with PySpark 4 data sources: workers otherwise
run ``python3`` from PATH (not your virtualenv), and Spark otherwise binds the machine's
external interface.  It registers the ``amqp`` data source by hand, so it also works from a
source checkout or an editable install, which Spark's own lookup cannot see.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["local_session"]


def local_session(master: str = "local[2]", app_name: str = "minibroker-tests", **conf: str) -> Any:
    """``SparkSession.builder...getOrCreate()`` on 127.0.0.1 with ``amqp`` registered; ``conf`` adds Spark settings."""
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
