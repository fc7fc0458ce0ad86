"""The scan: every dump line read once, in the task that reads it, into one aggregate.

:func:`scan_dumps` reads the dump files whole (:mod:`auditor.ingest.wholefile`), classifies
each line (:mod:`auditor.ingest.dumps`), and groups the lines by
``(file_id, sec, win, epoch, item_kind, item)``:

- a v2 batch line adds to its ``(file, section, window, epoch)`` summary
  (:mod:`auditor.summarise.digest`);
- a quarantined line is its own group (``item_kind = 'E'``, ``item`` = its line): its error;
- the lines of an old-format batch are their own groups (``B``, ``R``, ``M``; see
  :mod:`auditor.ingest.dumps`), turned into batches after the scan;
- every line adds to its group's line counts, and headers, ``Starting offset:`` and
  ``Found N invalid bytes`` lines to its section's facts.

Aggregating map-side first, the only shuffle moves one row per group: a handful per file.
:func:`split_scan` then derives, from those stored rows, the per-file accounting, the
``parse_errors`` rows, the sections (segments) and the summaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession

from auditor import columns as F
from auditor.columns import col, lit
from auditor.frames import aggregate_specs
from auditor.ingest import dump_grammar as g
from auditor.ingest.discovery import InputFile
from auditor.ingest.dump_items import item_spec, pending_batches, pending_item, placed_items
from auditor.ingest.dumps import (
    SECTION_PROBLEM,
    classified_lines,
    is_direct_v2_batch,
    shown_line,
    with_replica,
)
from auditor.ingest.wholefile import read_dump_lines
from auditor.summarise.digest import rollup, summary_aggregates, summary_spec, window_of

#: The scan's group key. Header lines (``H``) and quarantined lines (``E``) are groups of
#: their own, so their text (the header's facts, the error and the line shown) is part of
#: the key: every aggregate then has a fixed-width buffer and Spark aggregates with a hash
#: map instead of sorting every line.
SCAN_KEY = ("file_id", "sec", "win", "epoch", "item_kind", "item", "skind", "h_topic", "error", "e_kind", "e_meta")

#: The scan's rows (what the incremental store keeps per dump file, ``file_id`` aside).
SCAN_DDL = (
    "file_id int, sec int, win bigint, epoch int, item_kind string, item bigint, skind string, h_topic string, "
    "error string, e_kind string, e_meta string, lines bigint, lines_parsed bigint, lines_skipped bigint, lines_quarantined bigint, "
    "sec_line bigint, h_partition int, header_base bigint, start_line_offset bigint, invalid_bytes bigint, "
    "batch_lines bigint, "
    "n bigint, records bigint, min_base bigint, max_base bigint, max_last bigint, crcless bigint, invalid bigint, "
    "d1_lo bigint, d1_hi bigint, d2_lo bigint, d2_hi bigint, c1_lo bigint, c1_hi bigint, c2_lo bigint, c2_hi bigint, "
    "i_lines bigint, i_line bigint, i_min_offset bigint, i_max_offset bigint, i_v2 int, i_base bigint, "
    "i_last bigint, i_count bigint, i_epoch int, i_crc bigint, i_valid int, i_control int, i_txn int, i_magic int, "
    "i_number bigint, i_length int, i_clean int, i_compressed int")
SCAN_COLUMNS = tuple(part.strip().split(" ", 1)[0] for part in SCAN_DDL.split(", "))

#: A summary row: one replica's batches of one file, section, window and epoch; ``tail`` rows
#: hold one batch of a section's last lines each.
SUMMARY_KEY = ("snapshot", "replica", "topic", "partition", "file", "file_id", "sec", "win", "epoch", "tail")


def keyed_lines(spark: SparkSession, dump_files: Sequence[tuple[int, InputFile]], files: DataFrame,
                limit: int | None = None, per_batch: bool = False, spill: str | None = None,
                narrow: bool = False) -> DataFrame:
    """Every dump line, classified and judged, with the scan's group key (:data:`SCAN_KEY`);
    ``per_batch``: every v2 batch line summarised is a group of its own (``D``, or ``T`` in a
    section's tail) with all its batch's fields, so the scan's rows hold every batch."""
    lines = read_dump_lines(spark, dump_files, limit, spill=spill, narrow=narrow)
    rows = classified_lines(lines, files, all_fields=per_batch)
    kind, item = pending_item()
    v2 = is_direct_v2_batch()
    quarantined = col("error").isNotNull()
    header = col("kind") == "header"
    tail = v2 & col("tail")
    alone = v2 if per_batch else tail
    return rows.select(
        "*",
        F.when(v2, window_of(col("f_base"))).alias("win"),
        F.when(v2, col("f_epoch")).alias("epoch"),
        F.when(quarantined, lit("E")).when(header, lit("H")).when(tail, lit("T"))
        .when(alone, lit("D")).otherwise(kind).alias("item_kind"),
        F.when(quarantined | header | alone, col("line_number")).otherwise(item).alias("item"),
    ).withColumnRenamed("h_skind", "skind").withColumn("e_kind", F.when(quarantined, col("kind")))


def scan_dumps(spark: SparkSession, dump_files: Sequence[tuple[int, InputFile]], files: DataFrame,
               limit: int | None = None, per_batch: bool = False, spill: str | None = None,
                narrow: bool = False) -> DataFrame:
    """The scan aggregate (one row per group of :data:`SCAN_KEY`; see the module docstring).

    Args:
        dump_files: ``(file_id, file)`` of the dump files.
        files: ``file_id, rel, snapshot, broker, topic, partition`` of those files (small).
        limit: files above this many bytes are read line by line (tests).
        per_batch: every v2 batch is a row of its own (``D``): a small input's scan holds
            all its batches, and the drill-down filters them instead of reading files again
            (:func:`scan_batches`).
        spill, narrow: where driver-side lookups too large for a plan are stored (the run's
            work dir), and whether they are in one partition.
    """
    keyed = keyed_lines(spark, dump_files, files, limit, per_batch=per_batch, spill=spill, narrow=narrow)
    kind, disp = col("kind"), col("disposition")
    header = kind == "header"
    types = _types()

    def flag(condition: Column) -> Column:
        return F.when(condition, 1).otherwise(0)

    aggregated = aggregate_specs(keyed.withColumn("_v2", is_direct_v2_batch()), SCAN_KEY, [
        ("lines", F.sum, lit(1)),
        ("lines_parsed", F.sum, flag(disp == "parsed")),
        ("lines_skipped", F.sum, flag(disp == "skipped")),
        ("lines_quarantined", F.sum, flag(disp == "quarantined")),
        # the section's facts (from its header line) and the lines that say where it starts
        ("sec_line", F.max, F.when(header, col("line_number"))),
        ("h_partition", F.max, F.when(header, col("h_partition"))),
        ("header_base", F.max, F.when(header, col("f_header_base"))),
        ("start_line_offset", F.min, F.when(kind == "segment_start", col("f_number"))),
        ("invalid_bytes", F.sum, F.when(kind == "invalid_bytes", col("f_number"))),
        ("batch_lines", F.sum, flag(kind.isin(*g.BATCH_KINDS, *g.REBUILT_KINDS))),
        *summary_spec(col("f_base"), col("f_last"), col("f_epoch"), col("f_crc"),
                      F.coalesce(col("f_count"), col("f_last") - col("f_base") + 1),
                      col("f_valid"), when=col("_v2")),
        *item_spec(),
    ])
    return aggregated.select(*[col(c).cast(types[c]).alias(c) for c in SCAN_COLUMNS])


def _types() -> dict[str, str]:
    from pyspark.sql.types import _parse_datatype_string

    schema = _parse_datatype_string(SCAN_DDL)
    return {f.name: f.dataType.simpleString() for f in schema.fields}  # type: ignore[attr-defined]


@dataclass(frozen=True)
class ScanParts:
    """What the stored scan rows hold, as frames over them."""

    accounting: DataFrame  # file_id, lines, lines_parsed, lines_skipped, lines_quarantined
    errors: DataFrame  # snapshot, broker, file, line_number, byte_offset, line, error
    sections: DataFrame  # file_id, sec, snapshot, replica, topic, partition, file, line_number, segment_base_offset, invalid_bytes, in_log
    summaries: DataFrame  # SUMMARY_KEY + the summary aggregates (v2 batches only)
    items: DataFrame  # pending items with their file's and section's place


def split_scan(scan: DataFrame, files: DataFrame, per_batch: bool = False) -> ScanParts:
    """Derive the per-file, per-section and summary frames from the stored scan rows.

    Args:
        scan: the stored rows of :func:`scan_dumps` (possibly with rows reused from the
            incremental store).
        files: ``file_id, rel, snapshot, broker, topic, partition``.
        per_batch: the scan was made ``per_batch``: its ``D`` rows are rolled up into their
            window's summary.
    """
    accounting = scan.groupBy("file_id").agg(
        *[F.sum(c).cast("bigint").alias(c) for c in ("lines", "lines_parsed", "lines_skipped", "lines_quarantined")])
    f = files.select("file_id", "rel", "snapshot", "broker", "topic", "partition")
    shown = shown_line(col("e_kind"), col("e_meta"), col("i_length"), col("i_clean") == 1,
                       g.header_path(col("e_meta")), col("i_base"), col("i_last"), col("i_epoch"),
                       col("i_crc"), col("i_valid").cast("boolean"), col("i_min_offset"), col("i_number"))
    per_section = scan.groupBy("file_id", "sec").agg(
        F.max("sec_line").alias("sec_line"), F.max("skind").alias("skind"), F.max("h_topic").alias("h_topic"),
        F.max("h_partition").alias("h_partition"), F.max("header_base").alias("header_base"),
        F.min("start_line_offset").alias("start_line_offset"), F.sum("invalid_bytes").alias("invalid_bytes"),
        F.sum("batch_lines").alias("batch_lines"))
    placed = per_section.join(f, "file_id").transform(with_replica)
    problems = placed.select("file_id", "sec", "section_problem")
    errors = scan.filter(col("item_kind") == "E").join(f, "file_id").join(problems, ["file_id", "sec"], "left").select(
        "snapshot", "broker", col("rel").alias("file"), col("item").alias("line_number"),
        lit(None).cast("bigint").alias("byte_offset"), shown.alias("line"),
        F.when(col("error") == SECTION_PROBLEM, col("section_problem")).otherwise(col("error")).alias("error"))
    in_log = ((col("skind_or_log") == "log") & col("section_problem").isNull() & col("r_topic").isNotNull())
    sections = placed.select(
        "file_id", "sec", "snapshot", col("broker").alias("replica"), col("r_topic").alias("topic"),
        col("r_partition").alias("partition"), col("rel").alias("file"), col("sec_line").alias("line_number"),
        F.when(col("sec") > 0, F.coalesce(col("start_line_offset"), col("header_base")))
        .alias("segment_base_offset"),
        col("invalid_bytes").cast("bigint").alias("invalid_bytes"), in_log.alias("in_log"),
        (in_log & ((col("sec") > 0) | (col("batch_lines") > 0) | col("invalid_bytes").isNotNull()))
        .alias("is_segment"),
    )
    place = sections.select("file_id", "sec", "snapshot", "replica", "topic", "partition", "file")
    summarised = scan.filter(col("win").isNotNull())
    if per_batch:
        alone = F.coalesce(col("item_kind") == "D", lit(False))
        summarised = summarised.filter(~alone).select("file_id", "sec", "win", "epoch", "item_kind", *SUMMARY_VALUES) \
            .unionByName(summarised.filter(alone).groupBy("file_id", "sec", "win", "epoch").agg(*rollup([]))
                         .select("*", lit(None).cast("string").alias("item_kind")))
    summaries = summarised.join(place, ["file_id", "sec"]).select(
        *SUMMARY_KEY[:-1], F.coalesce(col("item_kind") == "T", lit(False)).alias("tail"), *SUMMARY_VALUES)
    items = placed_items(scan, sections).select(
        "file_id", "sec", "item_kind", "item", "rel", "snapshot", "broker", "r_topic", "r_partition", *ITEM_VALUES)
    return ScanParts(accounting=accounting, errors=errors, sections=sections, summaries=summaries, items=items)


def scan_batches(scan: DataFrame) -> DataFrame:
    """The batch items of a ``per_batch`` scan's rows: every v2 batch line (``D`` and ``T``
    rows, as ``V`` items) and the old-format items, for :func:`pending_batches`."""
    kind = col("item_kind")
    return scan.filter(kind.isin("B", "R", "M", "V", "D", "T")).withColumn(
        "item_kind", F.when(kind.isin("D", "T"), lit("V")).otherwise(kind))


SUMMARY_VALUES = ("n", "records", "min_base", "max_base", "max_last", "crcless", "invalid",
                  "d1_lo", "d1_hi", "d2_lo", "d2_hi", "c1_lo", "c1_hi", "c2_lo", "c2_hi")
ITEM_VALUES = ("i_lines", "i_line", "i_min_offset", "i_max_offset", "i_v2", "i_base", "i_last", "i_count",
               "i_epoch", "i_crc", "i_valid", "i_control", "i_txn", "i_magic", "i_number", "i_length", "i_clean",
               "i_compressed")


def summarise_batches(batches: DataFrame) -> DataFrame:
    """Summary rows (:data:`SUMMARY_KEY`) of batch rows (``snapshot, replica, topic,
    partition, file, base_offset, last_offset, epoch, crc, record_count, is_valid``, and
    ``file_id, sec`` when they have them)."""
    extra = [lit(None).cast("int").alias(c) if c == "file_id" else lit(0).alias(c)
             for c in ("file_id", "sec") if c not in batches.columns] + [lit(False).alias("tail")]
    keyed = batches.select("*", *extra, window_of(col("base_offset")).alias("win"))
    return keyed.groupBy(*SUMMARY_KEY).agg(
        *summary_aggregates(col("base_offset"), col("last_offset"), col("epoch"), col("crc"),
                            col("record_count"), col("is_valid"))
    ).select(*SUMMARY_KEY, *SUMMARY_VALUES)


def pending_summaries(items: DataFrame, sections: DataFrame) -> DataFrame:
    """Summary rows of the old-format batches (:func:`auditor.ingest.dumps.pending_batches`)."""
    batches = pending_batches(items, sections).withColumnRenamed("broker", "replica")
    return summarise_batches(batches.join(sections.select("file", "file_id").distinct(), "file"))


__all__ = ["SCAN_KEY", "SUMMARY_KEY", "ScanParts", "keyed_lines", "pending_summaries", "rollup", "scan_batches",
           "scan_dumps", "split_scan", "summarise_batches"]
