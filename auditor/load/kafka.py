"""A Kafka snapshot (``--format kafka``) loaded: the scan of its dumps, its small files,
and the tables of :class:`auditor.ingest.model.Snapshot` derived from what they stored.

A replica is ``(snapshot, topic, partition, replica)`` where ``replica`` is the broker id.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import replace
from functools import reduce
from typing import TYPE_CHECKING, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from auditor import columns as F
from auditor.columns import col, lit
from auditor.frames import local_frame
from auditor.ingest import discovery as d
from auditor.ingest.batches import BatchSource, DumpFiles, merged_batches
from auditor.ingest.collected import Collected, read_collected
from auditor.ingest.checkpoints import ParsedCheckpoints, checkpoint_tables, judge_checkpoints
from auditor.ingest.describe import describe_tables, judge_describe
from auditor.ingest.dumps import dedupe_segments
from auditor.ingest.kraft import (
    GROUPS_DDL,
    QUORUM_DDL,
    STATUS_DDL,
    SNAPSHOT_PLACE_DDL,
    KRaft,
    all_snapshots,
    binary_snapshots,
    parse_kraft_dumps,
    parse_quorum_state,
    parse_quorum_status,
    read_kraft_groups,
    is_kraft,
    read_section_groups,
    segment_log,
    snapshot_files,
    snapshot_id,
)
from auditor.ingest.segments import read_segments
from auditor.ingest.lines import LINE_COUNTS, file_contents, line_counts, read_small_files, split_lines
from auditor.ingest.model import ERRORS_SCHEMA, REPLICA, Snapshot
from auditor.load import segments as seg
from auditor.materialise import frame_files, materialise, stored_rows
from auditor.policy import CODEGEN_CONF, SMALL_TABLE_CONF, Plan, Plans, SizePolicy, codegen_on
from auditor.summarise.scan import (
    ScanParts,
    pending_summaries,
    scan_batches,
    scan_dumps,
    split_scan,
    summarise_batches,
)

if TYPE_CHECKING:
    from auditor.load.reuse import Reuse

FILES_SCHEMA = StructType([
    StructField("file_id", IntegerType(), False), StructField("rel", StringType(), False),
    StructField("kind", StringType(), False), StructField("snapshot", TimestampType(), False),
    StructField("broker", IntegerType()), StructField("log_dir", StringType()),
    StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("size", LongType(), False),
])


class ListedFiles(NamedTuple):
    """A discovery's files as the parse reads them (:func:`listed_files`)."""

    #: ``(file_id, file)`` of every file, ids in the listing's order.
    indexed: list[tuple[int, d.InputFile]]
    #: Those files as a table (:data:`FILES_SCHEMA`).
    files: DataFrame
    #: ``(file_id, file)`` of the dump files.
    dump_files: list[tuple[int, d.InputFile]]
    #: ``file_id, rel, snapshot, broker, topic, partition`` of the dump files.
    dump_frame: DataFrame


def listed_files(spark: SparkSession, found: d.Discovery, plan: Plan = Plan(),
                 spill: str | None = None) -> ListedFiles:
    """``found``'s files numbered, as a table, and its dump files (what the scan reads;
    the benchmarks build the scan's inputs with it too)."""
    indexed = list(enumerate(found.files))
    files = local_frame(
        spark,
        [(i, f.rel, f.kind, f.snapshot, f.broker, f.log_dir, f.topic, f.partition, f.size) for i, f in indexed],
        FILES_SCHEMA, narrow=plan.narrow, spill=spill,
    )
    dump_frame = files.filter(col("kind") == d.DUMP).select("file_id", "rel", "snapshot", "broker", "topic",
                                                             "partition")
    return ListedFiles(indexed, files, [(i, f) for i, f in indexed if f.kind == d.DUMP], dump_frame)


def load_kafka(spark: SparkSession, found: d.Discovery, work_dir: str, policy: SizePolicy, plans: Plans,
               store: tuple[str, str] | None = None, reuse: Reuse | None = None,
               verify_crc: bool = False) -> Snapshot:
    """Load a discovered Kafka snapshot (the parse plan applied by the caller).

    Args:
        found: the discovery of the input.
        work_dir: where the cut points are stored.
        policy, plans: its size policy and the plans that follow from it.
        store, reuse: an incremental run's store (``(OUT, cluster)``) and its answer for
            the dump files (:class:`auditor.load.reuse.Reuse`).
        verify_crc: segment files' batches are read whole and their CRCs checked (SPEC 3.3).
    """
    parse = plans.parse
    indexed, files, dump_files, dump_frame = listed_files(spark, found, parse, work_dir)
    # Collected log dirs (SPEC 3.4): their tables read as the log dirs they came from, file
    # ids after the listed files'
    collected = read_collected(spark, found.collected, len(indexed), narrow=parse.narrow, spill=work_dir) \
        if found.collected else None
    files_listed = files
    collected_kraft = any(cd.metadata_log for cd in found.collected)
    # a bare KRaft snapshot copy is binary: its name is all that is used (SPEC 4.7)
    other_files = [(i, f) for i, f in indexed if f.kind not in (d.DUMP, d.KRAFT_SNAPSHOT_FILE, d.SEGMENT)]
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
                            parse) if decoded else {}
    seg_rows = first_cut.get("rows")
    if collected is not None:
        collected = dataclasses.replace(collected, **{k: first_cut[k] for k in kept})
        files = files_listed.unionByName(collected.files)
    places = ([local_frame(spark, seg.place_rows(segment_files), seg.PLACE_DDL, narrow=parse.narrow, spill=work_dir)]
              if segment_files else []) + ([collected.place] if collected is not None else [])
    seg_place = reduce(DataFrame.unionByName, places) if places else None
    # Their batches summarised, files and errors derived over the session's cores (one job):
    # what the cut points after it use is then a few rows per file, as the scan's is.
    seg_small = materialise({
        "summaries": summarise_batches(seg.segment_batches(seg_rows, seg_place)),
        "files": seg.file_rows(seg_rows, seg_place),
        "errors": seg.segment_errors(seg_rows, seg_place),
    }, work_dir, "segment-summaries", parse) if seg_rows is not None and seg_place is not None else None
    # KRaft's snapshot files read in binary (SPEC 3.3, 4.7): every non-empty *.checkpoint,
    # its batches local to the snapshot (they never enter the log)
    snap_files = [(i, f) for i, f in indexed if f.kind == d.KRAFT_SNAPSHOT_FILE and f.size > 0
                  and snapshot_id(f) is not None]
    snap_decoded = ([read_segments(spark, [(i, f.path, False, 0) for i, f in snap_files], verify_crc,
                                   spill=work_dir)] if snap_files else []) + (
        [collected.snapshot_rows] if collected is not None and collected_kraft else [])
    snap_rows = materialise({"rows": reduce(DataFrame.unionByName, snap_decoded)}, work_dir, "kraft-snapshot-rows",
                            parse)["rows"] if snap_decoded else None
    snap_places = ([local_frame(spark, [(i, f.rel, f.snapshot, f.broker, f.topic, f.partition, *snapshot_id(f))
                                        for i, f in snap_files], SNAPSHOT_PLACE_DDL, narrow=parse.narrow,
                                spill=work_dir)] if snap_files else []) + (
        [collected.snapshot_place] if collected is not None and collected_kraft else [])
    snap_place = reduce(DataFrame.unionByName, snap_places) if snap_places else None
    if reuse is None and store is not None:
        from auditor.load.reuse import Reuse

        reuse = Reuse(spark, store, dump_files)
    to_scan = reuse.to_parse if reuse is not None else dump_files
    # A small input's scan keeps every batch: drill-downs filter those rows instead of
    # building the parser again and reading files a second and third time.
    per_batch = policy.per_batch

    kraft_files = [(i, f) for i, f in indexed if f.kind in KRAFT_KINDS or (
        f.kind in (d.DUMP, d.SEGMENT) and f.topic is not None and f.partition is not None
        and d.is_kraft_folder(f.topic, f.partition))]
    few = few_partitions(policy.replica_partitions)

    def small_frames(plan: Plan) -> dict[str, DataFrame]:
        # Each kind of small file is read by its own reader: a filter on file_id after one
        # read of them all would read every checkpoint file again for each kind (thousands
        # of files for the one describe file).
        # What this cut stores of them is each file or line judged, every regular
        # expression applied once; their tables are derived in the snapshot cut (at 300,000
        # checkpoint files and a describe line per partition, each table derived here would
        # apply them again).
        # (each checkpoint's place read beside its bytes: no join with the file list; the
        # describe file's as a local relation, which joins by broadcast, not a filter over
        # every listed file)
        describes = [(i, f) for i, f in other_files if f.kind == d.DESCRIBE]
        packed = collected.contents if collected is not None else None
        kraft_scan, kraft_lines = _kraft_scan(spark, kraft_files, plan, work_dir, packed if collected_kraft else None) \
            if kraft_files or collected_kraft else ({}, None)
        contents = file_contents(
            spark, [(i, f) for i, f in other_files if f.kind not in (d.DESCRIBE, *KRAFT_KINDS)], placed=True,
            narrow=plan.narrow, spill=work_dir)
        if packed is not None:
            contents = contents.unionByName(packed.filter(col("kind") == d.LEADER_EPOCH))
        return few({
            "checkpoints": judge_checkpoints(contents),
            "describe": judge_describe(read_small_files(spark, describes, narrow=plan.narrow, spill=work_dir), local_frame(
                spark, [(i, f.rel, f.snapshot, f.broker) for i, f in describes],
                "file_id int, rel string, snapshot timestamp, broker int", narrow=plan.narrow)),
            **({"kraft_lines": kraft_lines} if kraft_lines is not None else {}),
            **kraft_scan,
        })

    scan_frame = scan_dumps(spark, to_scan, dump_frame, per_batch=per_batch, spill=work_dir, narrow=parse.narrow)
    if codegen_on(spark) and policy.narrow_after_scan:
        # Cut points 1a and 1b (one job each): every dump line read once into the scan's
        # aggregate, compiled, then the small files parsed without generated code. In one
        # job the small files' few thousand rows made ~440 of its ~480 generated classes,
        # compiled before and while the lines were parsed (measured at 1M lines;
        # docs/design.md). The scan runs first: the small files' job, planned and run by
        # a JVM the scan has warmed, took ~4 s less at 1M lines (5.8-7.3 s against
        # 9.4-12.3 s, three alternating pairs) and the scan ~1.6 s more
        # (docs/performance-log.md, 2026-11-28).
        # Up to Limits.small_files_one_partition_bytes the small files' lines are as few as
        # the rows after the scan, and are parsed in one partition as those are (at 1M
        # lines, ~20,000 lines: a job of 38 stages and a second small job became one job of
        # 5 stages); more keep the session's shuffle partitions (log-sized in one task).
        # Above Limits.one_partition_replicas the small files' rows number in the millions
        # and stay compiled, in the scan's job (as the work after the scan keeps code
        # generation there).
        small_bytes = sum(f.size for _, f in other_files) + sum(f.size for _, f in kraft_files if f.kind == d.DUMP)
        first = materialise({"scan": scan_frame}, work_dir, "scan", parse)
        small_plan = plans.after_scan if policy.small_files_in_one_partition(small_bytes) else \
            replace(parse, settings=tuple((k, SMALL_TABLE_CONF[k]) for k in CODEGEN_CONF))
        with small_plan.applied(spark):
            first.update(materialise(small_frames(small_plan), work_dir, "small", small_plan))
    else:
        # Cut point 1 (one job): every file parsed (a small input's without generated code).
        first = materialise({"scan": scan_frame, **small_frames(parse)}, work_dir, "scan", parse)
    # The rows after the scan are few unless the input is small (its scan keeps every batch:
    # it runs as a small input throughout) or old-format dumps made log-sized items: the
    # second cut then runs replica-sized, as the audit after it (measured at 1M lines).
    reused = reuse.row_bound() if reuse is not None else 0
    sized = (not per_batch and reused is not None
             and not policy.is_log_sized(stored_rows(work_dir, "scan", "scan") + reused))
    plan = plans.after_scan if sized else parse
    # The metadata log's sections in dump files above the partition folders (known from the
    # scan's headers) are read by the KRaft reader too: one cut point, only when some are.
    above = _kraft_sections(dump_files, work_dir, reuse)
    more_kraft = materialise({"kraft_groups": read_section_groups(spark, dump_files, above, spill=work_dir, narrow=parse.narrow)}, work_dir,
                             "kraft-sections", parse)["kraft_groups"] if above else None
    if more_kraft is not None and not kraft_files and not collected_kraft:
        first.update(kraft_quorum_state=local_frame(spark, [], QUORUM_DDL, narrow=parse.narrow),
                     kraft_status=local_frame(spark, [], STATUS_DDL, narrow=parse.narrow),
                     kraft_groups=local_frame(spark, [], GROUPS_DDL, narrow=parse.narrow))
    with plan.applied(spark) if sized else contextlib.nullcontext():
        kraft_frames = _kraft_frames(spark, kraft_files, first, files, more_kraft, plan, seg_rows, snap_rows,
                                     snap_place, _empty_snapshots(indexed),
                                     collected if collected_kraft else None) \
            if kraft_files or more_kraft is not None or collected_kraft else {}
        scan = first["scan"]
        store_frames: dict[str, DataFrame] = {}
        if reuse is not None:
            store_frames = reuse.new_rows(scan, spill=work_dir)
            scan = scan.unionByName(reuse.rows(spill=work_dir))
        parts = split_scan(scan, dump_frame, per_batch=per_batch)
        judged = shadow = None
        if seg_rows is not None and seg_place is not None:
            dumped = parts.sections.filter("is_segment").select(*REPLICA, "segment_base_offset")
            assert seg_small is not None
            judged = seg.segments_of(seg_small["files"], dumped)
            if dump_files:
                shadow = seg.shadowed_sections(parts.sections, judged)
                parts = _without(parts, scan, shadow)
                scan = scan.join(shadow, ["file_id", "sec"], "left_anti")
        cps, desc = checkpoint_tables(first["checkpoints"]), describe_tables(first["describe"])
        small = _small_lines(cps, desc.lines if "kraft_lines" not in first
                             else desc.lines.unionByName(first["kraft_lines"]))
        counts = parts.accounting.unionByName(small["small_counts"])
        accounting = files.join(counts, "file_id", "left").select(
            "file_id", "rel", "kind", "broker", "size", *[F.coalesce(col(c), lit(0)).alias(c) for c in LINE_COUNTS])
        problems = local_frame(
            spark, [(p.snapshot, p.broker, p.rel, None, 0, None, p.error) for p in found.problems], ERRORS_SCHEMA,
            narrow=plan.narrow, spill=work_dir)
        segments = dedupe_segments(parts.sections.filter("is_segment").select(
            "snapshot", col("replica").alias("broker"), "topic", "partition", "file", "line_number",
            "segment_base_offset", "invalid_bytes")).withColumnRenamed("broker", "replica").withColumn(
            "byte_offset", lit(None).cast("bigint"))
        summaries = parts.summaries.unionByName(pending_summaries(parts.items, parts.sections))
        errors = problems.unionByName(parts.errors).unionByName(small["small_errors"])
        sections = parts.sections.select("file_id", "sec", "file", "snapshot", "replica", "topic", "partition",
                                         "segment_base_offset")
        seg_frames: dict[str, DataFrame] = {}
        if judged is not None or snap_rows is not None:
            accounted = [] if judged is None else [judged.select(*seg.FILE_FACTS)]
            if snap_rows is not None and snap_place is not None:
                accounted.append(seg.snapshot_facts(snap_rows))
                errors = errors.unionByName(seg.segment_errors(snap_rows, snap_place.drop("end_offset", "epoch")))
            seg_frames["segment_bytes"] = seg.byte_counts(reduce(DataFrame.unionByName, accounted))
        if judged is not None and seg_rows is not None and seg_place is not None:
            assert seg_small is not None
            segments = segments.unionByName(judged.select(*SEGMENT_COLUMNS))
            summaries = summaries.unionByName(seg_small["summaries"])
            errors = errors.unionByName(seg_small["errors"])
            # a segment file is a section of its own (sec 0): where its batches' segment ends
            sections = sections.unionByName(seg_place.select(
                "file_id", lit(0).alias("sec"), col("rel").alias("file"), "snapshot", col("broker").alias("replica"),
                "topic", "partition", "segment_base_offset"))
            if per_batch:
                seg_frames["segment_batches"] = seg.segment_batches(seg_rows, seg_place).drop("file_id", "sec")
        entries = cps.entries.withColumnRenamed("broker", "replica")
        replicas = _replicas(files, segments, cps.files)
        # Cut point 2 (one job): the parsed tables, from the stored scan rows.
        parsed = materialise(few({
            "accounting": accounting,
            "parse_errors": errors,
            "metadata": desc.metadata,
            "topics": desc.topics,
            "sections": sections,
            "segments": segments,
            "summaries": summaries,
            "replicas": replicas,
            "epoch_cache": entries.filter(col("kind") == d.LEADER_EPOCH).select(
                *REPLICA, "epoch", col("offset").alias("start_offset"), col("rel").alias("file")),
            "hwm": _per_replica(replicas, entries, d.HWM, "high_watermark"),
            "log_start": _per_replica(replicas, entries, d.LOG_START, "log_start_offset"),
            "recovery_point": _per_replica(replicas, entries, d.RECOVERY_POINT, "recovery_point"),
            **store_frames,
            **kraft_frames,
            **seg_frames,
            **({"batches": merged_batches(DumpFiles(spark, dump_files, dump_frame, parts.sections, spill=work_dir), scan_batches(scan))}
               if per_batch else {}),
        }), work_dir, "snapshot", plan)
    for name in store_frames:
        parsed.pop(name)
    kraft = KRaft(batches=parsed.pop("kraft_batches"), snapshots=parsed.pop("kraft_snapshots"),
                  quorum_state=first["kraft_quorum_state"], status=first["kraft_status"]) if kraft_frames else None
    sections = parsed.pop("sections")
    stored_batches = parsed.pop("batches", None)
    seg_batches_stored = parsed.pop("segment_batches", None)
    parsed.pop("segment_bytes", None)  # read by runs.counts from the work dir
    if stored_batches is not None and seg_batches_stored is not None:
        stored_batches = stored_batches.unionByName(seg_batches_stored, allowMissingColumns=True)
    elif seg_batches_stored is not None:
        stored_batches = seg_batches_stored
    source = BatchSource(dumps=DumpFiles(spark, dump_files, dump_frame, sections, spill=work_dir,
                                         shadowed=shadow),
                         stored=stored_batches, work_dir=work_dir, plan=parse,
                         segments=None if per_batch or seg_rows is None or seg_place is None else
                         seg.segment_batches(seg_rows, seg_place).drop("sec"))
    return Snapshot(
        format="kafka", root=found.root, snapshots=found.snapshots, work_dir=work_dir,
        files_read=len(found.files) + (collected.ids if collected is not None else 0), files_skipped=found.skipped, swap_files=sorted(found.swaps), source=source,
        collected_log_dirs=len(found.collected), collected_verified=sum(cd.crc_verified for cd in found.collected),
        sections=sections,
        replica_estimate=policy.replicas, summary_rows=stored_rows(work_dir, "snapshot", "summaries"),
        **parsed,
        files_parsed=len(found.files) + (collected.ids if collected is not None else 0)
        - (len(reuse.reused) if reuse is not None else 0),
        store=reuse, kraft=kraft,
    )


KRAFT_KINDS = (d.QUORUM_STATE, d.QUORUM_STATUS, d.KRAFT_SNAPSHOT_FILE)
#: The segments frame's columns (:data:`auditor.ingest.model.SEGMENTS_DDL` and where
#: invalid trailing bytes start).
SEGMENT_COLUMNS = ("snapshot", "replica", "topic", "partition", "file", "line_number", "segment_base_offset",
                   "invalid_bytes", "byte_offset")


def _without(parts: ScanParts, scan: DataFrame, shadow: DataFrame) -> ScanParts:
    """``parts`` without the dump sections ``shadow`` (``file_id, sec``: their segment is a
    readable ``.log`` file, SPEC 3.3): their summaries, items and segments left out, their
    lines counted as skipped."""
    keys = ["file_id", "sec"]
    moved = scan.join(shadow, keys, "left_semi").groupBy("file_id").agg(
        (F.sum("lines_parsed") + F.sum("lines_quarantined")).alias("_moved"),
        F.sum("lines_parsed").alias("_parsed"), F.sum("lines_quarantined").alias("_quarantined"))
    accounting = parts.accounting.join(moved, "file_id", "left").select(
        "file_id", "lines",
        (col("lines_parsed") - F.coalesce(col("_parsed"), lit(0))).cast("bigint").alias("lines_parsed"),
        (col("lines_skipped") + F.coalesce(col("_moved"), lit(0))).cast("bigint").alias("lines_skipped"),
        (col("lines_quarantined") - F.coalesce(col("_quarantined"), lit(0))).cast("bigint")
        .alias("lines_quarantined"))
    return replace(parts, accounting=accounting,
                   sections=parts.sections.join(shadow, keys, "left_anti"),
                   summaries=parts.summaries.join(shadow, keys, "left_anti"),
                   items=parts.items.join(shadow, keys, "left_anti"))


def _small_lines(cps: ParsedCheckpoints, lines: DataFrame) -> dict[str, DataFrame]:
    """``small_counts`` (:func:`line_counts` per file) and ``small_errors`` (the
    ``parse_errors`` rows of quarantined lines) of the checkpoints ``cps`` and the other
    small files' judged lines (``file_id, line_number, disposition, error, shown, snapshot,
    broker, rel``)."""
    return {
        # (a file-level problem of an empty file has no line: it is an error, not a line read)
        "small_counts": cps.counts.unionByName(line_counts(lines.filter(col("line_number").isNotNull()))),
        "small_errors": cps.quarantined.unionByName(lines.filter(col("disposition") == "quarantined")).select(
            "snapshot", "broker", col("rel").alias("file"), "line_number",
            F.when(col("line_number").isNull(), lit(0)).cast("bigint").alias("byte_offset"),
            col("shown").alias("line"), "error"),
    }


def few_partitions(n: int) -> Callable[[dict[str, DataFrame]], dict[str, DataFrame]]:
    """Frames with rows per file, replica or section (not per line) are written from ``n``
    partitions (:attr:`auditor.policy.SizePolicy.replica_partitions`): each comes out of a
    shuffle of ``spark.sql.shuffle.partitions`` partitions, and a cut's write runs a task
    per partition of every frame (at 1M lines, 47 tasks of ~0.2 s for frames of a few
    thousand rows each)."""
    return lambda frames: {name: df.coalesce(n) for name, df in frames.items()}


def _kraft_scan(spark: SparkSession, kraft_files: list[tuple[int, d.InputFile]], plan: Plan, spill: str,
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


def _kraft_sections(dump_files: list[tuple[int, d.InputFile]], work_dir: str,
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


def _kraft_frames(spark: SparkSession, kraft_files: list[tuple[int, d.InputFile]], stored: dict[str, DataFrame],
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


def _empty_snapshots(indexed: list[tuple[int, d.InputFile]]) -> frozenset[int]:
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


def _replicas(files: DataFrame, segments: DataFrame, cp_files: DataFrame) -> DataFrame:
    """One row per replica holding any data, with the inputs it has.

    Every parsed batch lies in a dumped segment of its replica, so the replicas seen in the
    dumps are those of ``segments``.

    Columns: ``snapshot, topic, partition, replica, log_dir, has_dump, has_epoch_file,
    epoch_file_usable``.
    """
    folders = files.filter(col("topic").isNotNull()).select(
        "snapshot", "topic", "partition", col("broker").alias("replica"), "log_dir",
        col("kind").isin(d.DUMP, d.SEGMENT).alias("is_dump"))
    from_dumps = segments.select(*REPLICA).distinct().withColumn("in_dump", lit(True))
    epoch_files = cp_files.filter(col("kind") == d.LEADER_EPOCH).groupBy(
        "snapshot", "topic", "partition", col("broker").alias("replica")).agg(
        F.max(col("usable").cast("int")).cast("boolean").alias("epoch_file_usable"))
    keys = reduce(DataFrame.unionByName, [
        folders.select(*REPLICA), from_dumps.select(*REPLICA), epoch_files.select(*REPLICA)]).distinct()
    folder_info = folders.groupBy(*REPLICA).agg(
        F.max("log_dir").alias("log_dir"), F.max(col("is_dump").cast("int")).cast("boolean").alias("dump_file"))
    return (
        keys.join(folder_info, list(REPLICA), "left")
        .join(from_dumps, list(REPLICA), "left")
        .join(epoch_files, list(REPLICA), "left")
        .select(
            *REPLICA, "log_dir",
            (F.coalesce(col("dump_file"), lit(False)) | F.coalesce(col("in_dump"), lit(False))).alias("has_dump"),
            col("epoch_file_usable").isNotNull().alias("has_epoch_file"),
            F.coalesce(col("epoch_file_usable"), lit(False)).alias("epoch_file_usable"),
        )
    )


def _per_replica(replicas: DataFrame, entries: DataFrame, kind: str, name: str) -> DataFrame:
    """A log-dir checkpoint's value for each replica: the entry of the checkpoint in the
    replica's own log dir, or of any log dir of its broker when the replica was found only
    in a per-broker dump file."""
    e = entries.filter(col("kind") == kind).select(
        *REPLICA, col("log_dir").alias("e_log_dir"), "offset")
    r = replicas.select(*REPLICA, "log_dir")
    joined = r.join(e, list(REPLICA)).filter(
        col("log_dir").isNull() | (col("log_dir") == col("e_log_dir")))
    return joined.groupBy(*REPLICA).agg(F.max("offset").alias(name))
