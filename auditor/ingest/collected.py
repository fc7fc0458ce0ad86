"""Collected node folders (SPEC 3.4) read as the log dirs they came from.

``auditor collect`` (:mod:`auditor.collect`) wrote, per log dir, a batch table (the walk's
``B`` and ``Q`` rows of every segment and snapshot file), a segment table (each file's ``F``
row and identity) and a pack of the per-partition small files. Spark reads those tables
(Parquet or gzip CSV: a few files per log dir, whatever the number of partitions) into the
frames a copy of the log dirs gives (:mod:`auditor.load.segments`): decoded rows with file
ids, the files' places, the packed files' bytes. The driver holds no per-partition or
per-segment state: each collected file's id is its log dir's first id (from the tables' row
counts) plus its rank within the log dir by name, a window over the segment table.

A collected file's path (``parse_errors.file``, ``segments.file``) is the virtual path
``<log dir folder>/<topic>-<partition>/<file name>``, its log dir ``broker=N/logdir=<k>``.
Its rows keep their collection's CRC verdicts: an audit with ``--verify-crc`` does not
verify them again, and ``bytes_read`` is 0 (nothing of a segment is read by the audit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window

from auditor import collect as c
from auditor import columns as F
from auditor.columns import col, lit
from auditor.frames import local_frame
from auditor.ingest import discovery as d
from auditor.ingest.kraft import SNAPSHOTS_DDL, is_kraft
from auditor.ingest.lines import load_paths, local_path
from auditor.ingest.segments import COLUMNS as ROW_COLUMNS
from auditor.ingest.segments import SPARK_TYPES

_DDL = {"string": "string", "int": "int", "bigint": "bigint", "boolean": "boolean"}


def _ddl(columns: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"`{name}` {_DDL[t]}" for name, t in columns)


#: A snapshot file's name (:data:`auditor.ingest.discovery.KRAFT_SNAPSHOT_NAME`, as Java spells it).
SNAPSHOT_NAME = r"^(\d{20})-(\d{10})\.checkpoint$"
#: The place of each collected log dir's tables: its index, folder, snapshot, broker and
#: the first file ids of its segment table and small-file pack.
DIRS_DDL = ("dir int, dir_rel string, snapshot timestamp, broker int, segment_base int, small_base int, "
            "batches_path string, segments_path string, small_path string")


@dataclass(frozen=True)
class Collected:
    """The frames of the collected log dirs (file ids from ``first_id`` on)."""

    #: Decoded rows (:data:`auditor.ingest.segments.COLUMNS`) of the collected segment files.
    rows: DataFrame
    #: ``file_id, rel, snapshot, broker, topic, partition, segment_base_offset`` of those files.
    place: DataFrame
    #: Decoded rows of the non-empty snapshot files, and their place
    #: (:data:`auditor.ingest.kraft.SNAPSHOT_PLACE_DDL`).
    snapshot_rows: DataFrame
    snapshot_place: DataFrame
    #: :data:`auditor.ingest.kraft.SNAPSHOTS_DDL` rows of the zero-length snapshot files.
    zero_snapshots: DataFrame
    #: Each packed file's bytes and place (:data:`auditor.ingest.lines.PLACED_CONTENTS`).
    contents: DataFrame
    #: Every collected file as a listed file (``auditor.load.kafka.FILES_SCHEMA``).
    files: DataFrame
    #: How many file ids they take.
    ids: int


def first_ids(dirs: Sequence[d.CollectedDir], first_id: int) -> list[tuple[int, int]]:
    """Each log dir's first segment-table and small-file ids: consecutive ranges from
    ``first_id``, each as long as the table's rows."""
    out = []
    next_id = first_id
    for cd in dirs:
        out.append((next_id, next_id + cd.segment_rows))
        next_id += cd.segment_rows + cd.small_file_rows
    return out


def read_collected(spark: SparkSession, dirs: Sequence[d.CollectedDir], first_id: int, *, narrow: bool = False,
                   spill: str | None = None) -> Collected:
    """The frames of the collected log dirs ``dirs``, file ids from ``first_id`` on."""
    bases = first_ids(dirs, first_id)
    lookup = local_frame(spark, [
        (k, cd.rel, cd.snapshot, cd.broker, seg, small, cd.batches, cd.segments, cd.small_files)
        for k, (cd, (seg, small)) in enumerate(zip(dirs, bases, strict=True))], DIRS_DDL, narrow=narrow, spill=spill)
    segments = _table(spark, dirs, "segments", c.SEGMENT_COLUMNS).join(
        F.broadcast(lookup.select("dir", "dir_rel", "snapshot", "broker", "segment_base",
                                  col("segments_path").alias("_path"))), "_path")
    # a file's id: its log dir's first id and its rank there by name (a total order: the
    # collector writes each file once)
    ranked = segments.withColumn("file_id", (col("segment_base") - 1 + F.row_number().over(
        Window.partitionBy("dir").orderBy("topic", "partition", "file"))).cast("int")).withColumn(
        "rel", F.concat_ws("/", col("dir_rel"), F.concat(col("topic"), lit("-"), col("partition").cast("string")),
                           col("file")))
    is_segment = col("kind") == "segment"
    is_snapshot = (col("kind") == "snapshot") & (col("file_bytes") > 0)
    batches = _table(spark, dirs, "batches", c.BATCH_COLUMNS).join(
        F.broadcast(lookup.select("dir", col("batches_path").alias("_path"))), "_path")
    segment_ids = ranked.filter(is_segment).select("dir", "topic", "partition", "file", "file_id")
    snapshot_ids = ranked.filter(is_snapshot).select("dir", "topic", "partition", "file", "file_id")
    keys = ["dir", "topic", "partition", "file"]
    rows = batches.join(segment_ids, keys).select(*_row_columns(entry=True)).unionByName(
        ranked.filter(is_segment).select(*_row_columns(entry=False)))
    # (a snapshot file's rows: the metadata log's folder only, picked before the join)
    snapshot_rows = batches.filter(is_kraft() & col("file").endswith(".checkpoint")).join(
        snapshot_ids, keys).select(*_row_columns(entry=True)).unionByName(
        ranked.filter(is_snapshot).select(*_row_columns(entry=False)))
    snapshot_id = F.regexp_extract(col("file"), SNAPSHOT_NAME, 1)
    snapshot_epoch = F.regexp_extract(col("file"), SNAPSHOT_NAME, 2)
    snapshot_place = ranked.filter(is_snapshot).select(
        "file_id", "rel", "snapshot", "broker", "topic", "partition", snapshot_id.cast("bigint").alias("end_offset"),
        snapshot_epoch.cast("int").alias("epoch"))
    contents = _contents(spark, dirs, lookup)
    return Collected(
        rows=rows,
        place=ranked.filter(is_segment).select(
            "file_id", "rel", "snapshot", "broker", "topic", "partition",
            F.substring(col("file"), 1, 20).cast("bigint").alias("segment_base_offset")),
        snapshot_rows=snapshot_rows,
        snapshot_place=snapshot_place,
        zero_snapshots=_zero_snapshots(ranked, snapshot_id, snapshot_epoch),
        contents=contents,
        files=_files(ranked, contents, is_segment),
        ids=sum(cd.segment_rows + cd.small_file_rows for cd in dirs),
    )


def _table(spark: SparkSession, dirs: Sequence[d.CollectedDir], name: str,
           columns: tuple[tuple[str, str], ...]) -> DataFrame:
    """One of the collected tables of every log dir (Parquet and gzip CSV alike), each row
    with ``_path``, the local path of its table file."""
    paths = {"batches": [cd.batches for cd in dirs], "segments": [cd.segments for cd in dirs],
             "small_files": [cd.small_files for cd in dirs if cd.small_files]}[name]
    parts = []
    parquet = [p for p in paths if p.endswith(c.PARQUET)]
    csv = [p for p in paths if p.endswith(c.CSV_GZ)]
    schema = _ddl(columns)
    if parquet:
        parts.append(load_paths(spark.read.schema(schema).format("parquet"), parquet))
    if csv:
        # (Python's csv module doubles a quote inside a quoted field: Spark's escape too)
        parts.append(load_paths(spark.read.schema(schema).format("csv").option("header", True)
                                .option("escape", '"').option("mode", "FAILFAST"), csv))
    if not parts:
        return local_frame(spark, [], schema + ", _path string")
    read = [df.withColumn("_path", local_path(col("_metadata.file_path"))) for df in parts]
    return read[0] if len(read) == 1 else read[0].unionByName(read[1])


def _row_columns(*, entry: bool) -> list[Column]:
    """:data:`ROW_COLUMNS` of a batch-table row (``entry``) or a segment-table row (``F``);
    ``bytes_read`` 0: the audit reads nothing of a collected segment."""
    entry_fields = set(c.ENTRY_FIELDS)
    out = []
    for name, arrow_type in ROW_COLUMNS:
        spark_type = SPARK_TYPES[arrow_type]
        if name == "file_id":
            out.append(col("file_id"))
        elif name == "row_kind" and not entry:
            out.append(lit("F").alias("row_kind"))
        elif name == "bytes_read" and not entry:
            out.append(lit(0).cast("bigint").alias(name))
        elif (name in entry_fields) == entry:
            out.append(col(name).cast(spark_type).alias(name))
        else:
            out.append(lit(None).cast(spark_type).alias(name))
    return out


def _zero_snapshots(ranked: DataFrame, snapshot_id: Column, snapshot_epoch: Column) -> DataFrame:
    """:data:`SNAPSHOTS_DDL` rows of the zero-length snapshot files: KAFKA-15312's empty
    snapshot where the node's metadata log folder has collected segment rows (SPEC 3.3),
    else a bare copy (its name is its id)."""
    replica = ("snapshot", "broker", "topic", "partition")
    zero = ranked.filter((col("kind") == "snapshot") & (F.coalesce(col("file_bytes"), lit(0)) == 0))
    with_segments = ranked.filter((col("kind") == "segment") & is_kraft()).select(*replica).distinct().withColumn(
        "_empty", lit(True))
    judged = zero.join(with_segments, list(replica), "left").withColumn(
        "_empty", F.coalesce(col("_empty"), lit(False)))
    names = [f.split()[0] for f in SNAPSHOTS_DDL.split(", ")]
    values = {
        "snapshot": col("snapshot"), "topic": col("topic"), "partition": col("partition"),
        "replica": col("broker"), "end_offset": snapshot_id.cast("bigint"), "epoch": snapshot_epoch.cast("int"),
        "file": col("rel"), "dumped": col("_empty"),
        "batch_count": F.when(col("_empty"), lit(0)).cast("bigint"),
    }
    types = dict(f.split() for f in SNAPSHOTS_DDL.split(", "))
    return judged.select(*[values.get(n, lit(None)).cast(types[n]).alias(n) for n in names])


def _contents(spark: SparkSession, dirs: Sequence[d.CollectedDir], lookup: DataFrame) -> DataFrame:
    """The packed files (``leader-epoch-checkpoint``, ``quorum-state``), each with its exact
    bytes and its place, as separate files would be read."""
    packed = _table(spark, dirs, "small_files", c.SMALL_FILE_COLUMNS).join(
        F.broadcast(lookup.select("dir", "dir_rel", "snapshot", "broker", "small_base",
                                  col("small_path").alias("_path"))), "_path")
    ranked = packed.withColumn("file_id", (col("small_base") - 1 + F.row_number().over(
        Window.partitionBy("dir").orderBy("topic", "partition", "name"))).cast("int"))
    return ranked.filter(col("name").isin(c.LEADER_EPOCH, c.QUORUM_STATE)).select(
        "file_id", F.coalesce(F.unbase64(col("content")), F.unhex(lit(""))).alias("content"),
        F.when(col("name") == c.LEADER_EPOCH, lit(d.LEADER_EPOCH)).otherwise(lit(d.QUORUM_STATE)).alias("kind"),
        F.concat_ws("/", col("dir_rel"), F.concat(col("topic"), lit("-"), col("partition").cast("string")),
                    col("name")).alias("rel"),
        "snapshot", "broker", col("dir_rel").alias("log_dir"), "topic", "partition")


def _files(ranked: DataFrame, contents: DataFrame, is_segment: Column) -> DataFrame:
    """Every collected file as a listed file: ``file_id, rel, kind, snapshot, broker,
    log_dir, topic, partition, size``."""
    files = ranked.select(
        "file_id", "rel", F.when(is_segment, lit(d.SEGMENT)).otherwise(lit(d.KRAFT_SNAPSHOT_FILE)).alias("kind"),
        "snapshot", "broker", col("dir_rel").alias("log_dir"), "topic", "partition",
        F.coalesce(col("file_bytes"), lit(0)).cast("bigint").alias("size"))
    small = contents.select(
        "file_id", "rel", "kind", "snapshot", "broker", "log_dir", "topic", "partition",
        F.length("content").cast("bigint").alias("size"))
    return files.unionByName(small)
