"""One run's rows read back from OUT without Spark (``deltalake`` + Arrow), for the report
and ``explain``: they work on tables written by any earlier run, on any machine.

Only runs with a SUCCEEDED ``runs`` row are shown (the README's rule for readers).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from auditor.errors import UsageError
from auditor.registry import SEVERITY_RANK

Row = dict[str, Any]
DATA_TABLES = ("findings", "replica_status", "partition_status", "epoch_lineage", "parse_errors")


@dataclass
class PartitionView:
    """Everything one run says about one partition."""

    topic: str
    partition: int
    status: Row  # the partition_status row
    replicas: list[Row]  # replica_status rows, leader first, then by broker id
    lineage: list[Row]  # epoch_lineage rows, by replica, source, start offset
    findings: list[Row]  # worst first

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def anchor(self) -> str:
        return anchor(self.topic, self.partition)

    def rounds(self, replica: int) -> list[Row]:
        """The per-round EOE answers a finding of ``replica`` carries in its details."""
        for f in self.findings:
            if f["replica"] == replica:
                details = _details(f)
                if details.get("rounds"):
                    return list(details["rounds"])
        return []


@dataclass
class RunView:
    """A SUCCEEDED run of one cluster, its rows, and the cluster's earlier runs."""

    out: str
    run: Row
    tables: dict[str, pa.Table]
    history: list[Row] = field(default_factory=list)  # SUCCEEDED runs of the cluster, oldest first

    @property
    def run_id(self) -> str:
        return str(self.run["run_id"])

    @property
    def counts(self) -> dict[str, Any]:
        return json.loads(self.run["counts"] or "{}")

    def flagged(self) -> list[tuple[str, int]]:
        """Partitions with an unsuppressed finding of WARNING or worse, worst first (most
        severe finding, then most findings, then name)."""
        worst: dict[tuple[str, int], tuple[int, int]] = {}
        for f in self.tables["findings"].select(["topic", "partition", "severity", "suppressed"]).to_pylist():
            if f["suppressed"] or SEVERITY_RANK[f["severity"]] < SEVERITY_RANK["WARNING"]:
                continue
            key = (f["topic"], f["partition"])
            rank, n = worst.get(key, (0, 0))
            worst[key] = (max(rank, SEVERITY_RANK[f["severity"]]), n + 1)
        return sorted(worst, key=lambda k: (-worst[k][0], -worst[k][1], k))

    def partition(self, topic: str, partition: int) -> PartitionView:
        def rows(name: str) -> list[Row]:
            t = self.tables[name]
            mask = pc.and_(pc.equal(t.column("topic"), topic), pc.equal(t.column("partition"), partition))
            return t.filter(mask).to_pylist()

        status = rows("partition_status")
        if not status:
            raise UsageError(f"run {self.run_id} has no partition {topic}-{partition}")
        replicas = sorted(rows("replica_status"), key=lambda r: (r["role"] != "leader", r["replica"]))
        lineage = sorted(rows("epoch_lineage"), key=lambda r: (r["replica"], r["source"], r["start_offset"], r["epoch"]))
        findings = sorted(rows("findings"), key=lambda f: (-SEVERITY_RANK[f["severity"]], f["check"],
                                                           f["replica"] if f["replica"] is not None else -1,
                                                           f["offset_start"] if f["offset_start"] is not None else -1))
        return PartitionView(topic, partition, status[0], replicas, lineage, findings)


def findings_by_check(findings: pa.Table) -> list[tuple[str, str, int, int]]:
    """``(check, severity, findings, of which suppressed)`` of a findings table, sorted by
    check and severity (the run's summary, its exit status and the report count alike)."""
    counts: Counter[tuple[str, str]] = Counter()
    suppressed: Counter[tuple[str, str]] = Counter()
    for check, sev, sup in zip(findings.column("check").to_pylist(), findings.column("severity").to_pylist(),
                               findings.column("suppressed").to_pylist(), strict=True):
        counts[(check, sev)] += 1
        suppressed[(check, sev)] += bool(sup)
    return [(check, sev, n, suppressed[(check, sev)]) for (check, sev), n in sorted(counts.items())]


def anchor(topic: str, partition: int) -> str:
    """An HTML id for a partition (topic names may hold dots and other characters)."""
    return "p-" + "".join(c if c.isalnum() or c in "-_" else f"_{ord(c):x}" for c in f"{topic}-{partition}")


def _details(finding: Row) -> dict[str, Any]:
    try:
        value = json.loads(finding["details"] or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def details(finding: Row) -> dict[str, Any]:
    """A finding's ``details`` JSON as a dict (empty when it is not an object)."""
    return _details(finding)


def snapshot_ids(r: Row) -> list[tuple[int, int]]:
    """A replica's KRaft snapshot ids ``(end offset, epoch)`` from ``replica_status.kraft_snapshots``
    (empty for any other partition, and for rows written before that column)."""
    try:
        ids = json.loads(r.get("kraft_snapshots") or "[]")
        return [(int(i["end_offset"]), int(i["epoch"])) for i in ids]
    except (ValueError, TypeError, KeyError):
        return []


def _read(out: str, name: str, cluster: str | None, run_id: str | None = None) -> pa.Table | None:
    """Rows of table ``name``, of one cluster (partition pruning) and one run (row filter:
    a long history is never read whole)."""
    from deltalake import DeltaTable

    from auditor.sinks.arrow_read import read_delta

    path = os.path.join(out, name)
    if not DeltaTable.is_deltatable(path):
        return None
    filters = ([("cluster", "=", cluster)] if cluster else []) + ([("run_id", "=", run_id)] if run_id else [])
    return read_delta(path, filters=filters or None)


def load_run(out: str, cluster: str | None = None, run_id: str | None = None) -> RunView:
    """The run ``run_id`` (default: the latest SUCCEEDED run of ``cluster``; ``cluster`` may
    be left out when OUT holds one cluster) and its rows.

    Raises:
        UsageError: OUT holds no such run, or several clusters and none was named.
    """
    runs = _read(out, "runs", cluster)
    if runs is None:
        raise UsageError(f"{out} holds no runs table: is it an audit's --out folder?")
    ok = [r for r in runs.to_pylist() if r["status"] == "SUCCEEDED"]
    if run_id is not None:
        ok_run = [r for r in ok if r["run_id"] == run_id]
        if not ok_run:
            raise UsageError(f"{out} has no SUCCEEDED run {run_id!r}" + (f" of cluster {cluster}" if cluster else ""))
        run = ok_run[0]
    else:
        clusters = sorted({r["cluster"] for r in ok})
        if not clusters:
            raise UsageError(f"{out} has no SUCCEEDED run" + (f" of cluster {cluster}" if cluster else ""))
        if len(clusters) > 1:
            raise UsageError(f"{out} holds several clusters ({', '.join(clusters)}): name one with --cluster")
        run = max(ok, key=lambda r: (r["started_at"], r["run_id"]))
    cluster = run["cluster"]
    tables = {}
    for name in DATA_TABLES:
        table = _read(out, name, cluster, run["run_id"])
        if table is None:
            raise UsageError(f"{out} has no {name} table")
        tables[name] = table
    history = sorted((r for r in ok if r["cluster"] == cluster), key=lambda r: (r["started_at"], r["run_id"]))
    return RunView(out=out, run=run, tables=tables, history=history)
