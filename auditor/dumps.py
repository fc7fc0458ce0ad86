"""Parse ``kafka-dump-log.sh`` text into batches, segments, line accounting and errors.

Every line gets exactly one disposition: ``parsed``, ``skipped`` (headers, notices, blank
lines, index sections, payload continuations) or ``quarantined`` (a ``parse_errors`` row).
All transforms are DataFrame -> DataFrame; the only per-file state (current section,
current batch) flows through :func:`auditor.lines.number_lines`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType

from auditor import dump_grammar as g
from auditor.lines import number_lines, position

UNCOMPRESSED = ("none", "NONE", "NoCompressionCodec")
REPLICA_KEY = ("snapshot", "broker", "topic", "partition")


@dataclass(frozen=True)
class ParsedDumps:
    """What the dumps of a snapshot hold."""

    batches: DataFrame
    segments: DataFrame
    lines: DataFrame  # one row per line: file_id, line_number, disposition, error, shown


def classify_dump_lines(raw: DataFrame) -> DataFrame:
    """Narrow pass over raw dump lines: kind, metadata fields, values to carry forward.

    Args:
        raw: ``file_id, block_start, mono, text`` of dump files.
    """
    return (
        raw.select("file_id", "block_start", "mono", g.stripped(F.col("text")).alias("t"))
        .withColumn("kind", g.line_kind(F.col("t")))
        .withColumn("meta", g.metadata_part(F.col("t")))
        .select(
            "file_id", "block_start", "mono", "kind",
            g.redacted(F.col("t"), F.col("kind")).alias("shown"),
            # values carried forward in file order
            F.when(F.col("kind") == "header", F.struct(position().alias("pos"), g.header_path(F.col("t")).alias("path"))).alias("hdr"),
            F.when(F.col("kind").isin(*g.BATCH_KINDS), position()).alias("owner"),
            F.when(~F.col("kind").isin("unknown", "blank"),
                   F.col("kind").isin(*g.RECORD_KINDS) & F.col("t").rlike(r"(^|\s)(key|payload): ")).alias("known"),
            # fields (null where the kind has none)
            g.field_long(F.col("meta"), "baseOffset").alias("f_base"),
            g.field_long(F.col("meta"), "lastOffset").alias("f_last"),
            g.field_long(F.col("meta"), "count").alias("f_count"),
            g.field_int(F.col("meta"), "partitionLeaderEpoch").alias("f_epoch"),
            g.field_long(F.col("meta"), "crc").alias("f_crc"),
            g.field_bool(F.col("meta"), "isvalid", "isValid").alias("f_valid"),
            g.field_bool(F.col("meta"), "isControl").alias("f_control"),
            g.field_bool(F.col("meta"), "isTransactional").alias("f_txn"),
            g.field_int(F.col("meta"), "magic").alias("f_magic"),
            g.field_text(F.col("meta"), "compresscodec").alias("f_codec"),
            F.regexp_extract(F.col("t"), r"^\|?\s*offset: (-?\d+)", 1).alias("_off"),
            g.field_long(F.col("meta"), "position").alias("f_position"),
            F.regexp_extract(F.col("t"), r"(?:^(?:Log s|S)tarting offset: |^Found )(\d+)", 1).alias("_num"),
        )
        .withColumn("f_offset", F.when(F.col("_off") != "", F.col("_off").try_cast(LongType())))
        .withColumn("f_number", F.when(F.col("_num") != "", F.col("_num").try_cast(LongType())))
        .drop("_off", "_num")
    )


def parse_dumps(raw: DataFrame, files: DataFrame) -> ParsedDumps:
    """Parse dump lines.

    Args:
        raw: ``file_id, block_start, mono, text`` of every dump file.
        files: ``file_id, rel, snapshot, broker, topic, partition`` of those files (small).
    """
    narrow = classify_dump_lines(raw).persist(StorageLevel.MEMORY_AND_DISK)
    numbered = number_lines(narrow, ["hdr", "owner", "known"]).withColumn(
        "section_pos", F.col("hdr_ff.pos"))
    sections = _sections(numbered)
    lines = (
        numbered.join(F.broadcast(files), "file_id")
        .join(F.broadcast(sections), ["file_id", "section_pos"], "left")
        .transform(_with_replica)
        .transform(_with_disposition)
    )
    # One row per line, payload-free: materialise it once (cutting the lineage), then the
    # batch, segment and accounting queries all read it.
    lines = lines.select(
        "file_id", "line_number", "block_start", "mono", "kind", "disposition", "error", "shown",
        "snapshot", "broker", "rel", "r_topic", "r_partition", "skind", "section_problem",
        "section_pos", "section_line", "segment_base_offset", "owner_ff",
        "f_base", "f_last", "f_count", "f_epoch", "f_crc", "f_valid", "f_control", "f_txn",
        "f_magic", "f_codec", "f_offset", "f_position", "f_number",
    ).localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)
    narrow.unpersist()
    batches = _batches(lines)
    segments = _segments(lines)
    accounting = lines.select(
        "file_id", "line_number", "disposition", "error", "shown", "snapshot", "broker", "rel")
    return ParsedDumps(batches=batches, segments=segments, lines=accounting)


def _sections(numbered: DataFrame) -> DataFrame:
    """One row per ``Dumping`` section: its path, kind, partition and segment base offset."""
    headers = numbered.filter(F.col("kind") == "header").select(
        "file_id", F.col("hdr.pos").alias("section_pos"), F.col("hdr.path").alias("section_path"),
        F.col("line_number").alias("section_line"))
    h_topic, h_part = g.header_topic_partition(F.col("section_path"))
    starts = numbered.filter(F.col("kind") == "segment_start").groupBy("file_id", "section_pos").agg(
        F.min("f_number").alias("start_offset_line"))
    return (
        headers.join(starts, ["file_id", "section_pos"], "left")
        .select(
            "file_id", "section_pos", "section_path", "section_line",
            g.section_kind(F.col("section_path")).alias("section_kind"),
            h_topic.alias("h_topic"), h_part.alias("h_partition"),
            F.coalesce(F.col("start_offset_line"), g.header_base_offset(F.col("section_path")))
            .alias("segment_base_offset"),
        )
    )


def _with_replica(df: DataFrame) -> DataFrame:
    """Resolve each line's topic-partition (SPEC 3.1) and the section's problem, if any."""
    conflict = (
        F.col("h_topic").isNotNull() & F.col("topic").isNotNull()
        & ((F.col("h_topic") != F.col("topic")) | (F.col("h_partition") != F.col("partition")))
    )
    r_topic = F.coalesce(F.col("h_topic"), F.col("topic"))
    problem = (
        F.when(conflict, F.format_string(
            "section header (line %d) names partition %s-%d but the file is in folder %s-%d",
            F.col("section_line"), F.col("h_topic"), F.col("h_partition"), F.col("topic"), F.col("partition")))
        .when(r_topic.isNull() & F.col("section_pos").isNotNull(), F.format_string(
            "section header (line %d) names no <topic>-<partition> folder and the file is not in a partition folder",
            F.col("section_line")))
        .when(r_topic.isNull(), F.lit("line before any Dumping header in a file outside partition folders"))
    )
    return df.select(
        "*",
        F.coalesce(F.col("section_kind"), F.lit("log")).alias("skind"),
        r_topic.alias("r_topic"),
        F.coalesce(F.col("h_partition"), F.col("partition")).alias("r_partition"),
        problem.alias("section_problem"),
    )


def _required(fields: dict[str, Column]) -> Column:
    """Name of the first missing field, or null when all are present."""
    expr = F.lit(None).cast("string")
    for name, col in reversed(list(fields.items())):
        expr = F.when(col.isNull(), F.lit(name)).otherwise(expr)
    return expr


def _with_disposition(df: DataFrame) -> DataFrame:
    """Decide parsed / skipped / quarantined for every line, with the reason."""
    kind = F.col("kind")
    content = ~kind.isin("blank", "notice", "segment_start", "header")
    missing_v2 = _required({"baseOffset": F.col("f_base"), "lastOffset": F.col("f_last"),
                            "partitionLeaderEpoch": F.col("f_epoch"), "crc": F.col("f_crc"),
                            "isvalid": F.col("f_valid")})
    missing_legacy = _required({"offset": F.col("f_offset"), "crc": F.col("f_crc")})
    missing_rebuilt = _required({"offset": F.col("f_offset"), "position": F.col("f_position")})
    owned = F.col("owner_ff").isNotNull() & (
        F.col("section_pos").isNull() | (F.col("owner_ff") > F.col("section_pos")))
    error = (
        F.when(kind == "header", F.col("section_problem"))
        .when(~F.col("skind").isin("log"), F.lit(None))
        .when(content & F.col("section_problem").isNotNull(), F.col("section_problem"))
        .when((kind == "unknown") & F.coalesce(F.col("known_ff"), F.lit(False)), F.lit(None))
        .when(kind == "unknown", F.lit("unrecognised line"))
        .when(kind == "index_like", F.lit("index-style line inside a .log section"))
        .when((kind == "batch_v2") & missing_v2.isNotNull(),
              F.concat(F.lit("batch line without "), missing_v2, F.lit(" (truncated line?)")))
        .when((kind == "batch_v2") & (F.col("f_last") < F.col("f_base")), F.lit("batch line with lastOffset below baseOffset"))
        .when((kind == "batch_legacy") & missing_legacy.isNotNull(),
              F.concat(F.lit("legacy batch line without "), missing_legacy, F.lit(" (truncated line?)")))
        .when(kind.isin(*g.REBUILT_KINDS) & missing_rebuilt.isNotNull(),
              F.concat(F.lit("message line without "), missing_rebuilt))
        .when(kind.isin(*g.RECORD_KINDS) & ~owned, F.lit("record line before any batch line of its section"))
        .when((kind == "record") & F.col("f_offset").isNull(), F.lit("record line without offset"))
    )
    parsed = kind.isin(*g.BATCH_KINDS, *g.REBUILT_KINDS, *g.RECORD_KINDS, "invalid_bytes") & F.col("skind").isin("log")
    return df.withColumn("error", error).withColumn(
        "disposition",
        F.when(F.col("error").isNotNull(), "quarantined").when(parsed, "parsed").otherwise("skipped"),
    )


def _replica_cols() -> list[Column]:
    return [F.col("snapshot"), F.col("broker"), F.col("r_topic").alias("topic"),
            F.col("r_partition").alias("partition")]


def _batches(lines: DataFrame) -> DataFrame:
    """Batches from batch lines (v2 and legacy) and from rebuilt message/record lines."""
    ok = lines.filter(F.col("disposition") == "parsed")
    records = ok.filter(F.col("kind").isin(*g.RECORD_KINDS)).groupBy(
        "file_id", F.col("owner_ff").alias("pos")).agg(
        F.count(F.lit(1)).alias("n_records"), F.min("f_offset").alias("min_record_offset"))
    batch_lines = ok.filter(F.col("kind").isin(*g.BATCH_KINDS)).select(
        "*", position().alias("pos")).join(records, ["file_id", "pos"], "left")
    is_v2 = F.col("kind") == "batch_v2"
    from_lines = batch_lines.select(
        "file_id", "section_pos", "pos", *_replica_cols(), "rel", "line_number", "segment_base_offset",
        F.when(is_v2, F.col("f_base")).otherwise(F.col("min_record_offset")).alias("base_offset"),
        F.when(is_v2, F.col("f_last")).otherwise(F.col("f_offset")).alias("last_offset"),
        F.when(is_v2, F.col("f_epoch")).otherwise(F.lit(-1)).alias("epoch"),
        F.col("f_crc").alias("crc"),
        F.coalesce(F.col("f_count"), F.col("n_records")).alias("count_known"),
        F.col("f_valid").alias("is_valid"), F.col("f_control").alias("is_control"),
        F.col("f_txn").alias("is_transactional"), F.col("f_magic").alias("magic"),
        F.col("f_codec").alias("codec"),
        F.when(is_v2, F.lit("v2")).otherwise(F.lit("legacy")).alias("origin"),
    )
    rebuilt = ok.filter(F.col("kind").isin(*g.REBUILT_KINDS)).groupBy(
        "file_id", "section_pos", "f_position", *_replica_cols(), "rel", "segment_base_offset").agg(
        F.min(position()).alias("pos"),
        F.min("line_number").alias("line_number"),
        F.min("f_offset").alias("base_offset"),
        F.max("f_offset").alias("last_offset"),
        F.count(F.lit(1)).alias("count_known"),
        F.min(F.col("f_valid").cast("int")).cast("boolean").alias("is_valid"),
        F.max("f_magic").alias("magic"),
        F.max("f_codec").alias("codec"),
    ).select(
        "file_id", "section_pos", "pos", "snapshot", "broker", "topic", "partition", "rel", "line_number",
        "segment_base_offset", "base_offset", "last_offset", F.lit(-1).alias("epoch"),
        F.lit(None).cast(LongType()).alias("crc"), "count_known", "is_valid",
        F.lit(None).cast("boolean").alias("is_control"), F.lit(None).cast("boolean").alias("is_transactional"),
        "magic", "codec", F.lit("rebuilt").alias("origin"),
    )
    both = from_lines.unionByName(rebuilt)
    # A compressed legacy wrapper printed shallow shows only its last offset: its base is
    # the offset after the previous batch of the section (or the segment base).
    in_section = Window.partitionBy("file_id", "section_pos").orderBy("pos")
    prev_last = F.lag("last_offset").over(in_section)
    single_wrapper = (F.col("origin") != "v2") & ~F.col("codec").isin(*UNCOMPRESSED) & (
        F.col("base_offset").isNull() | ((F.col("origin") == "rebuilt") & (F.col("count_known") == 1)))
    guessed = F.least(F.coalesce(prev_last + 1, F.col("segment_base_offset"), F.col("last_offset")), F.col("last_offset"))
    base = (
        F.when(single_wrapper, guessed)
        .otherwise(F.coalesce(F.col("base_offset"), F.col("last_offset")))
    )
    shaped = both.withColumn("base_offset", base).select(
        "snapshot", "broker", "topic", "partition", F.col("rel").alias("file"), "line_number",
        "segment_base_offset", "base_offset", "last_offset", F.col("epoch").cast(IntegerType()).alias("epoch"),
        "crc",
        F.coalesce(F.col("count_known"), F.col("last_offset") - F.col("base_offset") + 1).cast(LongType()).alias("record_count"),
        "is_valid", "is_control", "is_transactional", "magic", "origin",
    )
    return dedupe_batches(shaped)


def dedupe_batches(batches: DataFrame) -> DataFrame:
    """Merge identical batches of a replica (two dumps of one segment count once, SPEC 3.1).

    The surviving row keeps the first file and line (by name) that printed it.
    """
    key = [*REPLICA_KEY, "base_offset", "last_offset", "epoch", "crc"]
    first = Window.partitionBy(*key).orderBy("file", "line_number")
    return (
        batches.withColumn("_n", F.row_number().over(first))
        .filter(F.col("_n") == 1)
        .drop("_n")
    )


def _segments(lines: DataFrame) -> DataFrame:
    """One row per dumped ``.log`` segment of a replica, with invalid trailing bytes."""
    in_log = lines.filter(
        (F.col("skind") == "log") & F.col("section_problem").isNull() & F.col("r_topic").isNotNull())
    per_section = in_log.groupBy(
        "file_id", "section_pos", *_replica_cols(), "rel", "segment_base_offset", "section_line").agg(
        F.sum(F.when(F.col("kind") == "invalid_bytes", F.col("f_number"))).alias("invalid_bytes"),
        F.count(F.when(F.col("kind").isin(*g.BATCH_KINDS, *g.REBUILT_KINDS), 1)).alias("n_batch_lines"),
    ).filter(F.col("section_pos").isNotNull() | (F.col("n_batch_lines") > 0) | F.col("invalid_bytes").isNotNull())
    shaped = per_section.select(
        "snapshot", "broker", "topic", "partition", F.col("rel").alias("file"),
        F.col("section_line").alias("line_number"), "segment_base_offset", "invalid_bytes")
    # Two dumps of one segment: keep one row per segment, the larger invalid-byte count.
    seg = Window.partitionBy(*REPLICA_KEY, F.coalesce(F.col("segment_base_offset"), F.lit(-1)),
                             F.when(F.col("segment_base_offset").isNull(), F.col("file")))
    first = seg.orderBy(F.col("invalid_bytes").desc_nulls_last(), "file", "line_number")
    return shaped.withColumn("_n", F.row_number().over(first)).filter(F.col("_n") == 1).drop("_n")
