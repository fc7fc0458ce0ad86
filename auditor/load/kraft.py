"""The KRaft inputs of a Kafka snapshot as the load reads them (SPEC 4.7): which files are
the metadata log's, what the scan's job stores of them, the metadata log's sections in dump
files above the partition folders, and the parsed snapshot's KRaft frames.
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from auditor import columns as F
from auditor.columns import col
from auditor.frames import local_frame
from auditor.ingest import discovery as d
from auditor.ingest.collected import Collected
from auditor.ingest.kraft import (
    GROUPS_DDL,
    all_snapshots,
    binary_snapshots,
    is_kraft,
    parse_kraft_dumps,
    read_kraft_groups,
    read_section_groups,
    segment_log,
    snapshot_files,
)
from auditor.ingest.lines import read_small_files, split_lines
from auditor.ingest.quorum import QUORUM_DDL, STATUS_DDL, parse_quorum_state, parse_quorum_status
from auditor.materialise import frame_files, materialise
from auditor.policy import Plan

if TYPE_CHECKING:
    from auditor.load.reuse import Reuse

KRAFT_KINDS = (d.QUORUM_STATE, d.QUORUM_STATUS, d.KRAFT_SNAPSHOT_FILE)


def kraft_files(indexed: list[tuple[int, d.InputFile]]) -> list[tuple[int, d.InputFile]]:
    """The listed files of the metadata log: its folders' dumps and segments, ``quorum-state``,
    snapshot copies, and the root's status file."""
    return [(i, f) for i, f in indexed if f.kind in KRAFT_KINDS or (
        f.kind in (d.DUMP, d.SEGMENT) and f.topic is not None and f.partition is not None
        and d.is_kraft_folder(f.topic, f.partition))]


def kraft_scan(spark: SparkSession, kraft_files: list[tuple[int, d.InputFile]], plan: Plan, spill: str,
                packed: DataFrame | None = None) -> tuple[dict[str, DataFrame], DataFrame]:
    """What the scan job stores of the KRaft inputs (SPEC 4.7): one aggregate of the metadata
    log's dump lines, the ``quorum-state`` and status files parsed; and those files' line
    dispositions. ``packed``: collected small files (their ``quorum-state`` files are read
    as the files themselves)."""
    def of(kind: str) -> tuple[DataFrame, DataFrame]:
        # (a few files: their places as a local relation, not a filter over every listed file)
        chosen = [(i, f) for i, f in kraft_files if f.kind == kind]
        lines, places = read_small_files(spark, chosen, narrow=plan.narrow, spill=spill), local_frame(
            spark, [(i, f.rel, f.snapshot, f.broker, f.topic, f.partition) for i, f in chosen],
            "file_id int, rel string, snapshot timestamp, broker int, topic string, partition int",
            narrow=plan.narrow)
        if packed is not None and kind == d.QUORUM_STATE:
            mine = packed.filter(col("kind") == kind)
            lines = lines.unionByName(split_lines(mine.select("file_id", "content")))
            places = places.unionByName(mine.select("file_id", "rel", "snapshot", "broker", "topic", "partition"))
        return lines, places

    qs, qs_lines = parse_quorum_state(*of(d.QUORUM_STATE))
    st, st_lines = parse_quorum_status(*of(d.QUORUM_STATUS))
    groups = read_kraft_groups(spark, [(i, f) for i, f in kraft_files if f.kind == d.DUMP], spill=spill,
                               narrow=plan.narrow)
    return ({"kraft_groups": groups, "kraft_quorum_state": qs, "kraft_status": st},
            qs_lines.unionByName(st_lines))


def kraft_sections(dump_files: list[tuple[int, d.InputFile]], work_dir: str,
                    reuse: Reuse | None) -> dict[int, frozenset[int]]:
    """File id -> sections of the dump files above the partition folders whose ``Dumping``
    header names the metadata log (SPEC 3.1, 4.7), from the scan's header rows: the stored
    ones of the files parsed and the store's of the files reused, read by Arrow without
    Spark (five columns of the stored scan rows; nothing read when no dump file sits above
    a partition folder)."""
    above = {i for i, f in dump_files if f.topic is None or f.partition is None}
    if not above:
        return {}
    found: dict[int, set[int]] = {}
    # (the stored frame is one struct column, "scan": five of its fields are read)
    for path in frame_files(work_dir, "scan", "scan"):
        rows = pq.ParquetFile(path).read(columns=[f"scan.{c}" for c in (
            "file_id", "sec", "item_kind", "h_topic", "h_partition")]).column("scan").combine_chunks()
        header = pc.fill_null(pc.and_(pc.and_(
            pc.equal(rows.field("item_kind"), "H"), pc.is_in(rows.field("h_topic"), pa.array(d.KRAFT_TOPICS))),
            pc.equal(rows.field("h_partition"), 0)), False)
        for file_id, sec in zip(rows.field("file_id").filter(header).to_pylist(),
                                rows.field("sec").filter(header).to_pylist()):
            if file_id in above:
                found.setdefault(file_id, set()).add(sec)
    for file_id, secs in (reuse.kraft_sections(above) if reuse is not None else {}).items():
        found.setdefault(file_id, set()).update(secs)
    return {file_id: frozenset(secs) for file_id, secs in found.items()}


def section_groups(spark: SparkSession, dump_files: list[tuple[int, d.InputFile]], work_dir: str,
                   reuse: Reuse | None, plan: Plan) -> DataFrame | None:
    """The stored groups of the metadata log's sections in dump files above the partition
    folders (known from the scan's headers: :func:`kraft_sections`), read by the KRaft reader
    in a cut point of their own; ``None`` when there are none."""
    above = kraft_sections(dump_files, work_dir, reuse)
    if not above:
        return None
    return materialise({"kraft_groups": read_section_groups(spark, dump_files, above, spill=work_dir,
                                                            narrow=plan.narrow)},
                       work_dir, "kraft-sections", plan)["kraft_groups"]


def no_kraft_inputs(spark: SparkSession, plan: Plan) -> dict[str, DataFrame]:
    """The scan's KRaft frames of an input whose only metadata log sections are in dump files
    above the partition folders: empty."""
    return {"kraft_quorum_state": local_frame(spark, [], QUORUM_DDL, narrow=plan.narrow),
            "kraft_status": local_frame(spark, [], STATUS_DDL, narrow=plan.narrow),
            "kraft_groups": local_frame(spark, [], GROUPS_DDL, narrow=plan.narrow)}


def kraft_frames(spark: SparkSession, kraft_files: list[tuple[int, d.InputFile]], stored: dict[str, DataFrame],
                  files: DataFrame, more: DataFrame | None, plan: Plan, seg_rows: DataFrame | None = None,
                  snap_rows: DataFrame | None = None, snap_place: DataFrame | None = None,
                  empty: frozenset[int] = frozenset(), collected: Collected | None = None) -> dict[str, DataFrame]:
    """The KRaft frames of the parsed snapshot, from what the scan job stored (and ``more``:
    the stored groups of the metadata log's sections in files above the folders), the
    decoded rows of segment files (``seg_rows``: the metadata log's are its batches) and of
    snapshot files read in binary (``snap_rows`` at ``snap_place``); ``empty``: the
    zero-length snapshot files that are KAFKA-15312's empty snapshots."""
    place = files.select("file_id", "rel", "snapshot", "broker", "topic", "partition")
    groups = stored["kraft_groups"] if more is None else stored["kraft_groups"].unionByName(more)
    kraft_logs = sorted(i for i, f in kraft_files if f.kind == d.SEGMENT)
    # (the metadata log's few files picked first: a join of every segment row would move
    # the data log's batches too)
    picked = []
    if seg_rows is not None and kraft_logs:
        picked.append(seg_rows.filter(F.expr(f"file_id IN ({', '.join(map(str, kraft_logs))})")))
    if seg_rows is not None and collected is not None:
        # (the collected metadata log's files: a few, picked by a broadcast semi join)
        picked.append(seg_rows.join(F.broadcast(collected.place.filter(is_kraft()).select("file_id")), "file_id",
                                    "left_semi"))
    read = segment_log(reduce(DataFrame.unionByName, picked), place) if picked else None
    log, dumped = parse_kraft_dumps(groups, place, read)
    if snap_rows is not None and snap_place is not None:
        dumped = dumped.unionByName(binary_snapshots(snap_rows, snap_place))
    bare = snapshot_files(spark, [(i, f) for i, f in kraft_files if f.kind == d.KRAFT_SNAPSHOT_FILE and f.size == 0],
                          narrow=plan.narrow, empty_snapshots=empty)
    if collected is not None:
        bare = bare.unionByName(collected.zero_snapshots)
    return {"kraft_batches": log, "kraft_snapshots": all_snapshots(dumped, bare)}


def empty_snapshots(indexed: list[tuple[int, d.InputFile]]) -> frozenset[int]:
    """Ids of the zero-length ``*.checkpoint`` files that are KAFKA-15312's empty snapshot
    (SPEC 3.3): no dump of the same id beside it, and a segment file in its folder (else a
    bare copy, whose name alone is used)."""
    def snapshot_of(f: d.InputFile) -> tuple[object, ...]:  # its folder and the name before .checkpoint
        return (f.snapshot, f.broker, f.topic, f.partition, f.rel.rsplit("/", 1)[-1].split(".checkpoint")[0])

    with_segments = {(f.snapshot, f.broker, f.topic, f.partition) for _, f in indexed if f.kind == d.SEGMENT}
    dumped = {snapshot_of(f) for _, f in indexed if f.kind == d.DUMP and ".checkpoint" in f.rel.rsplit("/", 1)[-1]}
    return frozenset(
        i for i, f in indexed if f.kind == d.KRAFT_SNAPSHOT_FILE and f.size == 0
        and (f.snapshot, f.broker, f.topic, f.partition) in with_segments and snapshot_of(f) not in dumped)
