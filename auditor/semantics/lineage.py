"""Epoch lineage and epoch caches per replica (SPEC 4.1 and 6.1 ``epoch_lineage``).

All functions are DataFrame -> DataFrame over the parsed snapshot; a replica is
``(snapshot, topic, partition, replica)``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window

from auditor import columns as F
from auditor.columns import col, lit

REPLICA = ["snapshot", "topic", "partition", "replica"]

#: A total order of one replica's batches: by offsets and epoch, then by CRC, then by the
#: file and line that printed the batch, so windows never depend on how rows arrive.
BATCH_ORDER = ("base_offset", "last_offset", "epoch", "crc", "file", "line_number")


def log_lineage(batches: DataFrame) -> DataFrame:
    """Maximal runs of contiguous batches (no gap, no overlap) with one epoch, per replica.

    Returns:
        ``snapshot, topic, partition, replica, epoch, start_offset, end_offset, batch_count``
        with ``end_offset`` = last offset of the run + 1. Epoch -1 runs are included.
    """
    order = Window.partitionBy(*REPLICA).orderBy(*BATCH_ORDER)
    new_run = (
        F.lag("last_offset").over(order).isNull()
        | (col("epoch") != F.lag("epoch").over(order))
        | (col("base_offset") != F.lag("last_offset").over(order) + 1)
    )
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return (
        batches.select(*REPLICA, "base_offset", "last_offset", "epoch", "crc", "file", "line_number")
        .withColumn("_new", new_run.cast("int"))
        .withColumn("_run", F.sum("_new").over(running))
        .groupBy(*REPLICA, "_run", "epoch")
        .agg(F.min("base_offset").alias("start_offset"), (F.max("last_offset") + 1).alias("end_offset"),
             F.count(lit(1)).alias("batch_count"))
        .drop("_run")
    )


def rebuilt_cache(batches: DataFrame) -> DataFrame:
    """The epoch cache Kafka rebuilds from the log: ``assign(epoch, baseOffset)`` per batch.

    Kafka's ``assign`` (2.0.1+, KAFKA-FORMATS 2.2) over the batches with epoch >= 0 in
    offset order adds an entry whenever the epoch differs from the latest entry's, after
    removing every entry whose epoch is >= the new epoch or whose start is >= the new
    start. So the entries that survive are the epoch-change points whose epoch and start
    are both below those of every later epoch-change point.

    Returns:
        ``snapshot, topic, partition, replica, epoch, start_offset``.
    """
    order = Window.partitionBy(*REPLICA).orderBy(*BATCH_ORDER)
    changes = (
        batches.filter(col("epoch") >= 0)
        .select(*REPLICA, "epoch", "base_offset", "last_offset", "crc", "file", "line_number")
        .withColumn("_prev", F.lag("epoch").over(order))
        .filter(col("_prev").isNull() | (col("_prev") != col("epoch")))
    )
    later = Window.partitionBy(*REPLICA).orderBy(*BATCH_ORDER).rowsBetween(
        1, Window.unboundedFollowing)
    return (
        changes.withColumn("_min_e", F.min("epoch").over(later))
        .withColumn("_min_s", F.min("base_offset").over(later))
        .filter((col("_min_e").isNull() | (col("epoch") < col("_min_e")))
                & (col("_min_s").isNull() | (col("base_offset") < col("_min_s"))))
        .select(*REPLICA, "epoch", col("base_offset").alias("start_offset"))
    )


def effective_cache(epoch_cache: DataFrame, rebuilt: DataFrame, replicas: DataFrame,
                    offsets: DataFrame) -> DataFrame:
    """The epoch cache every lookup uses (SPEC 4.1).

    A usable ``leader-epoch-checkpoint`` without its entries whose start is above the LEO
    (an entry at the LEO is kept); else the cache rebuilt from the log.

    Returns:
        ``snapshot, topic, partition, replica, epoch, start_offset, log_end_offset,
        cache_source`` (``checkpoint`` or ``log``).
    """
    r = replicas.select(*REPLICA, "epoch_file_usable").join(
        offsets.select(*REPLICA, "log_end_offset"), REPLICA, "left")
    from_file = (
        epoch_cache.select(*REPLICA, "epoch", "start_offset")
        .join(r.filter(col("epoch_file_usable")), REPLICA)
        .filter(col("log_end_offset").isNull() | (col("start_offset") <= col("log_end_offset")))
        .select(*REPLICA, "epoch", "start_offset", "log_end_offset", lit("checkpoint").alias("cache_source"))
    )
    from_log = (
        rebuilt.join(r.filter(~col("epoch_file_usable")), REPLICA)
        .select(*REPLICA, "epoch", "start_offset", "log_end_offset", lit("log").alias("cache_source"))
    )
    return from_file.unionByName(from_log)


def checkpoint_lineage(cache: DataFrame) -> DataFrame:
    """``epoch_lineage`` rows of ``source = checkpoint``: one per entry of the effective
    cache read from the file, ending at the next entry's start or at the LEO."""
    nxt = Window.partitionBy(*REPLICA).orderBy("epoch", "start_offset")
    return cache.filter(col("cache_source") == "checkpoint").select(
        *REPLICA, "epoch", "start_offset",
        F.coalesce(F.lead("start_offset").over(nxt), col("log_end_offset"), col("start_offset")).alias("end_offset"),
        lit(None).cast("bigint").alias("batch_count"),
    )


def latest_epochs(cache: DataFrame) -> DataFrame:
    """``latest_epoch`` per replica: the epoch of the last entry of its effective cache."""
    return cache.groupBy(*REPLICA).agg(F.max("epoch").alias("latest_epoch"))
