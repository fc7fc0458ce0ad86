"""The leader of each partition (SPEC 4.6): from metadata, else inferred from the caches."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window

from auditor import columns as F
from auditor.columns import col, lit

PARTITION = ["snapshot", "topic", "partition"]


def choose_leaders(facts: DataFrame, named: DataFrame | None = None) -> DataFrame:
    """One row per partition holding data.

    Returns:
        ``snapshot, topic, partition, leader, leader_source, leader_present``:
        ``leader_source`` is ``metadata`` (the describe line's leader), ``inferred`` (the
        replica with the highest latest epoch; ties to the higher LEO, then the higher HWM,
        then the lower broker id) or ``unknown`` (no replica has an epoch).
        ``leader_present`` says whether the leader has a replica row with dumps.
        ``named``: ``PARTITION, named_leader`` of KRaft's metadata log (SPEC 4.7), used when
        the metadata names no leader (``leader_source = quorum-state``).
    """
    rank = Window.partitionBy(*PARTITION).orderBy(
        col("latest_epoch").desc_nulls_last(), col("log_end_offset").desc_nulls_last(),
        col("high_watermark").desc_nulls_last(), col("replica").asc())
    inferred = (
        facts.filter(col("latest_epoch").isNotNull())
        .withColumn("_rank", F.row_number().over(rank))
        .filter(col("_rank") == 1)
        .select(*PARTITION, col("replica").alias("inferred_leader"))
    )
    per_partition = facts.groupBy(*PARTITION).agg(F.max("meta_leader").alias("meta_leader"))
    if named is not None:
        per_partition = per_partition.join(named, PARTITION, "left")
    else:
        per_partition = per_partition.withColumn("named_leader", lit(None).cast("int"))
    chosen = per_partition.join(inferred, PARTITION, "left").select(
        *PARTITION,
        F.coalesce(col("meta_leader"), col("named_leader"), col("inferred_leader")).alias("leader"),
        F.when(col("meta_leader").isNotNull(), "metadata")
        .when(col("named_leader").isNotNull(), "quorum-state")
        .when(col("inferred_leader").isNotNull(), "inferred")
        .otherwise("unknown").alias("leader_source"),
    )
    present = facts.filter(col("has_dump")).select(
        *PARTITION, col("replica").alias("leader"), lit(True).alias("leader_present"))
    return chosen.join(present, [*PARTITION, "leader"], "left").select(
        *PARTITION, "leader", "leader_source",
        F.coalesce(col("leader_present"), lit(False)).alias("leader_present"))
