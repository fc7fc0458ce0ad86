"""Earlier successful runs of one cluster in OUT, as the over-time checks read them
(SPEC 5, "Over time"): one aggregate per partition, and a loader of single days' rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from pyspark.sql import DataFrame, SparkSession

from auditor.columns import col
from auditor.sinks.delta import read_rows, table_path
from auditor.sinks.schemas import OUTPUT_TABLES


@dataclass(frozen=True)
class History:
    """Earlier successful runs of one cluster in OUT, read narrowly.

    Args:
        observations: ``partition_status`` of those runs (``run_id, snapshot, topic,
            partition, leader, leader_epoch, max_high_watermark``) plus the run's
            ``started_at`` (ties between runs that saw the same snapshot).
        load: ``load(table, days)`` returns that table's rows of those runs whose ``day`` is
            one of ``days`` (Delta partition pruning).
    """

    observations: DataFrame
    load: Callable[[str, list[date]], DataFrame | None]


def read_history(spark: SparkSession, out: str, cluster: str, run_id: str) -> History | None:
    """What OUT holds about ``cluster`` from other runs that SUCCEEDED (SPEC 5, over time),
    or None when there is none."""
    from pyspark.sql import functions as F


    runs = read_rows(spark, table_path(out, "runs"), OUTPUT_TABLES["runs"], cluster)
    if runs is None:
        return None
    ok = (runs.filter((col("status") == "SUCCEEDED") & (col("run_id") != run_id))
          .groupBy("run_id").agg(F.max("started_at").alias("started_at")))
    ps = read_rows(spark, table_path(out, "partition_status"), OUTPUT_TABLES["partition_status"], cluster)
    if ps is None:
        return None
    observations = ps.join(F.broadcast(ok), "run_id").select(
        "run_id", "snapshot", "topic", "partition", "leader", "leader_epoch", "max_high_watermark", "started_at")

    def load(name: str, days: list[date]) -> DataFrame | None:
        df = read_rows(spark, table_path(out, name), OUTPUT_TABLES[name], cluster, days)
        return None if df is None else df.join(F.broadcast(ok.select("run_id")), "run_id", "left_semi")

    return History(observations, load)
