"""The parsed-input store of incremental audits (``audit --incremental``): what each dump
file yielded, kept under ``OUT/_auditor/store/`` so that a later run of the same cluster
parses only the files that changed. A rolled Kafka segment never changes, so an hourly
audit re-parses the active segments and the checkpoints, not the cluster.

A dump file is known by its **fingerprint**: the cluster, the broker, its path inside the
broker folder, its size, its modification time and a SHA-256 of its first and last KiB.
A file rewritten in place (compaction, a truncation after an unclean election, a broker
restored from backup) changes size, time or edges, so it gets a new fingerprint and is
parsed again; a file gone from the input is simply not used.

Tables (Delta, partitioned by ``cluster``; a row carries the ``fp`` of its file and the
``writer`` run that parsed it):

- ``store_scan``: the rows the scan made of the file (:mod:`auditor.summarise.scan`): its
  summaries per section, window and epoch, its sections, its line counts, its quarantined
  lines (as ``parse_errors`` stores them) and the lines of its old-format batches. Batches
  themselves are not kept: a drill-down re-reads the file, which is in the snapshot;
- ``store_files``: one row per fingerprint and run that used it, written **last**: a
  fingerprint counts only through a ``store_files`` row, and only the rows its ``writer``
  wrote count. A run killed while writing leaves rows no ``store_files`` row names, never
  read (and pruned later); two clusters never share a row (every read filters on it).

**Pruning** (:func:`prune`, after every save, under the same lock): a fingerprint no run of
the cluster's last ``keep_runs`` used (``[run] store_keep_runs``, default 24) is forgotten.
Its ``store_files`` rows, the ``store_files`` rows of older runs, and every data row no
remaining ``store_files`` row names (forgotten fingerprints, killed writers) are removed with
Delta deletes; Delta's vacuum then removes the files those deletes replaced once they are
older than :data:`VACUUM_RETENTION_HOURS` (a run that listed the store's files before the
delete is still reading them), and a cluster's many small files are compacted now and then.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import PurePath
from typing import Any

import pyarrow as pa

from auditor.sinks.arrow_read import read_delta

EDGE = 1024
#: files removed from a store table stay on disk this long (a running audit may be reading them)
VACUUM_RETENTION_HOURS = 24
#: a cluster's store files of one table are compacted when there are more than this many
COMPACT_ABOVE_FILES = 64
STORE_DIR = os.path.join("_auditor", "store")
DATA_TABLES = ("store_scan",)


def _scan_ddl() -> str:
    from auditor.summarise.scan import SCAN_DDL

    return SCAN_DDL.split("file_id int, ", 1)[1]


#: Spark DDL of each data table's columns in its Parquet files (``cluster`` is in the folder names).
SCHEMAS = {"store_scan": "fp string, writer string, " + _scan_ddl()}


FILES_SCHEMA = pa.schema([
    ("cluster", pa.string()), ("fp", pa.string()), ("writer", pa.string()), ("run_id", pa.string()),
    ("broker", pa.int32()), ("path", pa.string()), ("size", pa.int64()), ("mtime_ns", pa.int64()),
    ("saved_at", pa.timestamp("us", tz="UTC")),
])


@dataclass(frozen=True)
class Fingerprint:
    """One dump file as the store knows it."""

    fp: str
    broker: int
    path: str  # inside the broker folder
    size: int
    mtime_ns: int


def path_in_broker(rel: str) -> str:
    """``snapshot=X/broker=1/data/t-0/0.log.txt`` -> ``data/t-0/0.log.txt``."""
    parts = PurePath(rel).parts
    for i, part in enumerate(parts):
        if part.startswith("broker="):
            return "/".join(parts[i + 1:])
    return "/".join(parts)


def fingerprint(cluster: str, broker: int, rel: str, path: str) -> Fingerprint:
    """The fingerprint of the file at ``path`` (``rel``: its path in the input)."""
    st = os.stat(path)
    edges = hashlib.sha256()
    with open(path, "rb") as f:
        edges.update(f.read(EDGE))
        if st.st_size > EDGE:
            f.seek(max(EDGE, st.st_size - EDGE))
            edges.update(f.read(EDGE))
    inside = path_in_broker(rel)
    key = "\x00".join([cluster, str(broker), inside, str(st.st_size), str(st.st_mtime_ns), edges.hexdigest()])
    return Fingerprint(hashlib.sha256(key.encode()).hexdigest(), broker, inside, st.st_size, st.st_mtime_ns)


def store_path(out: str, table: str) -> str:
    return os.path.join(out, STORE_DIR, table)


def stored_pairs(out: str, cluster: str) -> set[tuple[str, str]]:
    """``(fp, writer)`` of every ``store_files`` row of ``cluster``: the rows that count."""
    path = store_path(out, "store_files")
    if not os.path.isdir(os.path.join(path, "_delta_log")):
        return set()
    rows = read_delta(path, columns=["cluster", "fp", "writer"], filters=[("cluster", "=", cluster)])
    return set(zip(rows.column("fp").to_pylist(), rows.column("writer").to_pylist()))


def known(out: str, cluster: str) -> dict[str, str]:
    """``fp -> writer`` of every fingerprint of ``cluster`` the store can give rows for."""
    # The rows of one fingerprint name the run that parsed it; two runs that parsed the same
    # new file before either saved wrote equal rows: the smaller run id is taken, always.
    writers: dict[str, str] = {}
    for fp, writer in stored_pairs(out, cluster):
        writers[fp] = min(writer, writers.get(fp, writer))
    return writers


def read_rows(spark: Any, out: str, table: str, cluster: str, wanted: Any) -> Any:
    """The rows of ``table`` for the fingerprints in ``wanted`` (a DataFrame with ``fp``,
    ``writer`` and whatever the caller wants attached), read by Spark from the table's
    current Parquet files."""
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    from auditor.frames import local_frame

    schema = SCHEMAS[table]
    path = store_path(out, table)
    uris = (DeltaTable(path).file_uris([("cluster", "=", cluster)])
            if os.path.isdir(os.path.join(path, "_delta_log")) else [])
    if not uris:
        return local_frame(spark, [], schema).join(wanted, ["fp", "writer"])
    # The partition column lives in the folder names, not in the files.
    rows = spark.read.schema(schema).parquet(*uris)
    return rows.join(F.broadcast(wanted), ["fp", "writer"])


def header_rows(out: str, cluster: str, topics: Sequence[str], partition: int) -> pa.Table:
    """``fp, writer, sec`` of the stored scan rows of ``cluster``'s ``Dumping`` headers that
    name a partition ``partition`` of ``topics`` (a few rows per file), read without Spark."""
    path = store_path(out, "store_scan")
    if not os.path.isdir(os.path.join(path, "_delta_log")):
        return pa.table({"fp": pa.array([], pa.string()), "writer": pa.array([], pa.string()),
                         "sec": pa.array([], pa.int32())})
    return read_delta(path, columns=["fp", "writer", "sec"], filters=[
        ("cluster", "=", cluster), ("item_kind", "=", "H"), ("h_topic", "in", list(topics)),
        ("h_partition", "=", partition)])


def stored_row_count(out: str, table: str, cluster: str) -> int | None:
    """How many rows ``table`` holds for ``cluster`` (every writer's, so at least what
    :func:`read_rows` gives), from the Delta log's file statistics: no data read. None when
    a file has no record count."""
    from deltalake import DeltaTable

    path = store_path(out, table)
    if not os.path.isdir(os.path.join(path, "_delta_log")):
        return 0
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    counts = [n for n, c in zip(actions.column("num_records").to_pylist(),
                                actions.column("partition.cluster").to_pylist(), strict=True) if c == cluster]
    return None if None in counts else sum(counts)


def _stamped(rows: pa.Table | pa.RecordBatchReader, run_id: str, cluster: str) -> pa.RecordBatchReader | None:
    """``rows`` with the ``writer`` and ``cluster`` columns, batch by batch; None when empty."""
    reader = rows if isinstance(rows, pa.RecordBatchReader) else rows.to_reader()
    schema = reader.schema.append(pa.field("writer", pa.string())).append(pa.field("cluster", pa.string()))

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            n = batch.num_rows
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array([run_id] * n, pa.string()), pa.array([cluster] * n, pa.string())],
                schema=schema)

    stream = batches()
    first = next(stream, None)
    if first is None:
        return None
    return pa.RecordBatchReader.from_batches(schema, itertools.chain([first], stream))


def save(out: str, cluster: str, run_id: str, new: Sequence[Fingerprint], used: Sequence[str],
         writers: dict[str, str], frames: dict[str, pa.Table | pa.RecordBatchReader | None],
         saved_at: datetime | None = None) -> None:
    """Add the rows of the files this run parsed (``new``), then one ``store_files`` row per
    fingerprint this run used (``used``; ``writers`` says who wrote each one's rows).

    ``frames``: ``store_batches`` etc., each with ``fp`` and the table's columns (the
    ``cluster`` and ``writer`` columns are added here), as a table or streamed batch by
    batch (the first run of a cluster stores every batch it parsed: the driver never holds
    them all at once). Called under OUT's lock.
    """
    from deltalake import write_deltalake

    # A reused file whose rows a concurrent run's pruning removed since this run read them
    # must not be named again: the next run parses it anew.
    still = stored_pairs(out, cluster)
    used = [fp for fp in used if writers[fp] == run_id or (fp, writers[fp]) in still]
    for table in DATA_TABLES:
        rows = frames.get(table)
        stamped = None if rows is None else _stamped(rows, run_id, cluster)
        if stamped is not None:
            write_deltalake(store_path(out, table), stamped, mode="append", partition_by=["cluster"])
    by_fp = {f.fp: f for f in new}
    files = pa.table({
        "cluster": [cluster] * len(used), "fp": list(used), "writer": [writers[fp] for fp in used],
        "run_id": [run_id] * len(used),
        "broker": [by_fp[fp].broker if fp in by_fp else None for fp in used],
        "path": [by_fp[fp].path if fp in by_fp else None for fp in used],
        "size": [by_fp[fp].size if fp in by_fp else None for fp in used],
        "mtime_ns": [by_fp[fp].mtime_ns if fp in by_fp else None for fp in used],
        "saved_at": [saved_at or datetime.now(timezone.utc)] * len(used),
    }, schema=FILES_SCHEMA)
    # (merge: a store saved before ``saved_at`` existed gains the column, null in old rows)
    write_deltalake(store_path(out, "store_files"), files, mode="append", partition_by=["cluster"],
                    schema_mode="merge")


@dataclass(frozen=True)
class Pruned:
    """What :func:`prune` removed."""

    runs_forgotten: int  # runs of the cluster older than the last ``keep_runs``
    fingerprints_forgotten: int  # fingerprints none of the kept runs used
    rows_deleted: dict[str, int]  # per table
    files_vacuumed: int
    compacted: tuple[str, ...]  # tables whose cluster partition was compacted


def _sql(values: Sequence[str]) -> str:
    """A SQL list of string literals (fingerprints are hex, run ids and clusters are quoted)."""
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


def prune(out: str, cluster: str, keep_runs: int,
          retention_hours: int = VACUUM_RETENTION_HOURS) -> Pruned:
    """Forget what the cluster's last ``keep_runs`` runs did not use (see the module's doc).
    Called under OUT's lock, after :func:`save`; cheap when nothing fell out of the window."""
    from deltalake import DeltaTable

    files_path = store_path(out, "store_files")
    if not os.path.isdir(os.path.join(files_path, "_delta_log")):
        return Pruned(0, 0, {}, 0, ())
    in_cluster = f"cluster = '{cluster.replace(chr(39), chr(39) * 2)}'"
    files = read_delta(files_path, columns=["fp", "writer", "run_id", "saved_at"],
                       filters=[("cluster", "=", cluster)]).to_pylist()
    # The runs in the order they saved (run ids break ties, and order rows saved before
    # ``saved_at`` existed, which read as None, first): a total order.
    last_saved: dict[str, float] = {}
    for row in files:
        at = row["saved_at"].timestamp() if row["saved_at"] is not None else float("-inf")
        last_saved[row["run_id"]] = max(at, last_saved.get(row["run_id"], float("-inf")))
    runs = sorted(last_saved, key=lambda r: (last_saved[r], r))
    kept_runs = set(runs[-keep_runs:])
    kept_rows = [row for row in files if row["run_id"] in kept_runs]
    kept_fps = {row["fp"] for row in kept_rows}
    forgotten = sorted({row["fp"] for row in files} - kept_fps)
    writers = sorted({row["writer"] for row in kept_rows})
    deleted: dict[str, int] = {}
    if len(kept_runs) < len(runs):
        deleted["store_files"] = _delete(files_path, f"{in_cluster} AND run_id NOT IN ({_sql(sorted(kept_runs))})")
    # Data rows no kept store_files row names: those of forgotten fingerprints, and those of
    # writers no kept row names (killed runs; runs whose every file was forgotten).
    gone = f"writer NOT IN ({_sql(writers)})" if writers else "TRUE"
    if forgotten:
        gone += f" OR fp IN ({_sql(forgotten)})"
    compacted = []
    vacuumed = 0
    for table in DATA_TABLES:
        path = store_path(out, table)
        if not os.path.isdir(os.path.join(path, "_delta_log")):
            continue
        deleted[table] = _delete(path, f"{in_cluster} AND ({gone})")
    for table in (*DATA_TABLES, "store_files"):
        path = store_path(out, table)
        if not os.path.isdir(os.path.join(path, "_delta_log")):
            continue
        dt = DeltaTable(path)
        if len(dt.file_uris([("cluster", "=", cluster)])) > COMPACT_ABOVE_FILES:
            dt.optimize.compact(partition_filters=[("cluster", "=", cluster)])
            compacted.append(table)
        vacuumed += _vacuum(path, retention_hours)
    return Pruned(len(runs) - len(kept_runs), len(forgotten), deleted, vacuumed, tuple(compacted))


def _vacuum(path: str, retention_hours: int) -> int:
    """Vacuum the table when it has removed files older than the retention still on disk
    (a vacuum is two commits: none when there is nothing to remove). Returns their number."""
    from deltalake import DeltaTable

    dt = DeltaTable(path)
    old = dt.vacuum(retention_hours=retention_hours, dry_run=True, enforce_retention_duration=False)
    present = [f for f in old if os.path.exists(os.path.join(path, f))]
    if present:
        dt.vacuum(retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False)
    return len(present)


def _delete(path: str, predicate: str) -> int:
    """Delete the rows matching ``predicate`` (a Delta delete: files holding none are untouched)."""
    from deltalake import DeltaTable

    metrics = DeltaTable(path).delete(predicate)
    return int(metrics.get("num_deleted_rows", 0) or 0)
