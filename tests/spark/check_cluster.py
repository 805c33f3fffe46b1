"""The cluster path on one machine: ``local-cluster[2,1,1024]`` (a Spark master, two worker JVMs with
one executor each, as with ``spark-submit --master spark://...``) writes to and reads from a broker,
and the rows of one stream come from tasks on both executors.

Run by hand (about 1-2 minutes; not part of CI, which keeps to ``local[2]``)::

    python tests/spark/check_cluster.py

Executors are separate processes that unpickle the data source's readers and writers and open their
own connections to the broker, which is what a real cluster needs (executors must reach the broker).
Each row read from the stream is tagged with the process id of the executor JVM whose task read
it (the Python worker's nearest ``java`` ancestor), by a plain Python UDF in the same task.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import Counter

from pyspark_minibroker.testing import local_session

from minibroker import ThreadedBroker

ROWS = 4000
PER_PARTITION = 250  # 16 ranges: tasks on both executors


def executor_pid() -> int:
    """The pid of the executor JVM this Python worker serves (its nearest ``java`` ancestor)."""
    pid = os.getpid()
    while pid > 1:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        pid = int(fields[1])  # the parent
        with open(f"/proc/{pid}/comm") as comm:
            if comm.read().strip() == "java":
                return pid
    return -1


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
            print("200 rows written from 4 partitions on 2 executors and read back", flush=True)

            broker.declare_stream("events")
            broker.publish_many("events", [f"e{i}" for i in range(ROWS)])
            source = (spark.readStream.format("amqp").option("url", broker.url).option("address", "events")
                      .option("maxOffsetsPerPartition", str(PER_PARTITION)).load())  # fmt: skip
            from pyspark.sql.functions import udf

            executor = udf(executor_pid, "long", useArrow=False).asNondeterministic()  # no pandas needed
            tagged = source.select("body", executor().alias("executor"))
            with tempfile.TemporaryDirectory() as checkpoint:
                query = (tagged.writeStream.format("memory").queryName("tagged")
                         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())  # fmt: skip
                try:
                    assert query.awaitTermination(300), "the availableNow query did not finish"
                finally:
                    query.stop()
            got = spark.sql("select cast(body as string) as body, executor from tagged").collect()
            assert sorted(r.body for r in got) == sorted(f"e{i}" for i in range(ROWS)), "rows lost or repeated"
            by_executor = Counter(r.executor for r in got)
            print(f"stream of {ROWS} rows in {ROWS // PER_PARTITION} ranges, rows per executor JVM pid: "
                  f"{dict(by_executor)}", flush=True)  # fmt: skip
            assert len(by_executor) == 2 and -1 not in by_executor, by_executor
    finally:
        spark.stop()
    print(f"local-cluster checks passed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
