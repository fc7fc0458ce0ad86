"""The tabular input format (``--format table``, SPEC 3.2) for Raft and other logs.

Each table is ``DIR/<name>/`` (Parquet files, or CSV files with a header row) or a single
``DIR/<name>.parquet`` / ``DIR/<name>.csv``. Every value is validated: a row whose value
does not have its column's type (a replica id that is not an integer, say) is quarantined
to ``parse_errors`` with its line (CSV) or row number (Parquet), never dropped silently.
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import datetime
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
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
from auditor.errors import InputError
from auditor.frames import local_frame
from auditor.ingest.batches import BatchSource
from auditor.ingest.discovery import parse_snapshot_label
from auditor.ingest.lines import LINE_COUNTS, line_counts, number_lines, read_text_lines
from auditor.ingest.model import (
    ERRORS_SCHEMA,
    REPLICA,
    SEGMENTS_DDL,
    TOPICS_DDL,
    Snapshot,
    offsets_ddl,
)
from auditor.materialise import materialise

I, L, S, T = IntegerType(), LongType(), StringType(), TimestampType()

#: table -> (required columns, optional columns), each with its type.
TABLES: dict[str, tuple[dict[str, object], dict[str, object]]] = {
    "batches": ({"topic": S, "partition": I, "replica": I, "base_offset": L, "last_offset": L, "epoch": I},
                {"crc": L, "snapshot": T}),
    "hwm": ({"topic": S, "partition": I, "replica": I, "high_watermark": L}, {"snapshot": T}),
    "epoch_cache": ({"topic": S, "partition": I, "replica": I, "epoch": I, "start_offset": L},
                    {"snapshot": T}),
    "metadata": ({"topic": S, "partition": I, "leader": I}, {"replicas": S, "isr": S, "snapshot": T}),
}


def _files_of(root: Path, name: str) -> list[tuple[str, str]]:
    """``(path, fmt)`` of the files holding table ``name``."""
    found: list[tuple[str, str]] = []
    folder = root / name
    if folder.is_dir():
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if entry.is_file() and entry.name.endswith(".parquet"):
                found.append((entry.path, "parquet"))
            elif entry.is_file() and entry.name.endswith(".csv"):
                found.append((entry.path, "csv"))
    for fmt in ("parquet", "csv"):
        single = root / f"{name}.{fmt}"
        if single.is_file():
            found.append((str(single), fmt))
    return found


def _typed(raw: Column, dtype: object) -> Column:
    if dtype == S:
        return raw
    return F.trim(raw).try_cast(dtype)  # type: ignore[arg-type]


def _validated(rows: DataFrame, name: str, columns: list[str]) -> DataFrame:
    """Add typed columns and ``error`` (null when the row is good) to string rows."""
    required, optional = TABLES[name]
    checks = []
    typed = []
    for name, dtype in {**required, **optional}.items():
        raw = col(name) if name in columns else lit(None).cast("string")
        value = _typed(raw, dtype)
        typed.append(value.alias(f"v_{name}"))
        present = raw.isNotNull() & (F.trim(raw) != "")
        if name in required:
            checks.append(F.when(~present, lit(f"column {name} is empty")))
        checks.append(F.when(present & value.isNull(), F.concat(
            lit(f"column {name}: "), F.substring(raw, 1, 40), lit(f" is not a valid {dtype.simpleString()}"))))  # type: ignore[attr-defined]
    return rows.select("*", *typed, F.coalesce(*checks).alias("error"))


def _read_csv(spark: SparkSession, files: list[tuple[int, str]], name: str, root: Path) -> tuple[DataFrame, DataFrame]:
    """CSV rows as strings with line numbers, plus per-line dispositions."""
    from auditor.ingest.discovery import InputFile

    fake = [(i, InputFile(path=os.path.abspath(p), rel=os.path.relpath(p, root), kind=name,
                          snapshot=datetime.min, broker=None, log_dir=None, topic=None,
                          partition=None, size=0)) for i, p in files]
    lines = number_lines(read_text_lines(spark, fake)).select("file_id", "line_number", "text")
    headers = {r.file_id: r.text for r in lines.filter(col("line_number") == 1).collect()}
    parts = []
    for header in sorted(set(headers.values())):
        cols = [c.strip() for c in header.split(",")]
        ids = [fid for fid, h in headers.items() if h == header]
        ddl = ", ".join(f"`{c}` STRING" for c in cols)
        body = lines.filter(col("file_id").isin(ids) & (col("line_number") > 1) & (F.trim("text") != ""))
        parsed = body.select("file_id", "line_number", col("text").alias("shown"),
                             F.from_csv("text", ddl).alias("r")).select(
            "file_id", "line_number", "shown", *[col("r")[c].alias(c) for c in cols])
        parts.append(_validated(parsed, name, cols))
    skipped = lines.filter((col("line_number") == 1) | (F.trim("text") == "")).select(
        "file_id", "line_number", lit("skipped").alias("disposition"),
        lit(None).cast("string").alias("error"), lit(None).cast("string").alias("shown"))
    if not parts:
        return _empty_rows(spark, name), skipped
    rows = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)
    return rows, skipped


def _read_parquet(spark: SparkSession, files: list[tuple[int, str]], name: str) -> DataFrame:
    df = spark.read.parquet(*[p for _, p in files])
    ids = local_frame(spark, [(os.path.abspath(p), i) for i, p in files], "path string, file_id int")
    from auditor.ingest.lines import local_path

    cols = [c for c in df.columns]
    rows = df.select(
        local_path(col("_metadata.file_path")).alias("path"),
        (col("_metadata.row_index") + 1).alias("line_number"),
        F.to_json(F.struct(*[col(f"`{c}`") for c in cols])).alias("shown"),
        *[col(f"`{c}`").cast("string").alias(c) for c in cols],
    ).join(F.broadcast(ids), "path").drop("path")
    return _validated(rows, name, cols)


def _empty_rows(spark: SparkSession, name: str) -> DataFrame:
    required, optional = TABLES[name]
    fields = [StructField("file_id", IntegerType()), StructField("line_number", LongType()),
              StructField("shown", StringType())]
    fields += [StructField(c, StringType()) for c in {**required, **optional}]
    return _validated(local_frame(spark, [], StructType(fields)), name, list({**required, **optional}))


def read_tables(spark: SparkSession, path: str, snapshot: str | None,
                default_snapshot: datetime, work_dir: str) -> Snapshot:
    """Load the tables under ``path`` into a :class:`Snapshot`.

    Raises:
        InputError: ``path`` is missing or holds no ``batches`` table.
    """
    root = Path(path)
    if not root.is_dir():
        raise InputError(f"input {root} does not exist or is not a directory")
    label = parse_snapshot_label(snapshot) if snapshot else default_snapshot
    file_list: list[tuple[int, str, str, str]] = []  # (file_id, table, path, fmt)
    for name in TABLES:
        for p, fmt in _files_of(root, name):
            file_list.append((len(file_list), name, p, fmt))
    if not any(t == "batches" for _, t, _, _ in file_list):
        raise InputError(f"input {root} holds no batches table (batches/, batches.parquet or batches.csv)")
    rel = {fid: os.path.relpath(p, root) for fid, _, p, _ in file_list}
    rel_df = local_frame(spark, list(rel.items()), "file_id int, rel string")

    tables: dict[str, DataFrame] = {}
    dispositions: list[DataFrame] = []
    for name in TABLES:
        mine = [(fid, p, fmt) for fid, t, p, fmt in file_list if t == name]
        parts = []
        csv_files = [(fid, p) for fid, p, fmt in mine if fmt == "csv"]
        pq_files = [(fid, p) for fid, p, fmt in mine if fmt == "parquet"]
        if csv_files:
            rows, skipped = _read_csv(spark, csv_files, name, root)
            parts.append(rows)
            dispositions.append(skipped)
        if pq_files:
            parts.append(_read_parquet(spark, pq_files, name))
        if not parts:
            parts.append(_empty_rows(spark, name))
        rows = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)
        rows = rows.withColumn("v_snapshot", F.coalesce(col("v_snapshot"), lit(label).cast(T)))
        dispositions.append(rows.select(
            "file_id", "line_number",
            F.when(col("error").isNull(), "parsed").otherwise("quarantined").alias("disposition"),
            "error", F.substring("shown", 1, 300).alias("shown")))
        tables[name] = rows.filter(col("error").isNull())

    lines = reduce(DataFrame.unionByName, dispositions).join(F.broadcast(rel_df), "file_id")
    accounting = line_counts(lines).join(F.broadcast(rel_df), "file_id").select(
        "file_id", "rel", lit("table").alias("kind"), lit(None).cast("int").alias("broker"),
        lit(0).cast("bigint").alias("size"), *LINE_COUNTS)
    parse_errors = lines.filter(col("disposition") == "quarantined").select(
        lit(label).cast(T).alias("snapshot"), lit(None).cast("int").alias("broker"),
        col("rel").alias("file"), "line_number", lit(None).cast("bigint").alias("byte_offset"),
        col("shown").alias("line"), "error")

    batches = tables["batches"].join(
        F.broadcast(rel_df), "file_id").select(
        col("v_snapshot").alias("snapshot"), col("v_replica").alias("replica"),
        col("v_topic").alias("topic"), col("v_partition").alias("partition"),
        col("rel").alias("file"), "line_number",
        lit(None).cast("bigint").alias("segment_base_offset"),
        col("v_base_offset").alias("base_offset"), col("v_last_offset").alias("last_offset"),
        col("v_epoch").alias("epoch"), col("v_crc").alias("crc"),
        (col("v_last_offset") - col("v_base_offset") + 1).alias("record_count"),
        lit(True).alias("is_valid"), lit(None).cast("boolean").alias("is_control"),
        lit(None).cast("boolean").alias("is_transactional"), lit(None).cast("int").alias("magic"),
        lit("table").alias("origin"),
    )
    epoch_cache = tables["epoch_cache"].join(F.broadcast(rel_df), "file_id").select(
        col("v_snapshot").alias("snapshot"), col("v_topic").alias("topic"),
        col("v_partition").alias("partition"), col("v_replica").alias("replica"),
        col("v_epoch").alias("epoch"), col("v_start_offset").alias("start_offset"),
        col("rel").alias("file"))
    hwm = tables["hwm"].groupBy(
        col("v_snapshot").alias("snapshot"), col("v_topic").alias("topic"),
        col("v_partition").alias("partition"), col("v_replica").alias("replica")).agg(
        F.max("v_high_watermark").alias("high_watermark"))
    md = tables["metadata"]
    ids = lambda c: F.when(col(c).isNull(), lit(None)).otherwise(  # noqa: E731
        F.filter(F.transform(F.split(col(c), "[,; ]+"), lambda x: x.try_cast("int")),
                 lambda x: x.isNotNull()))
    metadata = md.join(F.broadcast(rel_df), "file_id").select(
        col("v_snapshot").alias("snapshot"), col("v_topic").alias("topic"),
        col("v_partition").alias("partition"), col("v_leader").alias("leader"),
        ids("v_replicas").alias("replicas"), ids("v_isr").alias("isr"),
        lit(None).cast("array<int>").alias("elr"), lit(None).cast("array<int>").alias("last_known_elr"),
        lit(False).alias("has_elr"), col("rel").alias("file"),
        F.array().cast("array<bigint>").alias("conflict_lines"))
    has_cache = bool(tables["epoch_cache"].limit(1).count())
    keys = batches.select(*REPLICA).unionByName(epoch_cache.select(*REPLICA)).distinct()
    cache_keys = epoch_cache.select(*REPLICA).distinct().withColumn("_c", lit(True))
    replicas = keys.join(cache_keys, list(REPLICA), "left").select(
        *REPLICA, lit(None).cast("string").alias("log_dir"), lit(True).alias("has_dump"),
        lit(has_cache).alias("has_epoch_file"),
        F.coalesce(col("_c"), lit(False)).alias("epoch_file_usable"))
    snapshots = sorted({r.snapshot for r in batches.select("snapshot").distinct().collect()})
    parsed = materialise({
        "batches": batches, "epoch_cache": epoch_cache, "hwm": hwm, "metadata": metadata,
        "parse_errors": parse_errors.unionByName(local_frame(spark, [], ERRORS_SCHEMA)),
        "replicas": replicas, "accounting": accounting,
    }, work_dir, "snapshot")
    stored = parsed.pop("batches")
    return Snapshot(
        source=BatchSource(stored=stored), summaries=None,
        format="table", root=str(root), snapshots=snapshots or [label], work_dir=work_dir,
        segments=local_frame(spark, [], SEGMENTS_DDL), log_start=local_frame(spark, [], offsets_ddl("log_start_offset")),
        recovery_point=local_frame(spark, [], offsets_ddl("recovery_point")),
        topics=local_frame(spark, [], TOPICS_DDL),
        files_read=len(file_list), files_skipped=Counter(), **parsed,
    )

