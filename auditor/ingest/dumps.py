"""Parse ``kafka-dump-log.sh`` text into batches, segments, line accounting and errors.

Every line gets exactly one disposition: ``parsed``, ``skipped`` (headers, notices, blank
lines, index sections, payload continuations) or ``quarantined`` (a ``parse_errors`` row).
All transforms are DataFrame -> DataFrame; the only per-file state (current section,
current batch) flows through :func:`auditor.ingest.lines.number_lines`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType

from auditor.ingest import dump_grammar as g
from auditor.ingest.lines import number_lines, position
from auditor.materialise import materialise

UNCOMPRESSED = ("none", "NONE", "NoCompressionCodec")
REPLICA_KEY = ("snapshot", "broker", "topic", "partition")


@dataclass(frozen=True)
class ParsedDumps:
    """What the dumps of a snapshot hold."""

    batches: DataFrame
    segments: DataFrame
    lines: DataFrame  # one row per line: file_id, line_number, disposition, error, shown
    extra: dict[str, DataFrame] = field(default_factory=dict)  # frames stored in the same job
    # Per file, before two dumps of one segment are merged: what each file alone yields
    # (the unit the incremental store keeps; ``batches`` and ``segments`` merge these).
    file_batches: DataFrame | None = None
    file_segments: DataFrame | None = None


def classify_dump_lines(raw: DataFrame) -> DataFrame:
    """Narrow pass over raw dump lines: kind, metadata fields, values to carry forward.

    Only what later steps need leaves this pass: ``shown`` (the payload-free text that
    ``parse_errors.line`` stores) is kept only for lines that may be quarantined on their
    own; a well-formed batch line quarantined for its section's problem is shown from its
    parsed fields (:func:`shown_from_fields`), so the text of healthy lines never travels.

    Args:
        raw: ``file_id, block_start, mono, text`` of dump files.
    """
    kind = F.col("kind")
    fields = F.col("fields")
    data_kind = kind.isin(*g.BATCH_KINDS, *g.REBUILT_KINDS, *g.RECORD_KINDS)

    def data_field(builder: Callable[..., Column], *names: str) -> Column:
        return F.when(data_kind, builder(fields, *names))

    return (
        raw.select("file_id", "block_start", "mono", g.stripped(F.col("text")).alias("t"))
        .withColumn("kind", g.line_kind(F.col("t")))
        .withColumn("meta", F.when(kind.isin("blank", "notice"), F.lit(None)).otherwise(g.metadata_part(F.col("t"))))
        .withColumn("fields", F.when(data_kind, g.tokens(F.col("meta"))))
        .select(
            "file_id", "block_start", "mono", "kind", "t",
            # values carried forward in file order
            F.when(kind == "header", F.struct(position().alias("pos"), g.header_path(F.col("t")).alias("path"))).alias("hdr"),
            F.when(kind.isin(*g.BATCH_KINDS), position()).alias("owner"),
            F.when(~kind.isin("unknown", "blank"),
                   kind.isin(*g.RECORD_KINDS) & F.col("t").rlike(r"(^|\s)(key|payload): ")).alias("known"),
            # fields (null where the kind has none)
            data_field(g.field_long, "baseOffset").alias("f_base"),
            data_field(g.field_long, "lastOffset").alias("f_last"),
            data_field(g.field_long, "count").alias("f_count"),
            data_field(g.field_int, "partitionLeaderEpoch").alias("f_epoch"),
            data_field(g.field_long, "crc").alias("f_crc"),
            data_field(g.field_bool, "isvalid", "isValid").alias("f_valid"),
            data_field(g.field_bool, "isControl").alias("f_control"),
            data_field(g.field_bool, "isTransactional").alias("f_txn"),
            data_field(g.field_int, "magic").alias("f_magic"),
            data_field(g.field_text, "compresscodec").alias("f_codec"),
            F.when(kind.isin(*g.RECORD_KINDS, *g.REBUILT_KINDS, "batch_legacy"),
                   F.regexp_extract(F.col("t"), r"^\|?\s*offset: (-?\d+)", 1)).alias("_off"),
            data_field(g.field_long, "position").alias("f_position"),
            F.when(kind.isin("segment_start", "invalid_bytes"),
                   F.regexp_extract(F.col("t"), r"(?:^(?:Log s|S)tarting offset: |^Found )(\d+)", 1)).alias("_num"),
        )
        .withColumn("f_offset", F.when(F.col("_off") != "", F.col("_off").try_cast(LongType())))
        .withColumn("f_number", F.when(F.col("_num") != "", F.col("_num").try_cast(LongType())))
        .withColumn("shown", F.when(~_is_clean(), g.redacted(F.col("t"), kind)))
        .drop("_off", "_num", "t")
    )


def _is_clean() -> Column:
    """A line that can be quarantined only for its section's problem (shown from fields)."""
    kind = F.col("kind")
    v2_ok = ((kind == "batch_v2") & F.col("f_base").isNotNull() & F.col("f_last").isNotNull()
             & F.col("f_epoch").isNotNull() & F.col("f_crc").isNotNull() & F.col("f_valid").isNotNull()
             & (F.col("f_last") >= F.col("f_base")))
    legacy_ok = (kind == "batch_legacy") & F.col("f_offset").isNotNull() & F.col("f_crc").isNotNull()
    return kind.isin("blank", "notice", "segment_start", "header") | v2_ok | legacy_ok


def shown_from_fields() -> Column:
    """``parse_errors.line`` of a clean line (:func:`_is_clean`), rebuilt from what was parsed."""
    kind = F.col("kind")
    return (
        F.when(kind == "header", F.concat(F.lit("Dumping "), F.col("hdr.path")))
        .when(kind == "batch_v2", F.format_string(
            "baseOffset: %d lastOffset: %d partitionLeaderEpoch: %d crc: %d isvalid: %s",
            F.col("f_base"), F.col("f_last"), F.col("f_epoch"), F.col("f_crc"), F.col("f_valid").cast("string")))
        .when(kind == "batch_legacy", F.format_string("offset: %d crc: %d", F.col("f_offset"), F.col("f_crc")))
        .when(kind == "segment_start", F.format_string("Starting offset: %d", F.col("f_number")))
    )


def parse_dumps(raw: DataFrame, files: DataFrame, work_dir: str,
                also: dict[str, DataFrame] | None = None) -> ParsedDumps:
    """Parse dump lines.

    One pass over the text: classify and cut each line to its fields, one window per file
    (line numbers, the current section, the batch a record belongs to), then one row per
    line, payload-free, stored under ``work_dir``; batches, segments and accounting read
    those stored rows.

    Args:
        raw: ``file_id, block_start, mono, text`` of every dump file.
        files: ``file_id, rel, snapshot, broker, topic, partition`` of those files (small).
        work_dir: the run's work directory (:mod:`auditor.materialise`).
        also: other frames to store in the same job (returned in ``extra``).
    """
    numbered = number_lines(classify_dump_lines(raw), ["hdr", "owner", "known"])
    lines = (
        numbered.transform(_with_sections)
        .join(F.broadcast(files), "file_id")
        .transform(_with_replica)
        .transform(_with_disposition)
        .select(
            "file_id", "line_number", "block_start", "mono", "kind", "disposition", "error",
            F.when(F.col("error").isNotNull(), F.coalesce(F.col("shown"), shown_from_fields())).alias("shown"),
            "snapshot", "broker", "rel", "r_topic", "r_partition", "skind", "section_problem",
            "section_pos", "section_line", "segment_base_offset", "owner_ff",
            "f_base", "f_last", "f_count", "f_epoch", "f_crc", "f_valid", "f_control", "f_txn",
            "f_magic", "f_codec", "f_offset", "f_position", "f_number",
        )
    )
    stored = materialise({"lines": lines, **(also or {})}, work_dir, "lines")
    lines = stored.pop("lines")
    file_batches = _batches(lines)
    file_segments = _segments(lines)
    accounting = lines.select(
        "file_id", "line_number", "disposition", "error", "shown", "snapshot", "broker", "rel")
    return ParsedDumps(batches=dedupe_batches(file_batches), segments=dedupe_segments(file_segments),
                       lines=accounting, extra=stored, file_batches=file_batches, file_segments=file_segments)


def _with_sections(numbered: DataFrame) -> DataFrame:
    """Each line's ``Dumping`` section: its position, header line, kind, partition and
    segment base offset (windows over the section, within the per-file partitioning)."""
    section = Window.partitionBy("file_id", "section_pos")
    path = F.col("hdr_ff.path")
    h_topic, h_part = g.header_topic_partition(path)
    start_line = F.min(F.when(F.col("kind") == "segment_start", F.col("f_number"))).over(section)
    return numbered.select(
        "*",
        F.col("hdr_ff.pos").alias("section_pos"),
    ).select(
        "*",
        F.min(F.when(F.col("kind") == "header", F.col("line_number"))).over(section).alias("section_line"),
        F.when(F.col("section_pos").isNotNull(), g.section_kind(path)).alias("section_kind"),
        h_topic.alias("h_topic"), h_part.alias("h_partition"),
        F.when(F.col("section_pos").isNotNull(), F.coalesce(start_line, g.header_base_offset(path)))
        .alias("segment_base_offset"),
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
    return shaped


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
    """One row per dumped ``.log`` section of each file, with invalid trailing bytes
    (:func:`dedupe_segments` keeps one per segment of a replica)."""
    in_log = lines.filter(
        (F.col("skind") == "log") & F.col("section_problem").isNull() & F.col("r_topic").isNotNull())
    per_section = in_log.groupBy(
        "file_id", "section_pos", *_replica_cols(), "rel", "segment_base_offset", "section_line").agg(
        F.sum(F.when(F.col("kind") == "invalid_bytes", F.col("f_number"))).alias("invalid_bytes"),
        F.count(F.when(F.col("kind").isin(*g.BATCH_KINDS, *g.REBUILT_KINDS), 1)).alias("n_batch_lines"),
    ).filter(F.col("section_pos").isNotNull() | (F.col("n_batch_lines") > 0) | F.col("invalid_bytes").isNotNull())
    return per_section.select(
        "snapshot", "broker", "topic", "partition", F.col("rel").alias("file"),
        F.col("section_line").alias("line_number"), "segment_base_offset", "invalid_bytes")


def dedupe_segments(shaped: DataFrame) -> DataFrame:
    """One row per dumped segment of a replica: two dumps of one segment keep the larger
    invalid-byte count (then the first file and line by name)."""
    seg = Window.partitionBy(*REPLICA_KEY, F.coalesce(F.col("segment_base_offset"), F.lit(-1)),
                             F.when(F.col("segment_base_offset").isNull(), F.col("file")))
    first = seg.orderBy(F.col("invalid_bytes").desc_nulls_last(), "file", "line_number")
    return shaped.withColumn("_n", F.row_number().over(first)).filter(F.col("_n") == 1).drop("_n")
