"""What a walk of an input root finds (:mod:`auditor.ingest.discovery`): the files Spark
will read, the files and folders that cannot be used, and the log dirs that ``auditor
collect`` wrote. Plain data, no Spark.
"""

from __future__ import annotations

import functools
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

#: Kinds of input file.
DUMP, LEADER_EPOCH, HWM, LOG_START, RECOVERY_POINT, DESCRIBE = (
    "dump", "leader-epoch-checkpoint", "replication-offset-checkpoint",
    "log-start-offset-checkpoint", "recovery-point-offset-checkpoint", "topics-describe",
)
LOG_DIR_CHECKPOINTS = (HWM, LOG_START, RECOVERY_POINT)


@dataclass(frozen=True)
class InputFile:
    """One file Spark will read, with everything its location tells."""

    path: str  # absolute path
    rel: str  # path relative to the input root, as stored in ``parse_errors.file``
    kind: str
    snapshot: datetime
    broker: int | None
    log_dir: str | None  # relative dir whose checkpoints apply to the partition folders in it
    topic: str | None  # from the partition folder, when the file sits in one
    partition: int | None
    size: int


@dataclass(frozen=True)
class FileProblem:
    """A file or folder that could not be used: becomes a ``parse_errors`` row."""

    rel: str
    snapshot: datetime | None
    broker: int | None
    error: str


@dataclass(frozen=True)
class CollectedDir:
    """One log dir of a node folder that ``auditor collect`` wrote (SPEC 3.4): its tables,
    read by Spark as the log dir it came from (:mod:`auditor.ingest.collected`). The driver
    lists these few files per log dir, never one per partition or segment."""

    rel: str  # the log dir's folder relative to the root (``broker=N/logdir=<k>``): its files' paths
    snapshot: datetime
    broker: int
    batches: str  # absolute paths of its batch, segment and small-file tables
    segments: str
    small_files: str | None
    table_format: str  # "parquet" or "csv.gz"
    segment_rows: int  # rows of its segment table (one per segment or snapshot file)
    small_file_rows: int
    segment_bytes: int  # the collected segment files' bytes
    partitions: int
    crc_verified: bool
    metadata_log: bool  # it holds KRaft's metadata log folder


@dataclass
class Discovery:
    """The result of walking one input root."""

    root: str
    snapshots: list[datetime]
    files: list[InputFile] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    #: ``*.swap`` files (a compaction result Kafka's log recovery would install), by path
    #: relative to the root: skipped, counted and named in the run's summary (SPEC 3.3)
    swaps: list[str] = field(default_factory=list)
    #: The log dirs of collected node folders (``broker=N/collect.json``, SPEC 3.4).
    collected: list[CollectedDir] = field(default_factory=list)

    @property
    def files_skipped(self) -> int:
        """Files and folders deliberately left out (known non-inputs, -delete folders...)."""
        return sum(self.skipped.values())


def rel_path(path: str | os.PathLike[str], base: Path) -> str:
    """``os.path.relpath(path, base)`` for an absolute ``path`` under the absolute ``base``
    (at 300,000 files, relpath's ``abspath`` and ``getcwd`` calls were seconds)."""
    text, prefix = os.fspath(path), _prefix(base)
    return text[len(prefix):] if text.startswith(prefix) and len(text) > len(prefix) else os.path.relpath(text, base)


@functools.lru_cache(maxsize=64)
def _prefix(base: Path) -> str:
    return os.path.join(os.fspath(base), "")


def add_file(result: Discovery, base: Path, entry: os.DirEntry[str], kind: str,
              instant: datetime, broker: int | None, log_dir: str | None,
              topic: str | None, partition: int | None) -> None:
    """``entry`` as an input file of ``result``, or the reason it cannot be read."""
    rel = rel_path(entry.path, base)
    try:
        st = entry.stat()  # follows a symlink: a dangling one cannot be read
    except OSError as exc:
        result.problems.append(FileProblem(rel, instant, broker, f"file cannot be read: {exc.strerror or exc}"))
        return
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block the reader forever
        result.problems.append(FileProblem(rel, instant, broker,
                                           "not a regular file (a pipe, socket or device): not read"))
        return
    if not os.access(entry.path, os.R_OK):
        result.problems.append(FileProblem(rel, instant, broker, "file cannot be read: permission denied"))
        return
    size = st.st_size
    result.files.append(InputFile(
        path=entry.path, rel=rel, kind=kind, snapshot=instant, broker=broker,
        log_dir=log_dir, topic=topic, partition=partition, size=size))
