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

from collections.abc import Callable, Sequence

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
    kind = F.col("kind")
    fields = F.col("fields")
    data_kind = kind.isin(*g.BATCH_KINDS, *g.REBUILT_KINDS, *g.RECORD_KINDS)

    def data_field(builder: Callable[..., Column], *names: str) -> Column:
        return F.when(data_kind, builder(fields, *names))

    t = F.col("t")
    quick = F.when(t.startswith("baseOffset: "), F.lit("batch_v2")).when(t.startswith("| offset: "), F.lit("record"))
    context = ("file_id", "line_number", "sec", "in_log", "has_problem", "tail", "owner", "owner_needs_records",
               "known_prev", "file_has_legacy")
    cut = (
        lines.select(*context, g.stripped(F.col("text")).alias("t"))
        .withColumn("kind", F.coalesce(quick, interpreted(t, g.line_kind)))
        .withColumn("meta", F.when(kind.isin("blank", "notice"), F.lit(None)).otherwise(g.metadata_part(t)))
        .withColumn("fields", F.when(data_kind, g.tokens(F.col("meta"))))
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
                                 | F.coalesce(F.col("owner_needs_records"), F.col("file_has_legacy"), F.lit(False))),
                    interpreted(fields, _extra_fields))).alias("_extra"),
            F.when(kind.isin(*g.RECORD_KINDS, *g.REBUILT_KINDS, "batch_legacy"),
                   F.regexp_extract(t, r"^\|?\s*offset: (-?\d+)", 1)).alias("_off"),
            F.when(kind.isin("segment_start", "invalid_bytes"),
                   F.regexp_extract(t, r"(?:^(?:Log s|S)tarting offset: |^Found )(\d+)", 1)).alias("_num"),
        )
        .withColumn("f_offset", F.when(F.col("_off") != "", F.col("_off").try_cast(LongType())))
        .withColumn("f_number", F.when(F.col("_num") != "", F.col("_num").try_cast(LongType())))
        .select("*", *[F.col(f"_extra.{c}").alias(c) for c in _EXTRA_FIELDS])
        .drop("_off", "_num", "_extra")
    )
    placed = cut
    fast = F.col("in_log") & ~F.col("has_problem") & (
        ((kind == "batch_v2") & F.col("f_base").isNotNull() & F.col("f_last").isNotNull()
         & F.col("f_epoch").isNotNull() & F.col("f_crc").isNotNull() & F.col("f_valid").isNotNull()
         & (F.col("f_last") >= F.col("f_base")) & (F.col("f_base") >= 0) & (F.col("f_epoch") >= -1))
        | ((kind == "record") & F.col("f_offset").isNotNull() & F.col("owner").isNotNull()
           & (F.col("f_offset") >= 0)))
    slow_inputs = F.struct(*[F.col(c) for c in _SLOW_INPUTS])
    judged = placed.select("*", F.when(~fast, interpreted(slow_inputs, lambda s: _slow_path(s.getField))).alias("_slow"))
    parsed = kind.isin(*g.BATCH_KINDS, *g.REBUILT_KINDS, *g.RECORD_KINDS, "invalid_bytes") & F.col("in_log")
    error = F.col("_slow.error")
    return judged.select(
        *context, "kind",
        F.when(error.isNotNull(), "quarantined").when(parsed, "parsed").otherwise("skipped").alias("disposition"),
        error.alias("error"), F.col("_slow.e_meta").alias("e_meta"), F.col("_slow.e_length").alias("e_length"),
        F.col("_slow.e_clean").alias("e_clean"),
        "f_base", "f_last", "f_count", "f_epoch", "f_crc", "f_valid", "f_control", "f_txn", "f_magic", "f_codec",
        "f_offset", "f_position", "f_number", F.col("_slow.header_base").alias("f_header_base"),
        F.col("_slow.h_skind").alias("h_skind"), F.col("_slow.h_topic").alias("h_topic"),
        F.col("_slow.h_partition").alias("h_partition"),
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
    problem = F.when(c("has_problem"), F.lit(SECTION_PROBLEM))
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
        .when(r_topic.isNull(), F.lit("line before any Dumping header in a file outside partition folders"))
    )


def with_replica(df: DataFrame) -> DataFrame:
    """Resolve the topic-partition of each row (SPEC 3.1: ``h_topic, h_partition`` of its
    section's header, ``topic, partition`` of its file's folder) and the section's problem."""
    return df.select(
        "*",
        F.coalesce(F.col("skind"), F.lit("log")).alias("skind_or_log"),
        F.coalesce(F.col("h_topic"), F.col("topic")).alias("r_topic"),
        F.coalesce(F.col("h_partition"), F.col("partition")).alias("r_partition"),
        section_problem(F.col).alias("section_problem"),
    )


def _required(fields: dict[str, Column]) -> Column:
    """Name of the first missing field, or null when all are present."""
    expr = F.lit(None).cast("string")
    for name, col in reversed(list(fields.items())):
        expr = F.when(col.isNull(), F.lit(name)).otherwise(expr)
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
                F.lit(name), F.substring(text, 1, 25)))
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
        .when(~c("in_log"), F.lit(None))
        .when(content & problem.isNotNull(), problem)
        .when((kind == "unknown") & F.coalesce(c("known_prev"), F.lit(False)), F.lit(None))
        .when(kind == "unknown", F.lit("unrecognised line"))
        .when(kind == "index_like", F.lit("index-style line inside a .log section"))
        .when((kind == "batch_v2") & missing_v2.isNotNull(),
              F.coalesce(out_of_range, F.concat(F.lit("batch line without "), missing_v2, F.lit(" (truncated line?)"))))
        .when((kind == "batch_v2") & (c("f_epoch") < -1),
              F.lit("partitionLeaderEpoch below -1 (a value Kafka never writes)"))
        .when((kind == "batch_v2") & (c("f_base") < 0), F.lit("negative baseOffset (a value Kafka never writes)"))
        .when((kind == "batch_v2") & (c("f_last") < c("f_base")), F.lit("batch line with lastOffset below baseOffset"))
        .when((kind == "batch_legacy") & missing_legacy.isNotNull(),
              F.coalesce(out_of_range,
                         F.concat(F.lit("legacy batch line without "), missing_legacy, F.lit(" (truncated line?)"))))
        .when(kind.isin("batch_legacy", *g.REBUILT_KINDS, *g.RECORD_KINDS) & (c("f_offset") < 0),
              F.lit("negative offset (a value Kafka never writes)"))
        .when(kind.isin(*g.REBUILT_KINDS) & missing_rebuilt.isNotNull(),
              F.concat(F.lit("message line without "), missing_rebuilt))
        .when(kind.isin(*g.RECORD_KINDS) & c("owner").isNull(), F.lit("record line before any batch line of its section"))
        .when((kind == "record") & c("f_offset").isNull(),
              F.coalesce(out_of_range, F.lit("record line without offset")))
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


def item_spec() -> list[tuple[str, Callable[[Column], Column], Column]]:
    """The aggregates of one pending item's lines (one line for ``B``; a batch's record lines
    for ``R``; a batch's message lines for ``M``), over rows with an ``item_kind`` only, as
    :data:`auditor.summarise.digest.Spec` entries."""
    is_item = F.col("item_kind").isNotNull()

    def only(c: Column) -> Column:
        return F.when(is_item, c)

    return [
        ("i_lines", F.sum, only(F.lit(1))),
        ("i_line", F.min, only(F.col("line_number"))),
        ("i_min_offset", F.min, only(F.col("f_offset"))),
        ("i_max_offset", F.max, only(F.col("f_offset"))),
        ("i_v2", F.max, only((F.col("kind") == "batch_v2").cast(IntegerType()))),
        ("i_base", F.max, only(F.col("f_base"))),
        ("i_last", F.max, only(F.col("f_last"))),
        ("i_count", F.max, only(F.col("f_count"))),
        ("i_epoch", F.max, only(F.col("f_epoch"))),
        ("i_crc", F.max, only(F.col("f_crc"))),
        ("i_valid", F.min, only(F.col("f_valid").cast(IntegerType()))),
        ("i_control", F.max, only(F.col("f_control").cast(IntegerType()))),
        ("i_txn", F.max, only(F.col("f_txn").cast(IntegerType()))),
        ("i_magic", F.max, only(F.col("f_magic"))),
        ("i_number", F.max, only(F.col("f_number"))),
        ("i_length", F.max, only(F.col("e_length"))),
        ("i_clean", F.max, only(F.col("e_clean").cast(IntegerType()))),
        ("i_compressed", F.max, only((~F.col("f_codec").isin(*UNCOMPRESSED)).cast(IntegerType()))),
    ]


def pending_batches(items: DataFrame, sections: DataFrame, extra: Sequence[str] = ()) -> DataFrame:
    """The batches of the pending items (:data:`BATCH_COLUMNS`).

    Args:
        items: one row per ``(file, sec, item_kind, item)`` with :func:`item_aggregates` and
            ``rel, snapshot, broker, r_topic, r_partition``.
        sections: ``file_id, sec, segment_base_offset``.
        extra: also these of ``file_id`` and ``segment_base_offset``.
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
        "is_valid", "is_control", "is_transactional", "magic", "origin", *extra,
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
