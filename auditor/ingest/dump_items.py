"""Pending items: the dump lines of batches that one line does not make (SPEC 3.1).

A legacy (magic 0/1) batch line, or a v2 line without ``count:`` (``B``, by line), takes its
record count, and a legacy line its base offset, from the record lines under it (``R``, by
owning line); the message lines of 0.8-0.10 and the deep record lines of 0.11-2.1 make one
batch per ``position:`` (``M``). :func:`pending_item` keys those lines for one aggregate
(:func:`item_spec`), and :func:`pending_batches` turns the aggregated items into batch rows.
A drill-down reads v2 batch lines as items too (``V``): :func:`batch_items`. These shapes are
rare (old Kafka releases), so they are grouped, never windowed line by line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window

from auditor import columns as F
from auditor.columns import col, lit
from auditor.frames import aggregate_specs
from auditor.ingest import dump_grammar as g
from auditor.ingest.discovery import InputFile
from auditor.ingest.dumps import classified_lines, is_v2_batch, parsed_as
from auditor.ingest.wholefile import read_dump_lines

UNCOMPRESSED = ("none", "NONE", "NoCompressionCodec")


def pending_item(with_v2: bool = False) -> tuple[Column, Column]:
    """``(item_kind, item)`` of a line that goes into a pending batch (see the module
    docstring), nulls for every other line; with ``with_v2``, a v2 batch line that is a batch
    by itself is an item too (``V``, by line: the drill-down reads batches this way)."""
    needs = F.coalesce(col("owner_needs_records"), lit(False))
    own_line = col("owner") == col("line_number")
    v2 = is_v2_batch() if with_v2 else is_v2_batch() & F.coalesce(col("file_has_legacy"), lit(False))
    kind = (
        F.when(v2, lit("V"))
        .when(parsed_as(g.BATCH_KINDS) & (col("kind") == "batch_legacy"), lit("B"))
        .when(parsed_as(("batch_v2",)) & needs & own_line, lit("B"))
        .when(parsed_as(g.RECORD_KINDS) & needs, lit("R"))
        .when(parsed_as(g.REBUILT_KINDS), lit("M"))
    )
    item = (
        F.when(kind.isin("B", "V"), col("line_number"))
        .when(kind == "R", col("owner"))
        .when(kind == "M", col("f_position"))
    )
    return kind, item


def item_spec() -> list[tuple[str, Callable[[Column], Column], Column]]:
    """The aggregates of one pending item's lines (one line for ``B``; a batch's record lines
    for ``R``; a batch's message lines for ``M``), over rows with an ``item_kind`` only, as
    :data:`auditor.frames.Spec` entries."""
    is_item = col("item_kind").isNotNull()

    def only(c: Column) -> Column:
        return F.when(is_item, c)

    return [
        ("i_lines", F.sum, only(lit(1))),
        ("i_line", F.min, only(col("line_number"))),
        ("i_min_offset", F.min, only(col("f_offset"))),
        ("i_max_offset", F.max, only(col("f_offset"))),
        ("i_v2", F.max, only((col("kind") == "batch_v2").cast("int"))),
        ("i_base", F.max, only(col("f_base"))),
        ("i_last", F.max, only(col("f_last"))),
        ("i_count", F.max, only(col("f_count"))),
        ("i_epoch", F.max, only(col("f_epoch"))),
        ("i_crc", F.max, only(col("f_crc"))),
        ("i_valid", F.min, only(col("f_valid").cast("int"))),
        ("i_control", F.max, only(col("f_control").cast("int"))),
        ("i_txn", F.max, only(col("f_txn").cast("int"))),
        ("i_magic", F.max, only(col("f_magic"))),
        ("i_number", F.max, only(col("f_number"))),
        ("i_length", F.max, only(col("e_length"))),
        ("i_clean", F.max, only(col("e_clean").cast("int"))),
        ("i_compressed", F.max, only((~col("f_codec").isin(*UNCOMPRESSED)).cast("int"))),
    ]


def batch_items(spark: SparkSession, dump_files: Sequence[tuple[int, InputFile]], files: DataFrame,
                limit: int | None = None, keep: Column | None = None, spill: str | None = None,
                narrow: bool = False) -> DataFrame:
    """The batch items of dump files (one row per v2 batch line, legacy batch line, legacy
    batch's record lines or old message group: ``file_id, sec, item_kind, item`` and
    :func:`item_spec`), every other line grouped by kind; ``keep``: only the lines it holds
    for (a condition on ``file_id`` and ``sec``), before the grammar reads them.

    Args:
        dump_files: ``(file_id, file)`` of the dump files.
        files: ``file_id, rel, snapshot, broker, topic, partition`` of those files.
        limit: files above this many bytes are read line by line (tests).
        spill, narrow: where driver-side lookups too large for a plan are stored (the run's
            work dir), and whether they are in one partition.
    """
    lines = read_dump_lines(spark, dump_files, limit, spill=spill, narrow=narrow)
    rows = classified_lines(lines if keep is None else lines.filter(keep), files, all_fields=True)
    kind, item = pending_item(with_v2=True)
    quarantined = col("error").isNotNull()
    header = col("kind") == "header"
    keyed = rows.select(
        "*",
        F.when(quarantined, lit("E")).when(header, lit("H")).otherwise(kind).alias("item_kind"),
        F.when(quarantined | header, col("line_number")).otherwise(item).alias("item"))
    # Grouped before filtering: a filter on the item kind would be pushed below the
    # projection that computes it and copy the whole line grammar into its condition.
    return aggregate_specs(keyed, ("file_id", "sec", "item_kind", "item"), item_spec())


def placed_items(rows: DataFrame, sections: DataFrame) -> DataFrame:
    """The pending items (``B``, ``R``, ``M``, ``V``) of scan rows with their section's place:
    ``rel, snapshot, broker, r_topic, r_partition`` (what :func:`pending_batches` reads).

    Args:
        rows: scan rows (``file_id, sec, item_kind, ...``).
        sections: ``file_id, sec, file, snapshot, replica, topic, partition``.
    """
    place = sections.select("file_id", "sec", col("file").alias("rel"), "snapshot",
                            col("replica").alias("broker"), col("topic").alias("r_topic"),
                            col("partition").alias("r_partition"))
    return rows.filter(col("item_kind").isin("B", "R", "M", "V")).join(place, ["file_id", "sec"])


def pending_batches(items: DataFrame, sections: DataFrame, extra: Sequence[str] = ()) -> DataFrame:
    """The batch rows of the pending items (``broker`` not yet ``replica``).

    Args:
        items: one row per ``(file, sec, item_kind, item)`` with :func:`item_aggregates` and
            ``rel, snapshot, broker, r_topic, r_partition``.
        sections: ``file_id, sec, segment_base_offset``.
        extra: also these of ``file_id`` and ``segment_base_offset``.
    """
    key = ["file_id", "sec"]
    lines = items.filter(col("item_kind").isin("B", "V"))
    records = items.filter(col("item_kind") == "R").select(
        *key, col("item").alias("i_owner"), col("i_lines").alias("n_records"),
        col("i_min_offset").alias("min_record_offset"))
    is_v2 = col("i_v2") == 1
    from_lines = lines.join(records.withColumnRenamed("i_owner", "item"), [*key, "item"], "left").select(
        *key, "rel", "snapshot", "broker", "r_topic", "r_partition",
        col("i_line").alias("line_number"), col("i_line").alias("pos"),
        F.when(is_v2, col("i_base")).otherwise(col("min_record_offset")).alias("base_offset"),
        F.when(is_v2, col("i_last")).otherwise(col("i_min_offset")).alias("last_offset"),
        F.when(is_v2, col("i_epoch")).otherwise(lit(-1)).alias("epoch"),
        col("i_crc").alias("crc"),
        F.coalesce(col("i_count"), col("n_records")).alias("count_known"),
        col("i_valid").cast("boolean").alias("is_valid"), col("i_control").cast("boolean").alias("is_control"),
        col("i_txn").cast("boolean").alias("is_transactional"), col("i_magic").alias("magic"),
        col("i_compressed").cast("boolean").alias("compressed"),
        F.when(is_v2, lit("v2")).otherwise(lit("legacy")).alias("origin"),
    )
    rebuilt = items.filter(col("item_kind") == "M").select(
        *key, "rel", "snapshot", "broker", "r_topic", "r_partition",
        col("i_line").alias("line_number"), col("i_line").alias("pos"),
        col("i_min_offset").alias("base_offset"), col("i_max_offset").alias("last_offset"),
        lit(-1).alias("epoch"), lit(None).cast("bigint").alias("crc"),
        col("i_lines").cast("bigint").alias("count_known"), col("i_valid").cast("boolean").alias("is_valid"),
        lit(None).cast("boolean").alias("is_control"), lit(None).cast("boolean").alias("is_transactional"),
        col("i_magic").alias("magic"), col("i_compressed").cast("boolean").alias("compressed"),
        lit("rebuilt").alias("origin"),
    )
    both = from_lines.unionByName(rebuilt).join(sections.select(*key, "segment_base_offset"), key, "left")
    # A compressed legacy wrapper printed shallow shows only its last offset: its base is
    # the offset after the previous batch of the section (or the segment base).
    in_section = Window.partitionBy("file_id", "sec").orderBy("pos")
    prev_last = F.lag("last_offset").over(in_section)
    single_wrapper = (col("origin") != "v2") & col("compressed") & (
        col("base_offset").isNull() | ((col("origin") == "rebuilt") & (col("count_known") == 1)))
    guessed = F.least(F.coalesce(prev_last + 1, col("segment_base_offset"), col("last_offset")), col("last_offset"))
    base = F.when(single_wrapper, guessed).otherwise(F.coalesce(col("base_offset"), col("last_offset")))
    return both.withColumn("base_offset", base).select(
        "snapshot", "broker", col("r_topic").alias("topic"), col("r_partition").alias("partition"),
        col("rel").alias("file"), "line_number", "sec", "base_offset", "last_offset",
        col("epoch").cast("int").alias("epoch"), "crc",
        F.coalesce(col("count_known"), col("last_offset") - col("base_offset") + 1).cast("bigint")
        .alias("record_count"),
        "is_valid", "is_control", "is_transactional", "magic", "origin", *extra,
    )
