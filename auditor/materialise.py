"""Reliable materialisation: several DataFrames computed in one Spark job, kept as Parquet.

The audit needs a few cut points (the parsed lines, the parsed snapshot, the per-replica
facts, the output tables), each read by several later queries. They are written as
Parquet files under the run's work directory, all frames of one cut point in a single
write (a union of one struct column per frame, partitioned by frame name), and read back
with their declared schemas. Files on disk are never evicted and never recomputed, so every
later query, and the summary, reads exactly the same rows; and the planner sees their real
size.

A small input's cut points (:attr:`auditor.policy.Plan.collect`) are computed by the same one
job, collected to the driver as Arrow instead of written by Spark, and written by pyarrow
in the same layout.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType

from auditor import columns as F
from auditor.columns import col, lit
from auditor.frames import LOCAL_BYTES, arrow_schema, local_frame, union_tree
from auditor.policy import Plan

logger = logging.getLogger(__name__)

TAG = "_frame"


def frame_dir(work_dir: str, label: str, name: str) -> str:
    """Where frame ``name`` of cut point ``label`` is stored."""
    return os.path.join(work_dir, label, f"{TAG}={name}")


def materialise(frames: dict[str, DataFrame], work_dir: str, label: str, plan: Plan = Plan()) -> dict[str, DataFrame]:
    """Compute ``frames`` in one Spark job and return DataFrames reading the stored rows.

    Args:
        frames: name -> DataFrame (names are identifiers); every frame keeps its columns
            and types (nullability aside: Parquet columns read back nullable).
        work_dir: the run's work directory (:func:`new_work_dir`).
        label: the cut point's name, unique within the run.
        plan: the stretch of the run it belongs to: collected or written by Spark, and
            how its frames are read back (:class:`auditor.policy.Plan`).

    Returns:
        name -> DataFrame over the stored rows of that frame (:func:`stored_frame`; no job
        to read the schema).
    """
    spark = next(iter(frames.values())).sparkSession
    collect = plan.collect
    tagged = [df.select(lit(name).alias(TAG), _as_struct(df, name, nullable=collect)) for name, df in frames.items()]
    union = union_tree(tagged, lambda a, b: a.unionByName(b, allowMissingColumns=True))
    context = spark.sparkContext
    context.setJobDescription(f"{label}: {', '.join(frames)}")  # names the job in Spark's UI and event log
    call_site = {key: context.getLocalProperty(key) for key in CALL_SITE}  # (a caller's own, put back after)
    for key in CALL_SITE:
        context.setLocalProperty(key, label)
    try:
        if collect:
            # One task per core, not one per frame: each task deserialises the whole stage's
            # plan (every frame's expressions), and a cut point of ten small frames is ten
            # tasks otherwise (coalescing moves no row).
            union = union.coalesce(max(1, context.defaultParallelism))
            collected = _write_collected(union.toArrow(), list(frames), work_dir, label)
        else:
            collected = {}
            # (Written without a sort: see ``spark.sql.maxConcurrentOutputFileWriters`` in
            # :data:`auditor.spark.BASE_CONF`. Row groups of 32 MB bound each open file's buffer.)
            union.write.mode("overwrite").option("parquet.block.size", 32 << 20).partitionBy(TAG).parquet(
                os.path.join(work_dir, label))
    finally:
        context.setJobDescription(None)  # type: ignore[arg-type]
        for key, value in call_site.items():
            context.setLocalProperty(key, value)  # type: ignore[arg-type]
    return {name: stored_frame(spark, work_dir, label, name, df.schema, rows=collected.get(name), plan=plan)
            for name, df in frames.items()}


#: Spark's local properties that name the call site of the jobs, stages and RDDs a thread
#: starts (``org.apache.spark.util.CallSite``), set to the cut point's label while it runs.
#: Unless both are set, Spark computes the call site from the driver thread's stack at
#: every RDD it creates (``SparkContext.getCallSite``): ~0.12 ms on the py4j thread, and a
#: warm one-partition audit creates 2,843 RDDs. (PySpark sets the short one around a
#: collect, to the Python caller, and clears it after.)
CALL_SITE = ("callSite.short", "callSite.long")


def _as_struct(df: DataFrame, name: str, *, nullable: bool) -> Column:
    """``df``'s columns as one struct column named ``name``; with ``nullable``, every field
    (and element, and value) of it nullable, as the frames of a union collected as Arrow must
    be (rows of the other frames hold a null struct) and as they are read back anyway."""
    struct = F.struct(*[col(f"`{c}`") for c in df.columns])
    return (struct.cast(_nullable(df.schema)) if nullable else struct).alias(name)


def _write_collected(table: pa.Table, names: list[str], work_dir: str, label: str) -> dict[str, pa.Table]:
    """Write a collected cut point's frames as Parquet files where a Spark write puts them
    (a frame without rows gets no folder, as there); returns each written frame's rows (as
    :func:`read_frame_arrow` would read them back)."""
    shutil.rmtree(os.path.join(work_dir, label), ignore_errors=True)  # as a Spark write's "overwrite"
    tags = table.column(TAG)
    written = {}
    for name in names:
        rows = table.filter(pc.equal(tags, name)).select([name])
        if rows.num_rows:
            os.makedirs(frame_dir(work_dir, label, name))
            pq.write_table(rows, os.path.join(frame_dir(work_dir, label, name), "part-00000.parquet"),
                           row_group_size=1 << 20)
            written[name] = pa.Table.from_struct_array(rows.column(name).combine_chunks())
    return written


#: A stored frame of at most :attr:`auditor.policy.Plan.local_rows` rows and this many bytes
#: of Parquet files comes back as rows in the plan (a local relation), not as a file scan.
SMALL_FRAME_BYTES = 1 << 20


def stored_frame(spark: SparkSession, work_dir: str, label: str, name: str, schema: StructType,
                 rows: pa.Table | None = None, plan: Plan = Plan()) -> DataFrame:
    """Frame ``name`` of a stored cut point, with ``schema`` (nullable, as Parquet reads it
    back): a small one as a local relation of its rows, read by the driver with pyarrow
    (or ``rows``, the stored rows the caller already holds); a larger one as a Parquet scan
    (:func:`read_frame`).

    Why: most frames of most audits hold a few rows to a few thousand (per-replica facts,
    findings, lineage). A Parquet scan of each costs the planning thread a broadcast of the
    whole Hadoop configuration (~1,000 entries, ~15 ms) and a file listing, at every query
    that reads it; a local relation costs neither, and Catalyst evaluates filters and
    projections over it while it plans. Measured 2026-11-26, the demo's
    snapshot audited in one process, three sessions per variant, alternating: warm audits
    11.1-14.5 s against 14.6-19.0 s, the first audit of a session 23.2-26.9 s against
    27.7-30.1 s; every table the same. Larger frames stay scans: a plan holds a local
    relation's rows as JVM objects, once per query that filters or projects it
    (:func:`auditor.frames.arrow_frame`).
    """
    files = frame_files(work_dir, label, name)
    if not files:
        return local_frame(spark, [], schema, narrow=plan.narrow)
    small = sum(os.path.getsize(f) for f in files) <= SMALL_FRAME_BYTES and \
        (rows.num_rows if rows is not None else stored_rows(work_dir, label, name)) <= plan.local_rows
    table = (rows if rows is not None else read_frame_arrow(work_dir, label, name)) if small else None
    if table is None or table.nbytes > LOCAL_BYTES:
        return read_frame(spark, work_dir, label, name, schema, plan)
    struct = _nullable(schema)
    return plan.narrowed(spark.createDataFrame(table.select(struct.fieldNames()).cast(arrow_schema(struct)), struct))


def _nullable(schema: StructType) -> StructType:
    """``schema`` with every field, element and value nullable, as a Parquet scan reads it."""
    def mark(node: object) -> object:
        if isinstance(node, dict):
            return {k: True if k in ("nullable", "containsNull", "valueContainsNull") else mark(v)
                    for k, v in node.items()}
        if isinstance(node, list):
            return [mark(v) for v in node]
        return node

    marked = mark(schema.jsonValue())
    assert isinstance(marked, dict)
    return StructType.fromJson(marked)


def read_frame(spark: SparkSession, work_dir: str, label: str, name: str, schema: StructType,
               plan: Plan = Plan()) -> DataFrame:
    """Frame ``name`` of a stored cut point, with ``schema`` (empty when it had no rows)."""
    path = frame_dir(work_dir, label, name)
    if not os.path.isdir(path):
        return local_frame(spark, [], schema, narrow=plan.narrow)
    wrapped = StructType([StructField(name, schema)])
    return plan.narrowed(spark.read.schema(wrapped).parquet(path).select(f"`{name}`.*"))


def frame_files(work_dir: str, label: str, name: str) -> list[str]:
    """The Parquet files of frame ``name`` of a stored cut point, sorted by name (none when
    it had no rows)."""
    path = frame_dir(work_dir, label, name)
    if not os.path.isdir(path):
        return []
    return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".parquet"))


def stored_rows(work_dir: str, label: str, name: str) -> int:
    """How many rows frame ``name`` of a stored cut point holds (from its files' footers)."""
    return sum(pq.ParquetFile(f).metadata.num_rows for f in frame_files(work_dir, label, name))


def stream_frame_arrow(work_dir: str, label: str, name: str) -> pa.RecordBatchReader | None:
    """Frame ``name`` of a stored cut point as Arrow batches read one at a time (memory
    bounded by a row group, whatever the frame's size); None when it had no rows."""
    files = frame_files(work_dir, label, name)
    if not files:
        return None
    schema = pa.schema(list(pq.read_schema(files[0]).field(name).type))

    def batches() -> Iterator[pa.RecordBatch]:
        for file in files:
            for batch in pq.ParquetFile(file).iter_batches(columns=[name]):
                yield pa.RecordBatch.from_struct_array(batch.column(0))

    return pa.RecordBatchReader.from_batches(schema, batches())


def read_frame_arrow(work_dir: str, label: str, name: str) -> pa.Table | None:
    """Frame ``name`` of a stored cut point as an Arrow table, read without Spark; None
    when it had no rows. Row order is the files' order (sorted by name)."""
    files = frame_files(work_dir, label, name)
    if not files:
        return None
    tables = [pq.read_table(f) for f in files]
    struct = pa.concat_tables(tables).column(name).combine_chunks()
    return pa.Table.from_struct_array(struct)
