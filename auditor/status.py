"""Per-replica and per-partition status rows (SPEC 6.1 ``replica_status``, ``partition_status``)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

REPLICA = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]


def replica_facts(replicas: DataFrame, offsets: DataFrame, hwm: DataFrame, latest: DataFrame,
                  metadata: DataFrame) -> DataFrame:
    """Everything known about each replica before leader-against-follower checks.

    Returns:
        One row per replica holding data: offsets, HWM, latest epoch, counts, and from the
        metadata (when present) ``meta_leader``, ``in_isr``, ``in_elr`` and ``role``.
    """
    meta = metadata.select(*PARTITION, F.col("leader").alias("meta_leader"), "isr", "elr", "has_elr")
    return (
        replicas.join(offsets, REPLICA, "left")
        .join(hwm, REPLICA, "left")
        .join(latest, REPLICA, "left")
        .join(meta, PARTITION, "left")
        .select(
            *REPLICA, "log_dir", "has_dump", "has_epoch_file", "epoch_file_usable",
            "log_start_offset", "log_end_offset", "high_watermark", "latest_epoch",
            F.coalesce(F.col("batch_count"), F.lit(0)).alias("batch_count"),
            F.coalesce(F.col("record_count"), F.lit(0)).alias("record_count"),
            "meta_leader",
            F.when(F.col("isr").isNotNull(), F.array_contains("isr", F.col("replica"))).alias("in_isr"),
            F.when(F.col("has_elr"), F.array_contains("elr", F.col("replica"))).alias("in_elr"),
            F.when(F.col("meta_leader").isNull(), F.lit(None))
            .when(F.col("meta_leader") == F.col("replica"), F.lit("leader"))
            .otherwise(F.lit("follower")).alias("role"),
        )
    )


def partition_status(facts: DataFrame, leaders: DataFrame, findings: DataFrame) -> DataFrame:
    """``partition_status`` per partition holding data."""
    leader = facts.filter(F.col("role") == "leader").select(
        *PARTITION, F.col("latest_epoch").alias("leader_epoch"),
        F.col("log_end_offset").alias("leader_log_end_offset"))
    per_part = facts.groupBy(*PARTITION).agg(
        F.count(F.lit(1)).alias("replica_count"),
        F.max("high_watermark").alias("max_high_watermark"),
    )
    rank = F.when(F.col("severity") == "CRITICAL", 4).when(F.col("severity") == "ERROR", 3).when(
        F.col("severity") == "WARNING", 2).otherwise(1)
    per_findings = findings.groupBy(*PARTITION).agg(
        F.max(rank).alias("_worst"), F.count(F.lit(1)).alias("finding_count"))
    worst = (F.when(F.col("_worst") == 4, "CRITICAL").when(F.col("_worst") == 3, "ERROR")
             .when(F.col("_worst") == 2, "WARNING").when(F.col("_worst") == 1, "INFO"))
    return (
        per_part.join(leaders, PARTITION, "left").join(leader, PARTITION, "left")
        .join(per_findings, PARTITION, "left")
        .select(
            *PARTITION, "leader", F.coalesce(F.col("leader_source"), F.lit("unknown")).alias("leader_source"),
            "leader_epoch", "replica_count", "max_high_watermark", "leader_log_end_offset",
            worst.alias("worst_severity"),
            F.coalesce(F.col("finding_count"), F.lit(0)).alias("finding_count"),
        )
    )
