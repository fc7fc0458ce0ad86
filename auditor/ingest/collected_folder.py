"""A node folder that ``auditor collect`` wrote (SPEC 3.4), as discovery sees it: the
manifest, each log dir's tables (a few files, whatever the number of partitions) and the
log dir's copied checkpoint files. Spark reads the tables (:mod:`auditor.ingest.collected`).
"""

from __future__ import annotations

import gzip
import json
import os
import re
from datetime import datetime
from pathlib import Path

from auditor import collect as c
from auditor.errors import InputError
from auditor.ingest.found import LOG_DIR_CHECKPOINTS, CollectedDir, Discovery, FileProblem, add_file, rel_path

LOG_DIR_LABEL = re.compile(r"^logdir=\d+$")


def walk_collected(result: Discovery, base: Path, root: str, instant: datetime, broker: int) -> None:
    """A node folder ``auditor collect`` wrote: its manifest, each log dir's tables (a few
    files, whatever the number of partitions) and copied checkpoint files.

    Raises:
        InputError: the manifest cannot be read or names a format version this auditor
            does not know (SPEC 3.4: the run ends).
    """
    rel = rel_path(root, base)
    try:
        with open(os.path.join(root, c.MANIFEST), encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError) as exc:
        raise InputError(f"{rel}/{c.MANIFEST}: a collected node folder whose manifest cannot be read: {exc}") from exc
    if not isinstance(manifest, dict):
        raise InputError(f"{rel}/{c.MANIFEST}: a collected node folder whose manifest is not a JSON object")
    version = manifest.get("format_version")
    if manifest.get("format") != c.FORMAT or version != c.FORMAT_VERSION:
        raise InputError(f"{rel}/{c.MANIFEST}: a collected node folder of format {manifest.get('format')!r} "
                         f"version {version!r}; this auditor reads {c.FORMAT!r} version {c.FORMAT_VERSION}")
    if manifest.get("node_id") != broker:
        result.problems.append(FileProblem(
            f"{rel}/{c.MANIFEST}", instant, broker,
            f"collected from node {manifest.get('node_id')!r}, in the folder of broker {broker}: read as broker {broker}"))
    for reason, n in (manifest.get("skipped") or {}).items():
        result.skipped[str(reason)] += int(n)
    gone = (manifest.get("counts") or {}).get("vanished_files", 0)
    if gone:
        result.skipped["gone while collected (retention, compaction)"] += int(gone)
    result.swaps.extend(f"{rel}/{name}" for name in manifest.get("swap_files") or [])
    labels = {str(entry.get("label")) for entry in manifest.get("log_dirs") or []}
    for other in os.listdir(root):
        if other != c.MANIFEST and other not in labels:
            result.skipped["not named by the collected folder's manifest"] += 1
    for entry in manifest.get("log_dirs") or []:
        label = str(entry.get("label"))
        folder = os.path.join(root, label)
        if not LOG_DIR_LABEL.match(label) or not os.path.isdir(folder):
            result.problems.append(FileProblem(f"{rel}/{label}", instant, broker,
                                               "a log dir the manifest names is not in the collected folder"))
            continue
        tables = {name: c.table_path(folder, name) for name in (c.BATCHES, c.SEGMENTS, c.SMALL_FILES)}
        missing = [name for name in (c.BATCHES, c.SEGMENTS) if tables[name] is None]
        if missing:
            result.problems.append(FileProblem(f"{rel}/{label}", instant, broker,
                                               f"collected log dir without its {' and '.join(missing)} table"))
            continue
        batches, segments, small = tables[c.BATCHES], tables[c.SEGMENTS], tables[c.SMALL_FILES]
        assert batches is not None and segments is not None
        formats = {c.CSV_GZ if p.endswith(c.CSV_GZ) else c.PARQUET for p in (batches, segments, small) if p}
        if len(formats) > 1:
            result.problems.append(FileProblem(f"{rel}/{label}", instant, broker,
                                               "collected tables of two formats in one log dir"))
            continue
        try:
            seg_rows, small_rows = table_rows(segments), table_rows(small) if small else 0
        except (OSError, ValueError, EOFError) as exc:
            result.problems.append(FileProblem(f"{rel}/{label}", instant, broker,
                                               f"collected table cannot be read: {exc}"))
            continue
        result.collected.append(CollectedDir(
            rel=f"{rel}/{label}", snapshot=instant, broker=broker, batches=batches, segments=segments,
            small_files=small, table_format="csv.gz" if c.CSV_GZ in formats else "parquet",
            segment_rows=seg_rows, small_file_rows=small_rows, segment_bytes=int(entry.get("segment_bytes") or 0),
            partitions=int(entry.get("partitions") or 0), crc_verified=bool(manifest.get("crc_verified")),
            metadata_log=bool(entry.get("metadata_log"))))
        # the log dir's checkpoint files, copied as they are
        for e in sorted(os.scandir(folder), key=lambda e: e.name):
            if e.name in LOG_DIR_CHECKPOINTS:
                add_file(result, base, e, e.name, instant, broker, f"{rel}/{label}", None, None)


def table_rows(path: str) -> int:
    """The rows of a collected table: a Parquet file's footer says; a gzip CSV's lines are
    counted (its header row aside)."""
    if path.endswith(c.PARQUET):
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    with gzip.open(path, "rb") as handle:
        return max(0, sum(1 for _ in handle) - 1)
