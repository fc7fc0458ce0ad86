"""Invariants every audit's tables keep, whatever the input (SPEC 6): one row per replica and
snapshot, one per partition and snapshot, ``finding_id`` unique per snapshot, and no
``epoch_lineage`` row twice. A fact computed on two paths at once (the summaries and the
batches, say) shows up here as a repeated key, where a set comparison would hide it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

KEYS: dict[str, tuple[str, ...]] = {
    "findings": ("snapshot", "finding_id"),
    "replica_status": ("snapshot", "topic", "partition", "replica"),
    "partition_status": ("snapshot", "topic", "partition"),
    # a whole row: two runs of one epoch may start at one offset in a log whose batches repeat
    "epoch_lineage": ("snapshot", "topic", "partition", "replica", "source", "epoch", "start_offset", "end_offset",
                      "batch_count"),
}


def repeated_rows(tables: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, list[tuple[Any, ...]]]:
    """Per table of :data:`KEYS` in ``tables`` (rows as mappings): the keys seen more than once."""
    out = {}
    for name, rows in tables.items():
        counts = Counter(tuple(r[c] for c in KEYS[name]) for r in rows)
        out[name] = sorted((k for k, n in counts.items() if n > 1), key=str)
    return out


def repeated_keys(tables: Mapping[str, DataFrame], limit: int = 10) -> dict[str, list[tuple[Any, ...]]]:
    """The same, on Spark DataFrames (a grouped count: the rows never come to the driver)."""
    out = {}
    for name, df in tables.items():
        key = list(KEYS[name])
        found = df.groupBy(*key).count().filter(F.col("count") > 1).orderBy(*key).limit(limit).collect()
        out[name] = [tuple(r[c] for c in key) for r in found]
    return out
