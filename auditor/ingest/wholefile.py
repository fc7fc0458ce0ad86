"""Read dump files whole: every line with its exact number and its context, no shuffle.

A ``kafka-dump-log.sh`` line means something only in its context: the ``Dumping`` section
it sits in (which partition, which kind of file), the batch line a record line belongs to,
and, for a line the grammar does not know, whether it continues a record's payload. Each
file is read as one row (Spark's binary file source), split into an array of lines, and the
context is computed with array functions over that row before the lines are exploded:

- ``codes``: one pass over the lines marks headers (``4i``) and batch lines (``4i + 2``,
  ``4i + 3`` for a legacy one);
- ``sections``: each header starts a section; an array the length of the file holds, for
  every line, its section's number, header line and what the header says;
- ``owners``: each header or batch line starts a group; an array holds, for every line, the
  group's first line when that is a batch line (``4i + 3`` when the batch needs its record
  lines counted: a legacy batch, or a v2 batch printed without ``count:``);
- ``known``: in files that print payloads only, whether the last line the grammar knows
  before each line is a record with a key or payload (so an unknown line after it is the
  payload continuing, not a damaged line).

The per-line arrays are built from ``array_repeat`` over groups and joined, so the work is
linear in the file. Line numbers are positions in the array: exact, with no window.

A file above :func:`whole_file_limit` bytes is too big to hold as one row; it is read by the
text source and given the same columns by one window per file (a shuffle of its lines).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType

from auditor.ingest import dump_grammar as g
from auditor.ingest.discovery import InputFile
from auditor.ingest.lines import read_text_lines, with_file_ids
from auditor.spark import local_frame

#: Columns of :func:`read_dump_lines`.
LINE_COLUMNS = ("file_id", "line_number", "text", "sec", "sec_line", "skind", "h_topic", "h_partition",
                "owner", "owner_needs_records", "known_prev", "file_has_legacy")
LINES_DDL = ("file_id int, line_number bigint, text string, sec int, sec_line bigint, skind string, "
             "h_topic string, h_partition int, owner bigint, owner_needs_records boolean, known_prev boolean, "
             "file_has_legacy boolean")

_SECTION = "struct<sec:int,sec_line:bigint,skind:string,h_topic:string,h_partition:int>"


def whole_file_limit(spark: SparkSession) -> int:
    """Files up to this many bytes are read whole: an eighth of an executor's heap per task
    slot (a file's row, its text and its lines are a few copies of it)."""
    conf = spark.sparkContext.getConf()
    memory = conf.get("spark.executor.memory", None) or conf.get("spark.driver.memory", "1g")
    heap = _bytes(memory)
    master = conf.get("spark.master", "local[*]")
    slots = int(conf.get("spark.executor.cores", "0") or 0)
    if not slots:
        inside = master[master.find("[") + 1:master.find("]")] if "[" in master else "1"
        slots = int(inside) if inside.isdigit() else (__import__("os").cpu_count() or 2)
    return max(8 << 20, heap // (8 * max(1, slots)))


def _bytes(size: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    text = size.strip().lower().rstrip("b")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def read_dump_lines(spark: SparkSession, files: Sequence[tuple[int, InputFile]], limit: int | None = None) -> DataFrame:
    """Every line of the dump ``files`` with its context (:data:`LINE_COLUMNS`).

    Args:
        spark: the session.
        files: ``(file_id, file)`` pairs.
        limit: files above this many bytes are read line by line (default
            :func:`whole_file_limit`).

    Columns: ``file_id``; ``line_number`` (1-based); ``text`` (the raw line); ``sec`` (how
    many ``Dumping`` headers are at or before the line: 0 before the first), ``sec_line``
    (the header's line), ``skind`` (what the header's path holds: ``log``, ``index``,
    ``kraft-snapshot`` or ``other``), ``h_topic`` and ``h_partition`` (the partition the
    header's path names, when its parent folder has that form); ``owner`` (the line of the
    last batch line at or before this one in its section, null when none) and
    ``owner_needs_records``; ``known_prev`` (whether the last line at or before this one that
    is neither blank nor unrecognised is a record line with a key or payload; null when none:
    read only for unrecognised lines, where it is the last such line before them);
    ``file_has_legacy`` (the file has a legacy batch line: old-format batches take their
    base offset from the batch before them, so all its batches are built from lines together).
    """
    if not files:
        return local_frame(spark, [], LINES_DDL)
    limit = whole_file_limit(spark) if limit is None else limit
    small = [(i, f) for i, f in files if f.size <= limit]
    large = [(i, f) for i, f in files if f.size > limit]
    parts = []
    if small:
        parts.append(_whole_files(spark, small))
    if large:
        parts.append(_large_files(spark, large))
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


# --- the line tests used inside array functions (a cheap prefix test guards the exact one) ---

def _is_header(x: Column) -> Column:
    return F.ltrim(x).startswith("Dumping ") & (g.line_kind(g.stripped(x)) == "header")


def _is_v2_batch(x: Column) -> Column:
    return F.ltrim(x).startswith("baseOffset: ") & g.stripped(x).startswith("baseOffset: ")


def _is_legacy_batch(x: Column) -> Column:
    return F.ltrim(x).startswith("offset: ") & (g.line_kind(g.stripped(x)) == "batch_legacy")


def needs_records(batch_line: Column) -> Column:
    """A batch line whose record count (and, for a legacy batch, base offset) comes from the
    record lines under it: a legacy line, or a v2 line without a usable ``count:``."""
    t = g.stripped(batch_line)
    return ~t.startswith("baseOffset: ") | g.field_long(g.tokens(g.metadata_part(t)), "count").isNull()


def is_known_payload(t: Column, kind: Column) -> Column:
    """The ``known`` value of a stripped line of ``kind``: null for lines that do not count
    (unrecognised, blank), else whether it is a record line with a key or payload."""
    return F.when(~kind.isin("unknown", "blank"),
                  kind.isin(*g.RECORD_KINDS) & t.rlike(r"(^|\s)(key|payload): "))


def section_info(header: Column | None, sec: Column) -> Column:
    """The section struct of section ``sec`` whose header line is ``header`` (None: the lines
    before any header)."""
    if header is None:
        return F.struct(sec.cast(IntegerType()).alias("sec"), F.lit(None).cast(LongType()).alias("sec_line"),
                        F.lit(None).cast(StringType()).alias("skind"), F.lit(None).cast(StringType()).alias("h_topic"),
                        F.lit(None).cast(IntegerType()).alias("h_partition")).cast(_SECTION)
    path = g.header_path(g.stripped(header))
    topic, part = g.header_topic_partition(path)
    return F.struct(sec.cast(IntegerType()).alias("sec"), F.lit(None).cast(LongType()).alias("sec_line"),
                    g.section_kind(path).alias("skind"), topic.alias("h_topic"),
                    part.alias("h_partition")).cast(_SECTION)


def _whole_files(spark: SparkSession, files: Sequence[tuple[int, InputFile]]) -> DataFrame:
    raw = spark.read.format("binaryFile").load([f.path for _, f in files])
    text = F.col("content").cast(StringType())
    pieces = F.when(F.instr(text, "\r") > 0, F.split(text, r"\r\n|\r|\n", -1)).otherwise(F.split(text, "\n", -1))
    # only files that print payloads can hold a payload's continuation lines
    payload = (F.instr(text, "key: ") > 0) | (F.instr(text, "payload: ") > 0)
    rows = with_file_ids(spark, raw, files, raw.select(
        F.col("_metadata.file_path").alias("uri"), pieces.alias("p"), payload.alias("has_payload")))
    # a final line end does not start a line (an empty file has none)
    lines = F.when(F.try_element_at("p", F.lit(-1)) == "", F.slice("p", 1, F.size("p") - 1)).otherwise(F.col("p"))
    step = rows.select("file_id", lines.alias("L"), "has_payload")
    # Each step is its own projection: an array used inside a lambda must be a column, or the
    # expression that builds it is evaluated again for every element.
    L, n = F.col("L"), F.size("L")
    marks = F.transform(F.sequence(F.lit(1), n), lambda i: F.when(
        _is_header(F.try_element_at(L, i)), i * 4).when(_is_v2_batch(F.try_element_at(L, i)), i * 4 + 2).when(
        _is_legacy_batch(F.try_element_at(L, i)), i * 4 + 3))
    step = step.select("file_id", "L", "has_payload",
                       F.filter(F.when(n > 0, marks).otherwise(F.array().cast("array<int>")),
                                lambda c: c.isNotNull()).alias("C"))
    C = F.col("C")
    # group starts: a pseudo start at line 1, then every header and batch line
    groups = F.when(F.try_element_at(C, F.lit(1)).between(4, 7), C).otherwise(F.concat(F.array(F.lit(4)), C))
    heads = F.filter(C, lambda c: c % 4 == 0)
    step = step.select("file_id", "L", "has_payload", groups.alias("G"), heads.alias("H"),
                       F.exists(C, lambda c: c % 4 == 3).alias("file_has_legacy"))
    G, H = F.col("G"), F.col("H")

    def start(arr: Column, j: Column) -> Column:
        return (F.try_element_at(arr, j) / 4).cast(IntegerType())

    def length(arr: Column, j: Column) -> Column:
        nxt = F.coalesce(start(arr, j + 1), n + 1)
        return F.greatest(nxt - start(arr, j), F.lit(0)).cast(IntegerType())

    def owner_code(j: Column) -> Column:
        code = F.try_element_at(G, j)
        s, k = start(G, j), length(G, j)
        batch = code % 4 >= 2
        needs = F.when(batch & (k > 1), needs_records(F.try_element_at(L, s))).otherwise(F.lit(False))
        value = F.when(batch, (s * 4).cast(LongType()) + 2 + needs.cast(LongType()))
        return F.array_repeat(value, k)

    owners = F.when(F.size(G) > 0, F.flatten(F.transform(F.sequence(F.lit(1), F.size(G)), owner_code))).otherwise(
        F.array().cast("array<bigint>"))
    # sections: the lines before the first header (section 0, maybe none), then one per header
    first_header = F.coalesce(start(H, F.lit(1)), n + 1)
    before = F.array_repeat(section_info(None, F.lit(0)), (first_header - 1).cast(IntegerType()))

    def section(j: Column) -> Column:
        s = start(H, j)
        info = section_info(F.try_element_at(L, s), j).withField("sec_line", s.cast(LongType()))
        return F.array_repeat(info, length(H, j))

    sections = F.concat(before, F.flatten(F.transform(F.sequence(F.lit(1), F.size(H)), section)))
    sections = F.when(F.size(H) > 0, sections).otherwise(before)
    # payload continuation: only files that print payloads can have one
    known_marks = F.filter(F.transform(F.sequence(F.lit(1), n), lambda i: _known_code(L, i)),
                           lambda c: c.isNotNull())
    step = step.select("file_id", "L", "G", "H", "file_has_legacy", owners.alias("O"), sections.alias("S"),
                       F.when(F.col("has_payload") & (n > 0), known_marks).otherwise(
                           F.array().cast("array<int>")).alias("K"))
    K = F.col("K")

    def known_run(j: Column) -> Column:
        s = (F.try_element_at(K, j) / 2).cast(IntegerType())
        nxt = F.coalesce((F.try_element_at(K, j + 1) / 2).cast(IntegerType()), n + 1)
        return F.array_repeat(F.try_element_at(K, j) % 2 == 1, (nxt - s).cast(IntegerType()))

    lead = F.array_repeat(F.lit(None).cast("boolean"),
                          (F.coalesce((F.try_element_at(K, F.lit(1)) / 2).cast(IntegerType()), n + 1) - 1)
                          .cast(IntegerType()))
    known = F.when(F.size(K) > 0, F.concat(lead, F.flatten(F.transform(F.sequence(F.lit(1), F.size(K)), known_run))))
    zipped = F.arrays_zip(L.alias("text"), F.col("S").alias("s"), F.col("O").alias("o"),
                          F.coalesce(known, F.array().cast("array<boolean>")).alias("k"))
    # posexplode_outer, then a filter: for posexplode Spark infers a filter on the array's size
    # and pushes it below these projections, which would build every array again (and split
    # the whole file again) for the test
    exploded = step.select("file_id", "file_has_legacy", F.posexplode_outer(zipped).alias("pos", "z")).filter(
        F.col("pos").isNotNull())
    return exploded.select(
        "file_id", (F.col("pos") + 1).cast(LongType()).alias("line_number"), F.col("z.text").alias("text"),
        F.col("z.s.sec").alias("sec"), F.col("z.s.sec_line").alias("sec_line"), F.col("z.s.skind").alias("skind"),
        F.col("z.s.h_topic").alias("h_topic"), F.col("z.s.h_partition").alias("h_partition"),
        (F.col("z.o") / 4).cast(LongType()).alias("owner"), (F.col("z.o") % 4 == 3).alias("owner_needs_records"),
        F.col("z.k").alias("known_prev"), "file_has_legacy",
    )


def _known_code(L: Column, i: Column) -> Column:
    t = g.stripped(F.try_element_at(L, i))
    known = is_known_payload(t, g.line_kind(t))
    return F.when(known.isNotNull(), i * 2 + known.cast(IntegerType()))


def _large_files(spark: SparkSession, files: Sequence[tuple[int, InputFile]]) -> DataFrame:
    """The same columns for files too big to read whole: the text source, then one window per
    file ordered by each line's position (a shuffle of these files' lines)."""
    raw = read_text_lines(spark, files)
    t = g.stripped(F.col("text"))
    kind = g.line_kind(t)
    path = g.header_path(t)
    h_topic, h_part = g.header_topic_partition(path)
    in_file = Window.partitionBy("file_id").orderBy("block_start", "mono")
    running = in_file.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    numbered = raw.select(
        "file_id", "text",
        F.row_number().over(in_file).cast(LongType()).alias("line_number"),
        F.when(kind == "header", F.struct(
            g.section_kind(path).alias("skind"), h_topic.alias("h_topic"), h_part.alias("h_partition"))).alias("_hdr"),
        F.when(kind == "header", F.lit(False)).when(kind.isin(*g.BATCH_KINDS), F.lit(True)).alias("_batch"),
        F.when(kind.isin(*g.BATCH_KINDS), needs_records(F.col("text"))).alias("_needs"),
        (kind == "batch_v2").alias("_v2"),
        is_known_payload(t, kind).alias("_known"),
        "block_start", "mono",
    )
    carried = numbered.select(
        "file_id", "line_number", "text",
        F.count("_hdr").over(running).cast(IntegerType()).alias("sec"),
        F.last(F.when(F.col("_hdr").isNotNull(), F.struct(F.col("line_number").alias("line"), "_hdr")),
               ignorenulls=True).over(running).alias("_h"),
        F.last(F.when(F.col("_batch").isNotNull(), F.struct(
            "_batch", F.col("line_number").alias("line"), "_needs")), ignorenulls=True).over(running).alias("_g"),
        F.last("_known", ignorenulls=True).over(running).alias("known_prev"),
        F.max(F.when(F.col("_batch") & ~F.col("_v2"), 1).otherwise(0)).over(Window.partitionBy("file_id"))
        .alias("_legacy"),
    )
    return carried.select(
        "file_id", "line_number", "text", "sec",
        F.col("_h.line").alias("sec_line"), F.col("_h._hdr.skind").alias("skind"),
        F.col("_h._hdr.h_topic").alias("h_topic"), F.col("_h._hdr.h_partition").alias("h_partition"),
        F.when(F.col("_g._batch"), F.col("_g.line")).alias("owner"),
        F.coalesce(F.col("_g._batch") & F.col("_g._needs"), F.lit(False)).alias("owner_needs_records"),
        "known_prev", (F.col("_legacy") == 1).alias("file_has_legacy"),
    )
