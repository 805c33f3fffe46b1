"""Run with a NORMAL (non-editable) install of minibroker[spark]: Spark must find ``format("amqp")``
by itself (top-level ``pyspark_minibroker`` with ``DefaultSource``), with no register call.

CI builds a wheel, installs it with the spark extra into a fresh virtualenv and runs this file.
"""

from __future__ import annotations

import os
import sys
import sysconfig

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"

import pyspark_minibroker  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from minibroker import ThreadedBroker  # noqa: E402


def main() -> None:
    site = sysconfig.get_paths()["purelib"]
    where = os.path.dirname(pyspark_minibroker.__file__)
    assert where.startswith(site), f"pyspark_minibroker comes from {where}, not an installed copy in {site}"
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        with ThreadedBroker() as broker:
            df = spark.createDataFrame([(f"m{i}",) for i in range(5)], "body string")
            df.write.format("amqp").option("url", broker.url).option("address", "q").mode("append").save()
            assert broker.queue("q").depth == 5
            read = spark.read.format("amqp").option("url", broker.url).option("address", "q").load()
            texts = sorted(r.t for r in read.selectExpr("cast(body as string) as t").collect())
            assert texts == [f"m{i}" for i in range(5)], texts
    finally:
        spark.stop()
    print(f"format('amqp') found without registering, from {where}")


if __name__ == "__main__":
    main()
