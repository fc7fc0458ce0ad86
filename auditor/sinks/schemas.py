"""Schemas of the output tables (SPEC section 6) and of the parsed inputs.

These ``StructType`` constants are the single definition both Delta writers declare;
``schemas/*.json`` at the repository root is the language-neutral copy of the output
schemas, and a test keeps the two in agreement.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def _f(name: str, dtype: DataType, nullable: bool = True) -> StructField:
    return StructField(name, dtype, nullable)


S, I, L, T, B, D = StringType(), IntegerType(), LongType(), TimestampType(), BooleanType(), DateType()

#: Trailing partition column of every table: the UTC day of ``snapshot`` (``started_at`` for
#: ``runs``), so a dashboard query for one cluster and day prunes to one folder.
PARTITION_COLUMNS: tuple[str, ...] = ("cluster", "day")

FINDINGS = StructType([
    _f("run_id", S, False), _f("audit_time", T, False), _f("cluster", S, False),
    _f("snapshot", T, False), _f("topic", S, False), _f("partition", I, False),
    _f("replica", I), _f("leader", I), _f("check", S, False), _f("severity", S, False),
    _f("offset_start", L), _f("offset_end", L), _f("epoch", I),
    _f("message", S, False), _f("details", S, False),
    _f("suppressed", B, False), _f("finding_id", S, False), _f("first_seen", T, False),
    _f("day", D, False),
])

REPLICA_STATUS = StructType([
    _f("run_id", S, False), _f("snapshot", T, False), _f("cluster", S, False),
    _f("topic", S, False), _f("partition", I, False), _f("replica", I, False),
    _f("role", S), _f("in_isr", B), _f("log_start_offset", L), _f("log_end_offset", L),
    _f("high_watermark", L), _f("latest_epoch", I), _f("batch_count", L), _f("record_count", L),
    _f("divergence_offset", L), _f("truncation_offset", L), _f("truncation_rounds", I),
    _f("records_to_truncate", L), _f("status", S, False),
    _f("in_elr", B), _f("kraft_snapshots", S), _f("day", D, False),
])

PARTITION_STATUS = StructType([
    _f("run_id", S, False), _f("snapshot", T, False), _f("cluster", S, False),
    _f("topic", S, False), _f("partition", I, False), _f("leader", I),
    _f("leader_source", S, False), _f("leader_epoch", I), _f("replica_count", I, False),
    _f("max_high_watermark", L), _f("leader_log_end_offset", L), _f("worst_severity", S),
    _f("finding_count", L, False), _f("day", D, False),
])

EPOCH_LINEAGE = StructType([
    _f("run_id", S, False), _f("snapshot", T, False), _f("cluster", S, False),
    _f("topic", S, False), _f("partition", I, False), _f("replica", I, False),
    _f("epoch", I, False), _f("start_offset", L, False), _f("end_offset", L, False),
    _f("source", S, False), _f("batch_count", L), _f("day", D, False),
])

PARSE_ERRORS = StructType([
    _f("run_id", S, False), _f("snapshot", T), _f("cluster", S, False), _f("broker", I),
    _f("file", S, False), _f("line_number", L), _f("byte_offset", L), _f("line", S),
    _f("error", S, False), _f("day", D, False),
])

RUNS = StructType([
    _f("run_id", S, False), _f("cluster", S, False), _f("started_at", T, False),
    _f("finished_at", T), _f("status", S, False), _f("input", S, False), _f("format", S, False),
    _f("protocol", S, False), _f("writer", S, False), _f("tool_version", S, False),
    _f("spark_version", S, False), _f("counts", S, False), _f("day", D, False),
])

#: Output tables in the order a run writes them (``runs`` always last).
OUTPUT_TABLES: dict[str, StructType] = {
    "parse_errors": PARSE_ERRORS,
    "epoch_lineage": EPOCH_LINEAGE,
    "replica_status": REPLICA_STATUS,
    "partition_status": PARTITION_STATUS,
    "findings": FINDINGS,
    "runs": RUNS,
}

# ---------------------------------------------------------------------------------------
# Parsed inputs (``auditor.load_snapshot``). A replica is (snapshot, topic, partition, broker).

BATCHES = StructType([
    _f("snapshot", T, False), _f("broker", I, False), _f("topic", S, False),
    _f("partition", I, False), _f("file", S, False), _f("line_number", L),
    _f("segment_base_offset", L), _f("base_offset", L, False), _f("last_offset", L, False),
    _f("epoch", I, False), _f("crc", L), _f("record_count", L, False), _f("is_valid", B),
    _f("is_control", B), _f("is_transactional", B), _f("magic", I), _f("origin", S, False),
])

SEGMENTS = StructType([
    _f("snapshot", T, False), _f("broker", I, False), _f("topic", S, False),
    _f("partition", I, False), _f("file", S, False), _f("line_number", L),
    _f("segment_base_offset", L), _f("invalid_bytes", L),
])

EPOCH_CACHE = StructType([
    _f("snapshot", T, False), _f("broker", I, False), _f("topic", S, False),
    _f("partition", I, False), _f("epoch", I, False), _f("start_offset", L, False),
    _f("file", S, False),
])

OFFSET_CHECKPOINT = StructType([
    _f("snapshot", T, False), _f("broker", I, False), _f("log_dir", S),
    _f("topic", S, False), _f("partition", I, False), _f("offset", L, False),
    _f("file", S, False),
])

METADATA = StructType([
    _f("snapshot", T, False), _f("topic", S, False), _f("partition", I, False),
    _f("leader", I), _f("replicas", S), _f("isr", S), _f("elr", S),
    _f("last_known_elr", S), _f("file", S, False),
])
