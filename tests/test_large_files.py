"""Dump files too big to read whole give what they give read whole.

A file above :func:`auditor.ingest.wholefile.whole_file_limit` is read by Spark's text
source, which splits it across tasks: a file without record lines finds each line's number
and section in a broadcast table of positions (no window over its lines), a file with
record lines takes one window per file. Every dump fixture (each Kafka era's text, damaged
lines, multi-section files) and a per-broker shallow dump (many sections, batch lines
without ``count:``, blank and damaged lines, index sections) are scanned and drilled both
ways, with splits of 700 bytes so that files are cut into several splits and several
splits share a task: the accounting, ``parse_errors``, sections, summaries and batches
must be the same, row for row.
"""

from __future__ import annotations

import re
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from auditor.frames import local_frame
from auditor.ingest.batches import DumpFiles
from auditor.ingest.discovery import InputFile
from auditor.ingest.wholefile import read_dump_lines
from auditor.materialise import materialise
from auditor.policy import session_conf
from auditor.summarise.scan import pending_summaries, scan_dumps, split_scan
from auditor.workdir import new_work_dir
from tests.conftest import DUMPS

pytestmark = pytest.mark.spark

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SPLIT = {"spark.sql.files.maxPartitionBytes": "700", "spark.sql.files.openCostInBytes": "0"}
#: The per-broker shallow dump's file id.
BROKER_DUMP = 100


def per_broker_dump() -> str:
    """A shallow dump of a whole broker: 40 partitions, with what shallow dumps hold
    besides batch lines (a line before any header, index sections, blank and damaged
    lines), and batch lines with and without ``count:``."""
    lines = ["a line before any header"]  # (sections of 2 to 19 lines: longer and shorter than a tail)
    for part in range(40):
        lines += [f"Dumping /data/pb-{part}/00000000000000000000.log", "Starting offset: 0"]
        for b in range(part * 7 % 15):
            count = "" if (part + b) % 3 == 0 else " count: 1"
            lines.append(f"baseOffset: {b} lastOffset: {b}{count} baseSequence: -1 lastSequence: -1 producerId: -1 "
                         f"producerEpoch: -1 partitionLeaderEpoch: {b // 2} isTransactional: false isControl: false "
                         f"position: {b * 70} CreateTime: 1 size: 70 magic: 2 compresscodec: none crc: {1000 + b} "
                         f"isvalid: true")
            if (part + b) % 11 == 0:
                lines.append("")
            if (part + b) % 13 == 0:
                lines.append("not a line of kafka-dump-log")
        if part % 5 == 0:
            lines += [f"Dumping /data/pb-{part}/00000000000000000000.index", "timestamp: 1 offset: 0"]
    return "\n".join(lines) + "\n"


def dump_files(root: Path) -> list[tuple[int, InputFile]]:
    files = []
    for i, src in enumerate(sorted(DUMPS.glob("*.txt"))):
        # in the folder its first header names, so its sections are placed
        named = re.search(r"Dumping \S*/([^/\s]+)-(\d+)/", src.read_text())
        topic, part = (named.group(1), int(named.group(2))) if named else (f"t{i}", 0)
        folder = root / f"{topic}-{part}"
        folder.mkdir(parents=True, exist_ok=True)
        path = Path(shutil.copy(src, folder / src.name))
        files.append((i, InputFile(path=str(path), rel=f"{topic}-{part}/{src.name}", kind="dump", snapshot=T0,
                                   broker=1, log_dir=".", topic=topic, partition=part, size=path.stat().st_size)))
    path = root / "kafka-dump-log.txt"
    path.write_text(per_broker_dump())
    files.append((BROKER_DUMP, InputFile(path=str(path), rel=path.name, kind="dump", snapshot=T0, broker=1,
                                         log_dir=".", topic=None, partition=None, size=path.stat().st_size)))
    return files


def parsed(spark, files: list[tuple[int, InputFile]], limit: int | None) -> dict[str, list[tuple]]:  # type: ignore[no-untyped-def]
    frame = local_frame(spark, [(i, f.rel, f.snapshot, f.broker, f.topic, f.partition) for i, f in files],
                        "file_id int, rel string, snapshot timestamp, broker int, topic string, partition int")
    scan = materialise({"scan": scan_dumps(spark, files, frame, limit)}, new_work_dir(), "scan")["scan"]
    parts = split_scan(scan, frame)
    sections = parts.sections.select("file_id", "sec", "file", "snapshot", "replica", "topic", "partition",
                                     "segment_base_offset")
    source = DumpFiles(spark, files, frame, sections, limit)
    items = materialise({"items": source.items()}, new_work_dir(), "items")["items"]
    frames = {"accounting": parts.accounting, "errors": parts.errors, "sections": parts.sections,
              "summaries": parts.summaries.unionByName(pending_summaries(parts.items, sections)),
              "batches": source.batches_of(items)}
    return {name: sorted((tuple(r) for r in df.collect()), key=repr) for name, df in frames.items()}


def test_large_files_read_line_by_line_give_what_they_give_read_whole(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    files = dump_files(tmp_path)
    whole = parsed(spark, files, None)
    with session_conf(spark, SPLIT):
        split = spark.read.text(dict(files)[BROKER_DUMP].path).select("_metadata.file_block_start").distinct().count()
        by_line = parsed(spark, files, 0)
        context = {(r.file_id, r.owner is None) for r in read_dump_lines(spark, files, 0).filter(
            F.col("text").startswith("baseOffset: ")).collect()}
    assert split >= 20, split  # the per-broker dump is read in many splits
    # the shallow files took the table of positions (no line needs an owner), the others
    # the window (a batch line owns itself)
    assert (BROKER_DUMP, True) in context and (BROKER_DUMP, False) not in context
    deep = {i for i, f in files if "baseOffset: " in (text := Path(f.path).read_text())
            and any(line.lstrip().startswith(("|", "offset: ")) for line in text.splitlines())}
    assert deep and {(i, False) for i in deep} <= context
    assert len(whole["batches"]) > 100 and len(whole["errors"]) > 5 and len(whole["sections"]) > 60
    for name in whole:
        assert by_line[name] == whole[name], name
