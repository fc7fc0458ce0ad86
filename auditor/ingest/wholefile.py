"""Read dump files whole: every line with its exact number and its context, no shuffle.

A ``kafka-dump-log.sh`` line means something only in its context: the ``Dumping`` section
it sits in (which partition, which kind of file), the batch line a record line belongs to,
and, for a line the grammar does not know, whether it continues a record's payload. Each
file is read as one row (Spark's binary file source), split into an array of lines, and the
context is computed with array functions over that row before the lines are exploded:

- ``marks``: one pass over the lines marks v2 batch lines (``8i + 2``) and, negative, the
  lines that make a file more than a plain run of batch lines: a ``Dumping`` header but one
  on line 1 (``-8i``), a record line with a key or payload (``-(8i + 1)``), a legacy batch
  line (``-(8i + 3)``), any other record line (``-(8i + 5)``). A **plain** file (no negative mark: a shallow dump of one segment,
  by far the commonest) needs nothing more;
- ``sections``: each header starts a section; an array the length of the file holds, for
  every line, its section's number and whether that section is a usable ``.log`` section
  of a known partition, and which lines are its last :data:`TAIL_LINES` (in the files of
  :func:`tail_files` only);
- ``owners``: each header or batch line starts a group; an array holds, for every line, the
  group's first line when that is a batch line (``4i + 3`` when the batch needs its record
  lines counted: a legacy batch, or a v2 batch printed without ``count:``);
- ``known``: in files with a record line that prints a key or payload only, whether the
  last line the grammar knows before each line is such a record (so an unknown line after
  it is the payload continuing, not a damaged line).

The per-line arrays are built from ``array_repeat`` over sections and groups, so the work
is linear in the file; they hold numbers only (a section's strings stay with its header
line). Line numbers are positions in the array: exact, with no window.

A file above :func:`whole_file_limit` bytes is too big to hold as one row; it is read by the
text source and given the same columns by one window per file (a shuffle of its lines).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType

from auditor.ingest import dump_grammar as g
from auditor.ingest.discovery import InputFile
from auditor.ingest.lines import listed_file_id, load_paths, text_source, uri_table, with_file_ids
from auditor.spark import local_frame

#: Columns of :func:`read_dump_lines`.
LINE_COLUMNS = ("file_id", "line_number", "text", "sec", "in_log", "has_problem", "tail", "owner",
                "owner_needs_records", "known_prev", "file_has_legacy")
LINES_DDL = ("file_id int, line_number bigint, text string, sec int, in_log boolean, has_problem boolean, "
             "tail boolean, owner bigint, owner_needs_records boolean, known_prev boolean, file_has_legacy boolean")

#: The batches of a section's last lines are summarised one by one (see
#: :func:`auditor.compare.windows.window_verdicts`: a follower lagging its leader by fewer
#: batches differs from it only there), in the files :func:`tail_files` names. Each is a
#: scan group and a summary row of its own: 32 were 96% of the summary rows of the
#: benchmark's replicas of 333 batches (10M lines: 166 s with 32, 151 s with 8, 153 s with 4).
TAIL_LINES = 8

#: How many of a partition folder's newest segments keep their tails (:func:`tail_files`).
TAIL_SEGMENTS = 2

_SEGMENT_NAME = re.compile(r"(\d+)\.")

# A line's section, as one number: its index, then flags.
_IN_LOG, _PROBLEM, _TAIL = 1 << 32, 1 << 33, 1 << 34


def whole_file_limit(spark: SparkSession) -> int:
    """Files up to this many bytes are read whole: 1/32 of an executor's heap per task slot.
    A file read whole is held several times at once (its bytes, its text, its array of
    lines, the zipped array of lines and context, the exploded rows): an eighth of the heap
    per slot ran a 2 GB driver out of memory on six 67 MB dumps (100,000 partitions, one
    file per broker)."""
    conf = spark.sparkContext.getConf()
    memory = conf.get("spark.executor.memory", None) or conf.get("spark.driver.memory", "1g")
    heap = _bytes(memory)
    master = conf.get("spark.master", "local[*]")
    slots = int(conf.get("spark.executor.cores", "0") or 0)
    if not slots:
        inside = master[master.find("[") + 1:master.find("]")] if "[" in master else "1"
        slots = int(inside) if inside.isdigit() else (os.cpu_count() or 2)
    return max(8 << 20, heap // (32 * max(1, slots)))


def _bytes(size: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    text = size.strip().lower().rstrip("b")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def tail_files(files: Sequence[tuple[int, InputFile]]) -> frozenset[int]:
    """The ids of the dump files whose sections mark their last :data:`TAIL_LINES` lines.

    A follower lags its leader at the end of its log: in the leader's newest segment, or,
    just after the leader rolled a segment, in the one before it. So of the files of one
    partition folder whose names start with a segment's base offset (``<base>.log.txt``),
    those of the :data:`TAIL_SEGMENTS` highest bases keep their tails; every other file
    (a dump of several segments, a name without a base offset) keeps them too. The tails
    only spare drill-downs: a lag the tails do not cover is decided batch by batch, with
    the same answer. Without this, a log dumped segment by segment carries tail rows for
    every segment (a week of hourly segments: 168 tails per replica).
    """
    bases: dict[str, dict[int, int]] = {}
    for i, f in files:
        named = _SEGMENT_NAME.match(os.path.basename(f.rel))
        if named and f.topic is not None:
            bases.setdefault(os.path.dirname(f.rel), {})[i] = int(named.group(1))
    older = set()
    for of_folder in bases.values():
        newest = sorted(set(of_folder.values()))[-TAIL_SEGMENTS:]
        older |= {i for i, base in of_folder.items() if base < newest[0]}
    return frozenset(i for i, _ in files if i not in older)


def read_dump_lines(spark: SparkSession, files: Sequence[tuple[int, InputFile]], limit: int | None = None) -> DataFrame:
    """Every line of the dump ``files`` with its context (:data:`LINE_COLUMNS`).

    Args:
        spark: the session.
        files: ``(file_id, file)`` pairs.
        limit: files above this many bytes are read line by line (default
            :func:`whole_file_limit`).

    Columns: ``file_id``; ``line_number`` (1-based); ``text`` (the raw line); ``sec`` (how
    many ``Dumping`` headers are at or before the line: 0 before the first); ``in_log`` (the
    section is a ``.log`` section, or has no header), ``has_problem`` (the section cannot be
    placed in a replica: its header names another partition than the file's folder, or no
    partition is known: SPEC 3.1), ``tail`` (one of the section's last :data:`TAIL_LINES`
    lines, in a file of :func:`tail_files`); ``owner`` (the line of the last batch line at or before this one in its section,
    null when none) and ``owner_needs_records``; ``known_prev`` (whether the last line at
    or before this one that is neither blank nor unrecognised is a record line with a key or
    payload; null when none: read only for unrecognised lines); ``file_has_legacy`` (the
    file has a legacy batch line: old-format batches take their base offset from the batch
    before them, so all its batches are built from lines together).
    """
    if not files:
        return local_frame(spark, [], LINES_DDL)
    limit = whole_file_limit(spark) if limit is None else limit
    small = [(i, f) for i, f in files if f.size <= limit]
    large = [(i, f) for i, f in files if f.size > limit]
    tails = tail_files(files)
    parts = []
    if small:
        parts.append(_whole_files(spark, small, tails))
    if large:
        parts.append(_large_files(spark, large, tails))
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


# --- the line tests used inside array functions (a cheap prefix test guards the exact one) ---

def _is_header(x: Column) -> Column:
    return F.ltrim(x).startswith("Dumping ") & (g.line_kind(g.stripped(x)) == "header")


def _is_v2_batch(x: Column) -> Column:
    return F.ltrim(x).startswith("baseOffset: ") & g.stripped(x).startswith("baseOffset: ")


def _is_legacy_batch(x: Column) -> Column:
    return F.ltrim(x).startswith("offset: ") & (g.line_kind(g.stripped(x)) == "batch_legacy")


def _is_record(x: Column) -> Column:
    """A superset of the other record lines (``| offset: ...``, an old deep dump's
    ``offset: N position: ...``): their batch is the batch line above them."""
    lead = F.ltrim(x)
    return lead.startswith("|") | lead.startswith("offset: ")


def _may_carry_payload(x: Column) -> Column:
    """A superset of the record lines that print a key or payload (see :func:`is_known_payload`)."""
    lead = F.ltrim(x)
    record = lead.startswith("|") | lead.startswith("key: ") | lead.startswith("payload: ")
    return record & (x.contains("key: ") | x.contains("payload: "))


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


def section_code(header: Column | None, topic: Column, partition: Column) -> Column:
    """A section's flags (:data:`_IN_LOG`, :data:`_PROBLEM`) from its header line (None: the
    lines before any header) and the file's folder ``topic``, ``partition``."""
    if header is None:
        return section_flags(F.lit(True), F.lit(None).cast(StringType()), F.lit(None), topic, partition)
    path = g.header_path(g.stripped(header))
    h_topic, h_part = g.header_topic_partition(path)
    return section_flags(g.section_kind(path) == "log", h_topic, h_part, topic, partition)


def section_flags(in_log: Column, h_topic: Column, h_partition: Column, topic: Column, partition: Column) -> Column:
    """:func:`section_code` from what a header says: whether its path is a ``.log`` file
    (true for the lines before any header), the partition its path names (nulls when
    none), and the file's folder ``topic, partition``."""
    conflict = g.header_conflict(h_topic, h_partition, topic, partition)
    problem = conflict | F.coalesce(h_topic, topic).isNull()
    return (F.when(in_log, F.lit(_IN_LOG)).otherwise(F.lit(0)) + F.when(problem, F.lit(_PROBLEM)).otherwise(F.lit(0))
            ).cast(LongType())


def _repeat_with_tail(code: Column, count: Column, tails: Column) -> Column:
    """``count`` copies of ``code``, the last :data:`TAIL_LINES` of them with :data:`_TAIL`
    when ``tails``."""
    head = F.when(tails, F.greatest(count - TAIL_LINES, F.lit(0))).otherwise(count).cast(IntegerType())
    return F.concat(F.array_repeat(code, head), F.array_repeat(code + F.lit(_TAIL), (count - head).cast(IntegerType())))


def _whole_files(spark: SparkSession, files: Sequence[tuple[int, InputFile]], tails: frozenset[int]) -> DataFrame:
    raw = load_paths(spark.read.format("binaryFile"), [f.path for _, f in files])
    text = F.col("content").cast(StringType())
    # (``contains``, not ``instr``: Spark's ``instr`` compares the whole needle at every
    # position of the file; ``contains`` only where its first byte matches)
    pieces = F.when(text.contains("\r"), F.split(text, r"\r\n|\r|\n", -1)).otherwise(F.split(text, "\n", -1))
    # each row is a whole file: its id and folder come from one broadcast lookup, so no
    # file's text leaves the task that read it
    rows = with_file_ids(spark, raw, files, raw.select(F.col("_metadata.file_path").alias("uri"), pieces.alias("p")),
                         folders=True, tails=tails)
    # a final line end does not start a line (an empty file has none)
    lines = F.when(F.try_element_at("p", F.lit(-1)) == "", F.slice("p", 1, F.size("p") - 1)).otherwise(F.col("p"))
    step = rows.select("file_id", "topic", "partition", "tails", lines.alias("L"))
    # Each step is its own projection: an array used inside a lambda must be a column, or the
    # expression that builds it is evaluated again for every element.
    L, n = F.col("L"), F.size("L")
    nothing = F.array().cast("array<int>")

    def mark(i: Column) -> Column:
        x = F.try_element_at(L, i)
        return (F.when(_is_v2_batch(x), i * 8 + 2)
                .when(_is_header(x), F.when(i == 1, F.lit(8)).otherwise(-i * 8))
                .when(_is_legacy_batch(x), -(i * 8 + 3))
                .when(_may_carry_payload(x), -(i * 8 + 1))
                .when(_is_record(x), -(i * 8 + 5)))

    marks = F.filter(F.transform(F.sequence(F.lit(1), n), mark), lambda c: c.isNotNull())
    step = step.select("file_id", "topic", "partition", "tails", "L",
                       F.when(n > 0, marks).otherwise(nothing).alias("C"))
    C = F.col("C")
    plain = F.coalesce(F.array_min(C) > 0, F.lit(True))
    codes = F.when(plain, C).otherwise(F.transform(C, lambda c: F.abs(c)))
    step = step.select("file_id", "topic", "partition", "tails", "L", plain.alias("plain"), codes.alias("A"))
    A, plain = F.col("A"), F.col("plain")
    # group starts: a pseudo start at line 1, then every header and batch line
    starts = F.when(plain, A).otherwise(F.filter(A, lambda a: (a % 8 != 1) & (a % 8 != 5)))
    step = step.select(
        "file_id", "topic", "partition", "tails", "L", "plain",
        F.when(F.try_element_at(starts, F.lit(1)).between(8, 15), starts).otherwise(
            F.concat(F.array(F.lit(8)), starts)).alias("G"),
        F.when(plain, F.when(F.try_element_at(A, F.lit(1)) == 8, F.array(F.lit(8))).otherwise(nothing)).otherwise(
            F.filter(A, lambda a: a % 8 == 0)).alias("H"),
        F.when(plain, F.lit(False)).otherwise(F.exists(A, lambda a: a % 8 == 3)).alias("file_has_legacy"),
        F.when(plain, F.lit(False)).otherwise(F.exists(A, lambda a: a % 8 == 1)).alias("has_payload"),
        # (a batch line counts the lines under it only in a file with record lines to count)
        F.when(plain, F.lit(False)).otherwise(F.exists(A, lambda a: a % 2 == 1)).alias("has_records"))
    G, H = F.col("G"), F.col("H")

    def start(arr: Column, j: Column) -> Column:
        return (F.try_element_at(arr, j) / 8).cast(IntegerType())

    def length(arr: Column, j: Column) -> Column:
        nxt = F.coalesce(start(arr, j + 1), n + 1)
        return F.greatest(nxt - start(arr, j), F.lit(0)).cast(IntegerType())

    def owner_code(j: Column) -> Column:
        code = F.try_element_at(G, j)
        s, k = start(G, j), length(G, j)
        batch = (code % 8 == 2) | (code % 8 == 3)
        needs = F.when(batch & (k > 1) & F.col("has_records"), needs_records(F.try_element_at(L, s))).otherwise(
            F.lit(False))
        value = F.when(batch, (s * 4).cast(LongType()) + 2 + needs.cast(LongType()))
        return F.array_repeat(value, k)

    # a plain file has no record line: no line needs its owner
    owners = F.when(plain | (F.size(G) == 0), F.array().cast("array<bigint>")).otherwise(
        F.flatten(F.transform(F.sequence(F.lit(1), F.size(G)), owner_code)))
    # sections: the lines before the first header (section 0, maybe none), then one per header
    topic, partition = F.col("topic"), F.col("partition")
    first_header = F.coalesce(start(H, F.lit(1)), n + 1)
    before = _repeat_with_tail(section_code(None, topic, partition), first_header - 1, F.col("tails"))

    def section(j: Column) -> Column:
        code = section_code(F.try_element_at(L, start(H, j)), topic, partition) + j.cast(LongType())
        return _repeat_with_tail(code, length(H, j), F.col("tails"))

    sections = F.when(F.size(H) == 0, before).otherwise(
        F.concat(before, F.flatten(F.transform(F.sequence(F.lit(1), F.size(H)), section))))
    # payload continuation: only files with a record line printing a key or payload can have one
    known_marks = F.filter(F.transform(F.sequence(F.lit(1), n), lambda i: _known_code(L, i)),
                           lambda c: c.isNotNull())
    step = step.select("file_id", "L", "file_has_legacy", owners.alias("O"), sections.alias("S"),
                       F.when(F.col("has_payload") & (n > 0), known_marks).otherwise(nothing).alias("K"))
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
    s = F.col("z.s")
    return exploded.select(
        "file_id", (F.col("pos") + 1).cast(LongType()).alias("line_number"), F.col("z.text").alias("text"),
        s.bitwiseAND(F.lit(_IN_LOG - 1)).cast(IntegerType()).alias("sec"),
        (s.bitwiseAND(F.lit(_IN_LOG)) != 0).alias("in_log"), (s.bitwiseAND(F.lit(_PROBLEM)) != 0).alias("has_problem"),
        (s.bitwiseAND(F.lit(_TAIL)) != 0).alias("tail"),
        (F.col("z.o") / 4).cast(LongType()).alias("owner"), (F.col("z.o") % 4 == 3).alias("owner_needs_records"),
        F.col("z.k").alias("known_prev"), "file_has_legacy",
    )


def _known_code(L: Column, i: Column) -> Column:
    t = g.stripped(F.try_element_at(L, i))
    known = is_known_payload(t, g.line_kind(t))
    return F.when(known.isNotNull(), i * 2 + known.cast(IntegerType()))


#: A large file's lines find their section in buckets of 2^LOOKUP_BITS consecutive lines of
#: one split (:func:`_large_files`).
LOOKUP_BITS = 5


def _large_files(spark: SparkSession, files: Sequence[tuple[int, InputFile]], tails: frozenset[int]) -> DataFrame:
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
        F.col("_metadata.file_path").alias("uri"), F.col("_metadata.file_block_start").alias("block_start"),
        F.monotonically_increasing_id().alias("mono"), F.col("value").alias("text"))
    keyed = lines.select("*", F.shiftright("mono", LOOKUP_BITS).alias("mk")).join(
        F.broadcast(_positions(lines, uri_table(spark, raw, files, folders=True, tails=tails))),
        ["uri", "block_start", "mk"], "left")
    # (a line with no row in the table fails the run instead of being dropped by a filter)
    deep = F.coalesce(F.col("deep"), F.raise_error(F.concat(
        F.lit("internal error: a line of a large file has no position: "), F.col("uri"))).cast(BooleanType()))
    # (within one query both scans split the files alike; were they ever not, a line's
    # position would fall outside its split's, and the run fails instead of misnumbering)
    inside = (F.col("mono") >= F.col("first")) & (F.col("mono") < F.col("first") + F.col("n"))
    number = F.when(inside, F.col("mono") - F.col("first") + 1 + F.col("before")).otherwise(F.raise_error(
        F.concat(F.lit("internal error: a line of a large file is outside its split: "), F.col("uri")))
        .cast(LongType())).alias("line_number")
    numbered = keyed.select(listed_file_id().alias("file_id"), "text", "tails", "secs", deep.alias("deep"), number)
    # Both kinds of file read the same columns of the table (one broadcast, built once), and
    # each looks its lines up after the split (neither computes the other's). A file without
    # record lines is as read whole: no line needs the batch line it belongs to.
    shallow = _placed(numbered.filter(~F.col("deep"))).select(
        "*", F.lit(None).cast(LongType()).alias("owner"), F.lit(False).alias("owner_needs_records"),
        F.lit(None).cast(BooleanType()).alias("known_prev"), F.lit(False).alias("file_has_legacy"))
    return shallow.unionByName(_owners(_placed(numbered.filter(F.col("deep")))))


def _placed(numbered: DataFrame) -> DataFrame:
    """``file_id, line_number, text, sec, in_log, has_problem, tail`` of numbered lines, each
    looked up in its bucket's sections (``secs``)."""
    at = F.try_element_at(F.filter("secs", lambda x: x["start"] <= F.col("line_number")), F.lit(-1))
    found = numbered.select("file_id", "line_number", "text", (F.col("tails") & (
        at["end"] - F.col("line_number") < TAIL_LINES)).alias("tail"), at["sec"].cast(IntegerType()).alias("sec"),
        at["code"].alias("code"))
    code = F.col("code")
    return found.select("file_id", "line_number", "text", "sec", (code.bitwiseAND(F.lit(_IN_LOG)) != 0).alias("in_log"),
                        (code.bitwiseAND(F.lit(_PROBLEM)) != 0).alias("has_problem"), "tail")


def _positions(lines: DataFrame, listed: DataFrame) -> DataFrame:
    """The lookup table of :func:`_large_files`: one row per ``(uri, block_start, mk)``, a
    bucket of a split's positions (``mk = mono >> LOOKUP_BITS``), with the file's
    ``file_id, tails``, its number of lines (``total``), whether it has a record, legacy or
    payload line (``deep``), the split's ``first`` mono, its ``n`` lines and the lines
    ``before`` it in its file, and ``secs``: the sections holding the bucket's lines, ``(start, sec, code,
    end)`` by ``start`` (line numbers; section 0 is the lines before the first header)."""
    x = F.col("text")
    path = g.header_path(g.stripped(x))
    h_topic, h_part = g.header_topic_partition(path)
    header = F.struct(F.col("mono").alias("m"), (g.section_kind(path) == "log").alias("log"),
                      h_topic.alias("t"), h_part.alias("p"))
    per_split = lines.groupBy("uri", "block_start").agg(
        F.count(F.lit(1)).alias("n"), F.min("mono").alias("first"),
        F.max((_is_record(x) | _may_carry_payload(x)).cast(IntegerType())).alias("deep"),
        F.collect_list(F.when(_is_header(x), header)).alias("h"))
    # (each step reads the one before it once: the aggregate over every line is computed once)
    in_file = Window.partitionBy("file_id").orderBy("block_start")
    whole_file = Window.partitionBy("file_id")
    splits = per_split.join(listed, "uri", "left").select(
        "uri", "block_start", listed_file_id().alias("file_id"), "topic", "partition", "tails", "n", "first", "h",
        F.coalesce(F.sum("n").over(in_file.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)).alias("before"),
        F.sum("n").over(whole_file).alias("total"), (F.max("deep").over(whole_file) == 1).alias("deep"),
        (F.row_number().over(in_file) == 1).alias("first_split"))
    # (a step of its own: in the step that explodes the sections, the window would see their rows)
    split = F.struct("uri", "block_start", "first", "n", "before")
    splits = splits.select("*", F.collect_list(split).over(whole_file).alias("splits"))
    file_cols = ("file_id", "tails", "deep", "total")
    topic, partition = F.col("topic"), F.col("partition")
    # the sections: the lines before the first header (from the file's first split), then
    # one per header; each row also carries its file's splits
    before_any = F.struct(F.lit(1).cast(LongType()).alias("start"), F.lit(0).alias("o"),
                          section_code(None, topic, partition).alias("code"))
    heads = F.transform("h", lambda x: F.struct(
        (x["m"] - F.col("first") + 1 + F.col("before")).alias("start"), F.lit(1).alias("o"),
        section_flags(x["log"], x["t"], x["p"], topic, partition).alias("code")))
    starts = splits.select(
        *file_cols, "splits",
        F.explode(F.concat(F.when(F.col("first_split"), F.array(before_any)).otherwise(F.array().cast(
            "array<struct<start:bigint,o:int,code:bigint>>")), heads)).alias("x"))
    order = Window.partitionBy("file_id").orderBy("x.start", "x.o")
    sections = starts.select(
        *file_cols, "splits", F.col("x.start").alias("start"), F.col("x.code").alias("code"),
        (F.row_number().over(order) - 1).alias("sec"),
        F.coalesce(F.lead("x.start").over(order) - 1, F.col("total")).alias("end"),
    ).filter(F.col("end") >= F.col("start"))
    # each section, in the buckets of each split of its file it reaches
    reach = sections.select(*file_cols, F.struct("start", "sec", "code", "end").alias("s"),
                            F.explode("splits").alias("p"))
    before, n, first = F.col("p.before"), F.col("p.n"), F.col("p.first")
    lo, hi = F.greatest(F.col("s.start"), before + 1), F.least(F.col("s.end"), before + n)
    to_mono = first - 1 - before
    reached = reach.filter(lo <= hi).select(
        *file_cols, "s", F.col("p.uri").alias("uri"), F.col("p.block_start").alias("block_start"),
        F.col("p.first").alias("first"), F.col("p.n").alias("n"), F.col("p.before").alias("before"),
        F.explode(F.sequence(F.shiftright(lo + to_mono, LOOKUP_BITS), F.shiftright(hi + to_mono, LOOKUP_BITS)))
        .alias("mk"))
    return reached.groupBy("uri", "block_start", "mk", *file_cols, "first", "n", "before").agg(
        F.array_sort(F.collect_list("s")).alias("secs"))


def _owners(placed: DataFrame) -> DataFrame:
    """:data:`LINE_COLUMNS` of numbered and placed lines (``file_id, line_number, text, sec,
    in_log, has_problem, tail``) of files with record lines: each line's batch line, the
    last known line before it, and whether the file has legacy batch lines, from one window
    per file ordered by line number (a shuffle of these files' lines)."""
    t = g.stripped(F.col("text"))
    kind = g.line_kind(t)
    in_file = Window.partitionBy("file_id").orderBy("line_number")
    running = in_file.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    marked = placed.select(
        "*",
        F.when(kind == "header", F.lit(False)).when(kind.isin(*g.BATCH_KINDS), F.lit(True)).alias("_batch"),
        # (as read whole: a batch line counts the lines under it when there are any, i.e. the
        # next line starts no group)
        F.when(kind.isin(*g.BATCH_KINDS), needs_records(F.col("text")) & ~F.coalesce(
            F.lead(kind.isin("header", *g.BATCH_KINDS)).over(in_file), F.lit(True))).alias("_needs"),
        (kind == "batch_legacy").alias("_legacy"),
        is_known_payload(t, kind).alias("_known"),
    )
    carried = marked.select(
        "file_id", "line_number", "text", "sec", "in_log", "has_problem", "tail",
        F.last(F.when(F.col("_batch").isNotNull(), F.struct(
            "_batch", F.col("line_number").alias("line"), "_needs")), ignorenulls=True).over(running).alias("_g"),
        F.last("_known", ignorenulls=True).over(running).alias("known_prev"),
        F.max(F.col("_legacy").cast(IntegerType())).over(Window.partitionBy("file_id")).alias("_any_legacy"),
    )
    return carried.select(
        "file_id", "line_number", "text", "sec", "in_log", "has_problem", "tail",
        F.when(F.col("_g._batch"), F.col("_g.line")).alias("owner"),
        F.coalesce(F.col("_g._batch") & F.col("_g._needs"), F.lit(False)).alias("owner_needs_records"),
        "known_prev", (F.col("_any_legacy") == 1).alias("file_has_legacy"),
    )
