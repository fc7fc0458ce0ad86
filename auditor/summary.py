"""What a run reports: ``runs.counts``, the findings per check and severity, the exit
status's count, and the summary ``audit`` prints (from stored rows, no Spark job)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from auditor.errors import InconsistentResultError
from auditor.ingest.model import Snapshot
from auditor.materialise import read_frame_arrow
from auditor.registry import SEVERITY_RANK
from auditor.sinks.runview import findings_by_check


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


def run_counts(snap: Snapshot, tables: dict[str, pa.Table], by_check: list[tuple[str, str, int, int]]
            ) -> dict[str, Any]:
    """``runs.counts``: what was read, parsed, skipped and found, from stored rows (no job)."""
    acc = read_frame_arrow(snap.work_dir, "snapshot", "accounting")

    def total(column: str) -> int:
        return 0 if acc is None else int(pc.sum(acc.column(column)).as_py() or 0)

    rs = tables["replica_status"]
    partitions = rs.select(["snapshot", "topic", "partition"]).group_by(
        ["snapshot", "topic", "partition"]).aggregate([]).num_rows
    pe = tables["parse_errors"]
    return {
        "files": 0 if acc is None else acc.num_rows,
        "files_skipped": sum(snap.files_skipped.values()),
        # input files parsed by this run: fewer than ``files`` when an incremental run read
        # unchanged dump files from its store
        "files_parsed": (0 if acc is None else acc.num_rows) if snap.files_parsed is None else snap.files_parsed,
        # (a file-level problem has neither a line number nor a line: a quarantined segment
        # batch has its byte offset and its header as text)
        "files_unusable": int(pc.sum(pc.and_(pc.is_null(pe.column("line_number")),
                                            pc.is_null(pe.column("line")))).as_py() or 0),
        "lines": total("lines"),
        "lines_parsed": total("lines_parsed"),
        "lines_skipped": total("lines_skipped"),
        "lines_quarantined": total("lines_quarantined"),
        "parse_errors": pe.num_rows,
        "batches": int(pc.sum(rs.column("batch_count")).as_py() or 0),
        "partitions": partitions,
        "replicas": rs.num_rows,
        "snapshots": len(snap.snapshots),
        **segment_counts(read_frame_arrow(snap.work_dir, "snapshot", "segment_bytes")),
        **({"swap_files": snap.swap_files} if snap.swap_files else {}),
        **({"collected_log_dirs": snap.collected_log_dirs, "collected_log_dirs_verified": snap.collected_verified}
           if snap.collected_log_dirs else {}),
        "findings": severity_counts(by_check),
        # etcd: which replica id each member folder got (the ``replica`` column)
        **({"members": dict(sorted(snap.members.items(), key=lambda kv: kv[1]))}
           if snap.members is not None else {}),
    }


def segment_counts(row: pa.Table | None) -> dict[str, Any]:
    """``runs.counts``' byte accounting of segment files (SPEC 3.3) from the stored one-row
    sums (None: no segment file read): every key always, ``crc_verified`` null without
    segment input."""
    from auditor.load.segments import BYTE_COUNTS

    values = {"segment_files": 0, **{k: 0 for k in BYTE_COUNTS}}
    if row is not None and row.num_rows:
        values.update({k: int(row.column(k)[0].as_py() or 0) for k in values})
    values["crc_verified"] = None if not values["segment_files"] else values["crc_unverified_batches"] == 0
    return values


def severity_counts(by_check: list[tuple[str, str, int, int]]) -> dict[str, int]:
    """``runs.counts.findings``: findings per severity, suppressed ones included."""
    sev: Counter[str] = Counter()
    for _, severity, n, _ in by_check:
        sev[severity] += n
    return {s: sev[s] for s in ("CRITICAL", "ERROR", "WARNING", "INFO")}


def finding_summary(findings: pa.Table | DataFrame, fail_on: str) -> tuple[list[tuple[str, str, int, int]], int]:
    """Findings per (check, severity) with how many are suppressed, and how many count
    towards the exit status at ``fail_on``."""
    if isinstance(findings, DataFrame):
        findings = findings.select("check", "severity", "suppressed").toArrow()
    by_check = findings_by_check(findings)
    if fail_on == "never":
        return by_check, 0
    threshold = SEVERITY_RANK[fail_on.upper()]
    failing = sum(n - s for check, sev, n, s in by_check if SEVERITY_RANK[sev] >= threshold)
    return by_check, failing


def worst_partitions(partition_status: pa.Table, limit: int = 10) -> list[tuple[str, int, str, int]]:
    """Up to ``limit`` partitions with a WARNING or worse, most severe first (for the summary)."""
    rows = [r for r in partition_status.select(["topic", "partition", "worst_severity", "finding_count"]).to_pylist()
            if r["worst_severity"] in ("CRITICAL", "ERROR", "WARNING")]
    rows.sort(key=lambda r: (-SEVERITY_RANK[r["worst_severity"]], -r["finding_count"], r["topic"], r["partition"]))
    return [(r["topic"], int(r["partition"]), r["worst_severity"], int(r["finding_count"])) for r in rows[:limit]]


def check_consistent(before: tuple[list[tuple[str, str, int, int]], int],
                     after: tuple[list[tuple[str, str, int, int]], int], rows_written: int | None) -> None:
    """Raise :class:`InconsistentResultError` unless the findings summary taken before the
    writes equals the one taken after, and the writer wrote as many findings as it counts."""
    total = sum(n for _, _, n, _ in after[0])
    if after != before or rows_written not in (None, total):
        raise InconsistentResultError(
            f"findings changed while the run was writing them (before: {before[0]}; after: {after[0]}; "
            f"rows written: {rows_written}); the run was rolled back, re-run it")


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
    if c.get("segment_files"):
        mib = 1 << 20
        lines.insert(2, f"segment files: {c['segment_files']} ({c['segment_bytes'] / mib:.1f} MiB), "
                     f"{c['bytes_read'] / mib:.1f} MiB read; "
                     + ("every batch's CRC checked" if c["crc_verified"] else
                        f"{c['crc_unverified_batches']} batches read without --verify-crc: "
                        "none is known to be invalid"))
    if c.get("collected_log_dirs"):
        lines.insert(2, f"collected log dirs (auditor collect): {c['collected_log_dirs']}, "
                     f"{c['collected_log_dirs_verified']} collected with --verify-crc; collected rows keep "
                     "their collection's CRC verdicts (an audit's --verify-crc does not read them again)")
    if c.get("swap_files"):
        shown = c["swap_files"][:5]
        lines.insert(2, f"compaction results not yet swapped in (skipped; Kafka's recovery would install them): "
                     f"{len(c['swap_files'])}: " + ", ".join(shown) + (", ..." if len(c["swap_files"]) > 5 else ""))
    if "members" in c:  # etcd: a WAL record counts as a line
        lines.insert(2, "etcd members (replica = member=NAME): "
                     + ", ".join(f"{rid} = {name}" for name, rid in c["members"].items()))
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
