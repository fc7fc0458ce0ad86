"""Batch rows: the one shape every input kind's batches take, and where they are read from.

A batch row is :data:`BATCHES_DDL`: a replica's batch with its file and line (or byte
position), offsets, epoch, CRC, record count and flags. Dumps become batch rows through the
dump grammar (:mod:`auditor.ingest.dump_items`); ``--format table`` and etcd's WAL are read
as batch rows directly. A :class:`BatchSource` says where the batches of a snapshot can be
read again: stored rows, or the dump files, re-read section by section (a drill-down wants
a few sections; a per-broker dump holds every partition of its broker).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window

from auditor import columns as F
from auditor.columns import col
from auditor.ingest.discovery import InputFile
from auditor.ingest.dump_items import batch_items, pending_batches, placed_items
from auditor.materialise import materialise
from auditor.policy import Plan

#: A batch row (``Snapshot.batches``), ``replica`` = the broker id.
BATCHES_DDL = ("snapshot timestamp, topic string, partition int, replica int, file string, line_number bigint, "
               "segment_base_offset bigint, base_offset bigint, last_offset bigint, epoch int, crc bigint, "
               "record_count bigint, is_valid boolean, is_control boolean, is_transactional boolean, magic int, "
               "origin string")
REPLICA_KEY = ("snapshot", "broker", "topic", "partition")


def dedupe_batches(batches: DataFrame) -> DataFrame:
    """Merge identical batches of a replica (two dumps of one segment count once, SPEC 3.1).

    The surviving row keeps the first file and line (by name) that printed it, or the first
    byte position of a segment file that holds it twice (a repeated batch: no line number).
    """
    key = [*REPLICA_KEY, "base_offset", "last_offset", "epoch", "crc"]
    place = ["file", "line_number", *(["byte_offset"] if "byte_offset" in batches.columns else [])]
    first = Window.partitionBy(*key).orderBy(*place)
    return (
        batches.withColumn("_n", F.row_number().over(first))
        .filter(col("_n") == 1)
        .drop("_n")
    )


#: Above this many wanted sections a drill-down parses every section of the files it reads
#: (the filter is a literal set in the plan: a few thousand keys plan in milliseconds).
SECTION_FILTER_LIMIT = 10_000


def section_keys(sections: Mapping[int, Collection[int]]) -> frozenset[int] | None:
    """``sections`` (file id -> section numbers) as keys ``file_id * 2^32 + sec``, or None
    (parse every section) when they are more than :data:`SECTION_FILTER_LIMIT`."""
    keys = frozenset((file_id << 32) + sec for file_id, secs in sections.items() for sec in secs)
    return keys if len(keys) <= SECTION_FILTER_LIMIT else None


def section_filter(sections: Mapping[int, Collection[int]]) -> Column | None:
    """The condition on a dump line's ``file_id, sec`` that keeps the lines of ``sections``
    (:func:`section_keys`; None: keep every line)."""
    keys = section_keys(sections)
    if keys is None:
        return None
    # (one SQL expression: PySpark's isin would cross to the JVM once per key; the
    # optimizer turns the list into a hash set)
    listed = ", ".join(str(k) for k in sorted(keys)) or "NULL"
    return F.expr(f"CAST(file_id AS BIGINT) * {1 << 32} + CAST(sec AS BIGINT) IN ({listed})")


@dataclass(frozen=True)
class DumpFiles:
    """What re-reading Kafka dump files needs: the files, their frame, and where each
    section's segment starts (from the scan)."""

    spark: SparkSession
    dump_files: Sequence[tuple[int, InputFile]]
    files: DataFrame  # file_id, rel, snapshot, broker, topic, partition
    sections: DataFrame  # file_id, sec, file, snapshot, replica, topic, partition, segment_base_offset
    limit: int | None = None
    #: where driver-side lookups too large for a plan are stored (the run's work dir), and
    #: whether they are in one partition (the parse plan's)
    spill: str | None = None
    narrow: bool = False
    #: ``file_id, sec`` of sections left out: their segment is a readable ``.log`` file
    #: (SPEC 3.3), whose batches are read from it
    shadowed: DataFrame | None = None

    def items(self, sections: Mapping[int, Collection[int]] | None = None) -> DataFrame:
        """The batch items of the dump files (all of them, or only the sections ``sections``
        names: file id -> section numbers): one row per v2 batch line, legacy batch line,
        legacy batch's record lines or old message group
        (:func:`auditor.ingest.dump_items.pending_item`). Store it before use: its rows are read
        several times (:meth:`batches_of`).

        A file is read whole either way (a section's context, e.g. whether the file holds
        legacy batches, is the whole file's), but only the named sections' lines are
        parsed: a per-broker dump holds every partition of its broker, and a drill-down
        wants a few of them."""
        chosen = [(i, f) for i, f in self.dump_files if sections is None or i in sections]
        items = batch_items(self.spark, chosen, self.files, self.limit,
                            keep=None if sections is None else section_filter(sections), spill=self.spill,
                            narrow=self.narrow)
        return items if self.shadowed is None or sections is not None else items.join(
            self.shadowed, ["file_id", "sec"], "left_anti")

    def batches_of(self, items: DataFrame) -> DataFrame:
        """The batches of stored :meth:`items` rows, before repeated batches are merged:
        :data:`BATCHES_DDL` plus ``file_id``."""
        # (each batch keeps its file's id and its section's segment base from the joins that
        # placed it: joining them again would read every item once more per join)
        placed = pending_batches(placed_items(items, self.sections), self.sections,
                                 extra=("file_id", "segment_base_offset"))
        return placed.select(
            "snapshot", "topic", "partition", col("broker").alias("replica"), "file", "line_number",
            "segment_base_offset", "base_offset", "last_offset", "epoch", "crc", "record_count", "is_valid",
            "is_control", "is_transactional", "magic", "origin", "file_id")


@dataclass
class BatchSource:
    """Where a snapshot's batches can be read from: dump files read again (Kafka), or stored
    batches (tabular, etcd, and a small Kafka input whose scan kept every batch: ``stored``)."""

    dumps: DumpFiles | None = None
    stored: DataFrame | None = None
    work_dir: str | None = None
    #: how the dump files are parsed again (the load's parse plan)
    plan: Plan = Plan()
    #: the batch rows of segment files (SPEC 3.3) with their ``file_id``, from their stored
    #: decoded rows, beside the dump files read again (a small input keeps them in ``stored``)
    segments: DataFrame | None = None

    def all_batches(self) -> DataFrame:
        """Every batch, repeated batches merged (SPEC 7's ``Snapshot.batches``); for dumps,
        every dump file read again once, on first use."""
        if self.stored is None:
            assert self.dumps is not None and self.work_dir is not None
            items = materialise({"items": self.dumps.items()}, self.work_dir, "all-batches-items", self.plan)["items"]
            merged = merged_batches(self.dumps, items)
            if self.segments is not None:
                merged = merged.unionByName(self.segments.drop("file_id"), allowMissingColumns=True)
            self.stored = materialise({"batches": merged}, self.work_dir, "all-batches", self.plan)["batches"]
        return self.stored


def merged_batches(dumps: DumpFiles, items: DataFrame) -> DataFrame:
    """The batches (:data:`BATCHES_DDL`) of batch items (:meth:`DumpFiles.items` rows, or a
    ``per_batch`` scan's: :func:`auditor.summarise.scan.scan_batches`), repeated batches of
    a replica merged."""
    batches = dumps.batches_of(items).drop("file_id").withColumnRenamed("replica", "broker")
    return dedupe_batches(batches).withColumnRenamed("broker", "replica")
