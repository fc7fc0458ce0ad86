"""A Kafka snapshot's listed files and what every stage of its load sees
(:class:`Inputs`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from auditor.columns import col
from auditor.frames import local_frame
from auditor.ingest import discovery as d
from auditor.load.binary import Binary
from auditor.policy import Plan, Plans, SizePolicy

FILES_SCHEMA = StructType([
    StructField("file_id", IntegerType(), False), StructField("rel", StringType(), False),
    StructField("kind", StringType(), False), StructField("snapshot", TimestampType(), False),
    StructField("broker", IntegerType()), StructField("log_dir", StringType()),
    StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("size", LongType(), False),
])


class ListedFiles(NamedTuple):
    """A discovery's files as the parse reads them (:func:`listed_files`)."""

    #: ``(file_id, file)`` of every file, ids in the listing's order.
    indexed: list[tuple[int, d.InputFile]]
    #: Those files as a table (:data:`FILES_SCHEMA`).
    files: DataFrame
    #: ``(file_id, file)`` of the dump files.
    dump_files: list[tuple[int, d.InputFile]]
    #: ``file_id, rel, snapshot, broker, topic, partition`` of the dump files.
    dump_frame: DataFrame


def listed_files(spark: SparkSession, found: d.Discovery, plan: Plan = Plan(),
                 spill: str | None = None) -> ListedFiles:
    """``found``'s files numbered, as a table, and its dump files (what the scan reads;
    the benchmarks build the scan's inputs with it too)."""
    indexed = list(enumerate(found.files))
    files = local_frame(
        spark,
        [(i, f.rel, f.kind, f.snapshot, f.broker, f.log_dir, f.topic, f.partition, f.size) for i, f in indexed],
        FILES_SCHEMA, narrow=plan.narrow, spill=spill,
    )
    dump_frame = files.filter(col("kind") == d.DUMP).select("file_id", "rel", "snapshot", "broker", "topic",
                                                             "partition")
    return ListedFiles(indexed, files, [(i, f) for i, f in indexed if f.kind == d.DUMP], dump_frame)


@dataclass(frozen=True)
class Inputs:
    """One load's inputs, as every stage after the binary reads sees them."""

    spark: SparkSession
    found: d.Discovery
    listed: ListedFiles
    binary: Binary
    #: ``(file_id, file)`` of the metadata log's files (:func:`auditor.load.kraft.kraft_files`).
    kraft_files: list[tuple[int, d.InputFile]]
    work_dir: str
    policy: SizePolicy
    plans: Plans

    @cached_property
    def other_files(self) -> list[tuple[int, d.InputFile]]:
        """The small files: neither dumps, segments nor bare KRaft snapshot copies (a copy is
        binary: its name is all that is used, SPEC 4.7); listed once per load."""
        return [(i, f) for i, f in self.listed.indexed if f.kind not in (d.DUMP, d.KRAFT_SNAPSHOT_FILE, d.SEGMENT)]

    @property
    def has_kraft(self) -> bool:
        """Whether the input has metadata log files listed or collected."""
        return bool(self.kraft_files) or self.binary.collected_kraft

    @property
    def few(self) -> Callable[[dict[str, DataFrame]], dict[str, DataFrame]]:
        """:func:`few_partitions` of the policy's replica partitions."""
        return few_partitions(self.policy.replica_partitions)


def few_partitions(n: int) -> Callable[[dict[str, DataFrame]], dict[str, DataFrame]]:
    """Frames with rows per file, replica or section (not per line) are written from ``n``
    partitions (:attr:`auditor.policy.SizePolicy.replica_partitions`): each comes out of a
    shuffle of ``spark.sql.shuffle.partitions`` partitions, and a cut's write runs a task
    per partition of every frame (at 1M lines, 47 tasks of ~0.2 s for frames of a few
    thousand rows each)."""
    return lambda frames: {name: df.coalesce(n) for name, df in frames.items()}
