"""Parse ``kafka-dump-log.sh`` lines into batches, sections, line accounting and errors.

Every line gets exactly one disposition: ``parsed``, ``skipped`` (headers, notices, blank
lines, index sections, payload continuations) or ``quarantined`` (a ``parse_errors`` row).
The lines come with their context from :mod:`auditor.ingest.wholefile`, so everything here
is a projection of one line: no window, no shuffle.

A v2 batch line is a whole batch (:func:`is_direct_v2_batch`). The other batch shapes need
lines around them, which :func:`pending_item` keys for one aggregate: a legacy (magic 0/1) batch line or
a v2 line without ``count:`` (``B``, by line) takes its record count, and a legacy line its
base offset, from the record lines under it (``R``, by owning line); the message lines of
0.8-0.10 and the deep record lines of 0.11-2.1 make one batch per ``position:`` (``M``).
:func:`pending_batches` turns the aggregated items into batches (those shapes are rare: old
Kafka releases). The summaries (:mod:`auditor.summarise.scan`) and the drill-down
(:mod:`auditor.compare.drill`) both start from :func:`classified_lines`.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType

from auditor.ingest import dump_grammar as g

UNCOMPRESSED = ("none", "NONE", "NoCompressionCodec")
REPLICA_KEY = ("snapshot", "broker", "topic", "partition")

#: Columns of a batch row (before ``broker`` becomes ``replica``).
BATCH_COLUMNS = ("snapshot", "broker", "topic", "partition", "file", "line_number", "sec", "base_offset",
                 "last_offset", "epoch", "crc", "record_count", "is_valid", "is_control", "is_transactional",
                 "magic", "origin")


def classified_lines(lines: DataFrame, files: DataFrame) -> DataFrame:
    """Each dump line classified, cut to its fields, placed in its replica and judged.

    Args:
        lines: :func:`auditor.ingest.wholefile.read_dump_lines` rows.
        files: ``file_id, rel, snapshot, broker, topic, partition`` of those files (small).

    Returns:
        Per line: ``file_id, rel, snapshot, broker, line_number, sec, r_topic, r_partition,
        in_log`` (the line's section is a usable ``.log`` section), ``kind``, the ``f_*``
        fields, ``disposition``, ``error``, the context columns ``owner``,
        ``owner_needs_records``, ``file_has_legacy``, and for a quarantined line what
        :func:`shown_line` makes its ``parse_errors.line`` from: ``e_meta`` (the line cut
        before its first content field: no payload), ``e_length`` (an unrecognised line's
        length, all that is kept of it) and ``e_clean`` (shown from its parsed fields).
    """
    kind = F.col("kind")
    fields = F.col("fields")
    data_kind = kind.isin(*g.BATCH_KINDS, *g.REBUILT_KINDS, *g.RECORD_KINDS)

    def data_field(builder: Callable[..., Column], *names: str) -> Column:
        return F.when(data_kind, builder(fields, *names))

    cut = (
        lines.select("file_id", "line_number", "sec", "sec_line", "skind", "h_topic", "h_partition", "owner",
                     "owner_needs_records", "known_prev", "file_has_legacy", g.stripped(F.col("text")).alias("t"))
        .withColumn("kind", g.line_kind(F.col("t")))
        .withColumn("meta", F.when(kind.isin("blank", "notice"), F.lit(None)).otherwise(g.metadata_part(F.col("t"))))
        .withColumn("fields", F.when(data_kind, g.tokens(F.col("meta"))))
        .select(
            "file_id", "line_number", "sec", "sec_line", "skind", "h_topic", "h_partition", "owner",
            "owner_needs_records", "known_prev", "file_has_legacy", "kind", "t",
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
        .drop("_off", "_num")
    )
    placed = cut.join(F.broadcast(files.select("file_id", "rel", "snapshot", "broker", "topic", "partition")),
                      "file_id")
    judged = placed.transform(_with_replica).transform(_with_disposition)
    return judged.select(
        "file_id", "rel", "snapshot", "broker", "line_number", "sec", "sec_line", "skind", "h_topic",
        "h_partition", "r_topic", "r_partition", "section_problem",
        (F.col("skind_or_log") == "log").alias("in_log"),
        "owner", "owner_needs_records", "file_has_legacy", "kind", "disposition", "error",
        F.when(F.col("error").isNotNull() & ~kind.isin("unknown", "invalid_bytes") & ~_is_clean(),
               g.metadata_part(F.col("t"))).alias("e_meta"),
        F.when(F.col("error").isNotNull() & (kind == "unknown"), F.length("t")).alias("e_length"),
        F.when(F.col("error").isNotNull(), _is_clean()).alias("e_clean"),
        "f_base", "f_last", "f_count", "f_epoch", "f_crc", "f_valid", "f_control", "f_txn", "f_magic", "f_codec",
        "f_offset", "f_position", "f_number",
        F.when(kind == "header", g.header_base_offset(g.header_path(F.col("t")))).alias("f_header_base"),
    )


def _is_clean() -> Column:
    """A line that can be quarantined only for its section's problem (shown from fields)."""
    kind = F.col("kind")
    v2_ok = ((kind == "batch_v2") & F.col("f_base").isNotNull() & F.col("f_last").isNotNull()
             & F.col("f_epoch").isNotNull() & F.col("f_crc").isNotNull() & F.col("f_valid").isNotNull()
             & (F.col("f_last") >= F.col("f_base")))
    legacy_ok = (kind == "batch_legacy") & F.col("f_offset").isNotNull() & F.col("f_crc").isNotNull()
    return kind.isin("blank", "notice", "segment_start", "header") | v2_ok | legacy_ok


def shown_line(kind: Column, meta: Column, length: Column, clean: Column, header_path: Column,
               base: Column, last: Column, epoch: Column, crc: Column, valid: Column, offset: Column,
               number: Column) -> Column:
    """``parse_errors.line`` of a quarantined line, from what :func:`classified_lines` kept
    of it: metadata only, never payloads.

    A line the grammar does not recognise may be a payload continued over several physical
    lines, so only its length is kept. A line that is quarantined only for its section's
    problem is shown from its parsed fields. Any other recognised line is shown cut before
    its content fields, with only known field names and their values kept
    (:func:`auditor.ingest.dump_grammar.safe_metadata`).
    """
    from_fields = (
        F.when(kind == "header", F.concat(F.lit("Dumping "), header_path))
        .when(kind == "batch_v2", F.format_string(
            "baseOffset: %d lastOffset: %d partitionLeaderEpoch: %d crc: %d isvalid: %s",
            base, last, epoch, crc, valid.cast("string")))
        .when(kind == "batch_legacy", F.format_string("offset: %d crc: %d", offset, crc))
        .when(kind == "segment_start", F.format_string("Starting offset: %d", number))
    )
    return (
        F.when(kind == "unknown", F.concat(
            F.lit("<unrecognised line of "), length.cast("string"), F.lit(" characters, not shown>")))
        .when(kind == "invalid_bytes", F.concat(
            F.lit("Found "), number.cast("string"), F.lit(" invalid bytes at the end of the segment")))
        .when(clean, from_fields)
        .otherwise(F.substring(g.safe_metadata(meta), 1, 500))
    )


def _with_replica(df: DataFrame) -> DataFrame:
    """Resolve each line's topic-partition (SPEC 3.1) and the section's problem, if any."""
    conflict = (
        F.col("h_topic").isNotNull() & F.col("topic").isNotNull()
        & ((F.col("h_topic") != F.col("topic")) | (F.col("h_partition") != F.col("partition")))
    )
    r_topic = F.coalesce(F.col("h_topic"), F.col("topic"))
    in_section = F.col("sec") > 0
    problem = (
        F.when(conflict, F.format_string(
            "section header (line %d) names partition %s-%d but the file is in folder %s-%d",
            F.col("sec_line"), F.col("h_topic"), F.col("h_partition"), F.col("topic"), F.col("partition")))
        .when(r_topic.isNull() & in_section, F.format_string(
            "section header (line %d) names no <topic>-<partition> folder and the file is not in a partition folder",
            F.col("sec_line")))
        .when(r_topic.isNull(), F.lit("line before any Dumping header in a file outside partition folders"))
    )
    return df.select(
        "*",
        F.coalesce(F.col("skind"), F.lit("log")).alias("skind_or_log"),
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
    owned = F.col("owner").isNotNull()
    in_log = F.col("skind_or_log") == "log"
    error = (
        F.when(kind == "header", F.col("section_problem"))
        .when(~in_log, F.lit(None))
        .when(content & F.col("section_problem").isNotNull(), F.col("section_problem"))
        .when((kind == "unknown") & F.coalesce(F.col("known_prev"), F.lit(False)), F.lit(None))
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
    parsed = kind.isin(*g.BATCH_KINDS, *g.REBUILT_KINDS, *g.RECORD_KINDS, "invalid_bytes") & in_log
    return df.withColumn("error", error).withColumn(
        "disposition",
        F.when(F.col("error").isNotNull(), "quarantined").when(parsed, "parsed").otherwise("skipped"),
    )


def _parsed(kinds: tuple[str, ...]) -> Column:
    return (F.col("disposition") == "parsed") & F.col("kind").isin(*kinds)


def is_v2_batch() -> Column:
    """A parsed v2 batch line that is a whole batch by itself (no record lines to count).
    In a file with legacy batch lines it is still built with the others
    (:func:`pending_batches`), which need the batch before them."""
    direct = ~(F.coalesce(F.col("owner_needs_records"), F.lit(False)) & (F.col("owner") == F.col("line_number")))
    return _parsed(("batch_v2",)) & direct


def is_direct_v2_batch() -> Column:
    """A v2 batch summarised straight from its line (:func:`is_v2_batch`, in a file without
    legacy batch lines)."""
    return is_v2_batch() & ~F.coalesce(F.col("file_has_legacy"), F.lit(False))


def pending_item(with_v2: bool = False) -> tuple[Column, Column]:
    """``(item_kind, item)`` of a line that goes into a pending batch (see the module
    docstring), nulls for every other line; with ``with_v2``, a v2 batch line that is a batch
    by itself is an item too (``V``, by line: the drill-down reads batches this way)."""
    needs = F.coalesce(F.col("owner_needs_records"), F.lit(False))
    own_line = F.col("owner") == F.col("line_number")
    v2 = is_v2_batch() if with_v2 else is_v2_batch() & F.coalesce(F.col("file_has_legacy"), F.lit(False))
    kind = (
        F.when(v2, F.lit("V"))
        .when(_parsed(g.BATCH_KINDS) & (F.col("kind") == "batch_legacy"), F.lit("B"))
        .when(_parsed(("batch_v2",)) & needs & own_line, F.lit("B"))
        .when(_parsed(g.RECORD_KINDS) & needs, F.lit("R"))
        .when(_parsed(g.REBUILT_KINDS), F.lit("M"))
    )
    item = (
        F.when(kind.isin("B", "V"), F.col("line_number"))
        .when(kind == "R", F.col("owner"))
        .when(kind == "M", F.col("f_position"))
    )
    return kind, item


#: The aggregates of one pending item (one line for ``B``; a batch's record lines for ``R``;
#: a batch's message lines for ``M``), over lines of that item only.
def item_aggregates() -> list[Column]:
    """Aggregates of the lines of one pending item (null for other rows)."""
    is_item = F.col("item_kind").isNotNull()

    def only(c: Column) -> Column:
        return F.when(is_item, c)

    return [
        F.count(only(F.lit(1))).alias("i_lines"),
        F.min(only(F.col("line_number"))).alias("i_line"),
        F.min(only(F.col("f_offset"))).alias("i_min_offset"),
        F.max(only(F.col("f_offset"))).alias("i_max_offset"),
        F.max(only((F.col("kind") == "batch_v2").cast(IntegerType()))).alias("i_v2"),
        F.max(only(F.col("f_base"))).alias("i_base"),
        F.max(only(F.col("f_last"))).alias("i_last"),
        F.max(only(F.col("f_count"))).alias("i_count"),
        F.max(only(F.col("f_epoch"))).alias("i_epoch"),
        F.max(only(F.col("f_crc"))).alias("i_crc"),
        F.min(only(F.col("f_valid").cast(IntegerType()))).alias("i_valid"),
        F.max(only(F.col("f_control").cast(IntegerType()))).alias("i_control"),
        F.max(only(F.col("f_txn").cast(IntegerType()))).alias("i_txn"),
        F.max(only(F.col("f_magic"))).alias("i_magic"),
        F.max(only(F.col("f_number"))).alias("i_number"),
        F.max(only(F.col("e_length"))).alias("i_length"),
        F.max(only(F.col("e_clean").cast(IntegerType()))).alias("i_clean"),
        F.max(only((~F.col("f_codec").isin(*UNCOMPRESSED)).cast(IntegerType()))).alias("i_compressed"),
    ]


def pending_batches(items: DataFrame, sections: DataFrame) -> DataFrame:
    """The batches of the pending items (:data:`BATCH_COLUMNS`).

    Args:
        items: one row per ``(file, sec, item_kind, item)`` with :func:`item_aggregates` and
            ``rel, snapshot, broker, r_topic, r_partition``.
        sections: ``file_id, sec, segment_base_offset``.
    """
    key = ["file_id", "sec"]
    lines = items.filter(F.col("item_kind").isin("B", "V"))
    records = items.filter(F.col("item_kind") == "R").select(
        *key, F.col("item").alias("i_owner"), F.col("i_lines").alias("n_records"),
        F.col("i_min_offset").alias("min_record_offset"))
    is_v2 = F.col("i_v2") == 1
    from_lines = lines.join(records.withColumnRenamed("i_owner", "item"), [*key, "item"], "left").select(
        *key, "rel", "snapshot", "broker", "r_topic", "r_partition",
        F.col("i_line").alias("line_number"), F.col("i_line").alias("pos"),
        F.when(is_v2, F.col("i_base")).otherwise(F.col("min_record_offset")).alias("base_offset"),
        F.when(is_v2, F.col("i_last")).otherwise(F.col("i_min_offset")).alias("last_offset"),
        F.when(is_v2, F.col("i_epoch")).otherwise(F.lit(-1)).alias("epoch"),
        F.col("i_crc").alias("crc"),
        F.coalesce(F.col("i_count"), F.col("n_records")).alias("count_known"),
        F.col("i_valid").cast("boolean").alias("is_valid"), F.col("i_control").cast("boolean").alias("is_control"),
        F.col("i_txn").cast("boolean").alias("is_transactional"), F.col("i_magic").alias("magic"),
        F.col("i_compressed").cast("boolean").alias("compressed"),
        F.when(is_v2, F.lit("v2")).otherwise(F.lit("legacy")).alias("origin"),
    )
    rebuilt = items.filter(F.col("item_kind") == "M").select(
        *key, "rel", "snapshot", "broker", "r_topic", "r_partition",
        F.col("i_line").alias("line_number"), F.col("i_line").alias("pos"),
        F.col("i_min_offset").alias("base_offset"), F.col("i_max_offset").alias("last_offset"),
        F.lit(-1).alias("epoch"), F.lit(None).cast(LongType()).alias("crc"),
        F.col("i_lines").cast(LongType()).alias("count_known"), F.col("i_valid").cast("boolean").alias("is_valid"),
        F.lit(None).cast("boolean").alias("is_control"), F.lit(None).cast("boolean").alias("is_transactional"),
        F.col("i_magic").alias("magic"), F.col("i_compressed").cast("boolean").alias("compressed"),
        F.lit("rebuilt").alias("origin"),
    )
    both = from_lines.unionByName(rebuilt).join(sections.select(*key, "segment_base_offset"), key, "left")
    # A compressed legacy wrapper printed shallow shows only its last offset: its base is
    # the offset after the previous batch of the section (or the segment base).
    in_section = Window.partitionBy("file_id", "sec").orderBy("pos")
    prev_last = F.lag("last_offset").over(in_section)
    single_wrapper = (F.col("origin") != "v2") & F.col("compressed") & (
        F.col("base_offset").isNull() | ((F.col("origin") == "rebuilt") & (F.col("count_known") == 1)))
    guessed = F.least(F.coalesce(prev_last + 1, F.col("segment_base_offset"), F.col("last_offset")), F.col("last_offset"))
    base = F.when(single_wrapper, guessed).otherwise(F.coalesce(F.col("base_offset"), F.col("last_offset")))
    return both.withColumn("base_offset", base).select(
        "snapshot", "broker", F.col("r_topic").alias("topic"), F.col("r_partition").alias("partition"),
        F.col("rel").alias("file"), "line_number", "sec", "base_offset", "last_offset",
        F.col("epoch").cast(IntegerType()).alias("epoch"), "crc",
        F.coalesce(F.col("count_known"), F.col("last_offset") - F.col("base_offset") + 1).cast(LongType())
        .alias("record_count"),
        "is_valid", "is_control", "is_transactional", "magic", "origin",
    )


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


def dedupe_segments(shaped: DataFrame) -> DataFrame:
    """One row per dumped segment of a replica: two dumps of one segment keep the larger
    invalid-byte count (then the first file and line by name)."""
    seg = Window.partitionBy(*REPLICA_KEY, F.coalesce(F.col("segment_base_offset"), F.lit(-1)),
                             F.when(F.col("segment_base_offset").isNull(), F.col("file")))
    first = seg.orderBy(F.col("invalid_bytes").desc_nulls_last(), "file", "line_number")
    return shaped.withColumn("_n", F.row_number().over(first)).filter(F.col("_n") == 1).drop("_n")
