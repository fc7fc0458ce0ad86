"""Dump files too large to hold as one row, read line by line (Spark's text source) and
given the columns :func:`auditor.ingest.wholefile.read_dump_lines` gives a file read whole:
each line's number and section from a broadcast table of positions, and the owners of
record lines by one window per file (:func:`large_file_lines`)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession, Window

from auditor import columns as F
from auditor.columns import col, lit
from auditor.ingest import dump_grammar as g
from auditor.ingest.discovery import InputFile
from auditor.ingest.dump_context import (
    IN_LOG,
    PROBLEM,
    is_header,
    is_known_payload,
    is_record,
    may_carry_payload,
    needs_records,
    section_code,
    section_flags,
)
from auditor.ingest.lines import listed_file_id, text_source, uri_table

#: A large file's lines find their section in buckets of 2^LOOKUP_BITS consecutive lines of
#: one split (:func:`large_file_lines`).
LOOKUP_BITS = 5


def large_file_lines(spark: SparkSession, files: Sequence[tuple[int, InputFile]], tails: frozenset[int],
                     tail_lines: int, spill: str | None = None, narrow: bool = False) -> DataFrame:
    """The same columns for files too big to read whole, from Spark's text source, which
    splits a file across tasks and does not number lines.

    Within one split ``monotonically_increasing_id`` counts the split's lines in file order,
    so a line's number is its ``mono`` less the split's first, plus the lines of the file's
    earlier splits. Sections need no window over lines either: their headers are few. One
    small table (:func:`_positions`), built from one aggregate of the lines per split and
    broadcast, holds for every bucket of :data:`LOOKUP_BITS` positions of a split that
    split's first ``mono`` and earlier lines, and the sections that cover the bucket's
    lines; each line finds its number and its section there, in the task that read it. Both
    reads are scans of one relation in one query, so they split and order the files alike
    and give each line the same ``mono``.

    That is every line's context in a file without record lines (a shallow dump: no line
    needs the batch line it belongs to, or the line before it). In a file with a record,
    legacy or payload line, those come from one window per file ordered by line number
    (:func:`_owners`: a shuffle of that file's lines).
    """
    raw = text_source(spark, files)
    lines = raw.select(
        col("_metadata.file_path").alias("uri"), col("_metadata.file_block_start").alias("block_start"),
        F.monotonically_increasing_id().alias("mono"), col("value").alias("text"))
    keyed = lines.select("*", F.shiftright("mono", LOOKUP_BITS).alias("mk")).join(
        F.broadcast(_positions(lines, uri_table(spark, raw, files, folders=True, tails=tails, spill=spill,
                                                narrow=narrow))),
        ["uri", "block_start", "mk"], "left")
    # (a line with no row in the table fails the run instead of being dropped by a filter)
    deep = F.coalesce(col("deep"), F.raise_error(F.concat(
        lit("internal error: a line of a large file has no position: "), col("uri"))).cast("boolean"))
    # (within one query both scans split the files alike; were they ever not, a line's
    # position would fall outside its split's, and the run fails instead of misnumbering)
    inside = (col("mono") >= col("first")) & (col("mono") < col("first") + col("n"))
    number = F.when(inside, col("mono") - col("first") + 1 + col("before")).otherwise(F.raise_error(
        F.concat(lit("internal error: a line of a large file is outside its split: "), col("uri")))
        .cast("bigint")).alias("line_number")
    numbered = keyed.select(listed_file_id().alias("file_id"), "text", "tails", "secs", deep.alias("deep"), number)
    # Both kinds of file read the same columns of the table (one broadcast, built once), and
    # each looks its lines up after the split (neither computes the other's). A file without
    # record lines is as read whole: no line needs the batch line it belongs to.
    shallow = _placed(numbered.filter(~col("deep")), tail_lines).select(
        "*", lit(None).cast("bigint").alias("owner"), lit(False).alias("owner_needs_records"),
        lit(None).cast("boolean").alias("known_prev"), lit(False).alias("file_has_legacy"))
    return shallow.unionByName(_owners(_placed(numbered.filter(col("deep")), tail_lines)))


def _placed(numbered: DataFrame, tail_lines: int) -> DataFrame:
    """``file_id, line_number, text, sec, in_log, has_problem, tail`` of numbered lines, each
    looked up in its bucket's sections (``secs``)."""
    at = F.try_element_at(F.filter("secs", lambda x: x["start"] <= col("line_number")), lit(-1))
    found = numbered.select("file_id", "line_number", "text", (col("tails") & (
        at["end"] - col("line_number") < tail_lines)).alias("tail"), at["sec"].cast("int").alias("sec"),
        at["code"].alias("code"))
    code = col("code")
    return found.select("file_id", "line_number", "text", "sec", (code.bitwiseAND(lit(IN_LOG)) != 0).alias("in_log"),
                        (code.bitwiseAND(lit(PROBLEM)) != 0).alias("has_problem"), "tail")


def _positions(lines: DataFrame, listed: DataFrame) -> DataFrame:
    """The lookup table of :func:`large_file_lines`: one row per ``(uri, block_start, mk)``, a
    bucket of a split's positions (``mk = mono >> LOOKUP_BITS``), with the file's
    ``file_id, tails``, its number of lines (``total``), whether it has a record, legacy or
    payload line (``deep``), the split's ``first`` mono, its ``n`` lines and the lines
    ``before`` it in its file, and ``secs``: the sections holding the bucket's lines, ``(start, sec, code,
    end)`` by ``start`` (line numbers; section 0 is the lines before the first header)."""
    x = col("text")
    path = g.header_path(g.stripped(x))
    h_topic, h_part = g.header_topic_partition(path)
    header = F.struct(col("mono").alias("m"), (g.section_kind(path) == "log").alias("log"),
                      h_topic.alias("t"), h_part.alias("p"))
    per_split = lines.groupBy("uri", "block_start").agg(
        F.count(lit(1)).alias("n"), F.min("mono").alias("first"),
        F.max((is_record(x) | may_carry_payload(x)).cast("int")).alias("deep"),
        F.collect_list(F.when(is_header(x), header)).alias("h"))
    # (each step reads the one before it once: the aggregate over every line is computed once)
    in_file = Window.partitionBy("file_id").orderBy("block_start")
    whole_file = Window.partitionBy("file_id")
    splits = per_split.join(listed, "uri", "left").select(
        "uri", "block_start", listed_file_id().alias("file_id"), "topic", "partition", "tails", "n", "first", "h",
        F.coalesce(F.sum("n").over(in_file.rowsBetween(Window.unboundedPreceding, -1)), lit(0)).alias("before"),
        F.sum("n").over(whole_file).alias("total"), (F.max("deep").over(whole_file) == 1).alias("deep"),
        (F.row_number().over(in_file) == 1).alias("first_split"))
    # (a step of its own: in the step that explodes the sections, the window would see their rows)
    split = F.struct("uri", "block_start", "first", "n", "before")
    splits = splits.select("*", F.collect_list(split).over(whole_file).alias("splits"))
    file_cols = ("file_id", "tails", "deep", "total")
    topic, partition = col("topic"), col("partition")
    # the sections: the lines before the first header (from the file's first split), then
    # one per header; each row also carries its file's splits
    before_any = F.struct(lit(1).cast("bigint").alias("start"), lit(0).alias("o"),
                          section_code(None, topic, partition).alias("code"))
    heads = F.transform("h", lambda x: F.struct(
        (x["m"] - col("first") + 1 + col("before")).alias("start"), lit(1).alias("o"),
        section_flags(x["log"], x["t"], x["p"], topic, partition).alias("code")))
    starts = splits.select(
        *file_cols, "splits",
        F.explode(F.concat(F.when(col("first_split"), F.array(before_any)).otherwise(F.array().cast(
            "array<struct<start:bigint,o:int,code:bigint>>")), heads)).alias("x"))
    order = Window.partitionBy("file_id").orderBy("x.start", "x.o")
    sections = starts.select(
        *file_cols, "splits", col("x.start").alias("start"), col("x.code").alias("code"),
        (F.row_number().over(order) - 1).alias("sec"),
        F.coalesce(F.lead("x.start").over(order) - 1, col("total")).alias("end"),
    ).filter(col("end") >= col("start"))
    # each section, in the buckets of each split of its file it reaches
    reach = sections.select(*file_cols, F.struct("start", "sec", "code", "end").alias("s"),
                            F.explode("splits").alias("p"))
    before, n, first = col("p.before"), col("p.n"), col("p.first")
    lo, hi = F.greatest(col("s.start"), before + 1), F.least(col("s.end"), before + n)
    to_mono = first - 1 - before
    reached = reach.filter(lo <= hi).select(
        *file_cols, "s", col("p.uri").alias("uri"), col("p.block_start").alias("block_start"),
        col("p.first").alias("first"), col("p.n").alias("n"), col("p.before").alias("before"),
        F.explode(F.sequence(F.shiftright(lo + to_mono, LOOKUP_BITS), F.shiftright(hi + to_mono, LOOKUP_BITS)))
        .alias("mk"))
    return reached.groupBy("uri", "block_start", "mk", *file_cols, "first", "n", "before").agg(
        F.array_sort(F.collect_list("s")).alias("secs"))


def _owners(placed: DataFrame) -> DataFrame:
    """:data:`LINE_COLUMNS` of numbered and placed lines (``file_id, line_number, text, sec,
    in_log, has_problem, tail``) of files with record lines: each line's batch line, the
    last known line before it, and whether the file has legacy batch lines, from one window
    per file ordered by line number (a shuffle of these files' lines)."""
    t = g.stripped(col("text"))
    kind = g.line_kind(t)
    in_file = Window.partitionBy("file_id").orderBy("line_number")
    running = in_file.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    marked = placed.select(
        "*",
        F.when(kind == "header", lit(False)).when(kind.isin(*g.BATCH_KINDS), lit(True)).alias("_batch"),
        # (as read whole: a batch line counts the lines under it when there are any, i.e. the
        # next line starts no group)
        F.when(kind.isin(*g.BATCH_KINDS), needs_records(col("text")) & ~F.coalesce(
            F.lead(kind.isin("header", *g.BATCH_KINDS)).over(in_file), lit(True))).alias("_needs"),
        (kind == "batch_legacy").alias("_legacy"),
        is_known_payload(t, kind).alias("_known"),
    )
    carried = marked.select(
        "file_id", "line_number", "text", "sec", "in_log", "has_problem", "tail",
        F.last(F.when(col("_batch").isNotNull(), F.struct(
            "_batch", col("line_number").alias("line"), "_needs")), ignorenulls=True).over(running).alias("_g"),
        F.last("_known", ignorenulls=True).over(running).alias("known_prev"),
        F.max(col("_legacy").cast("int")).over(Window.partitionBy("file_id")).alias("_any_legacy"),
    )
    return carried.select(
        "file_id", "line_number", "text", "sec", "in_log", "has_problem", "tail",
        F.when(col("_g._batch"), col("_g.line")).alias("owner"),
        F.coalesce(col("_g._batch") & col("_g._needs"), lit(False)).alias("owner_needs_records"),
        "known_prev", (col("_any_legacy") == 1).alias("file_has_legacy"),
    )
