"""A Kafka snapshot (``--format kafka``) loaded: the scan of its dumps, its small files,
and the tables of :class:`auditor.ingest.model.Snapshot` derived from what they stored.

:func:`load_kafka` runs its stages in order: the binary inputs (:mod:`auditor.load.binary`),
the scan of the dumps with the small files (:func:`scan_cut`), the metadata log's sections
above the partition folders (:mod:`auditor.load.kraft`), the parsed tables
(:func:`parsed_cut`), and the snapshot with its batch source (:func:`snapshot_of`).

A replica is ``(snapshot, topic, partition, replica)`` where ``replica`` is the broker id.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession

from auditor import columns as F
from auditor.columns import col, lit
from auditor.frames import local_frame
from auditor.ingest import discovery as d
from auditor.ingest.batches import BatchSource, DumpFiles, merged_batches
from auditor.ingest.checkpoints import checkpoint_tables
from auditor.ingest.describe import describe_tables
from auditor.ingest.dumps import dedupe_segments
from auditor.ingest.kraft import KRaft
from auditor.ingest.lines import LINE_COUNTS
from auditor.ingest.model import ERRORS_SCHEMA, REPLICA, Snapshot
from auditor.load import kraft as k
from auditor.load import segments as seg
from auditor.load import small as sm
from auditor.load.binary import read_binary
from auditor.load.inputs import Inputs, listed_files
from auditor.materialise import materialise, stored_rows
from auditor.policy import CODEGEN_CONF, SMALL_TABLE_CONF, Plan, Plans, SizePolicy, codegen_on
from auditor.summarise.scan import (
    ScanParts,
    pending_summaries,
    scan_batches,
    scan_dumps,
    split_scan,
)

if TYPE_CHECKING:
    from auditor.load.reuse import Reuse

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
    listed = listed_files(spark, found, parse, work_dir)
    binary = read_binary(spark, listed.indexed, listed.files, found, work_dir, parse, verify_crc)
    if reuse is None and store is not None:
        from auditor.load.reuse import Reuse

        reuse = Reuse(spark, store, listed.dump_files)
    inputs = Inputs(spark, found, listed, binary, k.kraft_files(listed.indexed), work_dir, policy, plans)
    first = scan_cut(inputs, reuse.to_parse if reuse is not None else listed.dump_files)
    # The rows after the scan are few unless the input is small (its scan keeps every batch:
    # it runs as a small input throughout) or old-format dumps made log-sized items: the
    # second cut then runs replica-sized, as the audit after it (measured at 1M lines).
    reused = reuse.row_bound() if reuse is not None else 0
    sized = (not policy.per_batch and reused is not None
             and not policy.is_log_sized(stored_rows(work_dir, "scan", "scan") + reused))
    plan = plans.after_scan if sized else parse
    # The metadata log's sections in dump files above the partition folders (known from the
    # scan's headers) are read by the KRaft reader too: one cut point, only when some are.
    more_kraft = k.section_groups(spark, listed.dump_files, work_dir, reuse, parse)
    if more_kraft is not None and not inputs.has_kraft:
        first.update(k.no_kraft_inputs(spark, parse))
    with plan.applied(spark) if sized else contextlib.nullcontext():
        kraft_frames = k.kraft_frames(
            spark, inputs.kraft_files, first, binary.files, more_kraft, plan, binary.rows, binary.snap_rows,
            binary.snap_place, k.empty_snapshots(listed.indexed),
            binary.collected if binary.collected_kraft else None) \
            if inputs.has_kraft or more_kraft is not None else {}
        parsed, shadow = parsed_cut(inputs, first, kraft_frames, reuse, plan)
    return snapshot_of(inputs, parsed, first if kraft_frames else None, shadow, reuse)


def scan_cut(inputs: Inputs, to_scan: list[tuple[int, d.InputFile]]) -> dict[str, DataFrame]:
    """Cut point 1: the scan of the dump files ``to_scan`` and the small files' frames
    (:func:`auditor.load.small.small_frames`), stored."""
    spark, work_dir, policy, plans = inputs.spark, inputs.work_dir, inputs.policy, inputs.plans
    parse = plans.parse
    # A small input's scan keeps every batch: drill-downs filter those rows instead of
    # building the parser again and reading files a second and third time.
    scan_frame = scan_dumps(spark, to_scan, inputs.listed.dump_frame, per_batch=policy.per_batch, spill=work_dir,
                            narrow=parse.narrow)
    if not (codegen_on(spark) and policy.narrow_after_scan):
        # Cut point 1 (one job): every file parsed (a small input's without generated code).
        return materialise({"scan": scan_frame, **sm.small_frames(inputs, parse)}, work_dir, "scan", parse)
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
    small_bytes = sum(f.size for _, f in inputs.other_files) + sum(
        f.size for _, f in inputs.kraft_files if f.kind == d.DUMP)
    first = materialise({"scan": scan_frame}, work_dir, "scan", parse)
    small_plan = plans.after_scan if policy.small_files_in_one_partition(small_bytes) else \
        replace(parse, settings=tuple((key, SMALL_TABLE_CONF[key]) for key in CODEGEN_CONF))
    with small_plan.applied(spark):
        first.update(materialise(sm.small_frames(inputs, small_plan), work_dir, "small", small_plan))
    return first


def parsed_cut(inputs: Inputs, first: dict[str, DataFrame], kraft_frames: dict[str, DataFrame],
               reuse: Reuse | None, plan: Plan) -> tuple[dict[str, DataFrame], DataFrame | None]:
    """Cut point 2 (one job): the parsed tables, from the stored scan rows (``first``), the
    binary inputs' stored rows and the KRaft frames. Returns the stored tables and the dump
    sections shadowed by readable segment files (``file_id, sec``; ``None`` when none are)."""
    spark, work_dir, binary, per_batch = inputs.spark, inputs.work_dir, inputs.binary, inputs.policy.per_batch
    dump_files, dump_frame = inputs.listed.dump_files, inputs.listed.dump_frame
    scan = first["scan"]
    store_frames: dict[str, DataFrame] = {}
    if reuse is not None:
        store_frames = reuse.new_rows(scan, spill=work_dir)
        scan = scan.unionByName(reuse.rows(spill=work_dir))
    parts = split_scan(scan, dump_frame, per_batch=per_batch)
    judged = shadow = None
    if binary.segments:
        assert binary.small is not None
        dumped = parts.sections.filter("is_segment").select(*REPLICA, "segment_base_offset")
        judged = seg.segments_of(binary.small["files"], dumped)
        if dump_files:
            shadow = seg.shadowed_sections(parts.sections, judged)
            parts = _without(parts, scan, shadow)
            scan = scan.join(shadow, ["file_id", "sec"], "left_anti")
    cps, desc = checkpoint_tables(first["checkpoints"]), describe_tables(first["describe"])
    small = sm.small_lines(cps, desc.lines if "kraft_lines" not in first
                            else desc.lines.unionByName(first["kraft_lines"]))
    counts = parts.accounting.unionByName(small["small_counts"])
    accounting = binary.files.join(counts, "file_id", "left").select(
        "file_id", "rel", "kind", "broker", "size", *[F.coalesce(col(c), lit(0)).alias(c) for c in LINE_COUNTS])
    problems = local_frame(
        spark, [(p.snapshot, p.broker, p.rel, None, 0, None, p.error) for p in inputs.found.problems], ERRORS_SCHEMA,
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
    if judged is not None or binary.snap_rows is not None:
        accounted = [] if judged is None else [judged.select(*seg.FILE_FACTS)]
        if binary.snap_rows is not None and binary.snap_place is not None:
            accounted.append(seg.snapshot_facts(binary.snap_rows))
            errors = errors.unionByName(seg.segment_errors(binary.snap_rows,
                                                           binary.snap_place.drop("end_offset", "epoch")))
        seg_frames["segment_bytes"] = seg.byte_counts(reduce(DataFrame.unionByName, accounted))
    if judged is not None and binary.rows is not None and binary.place is not None:
        assert binary.small is not None
        segments = segments.unionByName(judged.select(*SEGMENT_COLUMNS))
        summaries = summaries.unionByName(binary.small["summaries"])
        errors = errors.unionByName(binary.small["errors"])
        # a segment file is a section of its own (sec 0): where its batches' segment ends
        sections = sections.unionByName(binary.place.select(
            "file_id", lit(0).alias("sec"), col("rel").alias("file"), "snapshot", col("broker").alias("replica"),
            "topic", "partition", "segment_base_offset"))
        if per_batch:
            seg_frames["segment_batches"] = seg.segment_batches(binary.rows, binary.place).drop("file_id", "sec")
    entries = cps.entries.withColumnRenamed("broker", "replica")
    replicas = _replicas(binary.files, segments, cps.files)
    parsed = materialise(inputs.few({
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
        **({"batches": merged_batches(DumpFiles(spark, dump_files, dump_frame, parts.sections, spill=work_dir),
                                      scan_batches(scan))}
           if per_batch else {}),
    }), work_dir, "snapshot", plan)
    for name in store_frames:
        parsed.pop(name)
    return parsed, shadow


def snapshot_of(inputs: Inputs, parsed: dict[str, DataFrame], first: dict[str, DataFrame] | None,
                shadow: DataFrame | None, reuse: Reuse | None) -> Snapshot:
    """The loaded snapshot from the stored tables ``parsed`` (``first``: the scan's frames
    when the input has KRaft inputs), with the batch source its drill-downs read."""
    spark, work_dir, binary, found = inputs.spark, inputs.work_dir, inputs.binary, inputs.found
    per_batch = inputs.policy.per_batch
    kraft = KRaft(batches=parsed.pop("kraft_batches"), snapshots=parsed.pop("kraft_snapshots"),
                  quorum_state=first["kraft_quorum_state"], status=first["kraft_status"]) \
        if first is not None else None
    sections = parsed.pop("sections")
    stored_batches = parsed.pop("batches", None)
    seg_batches_stored = parsed.pop("segment_batches", None)
    parsed.pop("segment_bytes", None)  # read by runs.counts from the work dir
    if stored_batches is not None and seg_batches_stored is not None:
        stored_batches = stored_batches.unionByName(seg_batches_stored, allowMissingColumns=True)
    elif seg_batches_stored is not None:
        stored_batches = seg_batches_stored
    source = BatchSource(dumps=DumpFiles(spark, inputs.listed.dump_files, inputs.listed.dump_frame, sections,
                                         spill=work_dir, shadowed=shadow),
                         stored=stored_batches, work_dir=work_dir, plan=inputs.plans.parse,
                         segments=None if per_batch or binary.rows is None or binary.place is None else
                         seg.segment_batches(binary.rows, binary.place).drop("sec"))
    files = len(found.files) + (binary.collected.ids if binary.collected is not None else 0)
    return Snapshot(
        format="kafka", root=found.root, snapshots=found.snapshots, work_dir=work_dir,
        files_read=files, files_skipped=found.skipped, swap_files=sorted(found.swaps), source=source,
        collected_log_dirs=len(found.collected), collected_verified=sum(cd.crc_verified for cd in found.collected),
        sections=sections,
        replica_estimate=inputs.policy.replicas, summary_rows=stored_rows(work_dir, "snapshot", "summaries"),
        **parsed,
        files_parsed=files - (len(reuse.reused) if reuse is not None else 0),
        store=reuse, kraft=kraft,
    )


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
