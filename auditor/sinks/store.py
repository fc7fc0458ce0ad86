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

- ``store_batches``: the file's batches (SPEC 3.1, before two dumps of one segment are
  merged: that happens in every run over the files it uses);
- ``store_segments``: the file's ``.log`` sections with their invalid trailing bytes;
- ``store_accounting``: the file's line counts (read, parsed, skipped, quarantined);
- ``store_errors``: its quarantined lines (as ``parse_errors`` stores them);
- ``store_files``: one row per fingerprint and run that used it, written **last**: a
  fingerprint counts only through a ``store_files`` row, and only the rows its ``writer``
  wrote count. A run killed while writing leaves rows no ``store_files`` row names, never
  read (and pruned later); two clusters never share a row (every read filters on it).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import pyarrow as pa

logger = logging.getLogger(__name__)

EDGE = 1024
STORE_DIR = os.path.join("_auditor", "store")
DATA_TABLES = ("store_batches", "store_segments", "store_accounting", "store_errors")

FILES_SCHEMA = pa.schema([
    ("cluster", pa.string()), ("fp", pa.string()), ("writer", pa.string()), ("run_id", pa.string()),
    ("broker", pa.int32()), ("path", pa.string()), ("size", pa.int64()), ("mtime_ns", pa.int64()),
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


def known(out: str, cluster: str) -> dict[str, str]:
    """``fp -> writer`` of every fingerprint of ``cluster`` the store can give rows for."""
    path = store_path(out, "store_files")
    if not os.path.isdir(os.path.join(path, "_delta_log")):
        return {}
    from deltalake import DeltaTable

    rows = DeltaTable(path).to_pyarrow_table(columns=["cluster", "fp", "writer"],
                                             filters=[("cluster", "=", cluster)])
    # The rows of one fingerprint name the run that parsed it; two runs that parsed the same
    # new file before either saved wrote equal rows: the smaller run id is taken, always.
    writers: dict[str, str] = {}
    for fp, writer in zip(rows.column("fp").to_pylist(), rows.column("writer").to_pylist()):
        writers[fp] = min(writer, writers.get(fp, writer))
    return writers


def read_rows(spark: Any, out: str, table: str, schema: Any, cluster: str, wanted: Any) -> Any:
    """The rows of ``table`` for the fingerprints in ``wanted`` (a DataFrame with ``fp``,
    ``writer`` and whatever the caller wants attached), read by Spark from the table's
    current Parquet files."""
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    from auditor.spark import local_frame

    path = store_path(out, table)
    if not os.path.isdir(os.path.join(path, "_delta_log")):
        return local_frame(spark, [], schema).join(wanted, ["fp", "writer"])
    uris = DeltaTable(path).file_uris([("cluster", "=", cluster)])
    if not uris:
        return local_frame(spark, [], schema).join(wanted, ["fp", "writer"])
    # The partition column lives in the folder names, not in the files.
    rows = spark.read.schema(schema).parquet(*uris)
    return rows.join(F.broadcast(wanted), ["fp", "writer"])


def save(out: str, cluster: str, run_id: str, new: Sequence[Fingerprint], used: Sequence[str],
         writers: dict[str, str], frames: dict[str, pa.Table | None]) -> None:
    """Add the rows of the files this run parsed (``new``), then one ``store_files`` row per
    fingerprint this run used (``used``; ``writers`` says who wrote each one's rows).

    ``frames``: ``store_batches`` etc., each with ``fp`` and the table's columns (the
    ``cluster`` and ``writer`` columns are added here). Called under OUT's lock.
    """
    from deltalake import write_deltalake

    for table in DATA_TABLES:
        rows = frames.get(table)
        if rows is None or rows.num_rows == 0:
            continue
        rows = rows.append_column("writer", pa.array([run_id] * rows.num_rows, pa.string()))
        rows = rows.append_column("cluster", pa.array([cluster] * rows.num_rows, pa.string()))
        write_deltalake(store_path(out, table), rows, mode="append", partition_by=["cluster"])
    by_fp = {f.fp: f for f in new}
    files = pa.table({
        "cluster": [cluster] * len(used), "fp": list(used), "writer": [writers[fp] for fp in used],
        "run_id": [run_id] * len(used),
        "broker": [by_fp[fp].broker if fp in by_fp else None for fp in used],
        "path": [by_fp[fp].path if fp in by_fp else None for fp in used],
        "size": [by_fp[fp].size if fp in by_fp else None for fp in used],
        "mtime_ns": [by_fp[fp].mtime_ns if fp in by_fp else None for fp in used],
    }, schema=FILES_SCHEMA)
    write_deltalake(store_path(out, "store_files"), files, mode="append", partition_by=["cluster"])


def size_on_disk(out: str) -> int:
    """Bytes under the store (README: how large it grows)."""
    total = 0
    for dirpath, _, names in os.walk(os.path.join(out, STORE_DIR)):
        total += sum(os.path.getsize(os.path.join(dirpath, n)) for n in names)
    return total


def exists(out: str) -> bool:
    return Path(out, STORE_DIR).is_dir()
