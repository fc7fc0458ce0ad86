"""From summary rows to each replica's facts (SPEC 2, 4.1, 6.1 ``epoch_lineage``).

Summary rows (one per file, section, window and epoch: :mod:`auditor.summarise.scan`) are
rolled up per replica and window (what replicas are compared on), per replica and epoch,
and per replica. A replica is **regular** when its batches tile ``[first base, last
offset]`` with no gap, overlap or repeated batch (the chain sums of the whole log and of
every epoch telescope), its epochs (those >= 0) start in increasing order, and no batch is
printed ``isvalid: false``. For a regular replica every per-replica fact follows from the
per-epoch rows: each epoch is one contiguous run (its ``epoch_lineage`` row), Kafka's
``assign`` over its batches keeps one entry per epoch at the epoch's first base (the
rebuilt cache), and there is no gap, overlap, regression or corrupt batch to report. The
other replicas, and KRaft's metadata log, are read batch by batch (:mod:`auditor.compare.drill`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window

from auditor import columns as F
from auditor.columns import col, lit
from auditor.ingest.kraft import is_kraft
from auditor.summarise.digest import DIGEST_SUMS, digest, is_chain, rollup

KEY = ["snapshot", "topic", "partition", "replica"]


def window_summaries(summaries: DataFrame) -> DataFrame:
    """Per replica and window: the rolled-up summary, its digest sums and its two digests
    ``d1, d2``."""
    rolled = summaries.groupBy(*KEY, "win").agg(*rollup([*KEY, "win"]))
    d1, d2 = digest()
    return rolled.select(*KEY, "win", "n", "records", "min_base", "max_base", "max_last", "crcless", "invalid",
                         *DIGEST_SUMS, d1.alias("d1"), d2.alias("d2"))


def tail_batches(summaries: DataFrame) -> DataFrame:
    """The batches summarised one by one (the last lines of each dump section):
    ``KEY, win, base`` and their digest terms (:data:`DIGEST_SUMS`)."""
    return summaries.filter("tail").select(*KEY, "win", col("min_base").alias("base"), "crcless", *DIGEST_SUMS)


def epoch_summaries(summaries: DataFrame) -> DataFrame:
    """Per replica and epoch: ``n, records, min_base, max_base, max_last`` and whether the
    epoch's batches form one contiguous run (``is_run``)."""
    rolled = summaries.groupBy(*KEY, "epoch").agg(*rollup([*KEY, "epoch"]))
    return rolled.select(*KEY, "epoch", "n", "records", "min_base", "max_base", "max_last",
                         is_chain().alias("is_run"))


def replica_summaries(summaries: DataFrame, epochs: DataFrame) -> DataFrame:
    """Per replica with batches: ``n, records, min_base, max_last``, ``epochless`` (no batch
    has an epoch) and ``regular``. KRaft's metadata log is never regular: it is read batch by
    batch whatever its summaries say (its checks and ``kraft`` truncation need its batches),
    and a replica's facts come from one of the two paths, never both."""
    rolled = summaries.groupBy(*KEY).agg(*rollup(KEY))
    ordered = Window.partitionBy(*KEY).orderBy("epoch")
    per_epoch = epochs.select(
        *KEY, "epoch", "is_run",
        # epochs >= 0 must start in the order of their numbers (no regression)
        F.when(col("epoch") >= 0, F.lag(F.when(col("epoch") >= 0, col("min_base"))).over(ordered)
               < col("min_base")).alias("_after"),
        F.when(col("epoch") >= 0, F.lag(F.when(col("epoch") >= 0, col("epoch"))).over(ordered)).alias("_prev"),
    ).groupBy(*KEY).agg(
        F.min(col("is_run").cast("int")).alias("_runs"),
        F.min(F.when(col("_prev").isNotNull(), col("_after").cast("int"))).alias("_ordered"),
        F.max("epoch").alias("_max_epoch"),
    )
    return rolled.join(per_epoch, KEY, "left").select(
        *KEY, "n", "records", "min_base", "max_last", "invalid", "crcless",
        (col("_max_epoch") < 0).alias("epochless"),
        (is_chain() & (col("_runs") == 1) & F.coalesce(col("_ordered") == 1, lit(True))
         & (col("invalid") == 0) & ~is_kraft()).alias("regular"),
    )


def local_log_start(log_start: Column, lowest_dumped: Column) -> Column:
    """SPEC 2's local log start offset: max(log start offset, the lowest segment base offset
    dumped), the first offset the replica holds on its own disk. Below it a tiered replica's
    offsets live in remote segments no dump shows (KIP-405): never "not held"."""
    return F.greatest(log_start, lowest_dumped)  # (greatest skips nulls)


def offsets(replicas: DataFrame, segments: DataFrame, log_start: DataFrame) -> DataFrame:
    """LEO, log start offset, local log start offset and counts per replica with batches or
    segments (SPEC 2).

    ``batch_count`` and ``record_count`` count repeated batches of an irregular replica
    more than once: the drill-down replaces them (:func:`with_drilled_counts`).
    """
    per_segment = segments.groupBy(*KEY).agg(
        F.max("segment_base_offset").alias("_max_seg"), F.min("segment_base_offset").alias("_min_seg"))
    return (
        replicas.select(*KEY, "n", "records", "min_base", "max_last")
        .join(per_segment, KEY, "full")
        .join(log_start, KEY, "left")
        .select(
            *KEY,
            F.greatest(col("max_last") + 1, col("_max_seg")).alias("log_end_offset"),
            F.coalesce(col("log_start_offset"), col("_min_seg"), col("min_base")).alias("log_start_offset"),
            local_log_start(col("log_start_offset"), F.coalesce(col("_min_seg"), col("min_base")))
            .alias("local_log_start_offset"),
            F.coalesce(col("n"), lit(0)).cast("bigint").alias("batch_count"),
            F.coalesce(col("records"), lit(0)).cast("bigint").alias("record_count"),
        )
    )


def regular_lineage(epochs: DataFrame, replicas: DataFrame) -> DataFrame:
    """``epoch_lineage`` rows (``source = log``) of the regular replicas: one run per epoch."""
    regular = replicas.filter("regular").select(*KEY)
    return epochs.join(regular, KEY).select(
        *KEY, "epoch", col("min_base").alias("start_offset"), (col("max_last") + 1).alias("end_offset"),
        col("n").alias("batch_count"))


def regular_rebuilt_cache(epochs: DataFrame, replicas: DataFrame) -> DataFrame:
    """The cache Kafka rebuilds from the log of each regular replica: each epoch (>= 0) at
    its first base offset."""
    regular = replicas.filter("regular").select(*KEY)
    return epochs.filter(col("epoch") >= 0).join(regular, KEY).select(
        *KEY, "epoch", col("min_base").alias("start_offset"))


def segment_ends(summaries: DataFrame, sections: DataFrame | None) -> DataFrame:
    """Per replica and dumped segment: the offset after its last batch (``after_last``), for
    the trailing-bytes case of ``CORRUPT_BATCH``. Dump sections only (``sections``:
    ``file_id, sec, segment_base_offset``)."""
    if sections is None:
        return summaries.select(*KEY, lit(None).cast("bigint").alias("segment_base_offset"),
                                lit(None).cast("bigint").alias("after_last")).filter(lit(False))
    return summaries.join(sections.select("file_id", "sec", "segment_base_offset"), ["file_id", "sec"]).groupBy(
        *KEY, "segment_base_offset").agg((F.max("max_last") + 1).alias("after_last"))
