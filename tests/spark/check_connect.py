"""Run by hand: the ``amqp`` data source through Spark Connect (a local Connect server).

Needs the spark-connect extra (``pip install -e '.[spark-connect]'``: PySpark's ``connect`` client
packages, grpcio, pandas ...).  ``SparkSession.builder.remote("local[2]")`` starts a Connect server
in a local JVM; the source is registered from the client (``spark.dataSource.register``), which
sends the class to the server by value.  Writes 5 rows to a queue, reads them back in a batch
read, and copies a stream of 20 messages to a queue with an ``availableNow`` query.
"""

from __future__ import annotations

import os
import sys
import tempfile

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"

from pyspark.sql import SparkSession  # noqa: E402
from pyspark_minibroker import AmqpDataSource  # noqa: E402

from minibroker import ThreadedBroker  # noqa: E402


def main() -> None:
    # A Connect session takes no driver settings (the server owns them): SPARK_LOCAL_IP binds it.
    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    try:
        spark.dataSource.register(AmqpDataSource)
        with ThreadedBroker() as broker, tempfile.TemporaryDirectory() as checkpoint:
            df = spark.createDataFrame([(f"m{i}",) for i in range(5)], "body string")
            df.write.format("amqp").option("url", broker.url).option("address", "q").mode("append").save()
            assert broker.queue("q").depth == 5
            read = spark.read.format("amqp").option("url", broker.url).option("address", "q").load()
            texts = sorted(r.t for r in read.selectExpr("cast(body as string) as t").collect())
            assert texts == [f"m{i}" for i in range(5)], texts
            broker.declare_stream("events")
            broker.publish_many("events", [f"e{i}" for i in range(20)])
            source = spark.readStream.format("amqp").option("url", broker.url).option("address", "events").load()
            query = (
                source.select("body").writeStream.format("amqp").option("url", broker.url).option("address", "out")
                .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
            )  # fmt: skip
            try:
                assert query.awaitTermination(120), "the query did not finish within 120 s"
            finally:
                query.stop()
            assert broker.queue("out").depth == 20, broker.queue("out").depth
    finally:
        spark.stop()
    print("the amqp source read and wrote through Spark Connect")


if __name__ == "__main__":
    main()
