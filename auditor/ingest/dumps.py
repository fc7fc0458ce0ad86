"""Parse ``kafka-dump-log.sh`` lines into batches, sections, line accounting and errors.

Every line gets exactly one disposition: ``parsed``, ``skipped`` (headers, notices, blank
lines, index sections, payload continuations) or ``quarantined`` (a ``parse_errors`` row).
The lines come with their context from :mod:`auditor.ingest.wholefile`, so everything here
is a projection of one line: no window, no shuffle.

A v2 batch line is a whole batch (:func:`is_direct_v2_batch`); the other batch shapes are
pending items (:mod:`auditor.ingest.dump_items`). The scan (:mod:`auditor.summarise.scan`)
and the dump re-read of a drill-down (:mod:`auditor.ingest.batches`) both start from
:func:`classified_lines`.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql.types import IntegerType, LongType

from auditor import columns as F
from auditor.columns import col, lit
from auditor.ingest import dump_grammar as g

REPLICA_KEY = ("snapshot", "broker", "topic", "partition")



def classified_lines(lines: DataFrame, files: DataFrame, all_fields: bool = False) -> DataFrame:
    """Each dump line classified, cut to its fields, placed in its replica and judged.

    The common lines, a well-formed v2 batch line or ``| offset:`` record line in a usable
    ``.log`` section, take a short compiled path. Every other line is judged by the full
    grammar, evaluated without generated code (a one-element ``transform``): Spark compiles
    a stage's expressions into one method, and the whole grammar made it too big for the
    JIT (Spark then ran the stage operator by operator, copying every row at each step).

    Args:
        lines: :func:`auditor.ingest.wholefile.read_dump_lines` rows.
        files: ``file_id, rel, snapshot, broker, topic, partition`` of those files (small).
        all_fields: read ``isControl``, ``isTransactional``, ``magic``, ``compresscodec`` and
            ``position`` of every data line (the drill-down keeps whole batches); else only
            of the lines whose batch is built from several lines (:func:`pending_item`).

    Returns:
        Per line: ``file_id, line_number, sec``, the context columns of
        :func:`auditor.ingest.wholefile.read_dump_lines`, ``kind``, the ``f_*`` fields,
        ``disposition``, ``error`` (:data:`SECTION_PROBLEM` for a line quarantined for its
        section's problem: :func:`section_problem` says which, once per section), for a
        quarantined line what :func:`shown_line` makes its ``parse_errors.line`` from
        (``e_meta``: the line cut before its first content field, so no payload;
        ``e_length``: an unrecognised line's length, all that is kept of it; ``e_clean``:
        shown from its parsed fields), and for a header line what its path says
        (``h_skind, h_topic, h_partition, f_header_base``).
    """
    kind = col("kind")
    fields = col("fields")
    data_kind = kind.isin(*g.BATCH_KINDS, *g.REBUILT_KINDS, *g.RECORD_KINDS)

    def data_field(builder: Callable[..., Column], *names: str) -> Column:
        return F.when(data_kind, builder(fields, *names))

    t = col("t")
    quick = F.when(t.startswith("baseOffset: "), lit("batch_v2")).when(t.startswith("| offset: "), lit("record"))
    context = ("file_id", "line_number", "sec", "in_log", "has_problem", "tail", "owner", "owner_needs_records",
               "known_prev", "file_has_legacy")
    cut = (
        lines.select(*context, g.stripped(col("text")).alias("t"))
        .withColumn("kind", F.coalesce(quick, interpreted(t, g.line_kind)))
        .withColumn("meta", F.when(kind.isin("blank", "notice"), lit(None)).otherwise(g.metadata_part(t)))
        .withColumn("fields", F.when(data_kind, g.tokens(col("meta"))))
        .select(
            *context, "kind", "t", "meta",
            data_field(g.field_long, "baseOffset").alias("f_base"),
            data_field(g.field_long, "lastOffset").alias("f_last"),
            data_field(g.field_long, "count").alias("f_count"),
            data_field(g.field_int, "partitionLeaderEpoch").alias("f_epoch"),
            data_field(g.field_long, "crc").alias("f_crc"),
            data_field(g.field_bool, "isvalid", "isValid").alias("f_valid"),
            # the fields only whole batches need, read without generated code (see above)
            # (when every line needs them, compiled: the drill-down's items, 28% less task
            # time at 10M lines)
            (F.when(data_kind, _extra_fields(fields)) if all_fields else
             F.when(data_kind & (~kind.isin("batch_v2", *g.RECORD_KINDS)
                                 | F.coalesce(col("owner_needs_records"), col("file_has_legacy"), lit(False))),
                    interpreted(fields, _extra_fields))).alias("_extra"),
            F.when(kind.isin(*g.RECORD_KINDS, *g.REBUILT_KINDS, "batch_legacy"),
                   F.regexp_extract(t, r"^\|?\s*offset: (-?\d+)", 1)).alias("_off"),
            F.when(kind.isin("segment_start", "invalid_bytes"),
                   F.regexp_extract(t, r"(?:^(?:Log s|S)tarting offset: |^Found )(\d+)", 1)).alias("_num"),
        )
        .withColumn("f_offset", F.when(col("_off") != "", col("_off").try_cast("bigint")))
        .withColumn("f_number", F.when(col("_num") != "", col("_num").try_cast("bigint")))
        .select("*", *[col(f"_extra.{c}").alias(c) for c in _EXTRA_FIELDS])
        .drop("_off", "_num", "_extra")
    )
    placed = cut
    fast = col("in_log") & ~col("has_problem") & (
        ((kind == "batch_v2") & col("f_base").isNotNull() & col("f_last").isNotNull()
         & col("f_epoch").isNotNull() & col("f_crc").isNotNull() & col("f_valid").isNotNull()
         & (col("f_last") >= col("f_base")) & (col("f_base") >= 0) & (col("f_epoch") >= -1))
        | ((kind == "record") & col("f_offset").isNotNull() & col("owner").isNotNull()
           & (col("f_offset") >= 0)))
    slow_inputs = F.struct(*[col(c) for c in _SLOW_INPUTS])
    judged = placed.select("*", F.when(~fast, interpreted(slow_inputs, lambda s: _slow_path(s.getField))).alias("_slow"))
    parsed = kind.isin(*g.BATCH_KINDS, *g.REBUILT_KINDS, *g.RECORD_KINDS, "invalid_bytes") & col("in_log")
    error = col("_slow.error")
    return judged.select(
        *context, "kind",
        F.when(error.isNotNull(), "quarantined").when(parsed, "parsed").otherwise("skipped").alias("disposition"),
        error.alias("error"), col("_slow.e_meta").alias("e_meta"), col("_slow.e_length").alias("e_length"),
        col("_slow.e_clean").alias("e_clean"),
        "f_base", "f_last", "f_count", "f_epoch", "f_crc", "f_valid", "f_control", "f_txn", "f_magic", "f_codec",
        "f_offset", "f_position", "f_number", col("_slow.header_base").alias("f_header_base"),
        col("_slow.h_skind").alias("h_skind"), col("_slow.h_topic").alias("h_topic"),
        col("_slow.h_partition").alias("h_partition"),
    )


_EXTRA_FIELDS = ("f_control", "f_txn", "f_magic", "f_codec", "f_position")


def _extra_fields(toks: Column) -> Column:
    return F.struct(
        g.field_bool(toks, "isControl").alias("f_control"), g.field_bool(toks, "isTransactional").alias("f_txn"),
        g.field_int(toks, "magic").alias("f_magic"), g.field_text(toks, "compresscodec").alias("f_codec"),
        g.field_long(toks, "position").alias("f_position"))


def interpreted(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(value)`` evaluated without generated code: a one-element ``transform`` (Spark
    interprets higher-order functions). For logic that is large but rarely evaluated."""
    return F.transform(F.array(value), body)[0]


#: What the slow path of :func:`classified_lines` reads.
_SLOW_INPUTS = ("t", "meta", "kind", "in_log", "has_problem", "owner", "known_prev", "f_base", "f_last", "f_epoch",
                "f_crc", "f_valid", "f_offset", "f_position")

#: The error of a line quarantined for its section's problem, until the problem is known
#: (one message per section: :func:`section_problem`).
SECTION_PROBLEM = "\u0000section"


def _slow_path(c: Callable[[str], Column]) -> Column:
    """The full judgement of a line (``c``: a column by name): its error, what is shown of
    it when quarantined, and what a header's path says."""
    problem = F.when(c("has_problem"), lit(SECTION_PROBLEM))
    kind = c("kind")
    header = kind == "header"

    def judged(v: Column) -> Column:
        error, clean, path = v["error"], v["clean"], v["path"]
        topic, part = g.header_topic_partition(path)
        return F.struct(
            error.alias("error"),
            F.when(error.isNotNull() & ~kind.isin("unknown", "invalid_bytes") & ~clean, c("meta")).alias("e_meta"),
            F.when(error.isNotNull() & (kind == "unknown"), F.length(c("t"))).alias("e_length"),
            F.when(error.isNotNull(), clean).alias("e_clean"),
            F.when(header, g.header_base_offset(path)).alias("header_base"),
            F.when(header, g.section_kind(path)).alias("h_skind"), F.when(header, topic).alias("h_topic"),
            F.when(header, part).alias("h_partition"),
        )

    # the error, cleanliness and header path bound once each (a tree that repeats a
    # sub-expression copies it)
    return interpreted(F.struct(_error(c, problem).alias("error"), _is_clean(c).alias("clean"),
                                F.when(header, g.header_path(c("t"))).alias("path")), judged)


def _is_clean(c: Callable[[str], Column]) -> Column:
    """A line that can be quarantined only for its section's problem (shown from fields)."""
    kind = c("kind")
    v2_ok = ((kind == "batch_v2") & c("f_base").isNotNull() & c("f_last").isNotNull()
             & c("f_epoch").isNotNull() & c("f_crc").isNotNull() & c("f_valid").isNotNull()
             & (c("f_last") >= c("f_base")) & (c("f_base") >= 0) & (c("f_epoch") >= -1))
    legacy_ok = (kind == "batch_legacy") & c("f_offset").isNotNull() & c("f_crc").isNotNull() & (c("f_offset") >= 0)
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
        F.when(kind == "header", F.concat(lit("Dumping "), header_path))
        .when(kind == "batch_v2", F.format_string(
            "baseOffset: %d lastOffset: %d partitionLeaderEpoch: %d crc: %d isvalid: %s",
            base, last, epoch, crc, valid.cast("string")))
        .when(kind == "batch_legacy", F.format_string("offset: %d crc: %d", offset, crc))
        .when(kind == "segment_start", F.format_string("Starting offset: %d", number))
    )
    return (
        F.when(kind == "unknown", F.concat(
            lit("<unrecognised line of "), length.cast("string"), lit(" characters, not shown>")))
        .when(kind == "invalid_bytes", F.concat(
            lit("Found "), number.cast("string"), lit(" invalid bytes at the end of the segment")))
        .when(clean, from_fields)
        .otherwise(F.substring(g.safe_metadata(meta), 1, 500))
    )


def section_problem(c: Callable[[str], Column]) -> Column:
    """Why a section (``c``: a column by name: ``sec, sec_line, h_topic, h_partition`` and
    the file's ``topic, partition``) cannot be placed in a replica (SPEC 3.1), or null."""
    r_topic = F.coalesce(c("h_topic"), c("topic"))
    return (
        F.when(g.header_conflict(c("h_topic"), c("h_partition"), c("topic"), c("partition")), F.format_string(
            "section header (line %d) names partition %s-%d but the file is in folder %s-%d",
            c("sec_line"), c("h_topic"), c("h_partition"), c("topic"), c("partition")))
        .when(r_topic.isNull() & (c("sec") > 0), F.format_string(
            "section header (line %d) names no <topic>-<partition> folder and the file is not in a partition folder",
            c("sec_line")))
        .when(r_topic.isNull(), lit("line before any Dumping header in a file outside partition folders"))
    )


def with_replica(df: DataFrame) -> DataFrame:
    """Resolve the topic-partition of each row (SPEC 3.1: ``h_topic, h_partition`` of its
    section's header, ``topic, partition`` of its file's folder) and the section's problem."""
    return df.select(
        "*",
        F.coalesce(col("skind"), lit("log")).alias("skind_or_log"),
        F.coalesce(col("h_topic"), col("topic")).alias("r_topic"),
        F.coalesce(col("h_partition"), col("partition")).alias("r_partition"),
        section_problem(F.col).alias("section_problem"),
    )


def _required(fields: dict[str, Column]) -> Column:
    """Name of the first missing field, or null when all are present."""
    expr = lit(None).cast("string")
    for name, value in reversed(list(fields.items())):
        expr = F.when(value.isNull(), lit(name)).otherwise(expr)
    return expr


#: Numeric fields whose value Kafka bounds (SPEC 8): an offset is in [0, 2^63 - 1], a batch's
#: epoch in [-1, 2^31 - 1]. A value written but outside its type does not parse.
_BOUNDED = (("baseOffset", "2^63 - 1"), ("lastOffset", "2^63 - 1"), ("offset", "2^63 - 1"),
            ("partitionLeaderEpoch", "2^31 - 1"))


def _out_of_range(meta: Column) -> Column:
    """``"<field> <value> out of range"`` for the first bounded field written as a whole
    number too large for its type, else null (only evaluated for quarantined lines)."""
    def message(name: str, bound: str) -> Callable[[Column], Column]:
        def of(text: Column) -> Column:
            too_big = text.rlike(r"^-?\d+$") & (
                text.try_cast(LongType() if bound == "2^63 - 1" else IntegerType()).isNull())
            return F.when(too_big, F.format_string(
                f"%s %s out of range (at most {bound}: a value Kafka never writes)",
                lit(name), F.substring(text, 1, 25)))
        return of

    def first_too_big(toks: Column) -> Column:
        return F.coalesce(*[interpreted(g.field_text(toks, name), message(name, bound)) for name, bound in _BOUNDED])
    # each intermediate bound once (a tree that repeats a sub-expression copies it)
    return interpreted(g.tokens(meta), first_too_big)


def _error(c: Callable[[str], Column], problem: Column) -> Column:
    """Why a line is quarantined (``problem``: its section's), or null."""
    kind = c("kind")
    content = ~kind.isin("blank", "notice", "segment_start", "header")
    missing_v2 = _required({"baseOffset": c("f_base"), "lastOffset": c("f_last"),
                            "partitionLeaderEpoch": c("f_epoch"), "crc": c("f_crc"), "isvalid": c("f_valid")})
    missing_legacy = _required({"offset": c("f_offset"), "crc": c("f_crc")})
    missing_rebuilt = _required({"offset": c("f_offset"), "position": c("f_position")})
    out_of_range = _out_of_range(c("meta"))
    return (
        F.when(kind == "header", problem)
        .when(~c("in_log"), lit(None))
        .when(content & problem.isNotNull(), problem)
        .when((kind == "unknown") & F.coalesce(c("known_prev"), lit(False)), lit(None))
        .when(kind == "unknown", lit("unrecognised line"))
        .when(kind == "index_like", lit("index-style line inside a .log section"))
        .when((kind == "batch_v2") & missing_v2.isNotNull(),
              F.coalesce(out_of_range, F.concat(lit("batch line without "), missing_v2, lit(" (truncated line?)"))))
        .when((kind == "batch_v2") & (c("f_epoch") < -1),
              lit("partitionLeaderEpoch below -1 (a value Kafka never writes)"))
        .when((kind == "batch_v2") & (c("f_base") < 0), lit("negative baseOffset (a value Kafka never writes)"))
        .when((kind == "batch_v2") & (c("f_last") < c("f_base")), lit("batch line with lastOffset below baseOffset"))
        .when((kind == "batch_legacy") & missing_legacy.isNotNull(),
              F.coalesce(out_of_range,
                         F.concat(lit("legacy batch line without "), missing_legacy, lit(" (truncated line?)"))))
        .when(kind.isin("batch_legacy", *g.REBUILT_KINDS, *g.RECORD_KINDS) & (c("f_offset") < 0),
              lit("negative offset (a value Kafka never writes)"))
        .when(kind.isin(*g.REBUILT_KINDS) & missing_rebuilt.isNotNull(),
              F.concat(lit("message line without "), missing_rebuilt))
        .when(kind.isin(*g.RECORD_KINDS) & c("owner").isNull(), lit("record line before any batch line of its section"))
        .when((kind == "record") & c("f_offset").isNull(),
              F.coalesce(out_of_range, lit("record line without offset")))
    )


def parsed_as(kinds: tuple[str, ...]) -> Column:
    return (col("disposition") == "parsed") & col("kind").isin(*kinds)


def is_v2_batch() -> Column:
    """A parsed v2 batch line that is a whole batch by itself (no record lines to count).
    In a file with legacy batch lines it is still built with the others
    (:func:`pending_batches`), which need the batch before them."""
    direct = ~(F.coalesce(col("owner_needs_records"), lit(False)) & (col("owner") == col("line_number")))
    return parsed_as(("batch_v2",)) & direct


def is_direct_v2_batch() -> Column:
    """A v2 batch summarised straight from its line (:func:`is_v2_batch`, in a file without
    legacy batch lines)."""
    return is_v2_batch() & ~F.coalesce(col("file_has_legacy"), lit(False))


def dedupe_segments(shaped: DataFrame) -> DataFrame:
    """One row per dumped segment of a replica: two dumps of one segment keep the larger
    invalid-byte count (then the first file and line by name)."""
    seg = Window.partitionBy(*REPLICA_KEY, F.coalesce(col("segment_base_offset"), lit(-1)),
                             F.when(col("segment_base_offset").isNull(), col("file")))
    first = seg.orderBy(col("invalid_bytes").desc_nulls_last(), "file", "line_number")
    return shaped.withColumn("_n", F.row_number().over(first)).filter(col("_n") == 1).drop("_n")
