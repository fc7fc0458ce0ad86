"""Per-replica and per-partition status rows (SPEC 6.1 ``replica_status``, ``partition_status``)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from auditor import columns as F
from auditor.checks.rows import severity_name, severity_rank
from auditor.columns import col, lit
from auditor.ingest.kraft import is_kraft

REPLICA = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]


def replica_facts(replicas: DataFrame, offsets: DataFrame, hwm: DataFrame, latest: DataFrame,
                  metadata: DataFrame) -> DataFrame:
    """Everything known about each replica before leader-against-follower checks.

    Returns:
        One row per replica holding data: offsets, HWM, latest epoch, counts, and from the
        metadata (when present) ``meta_leader``, ``in_isr`` and ``in_elr``. The ``role``
        comes later, from the leader the engine chooses (SPEC 4.6).
    """
    meta = metadata.select(*PARTITION, col("leader").alias("meta_leader"), "isr", "elr", "has_elr")
    return (
        replicas.join(offsets, REPLICA, "left")
        .join(hwm, REPLICA, "left")
        .join(latest, REPLICA, "left")
        .join(meta, PARTITION, "left")
        .select(
            *REPLICA, "log_dir", "has_dump", "has_epoch_file", "epoch_file_usable",
            "log_start_offset", "local_log_start_offset", "log_end_offset", "high_watermark", "latest_epoch",
            F.coalesce(col("batch_count"), lit(0)).alias("batch_count"),
            F.coalesce(col("record_count"), lit(0)).alias("record_count"),
            "meta_leader",
            F.when(col("isr").isNotNull(), F.array_contains("isr", col("replica"))).alias("in_isr"),
            F.when(col("has_elr"), F.array_contains("elr", col("replica"))).alias("in_elr"),
        )
    )


def partition_status(facts: DataFrame, leaders: DataFrame, findings: DataFrame,
                     committed: DataFrame | None = None) -> DataFrame:
    """``partition_status`` per partition holding data; ``committed``: ``PARTITION,
    committed`` of KRaft's metadata log, its ``max_high_watermark`` (SPEC 4.7)."""
    leader = facts.filter(col("role") == "leader").select(
        *PARTITION, col("latest_epoch").alias("leader_epoch"),
        col("log_end_offset").alias("leader_log_end_offset"))
    per_part = facts.groupBy(*PARTITION).agg(
        F.count(lit(1)).alias("replica_count"),
        F.max("high_watermark").alias("max_high_watermark"),
    )
    if committed is not None:
        per_part = per_part.join(committed, PARTITION, "left").select(
            *PARTITION, "replica_count", F.when(is_kraft(), col("committed")).otherwise(col("max_high_watermark"))
            .alias("max_high_watermark"))
    per_findings = findings.groupBy(*PARTITION).agg(
        F.max(severity_rank(col("severity"))).alias("_worst"), F.count(lit(1)).alias("finding_count"))
    worst = severity_name(col("_worst"))
    return (
        per_part.join(leaders, PARTITION, "left").join(leader, PARTITION, "left")
        .join(per_findings, PARTITION, "left")
        .select(
            *PARTITION, "leader", F.coalesce(col("leader_source"), lit("unknown")).alias("leader_source"),
            "leader_epoch", "replica_count", "max_high_watermark", "leader_log_end_offset",
            worst.alias("worst_severity"),
            F.coalesce(col("finding_count"), lit(0)).alias("finding_count"),
        )
    )
