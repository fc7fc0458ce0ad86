"""An incremental run of an unchanged cluster takes its previous run's tables.

Anti-entropy repair compares the roots of two Merkle trees before anything else: equal
roots, nothing to repair. An incremental audit does the same with its whole input. It
digests the fingerprint of every dump file (:func:`auditor.sinks.store.fingerprint`:
path inside the broker folder, size, modification time, SHA-256 of the first and last
KiB), the size and modification time of every other input file, what discovery skipped
and could not read, the auditor's version and source, and
every setting that shapes a table (:func:`input_digest`), and records that digest in
``runs.counts`` (``input_digest``). When the cluster's latest succeeded run recorded the
same digest, every table of this run is a function of the same input, code and settings,
so it is that run's rows with this run's columns (run id, audit time, snapshot label,
day): :func:`previous_tables`. Only its over-time checks could differ, and they cannot
here:

- the run is taken only when its snapshot label is the latest of every succeeded run of the
  cluster, and this run's label is later still: for every partition, P (SPEC 5, over time)
  is that run's observation, which equals this one, so no HWM regressed, no leader or
  epoch changed, and P's leader's lineage is the current leader's (no over-time finding);
- the taken run's own over-time findings compared it with its own P, an older state: they
  are left out, and ``partition_status``'s worst severity and finding count are counted
  again over the findings left, as the engine counts them.

``first_seen`` carries over unchanged (the earliest snapshot with the finding is the taken
run's or earlier). An input with more than one snapshot (``snapshot=`` folders) is always
audited in full (its labels come from its folders, so an unchanged input repeats them,
never later ones), as is one whose dump files the store does not all know. A re-run of a
run id never takes its own earlier rows: only other runs are history.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import astuple, dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from auditor.config import Config
from auditor.ingest import discovery as d
from auditor.registry import REGISTRY, SEVERITY_RANK
from auditor.sinks import schemas
from auditor.sinks.arrow_read import read_delta
from auditor.sinks.delta import arrow_schema, table_path
from auditor.sinks.store import Fingerprint
from auditor.version import __version__

#: Bumped when what the digest covers changes: a digest of another version never matches.
DIGEST_VERSION = 1
#: The tables a run writes besides ``runs``.
DATA_TABLES = tuple(name for name in schemas.OUTPUT_TABLES if name != "runs")
OVER_TIME = tuple(sorted(c.name for c in REGISTRY if c.scope == "over-time"))


def input_digest(found: d.Discovery, dump_fingerprints: Mapping[str, Fingerprint], config: Config) -> str:
    """SHA-256 of everything a run's tables are a function of, besides its run columns:
    the auditor's version and source, the settings that shape a table, every input file's
    place, kind and fingerprint, what was skipped and what could not be read.

    A dump file's fingerprint is the store's (``dump_fingerprints``, by absolute path).
    Every other file (checkpoints, ``topics-describe.txt``, KRaft's quorum files) is known
    by its size and modification time (a segment file also by its inode), from one ``stat``: Kafka rewrites those files
    whole, through a new file renamed over the old one, so a change gives a new time, and
    reading 300,000 checkpoint files' edges besides took 6 s warm and 46 s from a cold
    page cache (100,000 partitions)."""
    settings = {
        "digest": DIGEST_VERSION, "tool": __version__, "code": code_digest(), "cluster": config.cluster,
        "format": config.format, "protocol": config.effective_protocol, "severity": sorted(config.severity.items()),
        "allowlist": [list(astuple(rule)) for rule in config.allowlist],
        "compacted_topics": sorted(config.compacted_topics), "verify_crc": config.verify_crc,
    }
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for f in sorted(found.files, key=lambda f: f.rel):
        if f.kind == d.DUMP:
            known = dump_fingerprints[f.path].fp
        else:
            try:
                st = os.stat(f.path)
                known = f"{st.st_size}:{st.st_mtime_ns}"
                if f.kind == d.SEGMENT:
                    # a compacted segment swapped in keeps the old one's modification time
                    # (Kafka's cleaner sets it) but is a new file: a new inode
                    known += f":{st.st_dev}:{st.st_ino}"
            except OSError as exc:  # gone since discovery: the full audit says what it finds
                known = f"unreadable:{exc.errno}"
        digest.update("\x00".join([f.rel, f.kind, known]).encode() + b"\n")
    for cd in sorted(found.collected, key=lambda cd: cd.rel):  # a collected log dir: its tables
        for path in (cd.batches, cd.segments, cd.small_files):
            try:
                st = os.stat(path) if path else None
                known = f"{st.st_size}:{st.st_mtime_ns}:{st.st_dev}:{st.st_ino}" if st else "none"
            except OSError as exc:
                known = f"unreadable:{exc.errno}"
            digest.update(f"collected\x00{cd.rel}\x00{path}\x00{known}\n".encode())
    for p in sorted(found.problems, key=lambda p: (p.rel, p.error)):
        digest.update(f"problem\x00{p.rel}\x00{p.broker}\x00{p.error}\n".encode())
    for reason, n in sorted(found.skipped.items()):
        digest.update(f"skipped\x00{reason}\x00{n}\n".encode())
    return digest.hexdigest()


@functools.cache
def code_digest() -> str:
    """SHA-256 of the auditor's own Python source: tables computed by other code (a fix
    shipped under the same version number) are never taken."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\x00" + path.read_bytes() + b"\x00")
    return digest.hexdigest()


@dataclass(frozen=True)
class Previous:
    """The succeeded run whose tables an unchanged run takes."""

    run_id: str
    snapshot: datetime
    counts: dict[str, Any]


def previous_run(out: str, cluster: str, digest: str, label: datetime, run_id: str) -> Previous | None:
    """The cluster's succeeded run this run may take its tables from (see the module's
    doc), or None. Reads OUT's ``runs`` and two columns of ``partition_status``."""
    from deltalake import DeltaTable

    runs_path, status_path = table_path(out, "runs"), table_path(out, "partition_status")
    if not (DeltaTable.is_deltatable(runs_path) and DeltaTable.is_deltatable(status_path)):
        return None
    runs = read_delta(runs_path, columns=["run_id", "status", "counts"], filters=[("cluster", "=", cluster)])
    succeeded = {r["run_id"]: r["counts"] for r in runs.to_pylist()
                 if r["status"] == "SUCCEEDED" and r["run_id"] != run_id}
    if not succeeded:
        return None
    observed = read_delta(status_path, columns=["run_id", "snapshot"], filters=[("cluster", "=", cluster)])
    observed = observed.filter(pc.is_in(observed.column("run_id"), pa.array(list(succeeded), pa.string())))
    per_run = observed.group_by("run_id").aggregate([("snapshot", "max")])
    latest = dict(zip(per_run.column("run_id").to_pylist(), per_run.column("snapshot_max").to_pylist(), strict=True))
    if not latest:
        return None
    newest = max(latest.values())
    holders = [rid for rid, snap in latest.items() if snap == newest]
    if len(holders) != 1 or not newest < label:
        return None
    counts = json.loads(succeeded[holders[0]])
    if counts.get("input_digest") != digest:
        return None
    return Previous(holders[0], newest, counts)


def previous_tables(out: str, cluster: str, previous: Previous, run_id: str, audit_time: datetime,
                    label: datetime) -> dict[str, pa.Table]:
    """``previous``'s rows of every data table as this run's: run id, audit time, snapshot
    label and day replaced, without its over-time findings (this run has none: see the
    module's doc), and ``partition_status``'s ``worst_severity`` and ``finding_count``
    counted again over the findings left; each table in its declared schema."""
    tables = {}
    for name in DATA_TABLES:
        schema = arrow_schema(schemas.OUTPUT_TABLES[name])
        rows = read_delta(table_path(out, name), filters=[("cluster", "=", cluster), ("run_id", "=", previous.run_id)])
        tables[name] = _as_run(rows, schema, run_id, audit_time, label)
    findings = tables["findings"]
    over_time = pc.is_in(findings.column("check"), pa.array(OVER_TIME))
    if pc.any(over_time).as_py():
        tables["findings"] = findings.filter(pc.invert(over_time))
        tables["partition_status"] = _recounted(tables["partition_status"], tables["findings"])
    return tables


def _recounted(status: pa.Table, findings: pa.Table) -> pa.Table:
    """``status`` with each partition's worst severity and finding count over ``findings``
    (as :func:`auditor.checks.status.partition_status` counts them: every finding of the
    partition, suppressed and INFO ones included; no finding: null and 0)."""
    ranks = pa.array(sorted(SEVERITY_RANK, key=SEVERITY_RANK.__getitem__))  # rank r at index r - 1
    per = pa.table({
        "topic": findings.column("topic"), "partition": findings.column("partition"),
        "_rank": pc.add(pc.index_in(findings.column("severity"), value_set=ranks), 1),
    }).group_by(["topic", "partition"]).aggregate([("_rank", "max"), ("_rank", "count")])
    keys = ["topic", "partition"]
    joined = status.join(per, keys, join_type="left outer")
    worst = pc.if_else(pc.is_null(joined.column("_rank_max")), pa.scalar(None, pa.string()),
                       pc.take(ranks, pc.subtract(pc.fill_null(joined.column("_rank_max"), 1), 1)))
    recounted = {"worst_severity": worst, "finding_count": pc.fill_null(joined.column("_rank_count"), 0)}
    schema = status.schema
    return pa.Table.from_arrays(
        [recounted[f.name].cast(f.type) if f.name in recounted else joined.column(f.name) for f in schema],
        schema=schema).sort_by([(k, "ascending") for k in ("topic", "partition")])


def _as_run(rows: pa.Table, schema: pa.Schema, run_id: str, audit_time: datetime, label: datetime) -> pa.Table:
    n = rows.num_rows
    columns = []
    for field in schema:
        if field.name == "run_id":
            column = pa.array([run_id] * n, field.type)
        elif field.name == "audit_time":
            column = pa.array([audit_time] * n, field.type)
        elif field.name == "snapshot":
            # (a parse error of a file outside every snapshot has none)
            column = pc.if_else(pc.is_null(rows.column("snapshot")), pa.scalar(None, field.type),
                                pa.scalar(label, field.type))
        elif field.name == "day":
            # the UTC day of the snapshot, else of the audit time (auditor.engine.with_run_columns)
            column = pc.if_else(pc.is_null(rows.column("snapshot")), pa.scalar(_day(audit_time), field.type),
                                pa.scalar(_day(label), field.type)) if "snapshot" in rows.column_names else \
                pa.array([_day(audit_time)] * n, field.type)
        elif field.name in rows.column_names:
            column = rows.column(field.name).cast(field.type)
        else:  # a column an older version did not write
            column = pa.nulls(n, field.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def _day(instant: datetime) -> date:
    return instant.astimezone(timezone.utc).date()
