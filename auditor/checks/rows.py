"""Shaping ``findings`` rows (SPEC section 5): the helpers every check's rows go through,
and the severity helpers."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame

from auditor import columns as F
from auditor.columns import col, lit
from auditor.registry import SEVERITY_RANK

KEY = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]
FINDING_COLUMNS = ["snapshot", "topic", "partition", "replica", "check", "severity",
                   "offset_start", "offset_end", "epoch", "message", "details"]


@dataclass(frozen=True)
class Kind:
    """One kind of finding a frame's rows can give (see :func:`findings`): the rows where
    ``where`` holds, shaped as :func:`finding` shapes them (the same arguments)."""

    where: Column
    check: str
    severity: Column | str
    start: Column | None
    end: Column | None
    epoch: Column | None
    message: Column
    details: Column
    replica: Column | None = None


def finding(df: DataFrame, check: str, severity: Column | str, start: Column | None, end: Column | None,
            epoch: Column | None, message: Column, details: Column, replica: Column | None = None) -> DataFrame:
    """Shape ``df``'s rows into findings of ``check``; ``details`` is a struct turned to JSON."""
    return df.select(*_columns(check, severity, start, end, epoch, message, details, replica))


def findings(df: DataFrame, kinds: Sequence[Kind]) -> DataFrame:
    """The findings of every kind in ``kinds`` from ``df``'s rows, in one projection: each
    row whose ``where`` holds for some kinds gives one finding per such kind.

    This is :func:`finding` of ``df.filter(kind.where)`` per kind, unioned, built as one
    query: ``df`` is analysed, planned and computed once, not once per kind (a frame that is
    a join or a window, not a stored cut, was computed again by every kind), and the audit's
    findings union has one child for all of them. A ``where`` that is null, like a filter's,
    gives no row.
    """
    if len(kinds) == 1:
        return finding(df.filter(kinds[0].where), *_arguments(kinds[0]))
    rows = F.array(*[F.when(k.where, F.struct(*_columns(*_arguments(k)))) for k in kinds])
    return (df.filter(reduce(operator.or_, [k.where for k in kinds]))
            .select(F.explode(rows).alias("_finding")).filter(col("_finding").isNotNull()).select("_finding.*"))


def _arguments(kind: Kind) -> tuple:
    return (kind.check, kind.severity, kind.start, kind.end, kind.epoch, kind.message, kind.details, kind.replica)


def _columns(check: str, severity: Column | str, start: Column | None, end: Column | None, epoch: Column | None,
             message: Column, details: Column, replica: Column | None) -> list[Column]:
    """The columns of one finding (:data:`FINDING_COLUMNS`), over its frame's row."""

    def or_null(c: Column | None) -> Column:
        return c if c is not None else lit(None)

    return [
        col("snapshot"), col("topic"), col("partition"),
        (replica if replica is not None else col("replica")).cast("int").alias("replica"),
        lit(check).alias("check"), (lit(severity) if isinstance(severity, str) else severity).alias("severity"),
        or_null(start).cast("bigint").alias("offset_start"), or_null(end).cast("bigint").alias("offset_end"),
        or_null(epoch).cast("int").alias("epoch"), message.alias("message"), F.to_json(details).alias("details"),
    ]


def severity_rank(severity: Column) -> Column:
    """``CRITICAL`` 4, ``ERROR`` 3, ``WARNING`` 2, ``INFO`` 1 (:data:`auditor.registry.SEVERITY_RANK`)."""
    rank: Column = lit(None)
    for name, value in SEVERITY_RANK.items():
        rank = F.when(severity == name, lit(value)).otherwise(rank)
    return rank


def severity_name(rank: Column) -> Column:
    """The inverse of :func:`severity_rank` (null stays null)."""
    name: Column = lit(None).cast("string")
    for level, value in SEVERITY_RANK.items():
        name = F.when(rank == value, lit(level)).otherwise(name)
    return name


def s(value: str | Column) -> Column:
    """A column as text for messages ('none' for null)."""
    c = col(value) if isinstance(value, str) else value
    return F.coalesce(c.cast("string"), lit("none"))
