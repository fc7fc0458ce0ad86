"""The last stage of ``auditor.audit``: findings made final (severity overrides, allowlist,
identity) and every output table shaped to its schema (SPEC 6)."""

from __future__ import annotations

from datetime import date, datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql.types import StructType

from auditor import columns as F
from auditor.checks.pairs import follower_status
from auditor.columns import col, lit
from auditor.config import Config
from auditor.registry import ALWAYS_COMPACTED
from auditor.sinks import schemas
from auditor.sinks.history import History

PARTITION = ["snapshot", "topic", "partition"]


def conform(df: DataFrame, schema: StructType) -> DataFrame:
    """Select ``schema``'s columns in order, each cast to its declared type."""
    return df.select(*[col(f.name).cast(f.dataType.simpleString()).alias(f.name) for f in schema.fields])


def with_run_columns(df: DataFrame, run_id: str, cluster: str, audit_time: datetime) -> DataFrame:
    """Add the columns every output row carries: run id, cluster, audit time, day."""
    snapshot_or_now: Column = (
        col("snapshot") if "snapshot" in df.columns else lit(audit_time))
    return df.select(
        "*",
        lit(run_id).alias("run_id"),
        lit(cluster).alias("cluster"),
        lit(audit_time).cast("timestamp").alias("audit_time"),
        F.to_date(F.coalesce(snapshot_or_now, lit(audit_time).cast("timestamp"))).alias("day"),
    )


def compaction_scope(facts: DataFrame, topics: DataFrame, configured: tuple[str, ...]) -> DataFrame:
    """Per partition: ``compacted`` (SPEC 4.5) and ``hmax``, the highest HWM of any replica."""
    always = list(ALWAYS_COMPACTED) + list(configured)
    policy = topics.groupBy("snapshot", "topic").agg(
        F.max(F.coalesce(col("cleanup_policy"), lit("")).contains("compact")).alias("_by_config"))
    return facts.groupBy(*PARTITION).agg(F.max("high_watermark").alias("hmax")).join(
        policy, ["snapshot", "topic"], "left").select(
        *PARTITION, "hmax",
        (F.coalesce(col("_by_config"), lit(False)) | col("topic").isin(always)).alias("compacted"))


def apply_policy(found: DataFrame, config: Config) -> DataFrame:
    """Severity overrides (``[severity]``) and the allowlist (``suppressed = true``)."""
    severity = col("severity")
    for check, level in config.severity.items():
        severity = F.when(col("check") == check, lit(level)).otherwise(severity)
    suppressed = lit(False)
    for rule in config.allowlist:
        match = col("check") == rule.check
        if rule.topic is not None:
            match = match & (col("topic") == rule.topic)
        if rule.partition is not None:
            match = match & (col("partition") == rule.partition)
        if rule.replica is not None:
            match = match & col("replica").eqNullSafe(lit(rule.replica))
        suppressed = suppressed | match
    return found.withColumn("severity", severity).withColumn("suppressed", suppressed)


#: SPEC 5's checks with one finding per occurrence: two of them in one replica and snapshot
#: can share offset_start, so their identity also covers epoch, offset_end and the segment.
PER_OCCURRENCE = ("OFFSET_GAP", "OFFSET_OVERLAP", "EPOCH_REGRESSION", "CORRUPT_BATCH", "EPOCH_CACHE_MISMATCH",
                  "KRAFT_EPOCH_START", "KRAFT_SNAPSHOT_INVALID")


def finding_id(cluster: str) -> Column:
    """A finding's stable identity (SPEC 6): a hash of cluster, topic, partition, replica,
    check and offset_start, and for the per-occurrence checks also epoch, offset_end and the
    segment (its base offset, which names the segment file: trailing invalid bytes), so it is
    unique within a run and the same in every run that sees the same problem. The other
    checks keep the identity they always had (their ``first_seen`` carries on)."""
    def text(c: Column) -> Column:
        return F.coalesce(c.cast("string"), lit(""))

    parts = [lit(cluster), col("topic"), col("partition").cast("string"), text(col("replica")),
             col("check"), text(col("offset_start"))]
    occurrence = F.concat_ws("|", text(col("epoch")), text(col("offset_end")),
                             text(F.get_json_object("details", "$.segment_base_offset")))
    base = F.concat_ws("|", *parts)
    return F.sha2(F.when(col("check").isin(*PER_OCCURRENCE), F.concat_ws("|", base, occurrence))
                  .otherwise(base), 256)


def with_identity(found: DataFrame, cluster: str, previous: DataFrame, days: list[date],
                  history: History | None) -> DataFrame:
    """Add ``finding_id`` and ``first_seen``: the earliest snapshot in which the finding was
    seen, in this run or (carried forward) in P's run of the partition in OUT (``days``:
    the days of those P observations)."""
    ided = found.withColumn("finding_id", finding_id(cluster)).withColumn(
        "first_seen", F.min("snapshot").over(Window.partitionBy("finding_id")))
    earlier = history.load("findings", days) if history is not None and days else None
    if earlier is None:
        return ided
    p = previous.filter(col("p_from_out")).select(*PARTITION, "p_run_id", "p_snapshot")
    seen = p.join(earlier.select(col("run_id").alias("p_run_id"), col("snapshot").alias("p_snapshot"),
                                 "topic", "partition", "finding_id", col("first_seen").alias("_earlier")),
                  ["p_run_id", "p_snapshot", "topic", "partition"]).groupBy(*PARTITION, "finding_id").agg(
        F.min("_earlier").alias("_earlier"))
    return ided.join(seen, [*PARTITION, "finding_id"], "left").withColumn(
        "first_seen", F.least("first_seen", F.coalesce("_earlier", "first_seen"))).drop("_earlier")


KEY = ["snapshot", "topic", "partition", "replica"]


def replica_rows(facts: DataFrame, verdicts: DataFrame, counts: DataFrame, kraft_rows: Column) -> DataFrame:
    """``replica_status`` (SPEC 6.1): the facts, each follower's verdict, and the counts of
    the replicas whose batches were read (the others' come from their summaries)."""
    follower = verdicts.select(
        *KEY, "divergence_offset", "truncation_offset", "truncation_rounds",
        F.when(col("evaluated") & ~col("missing_hwm"), F.coalesce(col("removed_records"), lit(0)))
        .alias("records_to_truncate"),
        follower_status(verdicts).alias("follower_status"))
    counted = counts.select(*KEY, col("batch_count").alias("_bc"), col("record_count").alias("_rc"))
    return facts.join(follower, KEY, "left").join(counted, KEY, "left").select(
        *[c for c in facts.columns if c not in ("batch_count", "record_count", "high_watermark")],
        F.when(~kraft_rows, col("high_watermark")).alias("high_watermark"),
        *[c for c in follower.columns if c not in KEY],
        F.coalesce(col("_bc"), col("batch_count")).alias("batch_count"),
        F.coalesce(col("_rc"), col("record_count")).alias("record_count"),
        *([] if "kraft_snapshots" in facts.columns else [lit(None).cast("string").alias("kraft_snapshots")]),
        F.when(col("role") == "leader", "leader")
        .when(col("role") == "follower", F.coalesce(col("follower_status"), lit("unknown")))
        .otherwise("unknown").alias("status"))


def shaped(tables: dict[str, DataFrame], run_id: str, cluster: str, audit_time: datetime) -> dict[str, DataFrame]:
    """Each table with the run's columns, in its schema's columns and types."""
    return {
        name: conform(with_run_columns(df.drop("run_id", "cluster", "audit_time", "day"), run_id, cluster, audit_time),
                      schemas.OUTPUT_TABLES[name])
        for name, df in tables.items()
    }
