"""Parse Kafka's checkpoint files (KAFKA-FORMATS 2.1 and 3.1).

``leader-epoch-checkpoint`` entries are ``<epoch> <startOffset>``; the offset checkpoints
(``replication-offset-checkpoint``, ``log-start-offset-checkpoint``,
``recovery-point-offset-checkpoint``) hold ``<topic> <partition> <offset>``. Line 1 is the
version (``0``), line 2 the entry count. As in Kafka's reader, an unknown version, a count
that does not match, or a malformed entry makes the whole file unusable: all its lines are
quarantined with the reason, and the file is reported unusable. An empty file, or one with
only a version line, is a valid empty checkpoint. Blank lines are skipped.

Nearly every file is as Kafka writes it: version ``0``, the count, then one entry per line,
single spaces, ``\n`` line ends, no blank line, numbers no longer than their type holds.
Such a file (``0``, :data:`COUNT_LINE`, then :data:`EPOCH_ENTRY` or :data:`OFFSETS_ENTRY`
lines as many as the count says, ``\n`` after each but maybe the last) is usable, and is
parsed in its own row: no line of it is shuffled, numbered by a window or grouped (a large
cluster has hundreds of thousands of these files).
Every other file is read line by line as above. Both give the same rows for a file of that
shape (``tests/test_checkpoints_describe.py`` checks both against a model of Kafka's reader).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Window

from auditor import columns as F
from auditor.columns import col, lit
from auditor.ingest.discovery import LEADER_EPOCH
from auditor.ingest.lines import PLACE as FILE_PLACE
from auditor.ingest.lines import line_counts, split_lines


@dataclass(frozen=True)
class ParsedCheckpoints:
    """Entries of usable checkpoint files, per-file verdicts, and per-line dispositions."""

    entries: DataFrame  # file_id, kind, snapshot, broker, log_dir, topic, partition, epoch, offset, rel
    files: DataFrame  # file_id, kind, snapshot, broker, log_dir, topic, partition, rel, usable, reason
    lines: DataFrame  # file_id, line_number, disposition, error, shown, snapshot, broker, rel
    counts: DataFrame  # file_id, lines, lines_parsed, lines_skipped, lines_quarantined (files with lines)
    quarantined: DataFrame  # the rows of ``lines`` whose disposition is ``quarantined``


#: A leader-epoch checkpoint's entry as Kafka writes it (what :func:`parse_checkpoints`
#: parses in the file's row): ``<epoch> <offset>``, an epoch of at most 9 digits and an
#: offset of at most 18, so both fit their types and the entry is well formed.
EPOCH_ENTRY = r"\A[0-9]{1,9} [0-9]{1,18}\z"
#: An offset checkpoint's entry as Kafka writes it: ``<topic> <partition> <offset>``.
OFFSETS_ENTRY = r"\A[A-Za-z0-9._-]+ [0-9]{1,9} [0-9]{1,18}\z"
#: The count line of such a file.
COUNT_LINE = r"\A[0-9]{1,9}\z"


def parse_checkpoints(contents: DataFrame) -> ParsedCheckpoints:
    """Parse checkpoint files: :func:`checkpoint_tables` of :func:`judge_checkpoints`.

    Args:
        contents: each file's bytes and place: ``file_id, content, kind, rel, snapshot,
            broker, log_dir, topic, partition``
            (:func:`auditor.ingest.lines.file_contents` with ``placed``).
    """
    return checkpoint_tables(judge_checkpoints(contents))


#: Where a checkpoint file is (:func:`judge_checkpoints`): its id and the place
#: :func:`auditor.ingest.lines.file_contents` gives beside its bytes.
PLACE = ("file_id", *FILE_PLACE)


def judge_checkpoints(contents: DataFrame) -> DataFrame:
    """Each checkpoint file's place (:data:`PLACE`), whether it has Kafka's own shape
    (``fast``), its lines ``L`` if it has (split at ``\n``), and its bytes ``content`` if
    not: every line's regular expression applied once. A caller that stores this frame
    derives the tables from it (:func:`checkpoint_tables`) without applying them again
    (each table derived from the contents would: at 300,000 files, four times).

    Args:
        contents: as :func:`parse_checkpoints`.
    """
    # (each line is tested on its own: one regular expression over a whole file of thousands
    # of entries recurses once per entry in Java's matcher and overflows its stack)
    text = col("content").cast("string")
    rows = contents.select("*", F.split(F.regexp_replace(text, r"\n\z", ""), "\n").alias("L"))
    L = col("L")
    entries = F.slice(L, 3, F.greatest(F.size(L), lit(1)))
    fast = F.coalesce(
        (F.get(L, 0) == "0") & F.get(L, 1).rlike(COUNT_LINE)
        & (F.size(L) - 2 == F.get(L, 1).try_cast("int"))
        & F.when(col("kind") == LEADER_EPOCH, F.forall(entries, lambda x: x.rlike(EPOCH_ENTRY)))
        .otherwise(F.forall(entries, lambda x: x.rlike(OFFSETS_ENTRY))),
        lit(False))
    # (two projections: the verdict is computed once, then read twice)
    return rows.select(*PLACE, "content", "L", fast.alias("fast")).select(
        *PLACE, "fast", F.when(col("fast"), L).alias("L"), F.when(~col("fast"), col("content")).alias("content"))


def checkpoint_tables(judged: DataFrame) -> ParsedCheckpoints:
    """The tables of :func:`judge_checkpoints`'s files: those of Kafka's own shape from their
    lines (:func:`_with_fast`), the others read line by line (:func:`_parse_lines`)."""
    others = judged.filter(~col("fast"))
    slow = _parse_lines(split_lines(others.select("file_id", "content")), others.select(*PLACE))
    return _with_fast(slow, judged.filter(col("fast")).select(*PLACE, "L"))


def _with_fast(slow: ParsedCheckpoints, fast: DataFrame) -> ParsedCheckpoints:
    """``slow``'s frames and those of the files of Kafka's own shape (``place`` columns and
    ``L``, the file's lines): every file usable, its first two lines skipped, the others
    entries."""
    L = col("L")
    n = F.size(L).cast("bigint")
    entry = fast.select(*[c for c in fast.columns if c != "L"],
                        F.posexplode(F.slice(L, 3, F.size(L))).alias("pos", "e"))
    fields = F.split(col("e"), " ")
    is_epoch = col("kind") == LEADER_EPOCH
    entries = entry.select(
        "file_id", "kind", "snapshot", "broker", "log_dir", "rel", (col("pos") + 3).cast("bigint").alias("line_number"),
        F.when(is_epoch, col("topic")).otherwise(F.get(fields, 0)).alias("topic"),
        F.when(is_epoch, col("partition")).otherwise(F.get(fields, 1).cast("int")).alias("partition"),
        F.when(is_epoch, F.get(fields, 0).cast("int")).alias("epoch"),
        F.when(is_epoch, F.get(fields, 1)).otherwise(F.get(fields, 2)).cast("bigint").alias("offset"),
    )
    verdicts = fast.select("file_id", "kind", "snapshot", "broker", "log_dir", "topic", "partition", "rel",
                           lit(True).alias("usable"), lit(None).cast("string").alias("reason"))
    lines = fast.select("file_id", "snapshot", "broker", "rel", F.posexplode(L).alias("pos", "t")).select(
        "file_id", (col("pos") + 1).cast("bigint").alias("line_number"),
        F.when(col("pos") < 2, lit("skipped")).otherwise(lit("parsed")).alias("disposition"),
        lit(None).cast("string").alias("error"), F.substring(col("t"), 1, 200).alias("shown"),
        "snapshot", "broker", "rel")
    counts = fast.select("file_id", n.alias("lines"), (n - 2).alias("lines_parsed"), lit(2).cast("bigint")
                         .alias("lines_skipped"), lit(0).cast("bigint").alias("lines_quarantined"))
    return ParsedCheckpoints(
        entries=slow.entries.unionByName(entries), files=slow.files.unionByName(verdicts),
        lines=slow.lines.unionByName(lines), counts=slow.counts.unionByName(counts), quarantined=slow.quarantined)


def _parse_lines(numbered: DataFrame, files: DataFrame) -> ParsedCheckpoints:
    """Parse numbered checkpoint lines (``file_id, line_number, text``) of ``files``, line
    by line."""
    t = F.trim(col("text"))
    is_epoch = col("kind") == LEADER_EPOCH
    fields = F.split(t, r"\s+")
    n_fields = F.when(t == "", 0).otherwise(F.size(fields))
    topic_re = r"^[A-Za-z0-9._-]+$"
    entry_ok = F.when(
        is_epoch,
        (n_fields == 2) & F.get(fields, 0).try_cast("int").isNotNull()
        & F.get(fields, 1).try_cast("bigint").isNotNull(),
    ).otherwise(
        (n_fields == 3) & F.get(fields, 0).rlike(topic_re) & F.get(fields, 1).try_cast("int").isNotNull()
        & F.get(fields, 2).try_cast("bigint").isNotNull()
    )
    # SPEC 8: values Kafka never writes (an epoch in [0, 2^31 - 1], an offset in
    # [0, 2^63 - 1]) make the entry malformed, and with it the file.
    number = r"^[+-]?\d+$"
    epoch_text, offset_text = F.get(fields, 0), F.when(is_epoch, F.get(fields, 1)).otherwise(F.get(fields, 2))
    entry_problem = (
        F.when(is_epoch & epoch_text.rlike(number) & ~(epoch_text.try_cast("int") >= 0).eqNullSafe(True),
               lit("an epoch outside [0, 2^31 - 1]"))
        .when((n_fields >= 2) & offset_text.rlike(number) & ~(offset_text.try_cast("bigint") >= 0).eqNullSafe(True),
              lit("an offset outside [0, 2^63 - 1]"))
    )
    entry_ok = entry_ok & entry_problem.isNull()
    # Rank among non-blank lines: 1 = version, 2 = count, then entries.
    nonblank = Window.partitionBy("file_id").orderBy("line_number")
    lines = (
        numbered.join(files, "file_id")
        .select("*", t.alias("t"), (t == "").alias("blank"), entry_ok.alias("entry_ok"),
                fields.alias("fields"), entry_problem.alias("entry_problem"))
        .withColumn("rank", F.sum(F.when(~col("blank"), 1).otherwise(0)).over(nonblank))
    )
    per_file = lines.filter(~col("blank")).groupBy("file_id").agg(
        F.max(F.when(col("rank") == 1, col("t"))).alias("version"),
        F.max(F.when(col("rank") == 2, col("t"))).alias("count_text"),
        F.count(F.when(col("rank") > 2, 1)).alias("n_entries"),
        F.min(F.when((col("rank") > 2) & ~col("entry_ok"), col("line_number"))).alias("bad_line"),
        F.min_by(col("entry_problem"), F.when((col("rank") > 2) & ~col("entry_ok"), col("line_number")))
        .alias("bad_why"),
    )
    reason = (
        F.when(col("version").isNull(), lit(None))
        .when(col("version") != "0", F.format_string(
            "unrecognised checkpoint version %s (expected 0)", F.substring("version", 1, 40)))
        .when(col("count_text").isNull(), lit(None))
        # (Kafka reads the count as an int: digits beyond a long are no number here either)
        .when(~col("count_text").rlike(r"^\d+$") | col("count_text").try_cast("bigint").isNull(),
              lit("entry count line is not a number"))
        .when(col("bad_line").isNotNull() & col("bad_why").isNotNull(), F.format_string(
            "malformed entry on line %d: %s, a value Kafka never writes", col("bad_line"), col("bad_why")))
        .when(col("bad_line").isNotNull(), F.format_string("malformed entry on line %d", col("bad_line")))
        .when(col("count_text").try_cast("bigint") != col("n_entries"), F.format_string(
            "expected %s entries but found %d", col("count_text"), col("n_entries")))
    )
    verdicts = files.join(per_file.select("file_id", reason.alias("reason")), "file_id", "left").select(
        "file_id", "kind", "snapshot", "broker", "log_dir", "topic", "partition", "rel",
        col("reason").isNull().alias("usable"), "reason")
    judged = lines.join(verdicts.select("file_id", "usable", "reason"), "file_id")
    disposition = (
        F.when(col("blank"), "skipped")
        .when(~col("usable"), "quarantined")
        .when(col("rank") <= 2, "skipped")
        .otherwise("parsed")
    )
    dispositions = judged.select(
        "file_id", "line_number", disposition.alias("disposition"),
        F.when(~col("usable") & ~col("blank"), F.concat(lit("checkpoint file rejected: "), col("reason"))).alias("error"),
        F.substring(col("t"), 1, 200).alias("shown"), "snapshot", "broker", "rel",
    )
    good = judged.filter(col("usable") & (col("rank") > 2) & ~col("blank"))
    entries = good.select(
        "file_id", "kind", "snapshot", "broker", "log_dir", "rel", "line_number",
        F.when(col("kind") == LEADER_EPOCH, col("topic")).otherwise(F.get(col("fields"), 0)).alias("topic"),
        F.when(col("kind") == LEADER_EPOCH, col("partition"))
        .otherwise(F.get(col("fields"), 1).try_cast("int")).alias("partition"),
        F.when(col("kind") == LEADER_EPOCH, F.get(col("fields"), 0).try_cast("int")).alias("epoch"),
        F.when(col("kind") == LEADER_EPOCH, F.get(col("fields"), 1))
        .otherwise(F.get(col("fields"), 2)).try_cast("bigint").alias("offset"),
    )
    return ParsedCheckpoints(entries=entries, files=verdicts, lines=dispositions, counts=line_counts(dispositions),
                             quarantined=dispositions.filter(col("disposition") == "quarantined"))
