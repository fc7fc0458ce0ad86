"""Shaping ``findings`` rows (SPEC section 5): the one helper every check's rows go through,
and the severity helpers."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from auditor.checks.registry import SEVERITY_RANK

KEY = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]
FINDING_COLUMNS = ["snapshot", "topic", "partition", "replica", "check", "severity",
                   "offset_start", "offset_end", "epoch", "message", "details"]


def finding(df: DataFrame, check: str, severity: Column | str, start: Column | None, end: Column | None,
            epoch: Column | None, message: Column, details: Column, replica: Column | None = None) -> DataFrame:
    """Shape ``df``'s rows into findings of ``check``; ``details`` is a struct turned to JSON."""
    sev = F.lit(severity) if isinstance(severity, str) else severity
    return df.select(
        "snapshot", "topic", "partition",
        (replica if replica is not None else F.col("replica")).cast("int").alias("replica"),
        F.lit(check).alias("check"), sev.alias("severity"),
        (start if start is not None else F.lit(None)).cast("bigint").alias("offset_start"),
        (end if end is not None else F.lit(None)).cast("bigint").alias("offset_end"),
        (epoch if epoch is not None else F.lit(None)).cast("int").alias("epoch"),
        message.alias("message"), F.to_json(details).alias("details"),
    )


def severity_rank(col: Column) -> Column:
    """``CRITICAL`` 4, ``ERROR`` 3, ``WARNING`` 2, ``INFO`` 1 (:data:`auditor.checks.registry.SEVERITY_RANK`)."""
    rank: Column = F.lit(None)
    for name, value in SEVERITY_RANK.items():
        rank = F.when(col == name, F.lit(value)).otherwise(rank)
    return rank


def severity_name(rank: Column) -> Column:
    """The inverse of :func:`severity_rank` (null stays null)."""
    name: Column = F.lit(None).cast("string")
    for level, value in SEVERITY_RANK.items():
        name = F.when(rank == value, F.lit(level)).otherwise(name)
    return name


def s(col: str | Column) -> Column:
    """A column as text for messages ('none' for null)."""
    c = F.col(col) if isinstance(col, str) else col
    return F.coalesce(c.cast("string"), F.lit("none"))
