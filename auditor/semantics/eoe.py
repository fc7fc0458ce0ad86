"""End Offset for Epoch (SPEC 4.2): Kafka's ``LeaderEpochFileCache.endOffsetFor``.

A replica's epoch cache is held as one sorted array of ``(epoch, start_offset)`` structs,
so a lookup is an expression over that array (no per-entry join): the largest epoch at or
below the request and the start of the next higher epoch, found with ``filter``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame

from auditor import columns as F
from auditor.columns import col, lit

KEYS = ("snapshot", "topic", "partition", "replica")
ENTRY = "struct<epoch:int,start_offset:bigint>"


def cache_arrays(cache: DataFrame, keys: Sequence[str] = KEYS) -> DataFrame:
    """One row per replica: ``entries`` (sorted by epoch) and ``log_end_offset``."""
    return cache.groupBy(*keys).agg(
        F.array_sort(F.collect_list(F.struct(
            col("epoch").cast("int").alias("epoch"),
            col("start_offset").cast("bigint").alias("start_offset"),
        ))).alias("entries"),
        F.max("log_end_offset").alias("log_end_offset"),
    )


def latest_epoch(entries: Column) -> Column:
    """Epoch of the last entry, or -1 for an empty (or null) cache."""
    return F.coalesce(F.try_element_at(entries, lit(-1))["epoch"], lit(-1))


def eoe(entries: Column, leo: Column, requested: Column) -> tuple[Column, Column]:
    """``(epoch, end_offset)`` of ``endOffsetFor(requested, leo)`` over a sorted cache array.

    requested -1 or an empty cache -> (-1, -1); requested == latest epoch -> (requested, LEO);
    above every epoch -> (-1, -1); below every epoch -> (requested, first start offset);
    else (largest epoch <= requested, start offset of the next higher epoch).
    """
    safe = F.coalesce(entries, F.array().cast(f"array<{ENTRY}>"))
    n = F.size(safe)
    latest = F.try_element_at(safe, lit(-1))["epoch"]
    higher = F.try_element_at(F.filter(safe, lambda x: x["epoch"] > requested), lit(1))
    floor = F.try_element_at(F.filter(safe, lambda x: x["epoch"] <= requested), lit(-1))
    undefined = (requested == -1) | (n == 0)
    epoch = (
        F.when(undefined, lit(-1))
        .when(latest == requested, requested)
        .when(higher.isNull(), lit(-1))
        .when(floor.isNull(), requested)
        .otherwise(floor["epoch"])
    )
    offset = (
        F.when(undefined, lit(-1))
        .when(latest == requested, leo)
        .when(higher.isNull(), lit(-1))
        .otherwise(higher["start_offset"])
    )
    return epoch.cast("int"), offset.cast("bigint")


def end_offset_for(caches: DataFrame, requests: DataFrame) -> DataFrame:
    """Vectorised EOE (SPEC 7): one output row per request row.

    Args:
        caches: ``topic, partition, replica, epoch, start_offset, log_end_offset`` (the same
            ``log_end_offset`` on every row of a replica); a ``snapshot`` column, when both
            inputs have one, is part of the replica key. Rows are used exactly as given.
        requests: ``topic, partition, replica, requested_epoch`` and any other columns.

    Returns:
        ``requests`` with ``epoch`` (INT) and ``end_offset`` (BIGINT) added; -1 for
        undefined, (-1, -1) when the replica has no cache row.
    """
    keys = [k for k in KEYS if k in caches.columns and k in requests.columns]
    arrays = cache_arrays(caches, keys).withColumnRenamed("log_end_offset", "_leo")
    joined = requests.join(arrays, keys, "left")
    epoch, offset = eoe(col("entries"), col("_leo"), col("requested_epoch").cast("int"))
    return joined.select(*[col(c) for c in requests.columns], epoch.alias("epoch"), offset.alias("end_offset"))
