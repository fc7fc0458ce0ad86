"""The drill-down: the batches of some replicas (whole) and of some windows, read exactly.

Kafka dumps are read again, but only the files that hold the wanted batches (the summary
rows say which), with the very parser the scan used; the tabular and etcd inputs keep
their batches stored and are filtered. The result is stored under the run's work dir (one
Spark job), repeated batches merged (SPEC 3.1); nothing is read when nothing is wanted.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from auditor.ingest.discovery import InputFile
from auditor.ingest.dumps import dedupe_batches, item_spec, pending_batches
from auditor.materialise import materialise, read_frame_arrow, stored_frame, stored_rows
from auditor.spark import local_frame, parsing, spread_out
from auditor.summarise.digest import aggregate_specs, window_of

KEY = ["snapshot", "topic", "partition", "replica"]
#: The columns of drilled batches (``Snapshot.batches`` plus ``win``).
DRILLED_DDL = ("snapshot timestamp, topic string, partition int, replica int, file string, line_number bigint, "
               "segment_base_offset bigint, base_offset bigint, last_offset bigint, epoch int, crc bigint, "
               "record_count bigint, is_valid boolean, is_control boolean, is_transactional boolean, magic int, "
               "origin string, win bigint")
BATCHES_DDL = DRILLED_DDL.rsplit(", win bigint", 1)[0]


@dataclass(frozen=True)
class DumpFiles:
    """What re-reading Kafka dump files needs: the files, their frame, and where each
    section's segment starts (from the scan)."""

    spark: SparkSession
    dump_files: Sequence[tuple[int, InputFile]]
    files: DataFrame  # file_id, rel, snapshot, broker, topic, partition
    sections: DataFrame  # file_id, sec, file, snapshot, replica, topic, partition, segment_base_offset
    limit: int | None = None

    def items(self, sections: Mapping[int, Collection[int]] | None = None) -> DataFrame:
        """The batch items of the dump files (all of them, or only the sections ``sections``
        names: file id -> section numbers): one row per v2 batch line, legacy batch line,
        legacy batch's record lines or old message group
        (:func:`auditor.ingest.dumps.pending_item`). Store it before use: its rows are read
        several times (:meth:`batches_of`).

        A file is read whole either way (a section's context, e.g. whether the file holds
        legacy batches, is the whole file's), but only the named sections' lines are
        parsed: a per-broker dump holds every partition of its broker, and a drill-down
        wants a few of them."""
        from auditor.summarise.scan import keyed_lines

        chosen = [(i, f) for i, f in self.dump_files if sections is None or i in sections]
        if not chosen:
            chosen = self.dump_files[:0]
        lines = keyed_lines(self.spark, chosen, self.files, self.limit, with_v2=True,
                            keep=None if sections is None else section_filter(sections))
        # Grouped before filtering: a filter on the item kind would be pushed below the
        # projection that computes it and copy the whole line grammar into its condition.
        return aggregate_specs(lines, ("file_id", "sec", "item_kind", "item"), item_spec())

    def batches_of(self, items: DataFrame) -> DataFrame:
        """The batches of stored :meth:`items` rows, before repeated batches are merged:
        :data:`BATCHES_DDL` plus ``file_id``."""
        from auditor.summarise.scan import placed_items

        # (each batch keeps its file's id and its section's segment base from the joins that
        # placed it: joining them again would read every item once more per join)
        placed = pending_batches(placed_items(items, self.sections), self.sections,
                                 extra=("file_id", "segment_base_offset"))
        return placed.select(
            "snapshot", "topic", "partition", F.col("broker").alias("replica"), "file", "line_number",
            "segment_base_offset", "base_offset", "last_offset", "epoch", "crc", "record_count", "is_valid",
            "is_control", "is_transactional", "magic", "origin", "file_id")


@dataclass
class BatchSource:
    """Where a snapshot's batches can be read from: dump files read again (Kafka), or stored
    batches (tabular, etcd, and a small Kafka input whose scan kept every batch: ``stored``)."""

    dumps: DumpFiles | None = None
    stored: DataFrame | None = None
    work_dir: str | None = None

    def all_batches(self) -> DataFrame:
        """Every batch, repeated batches merged (SPEC 7's ``Snapshot.batches``); for dumps,
        every dump file read again once, on first use."""
        if self.stored is None:
            assert self.dumps is not None and self.work_dir is not None
            items = materialise({"items": self.dumps.items()}, self.work_dir, "all-batches-items")["items"]
            self.stored = materialise({"batches": merged_batches(self.dumps, items)},
                                      self.work_dir, "all-batches")["batches"]
        return self.stored


def merged_batches(dumps: DumpFiles, items: DataFrame) -> DataFrame:
    """The batches (:data:`BATCHES_DDL`) of batch items (:meth:`DumpFiles.items` rows, or a
    ``per_batch`` scan's: :func:`auditor.summarise.scan.scan_batches`), repeated batches of
    a replica merged."""
    batches = dumps.batches_of(items).drop("file_id").withColumnRenamed("replica", "broker")
    return dedupe_batches(batches).withColumnRenamed("broker", "replica")


def _wanted(rows: DataFrame, whole: DataFrame, windows: DataFrame) -> DataFrame:
    """The ``rows`` (``KEY, win``, ...) of the replicas in ``whole`` or the windows in
    ``windows``: one join, a null window standing for a whole replica, so ``rows`` are
    read (and, for batches, built) once."""
    wanted = whole.select(*KEY, F.lit(None).cast("bigint").alias("win")).unionByName(windows.select(*KEY, "win"))
    wanted = wanted.distinct().select(*[F.col(c).alias(f"w_{c}") for c in [*KEY, "win"]])
    matches = [F.col(c) == F.col(f"w_{c}") for c in KEY] + [F.col("w_win").isNull() | (F.col("w_win") == F.col("win"))]
    return rows.join(wanted, reduce(lambda a, b: a & b, matches), "left_semi")


def drill_files(summaries: DataFrame, whole: DataFrame, windows: DataFrame) -> DataFrame:
    """``file_id, sec`` of the dump file sections that hold the batches :func:`drill` wants
    (arguments as there), each once. Every batch is in a summary row of its own file and
    section (a v2 batch in the scan's rows, an old-format one in those of
    :func:`auditor.summarise.scan.pending_summaries`), so these sections hold all of them.
    Computed in an earlier cut point's job and read back with :func:`stored_drill_files`,
    the list costs no job of its own."""
    hits = _wanted(summaries, whole, windows).select("file_id", "sec")
    return hits.filter(F.col("file_id").isNotNull()).distinct()


def stored_drill_files(work_dir: str, label: str, name: str) -> dict[int, frozenset[int]]:
    """A stored :func:`drill_files` frame as file id -> its wanted sections (read without
    Spark: at most one row per dump file section)."""
    table = read_frame_arrow(work_dir, label, name)
    if table is None:
        return {}
    found: dict[int, set[int]] = {}
    for file_id, sec in zip(table.column("file_id").to_pylist(), table.column("sec").to_pylist()):
        found.setdefault(file_id, set()).add(sec)
    return {file_id: frozenset(secs) for file_id, secs in found.items()}


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


def drill(source: BatchSource, summaries: DataFrame, whole: DataFrame, windows: DataFrame,
          work_dir: str, label: str, progress: Callable[[str], None] | None = None,
          sections: Mapping[int, Collection[int]] | None = None) -> DataFrame:
    """The batches of the replicas in ``whole`` and of the windows in ``windows``, stored.

    Args:
        source: where batches are read from.
        summaries: the summary rows (``KEY, file_id, win``): which files hold which windows.
        whole: ``KEY`` of replicas wanted whole.
        windows: ``KEY, win`` of windows wanted.
        work_dir, label: where the result is stored.
        sections: the dump files to read again and their sections to parse (a source that
            reads dumps): what :func:`drill_files` listed, stored by an earlier cut point's
            job (:func:`stored_drill_files`).

    Returns:
        The batches (:data:`DRILLED_DDL`), repeated batches of a replica merged.
    """
    spark = summaries.sparkSession
    if source.stored is not None:  # stored: tables, etcd, a small input's scan
        batches = source.stored.select("*", window_of(F.col("base_offset")).alias("win"))
    else:
        assert source.dumps is not None
        if not sections:
            return local_frame(spark, [], DRILLED_DDL)
        if progress is not None:
            progress(f"reading {len(sections)} of {len(source.dumps.dump_files)} dump files batch by batch")
        # one job reads the files (with the settings the scan had: it parses text); building
        # and merging their batches reads what it stored
        with parsing(spark):
            items = materialise({"items": source.dumps.items(sections)}, work_dir, f"{label}-items")["items"]
        # the batches are built from the stored items over the session's cores when they
        # are log-sized (a wide divergence), else in one partition: the items are read back
        # inside that block for it
        rows = stored_rows(work_dir, f"{label}-items", "items")
        with spread_out(spark, rows):
            items = stored_frame(spark, work_dir, f"{label}-items", "items", items.schema)
            batches = source.dumps.batches_of(items).drop("file_id").select(
                "*", window_of(F.col("base_offset")).alias("win"))
            return _merged(batches, whole, windows, work_dir, label)
    return _merged(batches, whole, windows, work_dir, label)


def _merged(batches: DataFrame, whole: DataFrame, windows: DataFrame, work_dir: str, label: str) -> DataFrame:
    merged = dedupe_batches(_wanted(batches, whole, windows).withColumnRenamed("replica", "broker")).withColumnRenamed("broker", "replica")
    return materialise({"drilled": merged}, work_dir, label)["drilled"]
