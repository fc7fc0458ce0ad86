"""The frames a Kafka snapshot's segment files (SPEC 3.3) give, from their decoded rows
(:func:`auditor.ingest.segments.read_segments`, stored once): batch rows, segments,
``parse_errors`` rows, and the byte accounting of ``runs.counts``.

A replica's segments are the union, by base offset, of its ``.log`` files and its dump
sections: a dump section of a base offset that a readable ``.log`` holds is left out (its
lines counted as skipped, :func:`shadowed_sections`), and the newest segment is the union's
highest base offset, whichever kind it is (:func:`segments_of`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame

from auditor import columns as F
from auditor.columns import col, lit
from auditor.ingest import discovery as d

#: The place of each segment file: ``file_id, rel, snapshot, broker, topic, partition,
#: segment_base_offset`` (a local frame made from the file list).
PLACE_DDL = ("file_id int, rel string, snapshot timestamp, broker int, topic string, partition int, "
             "segment_base_offset bigint")
REPLICA = ("snapshot", "topic", "partition", "replica")
#: The byte accounting of ``runs.counts`` (SPEC 3.3), summed over the run.
BYTE_COUNTS = ("segment_bytes", "batch_bytes", "quarantined_bytes", "zero_tail_bytes", "invalid_tail_bytes",
               "vanished_bytes", "bytes_read", "crc_verified_batches", "crc_unverified_batches")


def segment_base(f: d.InputFile) -> int:
    """A segment file's base offset, from its name."""
    m = d.SEGMENT_NAME.match(f.path.rsplit("/", 1)[-1])
    assert m is not None, f.path
    return int(m.group("base"))


def file_list(files: Sequence[tuple[int, d.InputFile]]) -> list[tuple[int, str, bool, int]]:
    """What the decoding tasks get per segment file: ``(file_id, path, newest, base)``,
    ``newest`` for each replica's highest-base ``.log`` (a dump of a higher base can still
    make it an older one: then its zero tail is invalid bytes, :func:`segments_of`)."""
    newest: dict[tuple[object, ...], int] = {}
    for _, f in files:
        key = (f.snapshot, f.broker, f.topic, f.partition)
        newest[key] = max(newest.get(key, -1), segment_base(f))
    # larger files first: dealt round-robin, each task gets a like share of bytes
    ordered = sorted(files, key=lambda item: (-item[1].size, item[0]))
    return [(i, f.path, newest[(f.snapshot, f.broker, f.topic, f.partition)] == segment_base(f), segment_base(f))
            for i, f in ordered]


def place_rows(files: Sequence[tuple[int, d.InputFile]]) -> list[tuple[object, ...]]:
    """Rows of :data:`PLACE_DDL` for the segment ``files``."""
    return [(i, f.rel, f.snapshot, f.broker, f.topic, f.partition, segment_base(f)) for i, f in files]


def segment_batches(rows: DataFrame, place: DataFrame) -> DataFrame:
    """The batch rows (:data:`auditor.ingest.batches.BATCHES_DDL` plus ``file_id, sec,
    byte_offset``) of the decoded ``rows``: every ``B`` row; ``is_valid`` null unless the
    CRC was checked."""
    return rows.filter(col("row_kind") == "B").join(place, "file_id").select(
        "snapshot", "topic", "partition", col("broker").alias("replica"), col("rel").alias("file"),
        lit(None).cast("bigint").alias("line_number"), "segment_base_offset", "base_offset", "last_offset",
        "epoch", "crc", "record_count", "is_valid", "is_control", "is_transactional", "magic",
        F.when(col("magic") == 2, lit("segment-v2")).otherwise(lit("segment-legacy")).alias("origin"),
        "file_id", lit(0).alias("sec"), col("position").alias("byte_offset"))


def file_rows(rows: DataFrame, place: DataFrame) -> DataFrame:
    """One row per segment file: its place and its ``F`` row's facts."""
    return rows.filter(col("row_kind") == "F").join(place, "file_id").select(
        "file_id", "snapshot", col("broker").alias("replica"), "topic", "partition", col("rel").alias("file"),
        "segment_base_offset", "file_bytes", "batch_bytes", "quarantined_bytes", "tail_position", "tail_bytes",
        "tail_zero", "vanished_bytes", "bytes_read", "stop", "crc_verified", "crc_unverified", "unreadable")


def segments_of(files: DataFrame, dumped: DataFrame) -> DataFrame:
    """The segments (:data:`auditor.ingest.model.SEGMENTS_DDL` plus ``byte_offset``, where
    invalid trailing bytes start) of the readable segment ``files`` (:func:`file_rows`)
    beside the dumped ones (``dumped``), and each file's tail verdict: a zero tail is
    preallocated space only on the replica's newest segment of the union."""
    readable = files.filter(col("unreadable").isNull())
    newest = readable.select(*REPLICA, "segment_base_offset").unionByName(
        dumped.select(*REPLICA, "segment_base_offset")).groupBy(*REPLICA).agg(
        F.max("segment_base_offset").alias("_newest"))
    judged = readable.join(newest, list(REPLICA), "left").withColumn(
        "zero_tail", F.coalesce(col("tail_zero") & (col("segment_base_offset") == col("_newest")), lit(False)))
    return judged.select(
        *REPLICA, "file", lit(None).cast("bigint").alias("line_number"), "segment_base_offset",
        F.when((col("tail_bytes") > 0) & ~col("zero_tail"), col("tail_bytes")).alias("invalid_bytes"),
        F.when((col("tail_bytes") > 0) & ~col("zero_tail"), col("tail_position")).alias("byte_offset"),
        "zero_tail", "file_id", "tail_bytes", "file_bytes", "batch_bytes", "quarantined_bytes", "vanished_bytes",
        "bytes_read", "crc_verified", "crc_unverified")


#: What :func:`byte_counts` sums per file.
FILE_FACTS = ("zero_tail", "tail_bytes", "file_bytes", "batch_bytes", "quarantined_bytes", "vanished_bytes",
              "bytes_read", "crc_verified", "crc_unverified")


def snapshot_facts(rows: DataFrame) -> DataFrame:
    """:data:`FILE_FACTS` of snapshot files read in binary (no tail of theirs is
    preallocated space)."""
    return rows.filter(col("row_kind") == "F").select(
        lit(False).alias("zero_tail"), *FILE_FACTS[1:])


def byte_counts(judged: DataFrame) -> DataFrame:
    """One row: the byte accounting of :data:`BYTE_COUNTS` over the judged segment files
    (:func:`segments_of`), and how many files; its sums hold per file (SPEC 3.3: size when
    opened = batch + quarantined + zero tail + invalid tail + vanished bytes)."""
    tail = F.coalesce(col("tail_bytes"), lit(0))
    return judged.agg(
        F.count(lit(1)).alias("segment_files"),
        F.sum("file_bytes").alias("segment_bytes"), F.sum("batch_bytes").alias("batch_bytes"),
        F.sum("quarantined_bytes").alias("quarantined_bytes"),
        F.sum(F.when(col("zero_tail"), tail).otherwise(0)).alias("zero_tail_bytes"),
        F.sum(F.when(col("zero_tail"), 0).otherwise(tail)).alias("invalid_tail_bytes"),
        F.sum("vanished_bytes").alias("vanished_bytes"), F.sum("bytes_read").alias("bytes_read"),
        F.sum("crc_verified").alias("crc_verified_batches"), F.sum("crc_unverified").alias("crc_unverified_batches"),
        F.sum(F.when(col("zero_tail") | (tail == 0), 0).otherwise(1)).alias("files_with_invalid_tail"),
        F.sum(F.when(col("file_bytes") != col("batch_bytes") + col("quarantined_bytes") + tail
                     + col("vanished_bytes"), 1).otherwise(0)).alias("unbalanced_files"))


def header_text() -> Column:
    """What a quarantined batch's ``parse_errors.line`` shows: its header's fields as text."""
    return F.format_string(
        "position: %d magic: %d baseOffset: %d lastOffset: %d partitionLeaderEpoch: %d count: %d crc: %d",
        col("position"), col("magic"), col("base_offset"), col("last_offset"), F.coalesce(col("epoch"), lit(-1)),
        F.coalesce(col("record_count"), lit(-1)), col("crc"))


def segment_errors(rows: DataFrame, place: DataFrame) -> DataFrame:
    """``parse_errors`` rows: each quarantined header (``Q``, at its byte offset, its fields
    as text) and each segment file that could not be read (byte offset 0)."""
    quarantined = rows.filter(col("row_kind") == "Q").join(place, "file_id").select(
        "snapshot", "broker", col("rel").alias("file"), lit(None).cast("bigint").alias("line_number"),
        col("position").alias("byte_offset"), header_text().alias("line"),
        F.concat(lit("batch header holds a value Kafka never writes: "), col("error")).alias("error"))
    unreadable = rows.filter(col("unreadable").isNotNull()).join(place, "file_id").select(
        "snapshot", "broker", col("rel").alias("file"), lit(None).cast("bigint").alias("line_number"),
        lit(0).cast("bigint").alias("byte_offset"), lit(None).cast("string").alias("line"),
        F.concat(lit("segment file cannot be read: "), col("unreadable")).alias("error"))
    return quarantined.unionByName(unreadable)


def shadowed_sections(sections: DataFrame, judged: DataFrame) -> DataFrame:
    """``file_id, sec`` of the dump sections whose segment a readable ``.log`` file of the
    same replica holds (SPEC 3.3: left out, their lines counted as skipped)."""
    logs = judged.select(*REPLICA, "segment_base_offset").distinct()
    return sections.filter(col("is_segment")).join(logs, [*REPLICA, "segment_base_offset"], "left_semi").select(
        "file_id", "sec")

