"""bench/write_bench.py runs the Spark writer's _send_rows against a broker and reports both CPUs."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")  # the writer is the Spark source's (the spark extra)

from bench import write_bench  # noqa: E402 - after the skip


def test_a_small_write_reports_the_broker_and_the_writer_cpu_per_row() -> None:
    [result] = write_bench.measure(rows=200, repeats=1)  # raises unless every row reached the queue
    assert result["broker_us"] > 0 and result["writer_us"] > 0 and result["wall_s"] > 0
