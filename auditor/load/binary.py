"""The binary inputs of a Kafka snapshot as the load reads them: segment files decoded in
Spark's tasks (SPEC 3.3), the tables of collected log dirs (SPEC 3.4) and KRaft's snapshot
files read in binary, each stored once, with the segments' summaries, files and errors.
Everything else about them is derived from those stored rows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame, SparkSession

from auditor.frames import local_frame
from auditor.ingest import discovery as d
from auditor.ingest.collected import Collected, read_collected
from auditor.ingest.kraft import SNAPSHOT_PLACE_DDL, snapshot_id
from auditor.ingest.segments import read_segments
from auditor.load import segments as seg
from auditor.materialise import materialise
from auditor.policy import Plan
from auditor.summarise.scan import summarise_batches


@dataclass(frozen=True)
class Binary:
    """What the load read in binary or from collected tables (stored frames, or ``None``
    when the input has none of that kind)."""

    #: The listed files and the collected ones (:data:`auditor.load.kafka.FILES_SCHEMA`).
    files: DataFrame
    collected: Collected | None
    #: Whether a collected log dir holds KRaft's metadata log.
    collected_kraft: bool
    #: The segment files' and collected log dirs' batch rows and their files' places.
    rows: DataFrame | None
    place: DataFrame | None
    #: ``summaries``, ``files`` and ``errors`` of those rows.
    small: dict[str, DataFrame] | None
    #: KRaft's snapshot files read in binary, and their places.
    snap_rows: DataFrame | None
    snap_place: DataFrame | None

    @property
    def segments(self) -> bool:
        """Whether there are segment rows (read or collected)."""
        return self.rows is not None and self.place is not None


def read_binary(spark: SparkSession, indexed: list[tuple[int, d.InputFile]], files: DataFrame,
                found: d.Discovery, work_dir: str, plan: Plan, verify_crc: bool) -> Binary:
    """Read the segment files, collected log dirs and KRaft snapshot files among ``indexed``
    (``(file_id, file)``, whose table is ``files``) and ``found.collected`` (file ids after
    the listed files'), in up to three cut points: the rows with the collected files'
    places, ids and packed bytes; the segments' summaries; the snapshot files' rows."""
    collected = read_collected(spark, found.collected, len(indexed), narrow=plan.narrow, spill=work_dir) \
        if found.collected else None
    collected_kraft = any(cd.metadata_log for cd in found.collected)
    segment_files = [(i, f) for i, f in indexed if f.kind == d.SEGMENT]
    # Segment files (SPEC 3.3): decoded in Spark's tasks, their rows stored once (one job;
    # none without segment files). Everything else about them is derived from those rows.
    # (collected rows are their tables' rows: read, given file ids, stored with them)
    decoded = ([read_segments(spark, seg.file_list(segment_files), verify_crc, spill=work_dir)] if segment_files
               else []) + ([collected.rows] if collected is not None else [])
    # (the collected files' places, ids and packed bytes stored in the same job: every later
    # cut reads them, where each would read the tables and rank the files again)
    kept = {"place": collected.place, "files": collected.files, "contents": collected.contents,
            "zero_snapshots": collected.zero_snapshots, "snapshot_place": collected.snapshot_place} \
        if collected is not None else {}
    first_cut = materialise({"rows": reduce(DataFrame.unionByName, decoded), **kept}, work_dir, "segment-rows",
                            plan) if decoded else {}
    rows = first_cut.get("rows")
    if collected is not None:
        collected = dataclasses.replace(collected, **{k: first_cut[k] for k in kept})
        files = files.unionByName(collected.files)
    places = ([local_frame(spark, seg.place_rows(segment_files), seg.PLACE_DDL, narrow=plan.narrow, spill=work_dir)]
              if segment_files else []) + ([collected.place] if collected is not None else [])
    place = reduce(DataFrame.unionByName, places) if places else None
    # Their batches summarised, files and errors derived over the session's cores (one job):
    # what the cut points after it use is then a few rows per file, as the scan's is.
    small = materialise({
        "summaries": summarise_batches(seg.segment_batches(rows, place)),
        "files": seg.file_rows(rows, place),
        "errors": seg.segment_errors(rows, place),
    }, work_dir, "segment-summaries", plan) if rows is not None and place is not None else None
    # KRaft's snapshot files read in binary (SPEC 3.3, 4.7): every non-empty *.checkpoint,
    # its batches local to the snapshot (they never enter the log)
    snap_files = [(i, f) for i, f in indexed if f.kind == d.KRAFT_SNAPSHOT_FILE and f.size > 0
                  and snapshot_id(f) is not None]
    snap_decoded = ([read_segments(spark, [(i, f.path, False, 0) for i, f in snap_files], verify_crc,
                                   spill=work_dir)] if snap_files else []) + (
        [collected.snapshot_rows] if collected is not None and collected_kraft else [])
    snap_rows = materialise({"rows": reduce(DataFrame.unionByName, snap_decoded)}, work_dir, "kraft-snapshot-rows",
                            plan)["rows"] if snap_decoded else None
    snap_places = ([local_frame(spark, [(i, f.rel, f.snapshot, f.broker, f.topic, f.partition, *snapshot_id(f))
                                        for i, f in snap_files], SNAPSHOT_PLACE_DDL, narrow=plan.narrow,
                                spill=work_dir)] if snap_files else []) + (
        [collected.snapshot_place] if collected is not None and collected_kraft else [])
    snap_place = reduce(DataFrame.unionByName, snap_places) if snap_places else None
    return Binary(files=files, collected=collected, collected_kraft=collected_kraft, rows=rows, place=place,
                  small=small, snap_rows=snap_rows, snap_place=snap_place)
