"""``auditor.audit``: from a parsed snapshot to the output tables (SPEC sections 4 to 6)."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from auditor import lineage, schemas, status
from auditor.checks import DEFAULT_PROTOCOL, PROTOCOLS
from auditor.errors import UsageError
from auditor.snapshot import Snapshot


def conform(df: DataFrame, schema: StructType) -> DataFrame:
    """Select ``schema``'s columns in order, each cast to its declared type."""
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def with_run_columns(df: DataFrame, run_id: str, cluster: str, audit_time: datetime) -> DataFrame:
    """Add the columns every output row carries: run id, cluster, audit time, day."""
    snapshot_or_now: Column = (
        F.col("snapshot") if "snapshot" in df.columns else F.lit(audit_time))
    return df.select(
        "*",
        F.lit(run_id).alias("run_id"),
        F.lit(cluster).alias("cluster"),
        F.lit(audit_time).cast("timestamp").alias("audit_time"),
        F.to_date(F.coalesce(snapshot_or_now, F.lit(audit_time).cast("timestamp"))).alias("day"),
    )


def _cut(df: DataFrame) -> DataFrame:
    """Materialise an intermediate read by several tables, and cut its lineage."""
    return df.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)


def empty_findings(snapshot: Snapshot) -> DataFrame:
    """A findings DataFrame with no rows (the checks come with the core engine)."""
    spark = snapshot.batches.sparkSession
    return spark.createDataFrame([], schemas.FINDINGS).drop("run_id", "cluster", "audit_time", "day")


def audit(
    snapshot: Snapshot,
    protocol: str | None = None,
    *,
    run_id: str | None = None,
    cluster: str = "default",
    audit_time: datetime | None = None,
) -> dict[str, DataFrame]:
    """Build every output table of SPEC section 6 except ``runs``, before writing.

    Args:
        snapshot: from :func:`auditor.load_snapshot`.
        protocol: ``epoch``, ``kip-101``, ``hwm`` or ``raft``; None: the format's default.
        run_id: stored in every row (default: a new UUID).
        cluster: stored in every row.
        audit_time: the run's start (default: now, UTC).

    Returns:
        ``{table name: DataFrame}`` with exactly the columns of :mod:`auditor.schemas`.
    """
    chosen = protocol or DEFAULT_PROTOCOL[snapshot.format]
    if chosen not in PROTOCOLS:
        raise UsageError(f"unknown protocol {chosen!r}")
    run_id = run_id or str(uuid.uuid4())
    audit_time = audit_time or datetime.now(timezone.utc)

    offsets = _cut(lineage.replica_offsets(snapshot.batches, snapshot.segments, snapshot.log_start))
    rebuilt = lineage.rebuilt_cache(snapshot.batches)
    cache = _cut(lineage.effective_cache(snapshot.epoch_cache, rebuilt, snapshot.replicas, offsets))
    facts = _cut(status.replica_facts(
        snapshot.replicas, offsets, snapshot.hwm, lineage.latest_epochs(cache), snapshot.metadata))
    findings = empty_findings(snapshot)

    epoch_lineage = (
        lineage.log_lineage(snapshot.batches).withColumn("source", F.lit("log"))
        .unionByName(lineage.checkpoint_lineage(cache).withColumn("source", F.lit("checkpoint")))
    )
    tables = {
        "parse_errors": snapshot.parse_errors,
        "epoch_lineage": epoch_lineage,
        "replica_status": status.replica_status(facts),
        "partition_status": status.partition_status(facts, findings),
        "findings": findings.withColumn("suppressed", F.lit(False)),
    }
    return {
        name: conform(with_run_columns(df.drop("run_id", "cluster", "audit_time", "day"),
                                       run_id, cluster, audit_time),
                      schemas.OUTPUT_TABLES[name])
        for name, df in tables.items()
    }
