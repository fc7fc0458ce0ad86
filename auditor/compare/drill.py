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
from pyspark.sql.types import StructType

from auditor import columns as F
from auditor.columns import col, lit
from auditor.frames import local_frame
from auditor.ingest.batches import BATCHES_DDL, SECTION_FILTER_LIMIT, BatchSource, dedupe_batches
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
        # (one literal set in the plan, as the dump sections' filter, up to as many ids)
        logs = sorted(i for i in wanted if i not in listed)
        chosen = None if source.segments is None or not logs else source.segments if len(
            logs) > SECTION_FILTER_LIMIT else source.segments.filter(F.expr(f"file_id IN ({', '.join(map(str, logs))})"))
        segment_batches = None if chosen is None else chosen.drop("file_id").select(
            "*", window_of(col("base_offset")).alias("win"))
        if not sections and segment_batches is None:
            return local_frame(spark, [], DRILLED_DDL, narrow=plans.after_scan.narrow)
        # One job per kind stores what is wanted (dump text parsed again with the settings
        # the scan had; the wanted segment files' stored rows filtered), over the session's
        # cores; the batches are then built and merged over the cores when they are
        # log-sized (a wide divergence), else in one partition: read back in that plan.
        stored: dict[str, StructType] = {}
        with plans.spread.applied(spark):
            if segment_batches is not None:
                stored["segments"] = materialise({"segments": segment_batches}, work_dir, f"{label}-segments",
                                                 plans.spread)["segments"].schema
            if sections:
                if progress is not None:
                    progress(f"reading {len(sections)} of {len(source.dumps.dump_files)} dump files batch by batch")
                stored["items"] = materialise({"items": source.dumps.items(sections)}, work_dir, f"{label}-items",
                                              plans.spread)["items"].schema
        rows = sum(stored_rows(work_dir, f"{label}-{name}", name) for name in stored)
        spread = policy.is_log_sized(rows)
        plan = plans.spread if spread else plans.after_scan
        with plan.applied(spark) if spread else contextlib.nullcontext():
            read = {name: stored_frame(spark, work_dir, f"{label}-{name}", name, schema, plan=plan)
                    for name, schema in stored.items()}
            parts = [read["segments"]] if "segments" in read else []
            if "items" in read:
                parts.append(source.dumps.batches_of(read["items"]).drop("file_id").select(
                    "*", window_of(col("base_offset")).alias("win")))
            batches = parts[0] if len(parts) == 1 else parts[1].unionByName(parts[0], allowMissingColumns=True)
            return _merged(batches, whole, windows, work_dir, label, plan)
    return _merged(batches, whole, windows, work_dir, label, plans.after_scan)


def _merged(batches: DataFrame, whole: DataFrame, windows: DataFrame, work_dir: str, label: str,
            plan: Plan) -> DataFrame:
    if "byte_offset" not in batches.columns:
        batches = batches.withColumn("byte_offset", lit(None).cast("bigint"))
    merged = dedupe_batches(_wanted(batches, whole, windows).withColumnRenamed("replica", "broker")).withColumnRenamed(
        "broker", "replica").select(*DRILLED_COLUMNS)
    return materialise({"drilled": merged}, work_dir, label, plan)["drilled"]
