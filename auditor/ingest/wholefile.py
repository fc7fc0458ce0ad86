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

from pyspark.sql import Column, DataFrame, SparkSession

from auditor import columns as F
from auditor.columns import col, lit
from auditor.frames import local_frame
from auditor.ingest import dump_grammar as g
from auditor.ingest.discovery import InputFile
from auditor.ingest.dump_context import (
    IN_LOG,
    LINES_DDL,
    PROBLEM,
    TAIL,
    is_header,
    is_known_payload,
    is_legacy_batch,
    is_record,
    is_v2_batch,
    may_carry_payload,
    needs_records,
    section_code,
)
from auditor.ingest.largefile import large_file_lines
from auditor.ingest.lines import load_paths, with_file_ids

#: The batches of a section's last lines are summarised one by one (see
#: :func:`auditor.compare.windows.window_verdicts`: a follower lagging its leader by fewer
#: batches differs from it only there), in the files :func:`tail_files` names. Each is a
#: scan group and a summary row of its own: 32 were 96% of the summary rows of the
#: benchmark's replicas of 333 batches (10M lines: 166 s with 32, 151 s with 8, 153 s with 4).
TAIL_LINES = 8

#: How many of a partition folder's newest segments keep their tails (:func:`tail_files`).
TAIL_SEGMENTS = 2

_SEGMENT_NAME = re.compile(r"(\d+)\.")

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


def read_dump_lines(spark: SparkSession, files: Sequence[tuple[int, InputFile]], limit: int | None = None, *,
                    spill: str | None = None, narrow: bool = False) -> DataFrame:
    """Every line of the dump ``files`` with its context (:data:`LINE_COLUMNS`).

    Args:
        spark: the session.
        files: ``(file_id, file)`` pairs.
        limit: files above this many bytes are read line by line (default
            :func:`whole_file_limit`).
        spill: where driver-side lookups too large for a plan are stored (the run's work
            dir; :func:`auditor.frames.arrow_frame`); ``narrow``: they are in one partition.

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
        return local_frame(spark, [], LINES_DDL, narrow=narrow)
    limit = whole_file_limit(spark) if limit is None else limit
    small = [(i, f) for i, f in files if f.size <= limit]
    large = [(i, f) for i, f in files if f.size > limit]
    tails = tail_files(files)
    parts = []
    if small:
        parts.append(_whole_files(spark, small, tails, spill, narrow))
    if large:
        parts.append(large_file_lines(spark, large, tails, TAIL_LINES, spill, narrow))
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


def _repeat_with_tail(code: Column, count: Column, tails: Column) -> Column:
    """``count`` copies of ``code``, the last :data:`TAIL_LINES` of them with :data:`_TAIL`
    when ``tails``."""
    head = F.when(tails, F.greatest(count - TAIL_LINES, lit(0))).otherwise(count).cast("int")
    return F.concat(F.array_repeat(code, head), F.array_repeat(code + lit(TAIL), (count - head).cast("int")))


def _whole_files(spark: SparkSession, files: Sequence[tuple[int, InputFile]], tails: frozenset[int],
                 spill: str | None, narrow: bool) -> DataFrame:
    raw = load_paths(spark.read.format("binaryFile"), [f.path for _, f in files])
    text = col("content").cast("string")
    # (``contains``, not ``instr``: Spark's ``instr`` compares the whole needle at every
    # position of the file; ``contains`` only where its first byte matches)
    pieces = F.when(text.contains("\r"), F.split(text, r"\r\n|\r|\n", -1)).otherwise(F.split(text, "\n", -1))
    # each row is a whole file: its id and folder come from one broadcast lookup, so no
    # file's text leaves the task that read it
    rows = with_file_ids(spark, raw, files, raw.select(col("_metadata.file_path").alias("uri"), pieces.alias("p")),
                         folders=True, tails=tails, spill=spill, narrow=narrow)
    # a final line end does not start a line (an empty file has none)
    lines = F.when(F.try_element_at("p", lit(-1)) == "", F.slice("p", 1, F.size("p") - 1)).otherwise(col("p"))
    step = rows.select("file_id", "topic", "partition", "tails", lines.alias("L"))
    # Each step is its own projection: an array used inside a lambda must be a column, or the
    # expression that builds it is evaluated again for every element.
    L, n = col("L"), F.size("L")
    nothing = F.array().cast("array<int>")

    def mark(i: Column) -> Column:
        x = F.try_element_at(L, i)
        return (F.when(is_v2_batch(x), i * 8 + 2)
                .when(is_header(x), F.when(i == 1, lit(8)).otherwise(-i * 8))
                .when(is_legacy_batch(x), -(i * 8 + 3))
                .when(may_carry_payload(x), -(i * 8 + 1))
                .when(is_record(x), -(i * 8 + 5)))

    marks = F.filter(F.transform(F.sequence(lit(1), n), mark), lambda c: c.isNotNull())
    step = step.select("file_id", "topic", "partition", "tails", "L",
                       F.when(n > 0, marks).otherwise(nothing).alias("C"))
    C = col("C")
    plain = F.coalesce(F.array_min(C) > 0, lit(True))
    codes = F.when(plain, C).otherwise(F.transform(C, lambda c: F.abs(c)))
    step = step.select("file_id", "topic", "partition", "tails", "L", plain.alias("plain"), codes.alias("A"))
    A, plain = col("A"), col("plain")
    # group starts: a pseudo start at line 1, then every header and batch line
    starts = F.when(plain, A).otherwise(F.filter(A, lambda a: (a % 8 != 1) & (a % 8 != 5)))
    step = step.select(
        "file_id", "topic", "partition", "tails", "L", "plain",
        F.when(F.try_element_at(starts, lit(1)).between(8, 15), starts).otherwise(
            F.concat(F.array(lit(8)), starts)).alias("G"),
        F.when(plain, F.when(F.try_element_at(A, lit(1)) == 8, F.array(lit(8))).otherwise(nothing)).otherwise(
            F.filter(A, lambda a: a % 8 == 0)).alias("H"),
        F.when(plain, lit(False)).otherwise(F.exists(A, lambda a: a % 8 == 3)).alias("file_has_legacy"),
        F.when(plain, lit(False)).otherwise(F.exists(A, lambda a: a % 8 == 1)).alias("has_payload"),
        # (a batch line counts the lines under it only in a file with record lines to count)
        F.when(plain, lit(False)).otherwise(F.exists(A, lambda a: a % 2 == 1)).alias("has_records"))
    G, H = col("G"), col("H")

    def start(arr: Column, j: Column) -> Column:
        return (F.try_element_at(arr, j) / 8).cast("int")

    def length(arr: Column, j: Column) -> Column:
        nxt = F.coalesce(start(arr, j + 1), n + 1)
        return F.greatest(nxt - start(arr, j), lit(0)).cast("int")

    def owner_code(j: Column) -> Column:
        code = F.try_element_at(G, j)
        s, k = start(G, j), length(G, j)
        batch = (code % 8 == 2) | (code % 8 == 3)
        needs = F.when(batch & (k > 1) & col("has_records"), needs_records(F.try_element_at(L, s))).otherwise(
            lit(False))
        value = F.when(batch, (s * 4).cast("bigint") + 2 + needs.cast("bigint"))
        return F.array_repeat(value, k)

    # a plain file has no record line: no line needs its owner
    owners = F.when(plain | (F.size(G) == 0), F.array().cast("array<bigint>")).otherwise(
        F.flatten(F.transform(F.sequence(lit(1), F.size(G)), owner_code)))
    # sections: the lines before the first header (section 0, maybe none), then one per header
    topic, partition = col("topic"), col("partition")
    first_header = F.coalesce(start(H, lit(1)), n + 1)
    before = _repeat_with_tail(section_code(None, topic, partition), first_header - 1, col("tails"))

    def section(j: Column) -> Column:
        code = section_code(F.try_element_at(L, start(H, j)), topic, partition) + j.cast("bigint")
        return _repeat_with_tail(code, length(H, j), col("tails"))

    sections = F.when(F.size(H) == 0, before).otherwise(
        F.concat(before, F.flatten(F.transform(F.sequence(lit(1), F.size(H)), section))))
    # payload continuation: only files with a record line printing a key or payload can have one
    known_marks = F.filter(F.transform(F.sequence(lit(1), n), lambda i: _known_code(L, i)),
                           lambda c: c.isNotNull())
    step = step.select("file_id", "L", "file_has_legacy", owners.alias("O"), sections.alias("S"),
                       F.when(col("has_payload") & (n > 0), known_marks).otherwise(nothing).alias("K"))
    K = col("K")

    def known_run(j: Column) -> Column:
        s = (F.try_element_at(K, j) / 2).cast("int")
        nxt = F.coalesce((F.try_element_at(K, j + 1) / 2).cast("int"), n + 1)
        return F.array_repeat(F.try_element_at(K, j) % 2 == 1, (nxt - s).cast("int"))

    lead = F.array_repeat(lit(None).cast("boolean"),
                          (F.coalesce((F.try_element_at(K, lit(1)) / 2).cast("int"), n + 1) - 1)
                          .cast("int"))
    known = F.when(F.size(K) > 0, F.concat(lead, F.flatten(F.transform(F.sequence(lit(1), F.size(K)), known_run))))
    zipped = F.arrays_zip(L.alias("text"), col("S").alias("s"), col("O").alias("o"),
                          F.coalesce(known, F.array().cast("array<boolean>")).alias("k"))
    # posexplode_outer, then a filter: for posexplode Spark infers a filter on the array's size
    # and pushes it below these projections, which would build every array again (and split
    # the whole file again) for the test
    exploded = step.select("file_id", "file_has_legacy", F.posexplode_outer(zipped).alias("pos", "z")).filter(
        col("pos").isNotNull())
    s = col("z.s")
    return exploded.select(
        "file_id", (col("pos") + 1).cast("bigint").alias("line_number"), col("z.text").alias("text"),
        s.bitwiseAND(lit(IN_LOG - 1)).cast("int").alias("sec"),
        (s.bitwiseAND(lit(IN_LOG)) != 0).alias("in_log"), (s.bitwiseAND(lit(PROBLEM)) != 0).alias("has_problem"),
        (s.bitwiseAND(lit(TAIL)) != 0).alias("tail"),
        (col("z.o") / 4).cast("bigint").alias("owner"), (col("z.o") % 4 == 3).alias("owner_needs_records"),
        col("z.k").alias("known_prev"), "file_has_legacy",
    )


def _known_code(L: Column, i: Column) -> Column:
    t = g.stripped(F.try_element_at(L, i))
    known = is_known_payload(t, g.line_kind(t))
    return F.when(known.isNotNull(), i * 2 + known.cast("int"))
