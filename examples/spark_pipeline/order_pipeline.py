"""An order pipeline on Spark: orders arrive on an AMQP queue as JSON, a streaming job parses and
validates them, totals each order over its lines, and writes one result per order to a results
queue; rows that fail parsing or validation go to a dead-letter address with the reason.

    spark-submit order_pipeline.py amqp://broker:5672 /checkpoints/orders

The job is a Structured Streaming query with the ``amqp`` data source on both ends, run with
``trigger(availableNow=True)``: it drains what is queued and stops; run it again (same
checkpoint) for what arrived since.  If a run fails (a rejected publish, a lost broker), running it
again from the checkpoint replays the unfinished micro-batch; results carry deterministic
message-ids (``total-<order_id>``, ``invalid-<source message-id>``), so a consumer drops repeats.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

__all__ = ["ORDER_SCHEMA", "Addresses", "process_batch", "run", "run_until_done"]

#: One order: ``{"order_id": "o-1", "customer": "acme", "lines": [{"sku": "x", "qty": 2, "price": 1.5}]}``
ORDER_SCHEMA = (
    "order_id string, customer string, lines array<struct<sku: string, qty: int, price: double>>"
)


@dataclass(frozen=True)
class Addresses:
    orders: str = "orders"
    results: str = "order-totals"
    dead_letter: str = "orders-invalid"


def _validated(raw: DataFrame) -> DataFrame:
    """Each source message with its parsed order and, when it is invalid, the reason."""
    text = raw.select(F.col("body").cast("string").alias("text"), "message_id")
    # from_json turns malformed text into a row of nulls; try_parse_json tells it apart (NULL).
    parsed = text.withColumn("order", F.from_json("text", ORDER_SCHEMA)).withColumn(
        "json_ok", F.expr("try_parse_json(text)").isNotNull()
    )
    bad_line = F.exists(
        F.coalesce(F.col("order.lines"), F.array()),
        lambda line: line.qty.isNull() | (line.qty <= 0) | line.price.isNull() | (line.price < 0),
    )
    reason = (
        F.when(~F.col("json_ok") | F.col("order").isNull(), F.lit("not a JSON order"))
        .when(F.col("order.order_id").isNull(), F.lit("missing order_id"))
        .when(F.col("order.customer").isNull(), F.lit("missing customer"))
        .when(F.coalesce(F.size("order.lines"), F.lit(0)) <= 0, F.lit("no lines"))
        .when(bad_line, F.lit("a line has a missing or non-positive quantity or a negative price"))
    )
    return parsed.withColumn("error", reason)


def _results(valid: DataFrame) -> DataFrame:
    """One result per order: its customer, line count, units and total (rounded to cents)."""
    lines = valid.select("order.order_id", "order.customer", F.explode("order.lines").alias("line"))
    totals = lines.groupBy("order_id", "customer").agg(
        F.count("*").alias("lines"),
        F.sum("line.qty").alias("units"),
        F.round(F.sum(F.col("line.qty") * F.col("line.price")), 2).alias("total"),
    )
    return totals.select(
        F.to_json(F.struct("order_id", "customer", "lines", "units", "total")).alias("body"),
        F.concat(F.lit("total-"), "order_id").alias("message_id"),
        F.lit("order-total").alias("subject"),
        F.create_map(F.lit("customer"), F.col("customer")).alias("application_properties"),
    )


def _dead_letters(invalid: DataFrame) -> DataFrame:
    return invalid.select(
        F.coalesce(F.col("text"), F.lit("")).alias("body"),
        F.concat(F.lit("invalid-"), F.coalesce("message_id", F.sha2(F.coalesce("text", F.lit("")), 256))).alias(
            "message_id"
        ),
        F.lit("invalid-order").alias("subject"),
        F.create_map(F.lit("error"), F.col("error")).alias("application_properties"),
    )


def process_batch(batch: DataFrame, url: str, addresses: Addresses) -> None:
    """Validate one micro-batch, write its results and its dead letters (both wait for acceptance)."""
    checked = _validated(batch).persist()
    try:
        for frame, address in (
            (_results(checked.where("error IS NULL")), addresses.results),
            (_dead_letters(checked.where("error IS NOT NULL")), addresses.dead_letter),
        ):
            frame.write.format("amqp").option("url", url).option("address", address).mode("append").save()
    finally:
        checked.unpersist()


def run(spark: SparkSession, url: str, checkpoint: str, addresses: Addresses = Addresses(),
        max_batch: int = 1000, timeout: float = 300) -> None:
    """One availableNow run: every queued order, in micro-batches of ``max_batch``; raises if it fails."""
    orders = (
        spark.readStream.format("amqp").option("url", url).option("address", addresses.orders)
        .option("maxBatch", str(max_batch)).load()
    )  # fmt: skip

    def each(batch: DataFrame, batch_id: int) -> None:
        process_batch(batch, url, addresses)

    query = (
        orders.writeStream.foreachBatch(each).option("checkpointLocation", checkpoint)
        .trigger(availableNow=True).start()
    )  # fmt: skip
    try:
        finished = query.awaitTermination(timeout)
    except Exception as exc:  # the query failed: awaitTermination re-raises its exception
        raise RuntimeError(f"the order pipeline failed: {exc}") from exc
    finally:
        query.stop()
    if not finished:
        raise TimeoutError(f"the order pipeline did not finish within {timeout} s")


def run_until_done(spark: SparkSession, url: str, checkpoint: str, addresses: Addresses = Addresses(),
                   max_batch: int = 1000, attempts: int = 3) -> int:
    """:func:`run`, restarted from the checkpoint after a failure (what a scheduler would do);
    returns how many runs it took."""
    for attempt in range(1, attempts + 1):
        try:
            run(spark, url, checkpoint, addresses, max_batch)
            return attempt
        except RuntimeError:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


if __name__ == "__main__":  # pragma: no cover - spark-submit entry point
    broker_url, checkpoint_dir = sys.argv[1], sys.argv[2]
    run(SparkSession.builder.appName("order-pipeline").getOrCreate(), broker_url, checkpoint_dir)
