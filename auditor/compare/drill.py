"""The drill-down: the batches of some replicas (whole) and of some windows, read exactly.

Kafka dumps are read again, but only the files that hold the wanted batches (the summary
rows say which), with the very parser the scan used; the tabular and etcd inputs keep
their batches stored and are filtered. The result is stored under the run's work dir (one
Spark job), repeated batches merged (SPEC 3.1); nothing is read when nothing is wanted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Mapping
from functools import reduce

from pyspark.sql import DataFrame

from auditor import columns as F
from auditor.columns import col, lit
from auditor.frames import local_frame
from auditor.ingest.batches import BATCHES_DDL, BatchSource, dedupe_batches
from auditor.materialise import materialise, read_frame_arrow, stored_frame, stored_rows
from auditor.policy import Plan, Plans, SizePolicy
from auditor.summarise.digest import window_of

KEY = ["snapshot", "topic", "partition", "replica"]
#: The columns of drilled batches (batch rows plus ``win``, and ``byte_offset``: a segment
#: file's batch's position, null for the others).
DRILLED_DDL = f"{BATCHES_DDL}, win bigint, byte_offset bigint"
DRILLED_COLUMNS = tuple(part.strip().split(" ", 1)[0] for part in DRILLED_DDL.split(", "))


def _wanted(rows: DataFrame, whole: DataFrame, windows: DataFrame) -> DataFrame:
    """The ``rows`` (``KEY, win``, ...) of the replicas in ``whole`` or the windows in
    ``windows``: one join, a null window standing for a whole replica, so ``rows`` are
    read (and, for batches, built) once."""
    wanted = whole.select(*KEY, lit(None).cast("bigint").alias("win")).unionByName(windows.select(*KEY, "win"))
    wanted = wanted.distinct().select(*[col(c).alias(f"w_{c}") for c in [*KEY, "win"]])
    matches = [col(c) == col(f"w_{c}") for c in KEY] + [col("w_win").isNull() | (col("w_win") == col("win"))]
    return rows.join(wanted, reduce(lambda a, b: a & b, matches), "left_semi")


def drill_files(summaries: DataFrame, whole: DataFrame, windows: DataFrame) -> DataFrame:
    """``file_id, sec`` of the dump file sections that hold the batches :func:`drill` wants
    (arguments as there), each once. Every batch is in a summary row of its own file and
    section (a v2 batch in the scan's rows, an old-format one in those of
    :func:`auditor.summarise.scan.pending_summaries`), so these sections hold all of them.
    Computed in an earlier cut point's job and read back with :func:`stored_drill_files`,
    the list costs no job of its own."""
    hits = _wanted(summaries, whole, windows).select("file_id", "sec")
    return hits.filter(col("file_id").isNotNull()).distinct()


def stored_drill_files(work_dir: str, label: str, name: str) -> dict[int, frozenset[int]]:
    """A stored :func:`drill_files` frame as file id -> its wanted sections (read without
    Spark: at most one row per dump file section)."""
    table = read_frame_arrow(work_dir, label, name)
    if table is None:
        return {}
    found: dict[int, set[int]] = {}
    for file_id, sec in zip(table.column("file_id").to_pylist(), table.column("sec").to_pylist()):
        found.setdefault(file_id, set()).add(sec)
    return {file_id: frozenset(secs) for file_id, secs in found.items()}


def drill(source: BatchSource, summaries: DataFrame, whole: DataFrame, windows: DataFrame,
          work_dir: str, label: str, policy: SizePolicy, plans: Plans,
          progress: Callable[[str], None] | None = None,
          sections: Mapping[int, Collection[int]] | None = None) -> DataFrame:
    """The batches of the replicas in ``whole`` and of the windows in ``windows``, stored.

    Args:
        source: where batches are read from.
        summaries: the summary rows (``KEY, file_id, win``): which files hold which windows.
        whole: ``KEY`` of replicas wanted whole.
        windows: ``KEY, win`` of windows wanted.
        work_dir, label: where the result is stored.
        policy, plans: the run's sizes and plans: the result is stored as the work after
            the scan is (``plans.after_scan``), dump text is parsed again as the scan parsed
            it (``plans.spread``), and log-sized items are turned into batches spread out.
        sections: the dump files to read again and their sections to parse (a source that
            reads dumps): what :func:`drill_files` listed, stored by an earlier cut point's
            job (:func:`stored_drill_files`).

    Returns:
        The batches (:data:`DRILLED_DDL`), repeated batches of a replica merged.
    """
    spark = summaries.sparkSession
    if source.stored is not None:  # stored: tables, etcd, a small input's scan
        batches = source.stored.select("*", window_of(col("base_offset")).alias("win"))
    else:
        assert source.dumps is not None
        listed = {i for i, _ in source.dumps.dump_files}
        wanted = sections or {}
        sections = {i: s for i, s in wanted.items() if i in listed}
        # the segment files that hold wanted batches: their stored rows alone are read
        # (one literal set in the plan, as the dump sections' filter)
        logs = sorted(i for i in wanted if i not in listed)
        segment_batches = None if source.segments is None or not logs else source.segments.filter(
            F.expr(f"file_id IN ({', '.join(map(str, logs))})")).drop("file_id").select(
            "*", window_of(col("base_offset")).alias("win"))
        seg_spread = False
        if segment_batches is not None:
            # the wanted segment files' batches stored first, read over the session's cores;
            # merged in one partition unless they are log-sized (as dump items are, below)
            with plans.spread.applied(spark):
                segment_batches = materialise({"batches": segment_batches}, work_dir, f"{label}-segments",
                                              plans.spread)["batches"]
            seg_spread = policy.is_log_sized(stored_rows(work_dir, f"{label}-segments", "batches"))
            if seg_spread:
                with plans.spread.applied(spark):
                    wide = stored_frame(spark, work_dir, f"{label}-segments", "batches", segment_batches.schema,
                                        plan=plans.spread)
                    if not sections:
                        return _merged(wide, whole, windows, work_dir, label, plans.spread)
                segment_batches = wide
        if not sections:
            if segment_batches is not None:
                return _merged(segment_batches, whole, windows, work_dir, label, plans.after_scan)
            return local_frame(spark, [], DRILLED_DDL, narrow=plans.after_scan.narrow)
        if progress is not None:
            progress(f"reading {len(sections)} of {len(source.dumps.dump_files)} dump files batch by batch")
        # one job reads the files (with the settings the scan had: it parses text); building
        # and merging their batches reads what it stored
        with plans.spread.applied(spark):
            items = materialise({"items": source.dumps.items(sections)}, work_dir, f"{label}-items",
                                plans.spread)["items"]
        # the batches are built from the stored items over the session's cores when they
        # are log-sized (a wide divergence), else in one partition: the items are read back
        # in that plan
        spread = seg_spread or policy.is_log_sized(stored_rows(work_dir, f"{label}-items", "items"))
        plan = plans.spread if spread else plans.after_scan
        with plan.applied(spark) if spread else contextlib.nullcontext():
            items = stored_frame(spark, work_dir, f"{label}-items", "items", items.schema, plan=plan)
            batches = source.dumps.batches_of(items).drop("file_id").select(
                "*", window_of(col("base_offset")).alias("win"))
            if segment_batches is not None:
                batches = batches.unionByName(segment_batches, allowMissingColumns=True)
            return _merged(batches, whole, windows, work_dir, label, plan)
    return _merged(batches, whole, windows, work_dir, label, plans.after_scan)


def _merged(batches: DataFrame, whole: DataFrame, windows: DataFrame, work_dir: str, label: str,
            plan: Plan) -> DataFrame:
    if "byte_offset" not in batches.columns:
        batches = batches.withColumn("byte_offset", lit(None).cast("bigint"))
    merged = dedupe_batches(_wanted(batches, whole, windows).withColumnRenamed("replica", "broker")).withColumnRenamed(
        "broker", "replica").select(*DRILLED_COLUMNS)
    return materialise({"drilled": merged}, work_dir, label, plan)["drilled"]
