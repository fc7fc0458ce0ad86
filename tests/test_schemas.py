"""The output schemas match SPEC section 6 to the letter, and schemas/*.json matches the code."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import StructType

from auditor.sinks import schemas
from auditor.sinks.delta import arrow_schema

REPO = Path(__file__).resolve().parents[1]

# SPEC 6: columns, in this order (more may follow).
SPEC_COLUMNS = {
    "findings": "run_id, audit_time, cluster, snapshot, topic, partition, replica, leader, check, severity, offset_start, offset_end, epoch, message, details",
    "replica_status": "run_id, snapshot, cluster, topic, partition, replica, role, in_isr, log_start_offset, log_end_offset, high_watermark, latest_epoch, batch_count, record_count, divergence_offset, truncation_offset, truncation_rounds, records_to_truncate, status",
    "partition_status": "run_id, snapshot, cluster, topic, partition, leader, leader_source, leader_epoch, replica_count, max_high_watermark, leader_log_end_offset, worst_severity, finding_count",
    "epoch_lineage": "run_id, snapshot, cluster, topic, partition, replica, epoch, start_offset, end_offset, source, batch_count",
    "parse_errors": "run_id, snapshot, cluster, broker, file, line_number, byte_offset, line, error",
    "runs": "run_id, cluster, started_at, finished_at, status, input, format, protocol, writer, tool_version, spark_version, counts",
}
# SPEC 6.1 types.
STRING_NOT_NULL = {"run_id", "cluster", "topic", "check", "severity", "message", "details", "status", "source", "file", "error"}
INT = {"partition", "replica", "leader", "broker", "epoch", "latest_epoch", "leader_epoch", "truncation_rounds", "replica_count"}
BIGINT = {"offset_start", "offset_end", "log_start_offset", "log_end_offset", "high_watermark", "max_high_watermark",
          "batch_count", "record_count", "records_to_truncate", "finding_count", "line_number", "byte_offset",
          "divergence_offset", "truncation_offset", "leader_log_end_offset", "start_offset", "end_offset"}
TIMESTAMP = {"snapshot", "audit_time", "started_at", "finished_at"}


@pytest.mark.parametrize("table", sorted(SPEC_COLUMNS))
def test_columns_types_and_nulls_follow_the_spec(table: str) -> None:
    schema = schemas.OUTPUT_TABLES[table]
    names = [f.name for f in schema.fields]
    spec = [c.strip() for c in SPEC_COLUMNS[table].split(",")]
    assert names[: len(spec)] == spec
    for f in schema.fields:
        t = f.dataType.simpleString()
        if f.name in STRING_NOT_NULL:
            assert (t, f.nullable) == ("string", False), f.name
        if f.name in INT:
            assert t == "int", f.name
        if f.name in BIGINT:
            assert t == "bigint", f.name
        if f.name in TIMESTAMP:
            assert t == "timestamp", f.name
    assert {"cluster", "day"} <= set(names)


@pytest.mark.parametrize("table", sorted(schemas.OUTPUT_TABLES))
def test_json_copy_matches_code(table: str) -> None:
    on_disk = json.loads((REPO / "schemas" / f"{table}.json").read_text(encoding="utf-8"))
    assert StructType.fromJson(on_disk) == schemas.OUTPUT_TABLES[table]


def test_both_writers_share_one_arrow_schema() -> None:
    for schema in schemas.OUTPUT_TABLES.values():
        arrow = arrow_schema(schema)
        assert arrow.names == [f.name for f in schema.fields]
        for f, a in zip(schema.fields, arrow, strict=True):
            assert a.nullable == f.nullable
            if f.dataType.simpleString() == "timestamp":
                assert a.type == pa.timestamp("us", tz="UTC")
