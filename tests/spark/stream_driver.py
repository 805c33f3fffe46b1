"""A Spark driver for the crash tests: a streaming query from a stream into a JSON file sink, or
into a queue of the same broker.

``python stream_driver.py URL ADDRESS SINK CHECKPOINT MODE``: ``MODE`` ``slow`` runs micro-batches
of 50 offsets every 0.5 s until killed; ``finish`` runs ``availableNow`` from the same checkpoint
and exits when done.  ``SINK`` is a directory (Spark's file sink and checkpoint make the output
exactly-once) or ``amqp:QUEUE`` (the amqp sink: a replayed batch is sent again under the same
message-ids, which a queue with ``duplicate_window`` drops).
"""

from __future__ import annotations

import sys

from pyspark_minibroker.testing import local_session


def main(url: str, address: str, sink: str, checkpoint: str, mode: str) -> None:
    spark = local_session(app_name="minibroker-crash-test")
    source = (
        spark.readStream.format("amqp").option("url", url).option("address", address)
        .option("maxOffsetsPerTrigger", "50").option("maxOffsetsPerPartition", "25").load()
    )  # fmt: skip
    if sink.startswith("amqp:"):
        writer = source.select("body").writeStream.format("amqp").option("url", url).option("address", sink[5:])
    else:
        writer = source.selectExpr("cast(body as string) as id").writeStream.format("json").option("path", sink)
    writer = writer.option("checkpointLocation", checkpoint)
    if mode == "slow":
        query = writer.trigger(processingTime="500 milliseconds").start()
        print("started", flush=True)
        query.awaitTermination()  # until killed
    else:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination(300)
        query.stop()
        print("finished", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
