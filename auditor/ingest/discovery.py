"""Find and classify the files of a snapshot directory (SPEC 3.1), without Spark.

The walk is a plain ``os.scandir`` recursion: listing tens of thousands of partition
folders this way takes well under a second, where letting Spark discover them costs
listing jobs. What Spark then reads is an explicit list of files.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path

from auditor import collect as c
from auditor.errors import InputError, UsageError
from auditor.ingest.collected_folder import walk_collected
# (the kinds and the walk's results are read as this module's names too)
from auditor.ingest.found import (  # noqa: F401
    DESCRIBE,
    DUMP,
    HWM,
    LEADER_EPOCH,
    LOG_DIR_CHECKPOINTS,
    LOG_START,
    RECOVERY_POINT,
    CollectedDir,
    Discovery,
    FileProblem,
    InputFile,
    add_file,
    rel_path,
)

PARTITION_DIR = c.PARTITION_DIR  # (the folder and file names the collector knows too)
BROKER_DIR = re.compile(r"^broker=(?P<id>.*)$")
SNAPSHOT_DIR = re.compile(r"^snapshot=(?P<label>.*)$")
SKIPPED_DIR_SUFFIXES = c.SKIPPED_DIR_SUFFIXES
DUMP_SUFFIXES = (".txt", ".dump")

#: Kafka's own segment files (SPEC 3.3): ``<20-digit base offset>.log`` in a partition folder.
SEGMENT = "segment"
SEGMENT_NAME = c.SEGMENT_NAME
#: KRaft's metadata log inputs (SPEC 4.7): ``quorum-state`` and bare ``*.checkpoint`` snapshot
#: copies in its folder (a copy's name is its id: never read), and the root's
#: ``kafka-metadata-quorum.sh describe --status`` text.
QUORUM_STATE, KRAFT_SNAPSHOT_FILE, QUORUM_STATUS = "quorum-state", "kraft-snapshot-file", "quorum-status"
QUORUM_STATUS_NAME = "metadata-quorum-status.txt"
#: The metadata log's folder names: ``@metadata-0`` (Kafka 2.8), ``__cluster_metadata-0``.
KRAFT_TOPICS = c.KRAFT_TOPICS
KRAFT_SNAPSHOT_NAME = c.KRAFT_SNAPSHOT_NAME

KNOWN_NON_INPUT = {
    "partition.metadata", "meta.properties", "cleaner-offset-checkpoint", "quorum-state",
    ".lock", ".kafka_cleanshutdown", "bootstrap.checkpoint",
}
KNOWN_NON_INPUT_SUFFIXES = (
    ".index", ".timeindex", ".snapshot", ".txnindex", ".log", ".deleted", ".cleaned",
    ".swap", ".tmp", ".json", ".checkpoint",
)


def parse_snapshot_label(label: str) -> datetime:
    """Parse an ISO-8601 instant; a label without an offset is UTC.

    Raises:
        UsageError: the label is not an ISO-8601 date or instant.
    """
    text = label.strip()
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise UsageError(f"snapshot label {label!r} is not an ISO-8601 instant") from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def discover(root: str | os.PathLike[str], default_snapshot: datetime,
             snapshot_label: str | None = None) -> Discovery:
    """Walk ``root`` and classify its files.

    Args:
        root: the SNAPSHOT directory.
        default_snapshot: label of a root without ``snapshot=`` folders and without
            ``snapshot_label`` (the run's start time).
        snapshot_label: the ``--snapshot`` option, if given.

    Raises:
        InputError: ``root`` is missing, unreadable or holds no ``broker=N`` folder.
        UsageError: ``--snapshot`` with ``snapshot=`` folders, a bad label, or a root
            holding both ``snapshot=`` and ``broker=`` folders.
    """
    base = Path(root)
    entries = root_entries(base)
    snap_dirs = [e for e in entries if e.is_dir() and SNAPSHOT_DIR.match(e.name)]
    broker_dirs = [e for e in entries if e.is_dir() and BROKER_DIR.match(e.name)]
    roots = snapshot_roots(base, entries, BROKER_DIR, "broker=", snapshot_label, default_snapshot)
    result = Discovery(root=str(base), snapshots=[instant for instant, _ in roots])
    # walked from its absolute path: every path below it is then absolute, and a relative
    # path is a slice (:func:`rel_path`), not ``os.path.relpath``'s two ``abspath`` calls
    absolute = Path(os.path.abspath(base))
    for instant, folder in roots:
        _walk_snapshot(result, absolute, Path(os.path.abspath(folder)), instant)

    if not any(f.broker is not None for f in result.files) and not any(
        p.broker is not None for p in result.problems
    ):
        if not _has_broker_dir(base, snap_dirs, broker_dirs):
            raise InputError(f"input {base} holds no broker=N folder")
    return result


def root_entries(base: Path) -> list[os.DirEntry[str]]:
    """The entries of the input folder ``base``, sorted by name.

    Raises:
        InputError: ``base`` is missing, not a directory or unreadable.
    """
    if not base.exists():
        raise InputError(f"input {base} does not exist")
    if not base.is_dir():
        raise InputError(f"input {base} is not a directory")
    try:
        return sorted(os.scandir(base), key=lambda e: e.name)
    except OSError as exc:
        raise InputError(f"input {base} cannot be read: {exc.strerror or exc}") from exc


def snapshot_roots(base: Path, entries: list[os.DirEntry[str]], child: re.Pattern[str], child_name: str,
                   snapshot_label: str | None, default_snapshot: datetime) -> list[tuple[datetime, Path]]:
    """The snapshots of the input ``base`` (whose sorted ``entries`` are given), oldest first:
    one per ``snapshot=<label>`` folder, else ``base`` itself, labelled ``--snapshot`` or
    ``default_snapshot`` (SPEC 3.1). ``child`` matches the folders a snapshot holds
    (``broker=N``, ``member=NAME``), named ``child_name`` in errors.

    Raises:
        UsageError: ``--snapshot`` with ``snapshot=`` folders, a bad or repeated label, or
            ``snapshot=`` folders beside ``child`` folders.
    """
    snap_dirs = [e for e in entries if e.is_dir() and SNAPSHOT_DIR.match(e.name)]
    if not snap_dirs:
        return [(parse_snapshot_label(snapshot_label) if snapshot_label else default_snapshot, base)]
    if any(e.is_dir() and child.match(e.name) for e in entries):
        raise UsageError(f"input {base} holds both snapshot= and {child_name} folders")
    if snapshot_label is not None:
        raise UsageError("--snapshot cannot be used with an input of snapshot= folders")
    labelled = []
    for entry in snap_dirs:
        m = SNAPSHOT_DIR.match(entry.name)
        assert m is not None
        labelled.append((parse_snapshot_label(m.group("label")), Path(entry.path)))
    if len({t for t, _ in labelled}) != len(labelled):
        raise UsageError(f"input {base} has two snapshot= folders for the same instant")
    return sorted(labelled, key=lambda x: x[0])


def _has_broker_dir(base: Path, snap_dirs: list[os.DirEntry[str]],
                    broker_dirs: list[os.DirEntry[str]]) -> bool:
    if broker_dirs:
        return True
    for entry in snap_dirs:
        try:
            if any(e.is_dir() and BROKER_DIR.match(e.name) for e in os.scandir(entry.path)):
                return True
        except OSError:
            continue
    return False


def _walk_snapshot(result: Discovery, base: Path, snap_root: Path, instant: datetime) -> None:
    try:
        entries = sorted(os.scandir(snap_root), key=lambda e: e.name)
    except OSError as exc:
        result.problems.append(FileProblem(rel_path(snap_root, base), instant, None,
                                           f"folder cannot be read: {exc.strerror or exc}"))
        return
    for entry in entries:
        rel = rel_path(entry.path, base)
        if entry.is_dir():
            m = BROKER_DIR.match(entry.name)
            if m is None:
                result.skipped["folder outside broker= folders"] += 1
                continue
            try:
                broker = int(m.group("id"))
            except ValueError:
                result.problems.append(FileProblem(
                    rel, instant, None, f"broker folder {entry.name!r}: broker id is not an integer"))
                continue
            if os.path.exists(os.path.join(entry.path, c.MANIFEST)):
                walk_collected(result, base, entry.path, instant, broker)
            else:
                _walk_broker(result, base, Path(entry.path), instant, broker)
        elif entry.name == "topics-describe.txt":
            add_file(result, base, entry, DESCRIBE, instant, None, None, None, None)
        elif entry.name == QUORUM_STATUS_NAME:
            add_file(result, base, entry, QUORUM_STATUS, instant, None, None, None, None)
        else:
            result.skipped["file at the snapshot root"] += 1


def _walk_broker(result: Discovery, base: Path, broker_root: Path, instant: datetime,
                 broker: int) -> None:
    # (folders are strings, not Paths: at 300,000 partition folders, building Path objects
    # was a third of discovery's time)
    root = os.fspath(broker_root)
    stack = [root]
    seen: set[tuple[int, int]] = set()  # folders by (device, inode): a symlink loop is read once
    while stack:
        folder = stack.pop()
        try:
            st = os.stat(folder)
            if (st.st_dev, st.st_ino) in seen:
                result.problems.append(FileProblem(
                    rel_path(folder, base), instant, broker,
                    "folder links to a folder already read (a symlink loop?): not read again"))
                continue
            seen.add((st.st_dev, st.st_ino))
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            result.problems.append(FileProblem(
                rel_path(folder, base), instant, broker,
                f"folder cannot be read: {exc.strerror or exc}"))
            continue
        files = [e for e in entries if not e.is_dir()]
        m = PARTITION_DIR.match(os.path.basename(folder)) if folder != root else None
        kraft = m is not None and is_kraft_folder(m.group("topic"), m.group("partition"))
        is_partition = m is not None and any(
            e.name.endswith(DUMP_SUFFIXES) or e.name == LEADER_EPOCH
            or SEGMENT_NAME.match(e.name) is not None
            or (kraft and _kraft_kind(e.name) is not None) for e in files)
        log_dir = rel_path(os.path.dirname(folder) if is_partition else folder, base)
        for e in files:
            kind = _classify_file(e.name, is_partition, kraft)
            if kind is None:
                result.skipped[_skip_reason(e.name)] += 1
                if e.name.endswith(".swap"):
                    result.swaps.append(rel_path(e.path, base))
                continue
            topic = m.group("topic") if is_partition and m else None
            partition = int(m.group("partition")) if is_partition and m else None
            add_file(result, base, e, kind, instant, broker, log_dir, topic, partition)
        for e in entries:
            if e.is_dir():
                if e.name.endswith(SKIPPED_DIR_SUFFIXES):
                    result.skipped["folder " + e.name.rsplit("-", 1)[1]] += 1
                elif not is_partition:
                    stack.append(e.path)
                else:
                    result.skipped["folder inside a partition folder"] += 1


def is_kraft_folder(topic: str, partition: str | int) -> bool:
    """Whether ``<topic>-<partition>`` is KRaft's metadata log (SPEC 4.7)."""
    return topic in KRAFT_TOPICS and int(partition) == 0


def _kraft_kind(name: str) -> str | None:
    if name == "quorum-state":
        return QUORUM_STATE
    if KRAFT_SNAPSHOT_NAME.match(name):
        return KRAFT_SNAPSHOT_FILE
    return None


def _classify_file(name: str, in_partition_dir: bool, kraft: bool = False) -> str | None:
    if name.endswith(DUMP_SUFFIXES) and name != "topics-describe.txt":
        return DUMP
    if in_partition_dir and kraft and _kraft_kind(name) is not None:
        return _kraft_kind(name)
    if in_partition_dir and name == LEADER_EPOCH:
        return LEADER_EPOCH
    if in_partition_dir and SEGMENT_NAME.match(name):
        return SEGMENT
    if not in_partition_dir and name in LOG_DIR_CHECKPOINTS:
        return name
    return None


def _skip_reason(name: str) -> str:
    if name in KNOWN_NON_INPUT or name.endswith(KNOWN_NON_INPUT_SUFFIXES):
        return "known non-input file"
    if name == LEADER_EPOCH:
        return "leader-epoch-checkpoint outside a partition folder"
    if name in LOG_DIR_CHECKPOINTS:
        return "log-dir checkpoint inside a partition folder"
    return "unrecognised file"

