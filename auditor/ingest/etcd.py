"""``--format etcd``: the write-ahead logs of etcd's members, read without running etcd.

ROOT holds one folder per member, ``member=NAME/``, each holding that member's data dir
(or any folder around it): every ``<seq>-<index>.wal`` file under a ``wal`` folder in it is
read. Several snapshots of one cluster sit in ``ROOT/snapshot=<label>/member=NAME/``, as
for Kafka (SPEC 3.1). Format facts: ``docs/etcd-wal.md``.

The mapping into the auditor's model (the issue's, and SPEC 2's for Raft):

- replica = member: NAME when every member's NAME is a non-negative integer, else the
  member's position (1, 2, ...) among the input's member names in sorted order; topic ``etcd``, partition 0
  (etcd runs one Raft group);
- one batch per log entry: offset = index, epoch = term, CRC = CRC-32C of the entry's
  encoded bytes (its term, index, type and data: entries that differ in anything differ in
  CRC; the data itself is never kept, only its size);
- the log is what etcd's own reader (``wal.ReadAll``) returns: records in file order, a
  later entry at an index at or below an earlier one replaces the tail from there, entries
  at or below the latest snapshot's index are skipped, and reading stops at the first
  record that cannot be read or a break in the CRC chain between files;
- HWM = the last HardState's commit index + 1 (SPEC 2 and 3.2: the HWM is exclusive);
  log start = the latest snapshot's index + 1 (the first index the log holds: Raft's
  ``firstIndex``; the entry at the snapshot's index is inside the snapshot);
- no epoch cache file: the cache is rebuilt from the log, as for tables, without a
  ``MISSING_INPUT`` finding; no metadata: the leader is inferred (SPEC 4.6);
- where reading stops early: a ``CORRUPT_BATCH`` at the index the unread part starts at,
  INFO for a torn final record of the member's last file (etcd repairs it on start),
  CRITICAL for anything else (etcd refuses to start on it), and a ``parse_errors`` row.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pyspark.sql import SparkSession, Window

from auditor import columns as F
from auditor.columns import col, lit
from auditor.errors import InputError
from auditor.frames import local_frame
from auditor.ingest.batches import BatchSource
from auditor.ingest.discovery import InputFile, root_entries, snapshot_roots
from auditor.ingest.etcd_wal import read_wal_records
from auditor.ingest.lines import LINE_COUNTS, line_counts
from auditor.ingest.model import ERRORS_SCHEMA, SEGMENTS_DDL, TOPICS_DDL, Snapshot, offsets_ddl
from auditor.materialise import materialise

TOPIC, PARTITION = "etcd", 0
MEMBER_DIR = re.compile(r"^member=(?P<name>.+)$")
WAL_NAME = re.compile(r"^(?P<seq>[0-9a-f]{16})-(?P<index>[0-9a-f]{16})\.wal$")
WAL_KIND = "etcd-wal"

FILES_SCHEMA = ("file_id int, rel string, snapshot timestamp, replica int, member string, "
                "seq bigint, name_index bigint, size bigint, last_file boolean")


@dataclass
class EtcdInput:
    """What the walk of an etcd ROOT found (no Spark)."""

    root: str
    snapshots: list[datetime]
    members: dict[str, int]  # member name -> replica id
    present: list[tuple[datetime, int]] = field(default_factory=list)  # (snapshot, replica) of each member folder
    wal_files: list[tuple[InputFile, str, int, int]] = field(default_factory=list)  # (file, member, seq, name index)
    problems: list[tuple[datetime, str, str]] = field(default_factory=list)  # (snapshot, rel, error)
    skipped: Counter[str] = field(default_factory=Counter)


def replica_ids(names: list[str]) -> dict[str, int]:
    """Member name -> replica id: the names themselves when they all are small non-negative
    integers, else 1, 2, ... in sorted name order."""
    if names and all(n.isdigit() and int(n) < 2**31 for n in names):
        return {n: int(n) for n in names}
    return {n: i for i, n in enumerate(sorted(names), start=1)}


def discover_etcd(root: str, default_snapshot: datetime, snapshot_label: str | None) -> EtcdInput:
    """Walk ``root`` for ``member=NAME`` folders (optionally under ``snapshot=`` folders).

    Raises:
        InputError: ``root`` is missing or holds no ``member=NAME`` folder.
        UsageError: conflicting or bad snapshot labels.
    """
    base = Path(root)
    labelled = snapshot_roots(base, root_entries(base), MEMBER_DIR, "member=", snapshot_label, default_snapshot)
    folders: list[tuple[datetime, str, Path]] = []
    for instant, folder in labelled:
        try:
            listed = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise InputError(f"input folder {folder} cannot be read: {exc.strerror or exc}") from exc
        for e in listed:
            m = MEMBER_DIR.match(e.name)
            if m and e.is_dir():
                folders.append((instant, m.group("name"), Path(e.path)))
    if not folders:
        raise InputError(f"input {base} holds no member=NAME folder (--format etcd)")
    found = EtcdInput(root=str(base), snapshots=[t for t, _ in labelled],
                      members=replica_ids(sorted({name for _, name, _ in folders})))
    for instant, name, folder in folders:
        replica = found.members[name]
        found.present.append((instant, replica))
        wal = _wal_files(found, base, folder, instant)
        if not wal:
            found.problems.append((instant, os.path.relpath(folder, base),
                                   "no etcd WAL file (member/wal/<seq>-<index>.wal) in this member's folder"))
        for path, seq, index in wal:
            rel = os.path.relpath(path, base)
            file = InputFile(path=os.path.abspath(path), rel=rel, kind=WAL_KIND, snapshot=instant, broker=replica,
                             log_dir=None, topic=TOPIC, partition=PARTITION, size=os.path.getsize(path))
            found.wal_files.append((file, name, seq, index))
    return found


def _wal_files(found: EtcdInput, base: Path, folder: Path, instant: datetime) -> list[tuple[str, int, int]]:
    """``(path, seq, index)`` of the WAL files under ``folder``; other files are skipped
    (etcd's own ``.tmp`` preallocations, snapshots, the bolt db), a ``.wal`` file with a
    name etcd would not read is a problem."""
    out: list[tuple[str, int, int]] = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            m = WAL_NAME.match(name)
            if m and os.path.basename(dirpath) == "wal" and os.path.isfile(path):
                out.append((path, int(m.group("seq"), 16), int(m.group("index"), 16)))
            elif name.endswith(".wal"):
                found.problems.append((instant, os.path.relpath(path, base),
                                       "not an etcd WAL file: the name is not <seq>-<index>.wal (16 hex digits each) "
                                       "in a wal folder"))
            else:
                found.skipped["not a WAL file"] += 1
    return out


def read_etcd(spark: SparkSession, path: str, snapshot: str | None, default_snapshot: datetime,
              work_dir: str) -> Snapshot:
    """Read the members' WAL files under ``path`` into a :class:`Snapshot` (see the module
    docstring for the mapping)."""
    found = discover_etcd(path, default_snapshot, snapshot)
    indexed = list(enumerate(f for f, _, _, _ in found.wal_files))
    last_seq: dict[tuple[datetime, int | None], int] = {}
    for file, _, seq, _ in found.wal_files:
        last_seq[(file.snapshot, file.broker)] = max(last_seq.get((file.snapshot, file.broker), -1), seq)
    files = local_frame(spark, [
        (i, f.rel, f.snapshot, f.broker, member, seq, index, f.size, seq == last_seq[(f.snapshot, f.broker)])
        for (i, f), (_, member, seq, index) in zip(indexed, found.wal_files)], FILES_SCHEMA)

    # Cut point 1 (one job): every WAL file decoded where it is read, one row per record.
    records = materialise({"records": read_wal_records(spark, indexed)}, work_dir, "etcd-records")["records"]
    records = records.join(F.broadcast(files), "file_id")
    member = ["snapshot", "replica"]
    pos = F.struct("seq", "rel", "record_no")  # a total order of one member's records

    # Where each member's readable log ends: the first record that cannot be read, or the
    # first file whose CRC chain does not continue the previous file's (or that does not
    # follow it in sequence).
    per_file = records.groupBy("file_id", *member, "seq", "rel", "name_index", "last_file").agg(
        F.max(F.when((col("record_no") == 0) & (col("record_type") == "crc"), col("crc"))).alias("start_crc"),
        F.max_by("crc", F.when(col("problem").isNull(), col("record_no"))).alias("end_crc"),
        F.min(F.when(col("problem").isNotNull(), col("record_no"))).alias("problem_no"))
    by_seq = Window.partitionBy(*member).orderBy("seq", "rel")
    chain = per_file.select(
        "*", F.lag("seq").over(by_seq).alias("prev_seq"), F.lag("end_crc").over(by_seq).alias("prev_end_crc"),
        F.lag("problem_no").over(by_seq).alias("prev_problem"))
    broken = chain.filter(col("prev_seq").isNotNull() & col("prev_problem").isNull() & (
        (col("seq") != col("prev_seq") + 1) | ~col("start_crc").eqNullSafe(col("prev_end_crc"))))
    breaks = broken.select(
        *member, "file_id", "seq", "rel", "last_file", lit(-1).cast("bigint").alias("record_no"),
        lit(None).cast("bigint").alias("byte_offset"), lit(False).alias("torn"),
        F.when(col("seq") != col("prev_seq") + 1, F.format_string(
            "the WAL file sequence jumps from %d to %d: a file is missing", col("prev_seq"), col("seq")))
        .otherwise(F.format_string(
            "the CRC chain breaks: this file starts from CRC %d, the previous file ended at %d",
            col("start_crc"), col("prev_end_crc"))).alias("problem"))
    bad_records = records.filter(col("problem").isNotNull()).select(
        *member, "file_id", "seq", "rel", "last_file", "record_no", "byte_offset",
        F.coalesce(col("torn"), lit(False)).alias("torn"), "problem")
    first_stop = breaks.unionByName(bad_records).groupBy(*member).agg(
        F.min(F.struct("seq", "rel", "record_no", "file_id", "byte_offset", "torn", "last_file", "problem"))
        .alias("stop"))
    stops = materialise({"stops": first_stop.select(*member, "stop.*")}, work_dir, "etcd-stops")["stops"]

    readable = records.join(stops.select(*member, F.struct("seq", "rel", "record_no").alias("stop_pos")),
                            member, "left").withColumn(
        "readable", col("problem").isNull() & (col("stop_pos").isNull() | (pos < col("stop_pos"))))
    good = readable.filter("readable")
    latest = good.groupBy(*member).agg(
        F.max_by("snap_index", F.when(col("record_type") == "snapshot", pos)).alias("start_index"),
        F.max_by("hs_commit", F.when(col("record_type") == "state", pos)).alias("commit"))
    entries = good.filter(col("record_type") == "entry").join(latest.select(*member, "start_index"), member, "left") \
        .filter(col("index") > F.coalesce(col("start_index"), lit(-1)))
    # A later entry at or below an earlier one's index replaces the tail from there: an
    # entry survives when every entry written after it has a higher index. (The frame runs
    # over the entries written later, in reverse order, so it is a running minimum.)
    later = Window.partitionBy(*member).orderBy(col("seq").desc(), col("rel").desc(), col("record_no").desc()) \
        .rowsBetween(Window.unboundedPreceding, -1)
    log = entries.withColumn("next_min", F.min("index").over(later)).filter(
        col("next_min").isNull() | (col("index") < col("next_min")))
    batches = log.select(
        "snapshot", "replica", lit(TOPIC).alias("topic"), lit(PARTITION).alias("partition"),
        col("rel").alias("file"), (col("record_no") + 1).alias("line_number"),
        col("name_index").alias("segment_base_offset"), col("index").alias("base_offset"),
        col("index").alias("last_offset"), col("term").cast("int").alias("epoch"),
        col("entry_crc").alias("crc"), lit(1).cast("bigint").alias("record_count"),
        lit(True).alias("is_valid"), (col("entry_type") != 0).alias("is_control"),
        lit(None).cast("boolean").alias("is_transactional"), lit(None).cast("int").alias("magic"),
        lit("etcd").alias("origin"))
    keyed = [lit(TOPIC).alias("topic"), lit(PARTITION).alias("partition")]
    ends = log.groupBy(*member).agg(F.min("index").alias("first_index"), F.max("index").alias("last_index"))
    offsets = latest.join(ends, member, "full")
    hwm = offsets.filter(col("commit").isNotNull()).select(
        "snapshot", *keyed, "replica", (col("commit") + 1).alias("high_watermark"))
    log_start = offsets.select(
        "snapshot", *keyed, "replica",
        F.coalesce(col("start_index") + 1, col("first_index")).alias("log_start_offset")).filter(
        col("log_start_offset").isNotNull())
    # The index where the unread part starts: right after the readable log's last entry.
    wal_problems = stops.join(offsets.select(*member, "last_index", "start_index"), member, "left").join(
        files.select("file_id", "member", "name_index"), "file_id").select(
        "snapshot", *keyed, "replica", "member", col("rel").alias("file"), "record_no", "byte_offset",
        "problem", "torn", "last_file",
        F.coalesce(col("last_index") + 1, col("start_index") + 1, col("name_index")).alias("offset"),
        (col("torn") & col("last_file")).alias("repairable"))

    problems = local_frame(spark, [(t, None, rel, None, 0, None, err) for t, rel, err in found.problems],
                           ERRORS_SCHEMA)
    record_errors = stops.select(
        "snapshot", col("replica").alias("broker"), col("rel").alias("file"),
        F.when(col("record_no") >= 0, col("record_no") + 1).alias("line_number"),
        F.coalesce(col("byte_offset"), lit(0)).alias("byte_offset"), lit(None).cast("string").alias("line"),
        col("problem").alias("error"))
    dispositions = readable.select("file_id", F.when(col("problem").isNotNull(), "quarantined")
                                   .when(col("readable"), "parsed").otherwise("skipped").alias("disposition"))
    accounting = line_counts(dispositions).join(files.select("file_id", "rel", "replica", "size"), "file_id").select(
        "file_id", "rel", lit(WAL_KIND).alias("kind"), col("replica").alias("broker"), "size", *LINE_COUNTS)
    with_wal = files.select("snapshot", "replica").distinct().withColumn("has_dump", lit(True))
    present = local_frame(spark, sorted(set(found.present)), "snapshot timestamp, replica int")
    replicas = present.join(with_wal, member, "left").select(
        "snapshot", *keyed, "replica", lit(None).cast("string").alias("log_dir"),
        F.coalesce(col("has_dump"), lit(False)).alias("has_dump"),
        lit(False).alias("has_epoch_file"), lit(False).alias("epoch_file_usable"))

    # Cut point 2 (one job): the parsed tables.
    parsed = materialise({
        "batches": batches, "hwm": hwm, "log_start": log_start, "wal_problems": wal_problems,
        "parse_errors": problems.unionByName(record_errors), "accounting": accounting, "replicas": replicas,
    }, work_dir, "snapshot")
    return Snapshot(
        format="etcd", root=found.root, snapshots=found.snapshots, work_dir=work_dir,
        source=BatchSource(stored=parsed["batches"]), summaries=None, hwm=parsed["hwm"], log_start=parsed["log_start"],
        parse_errors=parsed["parse_errors"], accounting=parsed["accounting"], replicas=parsed["replicas"],
        epoch_cache=local_frame(spark, [], "snapshot timestamp, topic string, partition int, replica int, "
                                           "epoch int, start_offset bigint, file string"),
        metadata=local_frame(spark, [], "snapshot timestamp, topic string, partition int, leader int, "
                                        "replicas array<int>, isr array<int>, elr array<int>, "
                                        "last_known_elr array<int>, has_elr boolean, file string, "
                                        "conflict_lines array<bigint>"),
        segments=local_frame(spark, [], SEGMENTS_DDL), recovery_point=local_frame(spark, [], offsets_ddl("recovery_point")),
        topics=local_frame(spark, [], TOPICS_DDL),
        files_read=len(indexed), files_skipped=found.skipped,
        wal_problems=parsed["wal_problems"], members=found.members,
    )
