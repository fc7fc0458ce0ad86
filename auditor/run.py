"""One audit run: parse, compute, write the Delta tables, summarise, decide the exit status.

Every output is computed and materialised before the first table is written, so a run
that fails while computing leaves OUT untouched; a run that fails while writing restores
every table it touched to its version before the run; the SUCCEEDED ``runs`` row is
written last, so readers never count a half-written run.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from auditor import __version__, io, schemas
from auditor.checks import SEVERITY_RANK
from auditor.config import Config, validate_run_id
from auditor.engine import audit
from auditor.errors import InconsistentResultError
from auditor.findings import severity_rank
from auditor.snapshot import Snapshot, load_snapshot

logger = logging.getLogger(__name__)

Progress = Callable[[str], None]


@dataclass
class RunResult:
    """What a finished run reports."""

    run_id: str
    out: str
    writer: str
    counts: dict[str, Any]
    findings_by_check: list[tuple[str, str, int, int]] = field(default_factory=list)
    worst_partitions: list[tuple[str, int, str, int]] = field(default_factory=list)
    failing: int = 0
    exit_code: int = 0
    seconds: float = 0.0


def _quiet(_: str) -> None:
    return None


def run_audit(
    spark: SparkSession,
    snapshot_path: str,
    out: str,
    config: Config,
    *,
    run_id: str | None = None,
    snapshot_label: str | None = None,
    progress: Progress = _quiet,
) -> RunResult:
    """Audit ``snapshot_path`` and write the tables under ``out``.

    Raises:
        AuditorError: bad input or usage (exit 2); a FAILED ``runs`` row is added when
            OUT is writable and the failure happened after the run started.
    """
    run_id = validate_run_id(run_id or str(uuid.uuid4()))
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    io.check_writable(out)
    protocol = config.effective_protocol
    writer = io.choose_writer(spark)
    written: list[tuple[str, int]] = []  # (table path, version before this run wrote it)
    try:
        progress(f"reading and parsing the input under {snapshot_path}")
        snap = load_snapshot(spark, snapshot_path, format=config.format, snapshot=snapshot_label,
                             default_snapshot=started)
        progress(f"{snap.files_read} input files parsed ({sum(snap.files_skipped.values())} skipped); auditing")
        history = io.read_history(spark, out, config.cluster, run_id)
        tables = audit(snap, protocol, run_id=run_id, cluster=config.cluster, audit_time=started,
                       config=config, history=history)
        materialised = {}
        for name, df in tables.items():
            progress(f"computing {name}")
            materialised[name] = df.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)
        # the findings summary is taken before and after writing, and compared with what the
        # writer wrote: a result that changes on re-reading fails the run instead of paging
        # (or not paging) from numbers the tables do not hold (design.md, known open points)
        summary_before = _finding_summary(materialised["findings"], config.fail_on)
        counts = _counts(snap, materialised, summary_before[0])
        for name, df in materialised.items():
            progress(f"writing {name}")
            path = io.table_path(out, name)
            written.append((path, writer.prepare(path, schemas.OUTPUT_TABLES[name])))
            writer.replace_run(path, df, schemas.OUTPUT_TABLES[name], run_id)
        finished = datetime.now(timezone.utc)
        progress("writing runs")
        runs_path = io.table_path(out, "runs")
        written.append((runs_path, writer.prepare(runs_path, schemas.RUNS)))
        writer.replace_run(runs_path, _runs_row(
            spark, run_id, config, started, finished, "SUCCEEDED", snapshot_path, protocol,
            writer.name, counts), schemas.RUNS, run_id)
        by_check, failing = _finding_summary(materialised["findings"], config.fail_on)
        check_consistent(summary_before, (by_check, failing),
                         getattr(writer, "rows_written", {}).get(io.table_path(out, "findings")))
    except Exception:  # AuditorError included: undo what was written, record the failure, re-raise
        _roll_back(writer, written)
        _record_failure(spark, writer, out, run_id, config, started, snapshot_path, protocol)
        raise
    return RunResult(
        run_id=run_id, out=out, writer=writer.name, counts=counts, findings_by_check=by_check,
        worst_partitions=_worst_partitions(materialised["partition_status"]),
        failing=failing, exit_code=1 if failing else 0, seconds=time.monotonic() - t0)


def _counts(snap: Snapshot, tables: dict[str, DataFrame], by_check: list[tuple[str, str, int, int]]
            ) -> dict[str, Any]:
    """``runs.counts``: what was read, parsed, skipped and found (small aggregates only)."""
    acc = snap.accounting.agg(
        F.count(F.lit(1)).alias("files"),
        F.sum("lines").alias("lines"), F.sum("lines_parsed").alias("lines_parsed"),
        F.sum("lines_skipped").alias("lines_skipped"),
        F.sum("lines_quarantined").alias("lines_quarantined"),
    ).first()
    assert acc is not None
    rs = tables["replica_status"].agg(
        F.count(F.lit(1)).alias("replicas"),
        F.countDistinct("snapshot", "topic", "partition").alias("partitions"),
        F.sum("batch_count").alias("batches"),
    ).first()
    assert rs is not None
    sev: Counter[str] = Counter()
    for _, severity, n, _ in by_check:
        sev[severity] += n
    pe = tables["parse_errors"].agg(F.count(F.lit(1)).alias("rows"),
                                    F.count(F.when(F.col("line_number").isNull(), 1)).alias("files")).first()
    assert pe is not None
    return {
        "files": int(acc["files"] or 0),
        "files_skipped": sum(snap.files_skipped.values()),
        "files_unusable": int(pe["files"]),
        "lines": int(acc["lines"] or 0),
        "lines_parsed": int(acc["lines_parsed"] or 0),
        "lines_skipped": int(acc["lines_skipped"] or 0),
        "lines_quarantined": int(acc["lines_quarantined"] or 0),
        "parse_errors": int(pe["rows"]),
        "batches": int(rs["batches"] or 0),
        "partitions": int(rs["partitions"] or 0),
        "replicas": int(rs["replicas"] or 0),
        "snapshots": len(snap.snapshots),
        "findings": {s: sev[s] for s in ("CRITICAL", "ERROR", "WARNING", "INFO")},
    }


def _finding_summary(findings: DataFrame, fail_on: str) -> tuple[list[tuple[str, str, int, int]], int]:
    rows = findings.groupBy("check", "severity").agg(
        F.count(F.lit(1)).alias("n"), F.count(F.when(F.col("suppressed"), 1)).alias("suppressed")
    ).orderBy("check", "severity").collect()
    by_check = [(r["check"], r["severity"], int(r["n"]), int(r["suppressed"])) for r in rows]
    if fail_on == "never":
        return by_check, 0
    threshold = SEVERITY_RANK[fail_on.upper()]
    failing = sum(n - s for check, sev, n, s in by_check if SEVERITY_RANK[sev] >= threshold)
    return by_check, failing


def _worst_partitions(partition_status: DataFrame, limit: int = 10) -> list[tuple[str, int, str, int]]:
    """Up to ``limit`` partitions with a WARNING or worse, most severe first (for the summary)."""
    rank = severity_rank(F.col("worst_severity"))
    rows = (partition_status.filter(F.col("worst_severity").isin("CRITICAL", "ERROR", "WARNING"))
            .orderBy(rank.desc(), F.col("finding_count").desc(), "topic", "partition").limit(limit).collect())
    return [(r["topic"], int(r["partition"]), r["worst_severity"], int(r["finding_count"])) for r in rows]


def _runs_row(spark: SparkSession, run_id: str, config: Config, started: datetime,
              finished: datetime | None, status: str, input_path: str, protocol: str,
              writer: str, counts: dict[str, Any]) -> DataFrame:
    row = (run_id, config.cluster, started, finished, status, input_path, config.format, protocol,
           writer, __version__, spark.version, json.dumps(counts, sort_keys=True), started.date())
    return spark.createDataFrame([row], schemas.RUNS)


def check_consistent(before: tuple[list[tuple[str, str, int, int]], int],
                     after: tuple[list[tuple[str, str, int, int]], int], rows_written: int | None) -> None:
    """Raise :class:`InconsistentResultError` unless the findings summary taken before the
    writes equals the one taken after, and the writer wrote as many findings as it counts."""
    total = sum(n for _, _, n, _ in after[0])
    if after != before or rows_written not in (None, total):
        raise InconsistentResultError(
            f"findings changed while the run was writing them (before: {before[0]}; after: {after[0]}; "
            f"rows written: {rows_written}); the run was rolled back, re-run it")


def _roll_back(writer: io.TableWriter, written: list[tuple[str, int]]) -> None:
    """Restore every table this run started writing to its version before the run, so a
    run that fails halfway leaves every earlier row (its own run id's included) as it was.
    Assumes one run at a time per OUT (a scheduler's max_active_runs = 1)."""
    for path, version in reversed(written):
        try:
            writer.restore(path, version)
        except Exception as exc:  # keep going: restore what can be restored
            logger.error("could not restore %s to version %d: %s", path, version, exc)


def _record_failure(spark: SparkSession, writer: io.TableWriter, out: str, run_id: str,
                    config: Config, started: datetime, input_path: str, protocol: str) -> None:
    """Append a FAILED ``runs`` row; earlier rows of the same run id stay as they were."""
    try:
        row = _runs_row(spark, run_id, config, started, datetime.now(timezone.utc), "FAILED",
                        input_path, protocol, writer.name, {})
        writer.append(io.table_path(out, "runs"), row, schemas.RUNS)
    except Exception as exc:  # the original error matters more than this one
        logger.warning("could not record the failed run in %s: %s", out, exc)


def record_early_failure(out: str, run_id: str | None, config: Config, started: datetime,
                         input_path: str, error: str) -> bool:
    """Append a FAILED ``runs`` row for a run that failed before Spark started (bad input
    or config), when OUT is writable. Returns whether the row was written."""
    import pyarrow as pa

    if not os.path.isdir(out) or not os.access(out, os.W_OK):
        return False
    try:
        row = {
            "run_id": run_id or str(uuid.uuid4()), "cluster": config.cluster, "started_at": started,
            "finished_at": datetime.now(timezone.utc), "status": "FAILED", "input": input_path,
            "format": config.format, "protocol": config.effective_protocol, "writer": "deltalake",
            "tool_version": __version__, "spark_version": "", "counts": json.dumps({"error": error}),
            "day": started.date(),
        }
        io.append_arrow(io.table_path(out, "runs"), pa.Table.from_pylist([row]), schemas.RUNS)
        return True
    except Exception as exc:  # never hide the original error behind this one
        logger.warning("could not record the failed run in %s: %s", out, exc)
        return False


def format_summary(result: RunResult) -> str:
    """The short human summary ``audit`` prints at the end."""
    c = result.counts
    lines = [
        f"run {result.run_id}: {c['partitions']} partitions, {c['replicas']} replicas, "
        f"{c['batches']} batches in {result.seconds:.1f}s",
        f"input: {c['files']} files read ({c['files_skipped']} skipped, {c['files_unusable']} unusable), "
        f"{c['lines']} lines = {c['lines_parsed']} parsed + {c['lines_skipped']} skipped "
        f"+ {c['lines_quarantined']} quarantined",
        f"parse errors: {c['parse_errors']}",
    ]
    if result.findings_by_check:
        lines.append("findings:")
        for check, sev, n, suppressed in result.findings_by_check:
            extra = f" ({suppressed} suppressed)" if suppressed else ""
            lines.append(f"  {sev:<8} {check:<24} {n}{extra}")
    else:
        lines.append("findings: none")
    if result.worst_partitions:
        lines.append("partitions to look at (worst severity, findings):")
        for topic, partition, sev, n in result.worst_partitions:
            lines.append(f"  {topic}-{partition}: {sev}, {n}")
    lines.append(f"tables ({result.writer}): {result.out}/{{runs,findings,replica_status,"
                 f"partition_status,epoch_lineage,parse_errors}}")
    return "\n".join(lines)
