"""The cluster path on one machine: ``local-cluster[2,1,1024]`` (a Spark master, two worker JVMs with
one executor each, as with ``spark-submit --master spark://...``) writes to and reads from a broker.

Run by hand (about 1-2 minutes; not part of CI, which keeps to ``local[2]``)::

    python tests/spark/check_cluster.py

Executors are separate processes that unpickle the data source's readers and writers and open their
own connections to the broker, which is what a real cluster needs (executors must reach the broker).
"""

from __future__ import annotations

import time

from pyspark_minibroker.testing import local_session

from minibroker import ThreadedBroker


def main() -> None:
    started = time.monotonic()
    spark = local_session(master="local-cluster[2,1,1024]", **{"spark.executor.memory": "512m"})
    print(f"session on {spark.sparkContext.master} in {time.monotonic() - started:.1f} s", flush=True)
    try:
        with ThreadedBroker() as broker:
            rows = spark.range(200).selectExpr("concat('m', cast(id as string)) as body").repartition(4)
            rows.write.format("amqp").option("url", broker.url).option("address", "q").mode("append").save()
            assert broker.queue("q").depth == 200
            read = spark.read.format("amqp").option("url", broker.url).option("address", "q").load()
            assert read.count() == 200
            executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
            assert executors == 2, executors
    finally:
        spark.stop()
    print("local-cluster: 200 rows written from 4 partitions on 2 executors and read back")


if __name__ == "__main__":
    main()
