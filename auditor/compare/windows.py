"""Leader against follower, window by window, on their summaries; and which batches the
exact answers need.

Two replicas agree on a window when they hold the same number of batches with the same
digests (the same multiset of ``(base, last, epoch, crc)``) and every batch prints a CRC:
then every batch the follower holds there has an identical copy on the leader, and the
other way round. Ground truth (SPEC 4.4), ``SAME_EPOCH_CONFLICT``, ``ISR_INCOMPLETE`` and
the ``raft`` rule only look inside the windows where that fails (:func:`differing_windows`).
Truncation looks up ``floor_F`` of a few offsets; only followers whose protocol truncates
do (:func:`floor_windows`), in the windows that hold those offsets.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from auditor.semantics.eoe import ENTRY, eoe, latest_epoch
from auditor.semantics.truncation import kip101_offset, least_strict

KEY = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]
SIDE = ("n", "min_base", "max_last", "crcless", "d1", "d2")


def scope_floor() -> Column:
    """The first offset a comparison looks at: both local log starts (``lso``) and, on a
    compacted topic, the higher HWM (``hmax``; SPEC 4.5)."""
    compacted = F.coalesce(F.col("compacted"), F.lit(False)) & F.col("hmax").isNotNull()
    return F.greatest(F.coalesce(F.col("lso"), F.lit(0)), F.when(compacted, F.col("hmax")).otherwise(F.lit(0)))


def differing_windows(pairs: DataFrame, windows: DataFrame) -> DataFrame:
    """The windows in scope where a follower and its leader do not agree.

    Args:
        pairs: one row per follower (``replica``) with ``leader, lso, hmax, compacted``.
        windows: :func:`auditor.summarise.replicas.window_summaries`.

    Returns:
        ``PARTITION, replica, leader, win`` (``replica`` = the follower).
    """
    p = pairs.select(*PARTITION, "replica", "leader", "lso", "hmax", "compacted")
    f = windows.select(*PARTITION, "replica", "win", *[F.col(c).alias(f"f_{c}") for c in SIDE])
    lw = windows.select(*PARTITION, F.col("replica").alias("leader"), "win", *[F.col(c).alias(f"l_{c}") for c in SIDE])
    f_side = p.join(f, [*PARTITION, "replica"])
    l_side = p.join(lw, [*PARTITION, "leader"])
    keys = [*PARTITION, "replica", "leader", "lso", "hmax", "compacted", "win"]
    both = f_side.join(l_side, keys, "full")
    reaches = F.greatest(F.col("f_max_last"), F.col("l_max_last")) >= scope_floor()
    same = ((F.col("f_n") == F.col("l_n")) & (F.col("f_d1") == F.col("l_d1")) & (F.col("f_d2") == F.col("l_d2"))
            & (F.col("f_crcless") == 0) & (F.col("l_crcless") == 0))
    return both.filter(reaches & ~F.coalesce(same, F.lit(False))).select(*PARTITION, "replica", "leader", "win")


def truncation_probes(pairs: DataFrame, protocol: str) -> DataFrame:
    """The offsets whose ``floor_F`` a follower's truncation may look up, for the followers
    whose protocol truncates at all (the others never look one up).

    ``epoch``: a follower whose first OffsetsForLeaderEpoch round reports divergence (later
    rounds and the 2.8 fallback only use the epoch caches' start offsets, both LEOs, the
    HWM and their floors). ``kip-101`` and ``hwm``: the one offset, when it is below the
    follower's LEO. ``raft``: none (its offset is a base offset the follower holds, found in
    a differing window).

    Returns:
        ``KEY`` (``replica`` = the follower) and ``probe``.
    """
    empty = F.array().cast(f"array<{ENTRY}>")
    leo, hwm = F.col("f_leo"), F.col("f_hwm")
    if protocol == "epoch":
        e = latest_epoch(F.col("f_entries"))
        el, ol = eoe(F.col("l_entries"), F.col("l_leo"), e)
        diverges = leo.isNotNull() & ~((el >= e) & (ol >= leo))
        starts = lambda c: F.transform(F.coalesce(F.col(c), empty), lambda x: x["start_offset"])  # noqa: E731
        probes = F.when(diverges, F.concat(starts("f_entries"), starts("l_entries"),
                                           F.array(F.col("l_leo"), leo, hwm)))
    elif protocol in ("kip-101", "hwm"):
        if protocol == "kip-101":
            answer = kip101_offset(F.col("l_entries"), F.col("l_leo"), F.col("f_entries"))
            o = F.when(answer.isNull(), least_strict(hwm, leo)).when(answer < leo, answer)
        else:
            o = least_strict(hwm, leo)
        probes = F.when(o < leo, F.array(o))
    else:
        return pairs.select(*KEY, F.lit(None).cast("bigint").alias("probe")).filter(F.lit(False))
    return pairs.select(*KEY, F.explode(F.array_distinct(probes)).alias("probe")).filter(F.col("probe").isNotNull())


def probe_windows(probes: DataFrame, windows: DataFrame) -> DataFrame:
    """The windows of each replica holding a batch that may contain a probed offset
    (``min_base <= probe <= max_last``): ``KEY, win``."""
    w = windows.select(*KEY, "win", "min_base", "max_last")
    return probes.join(w, KEY).filter((F.col("min_base") <= F.col("probe")) & (F.col("probe") <= F.col("max_last"))) \
        .select(*KEY, "win").distinct()


def removed_records(truncated: DataFrame, windows: DataFrame, drilled: DataFrame, drilled_windows: DataFrame) -> DataFrame:
    """Records in the follower batches a truncation removes (those with last offset >= t).

    Batches of the windows read batch by batch count from those batches; every other
    window of the follower counts whole when it starts at or above t. (A window starting
    below t and reaching t holds a batch containing t or overlapping one: it was read.)

    Args:
        truncated: ``KEY, truncation_offset`` (not null).
        windows: the window summaries.
        drilled: the batches read (``KEY, win, last_offset, record_count``), repeated batches merged.
        drilled_windows: ``KEY, win`` of every window read.

    Returns:
        ``KEY, removed_records``.
    """
    t = truncated.select(*KEY, F.col("truncation_offset").alias("t"))
    read = drilled.join(t, KEY).filter(F.col("last_offset") >= F.col("t")).groupBy(*KEY).agg(
        F.sum("record_count").alias("_read"))
    unread = windows.join(drilled_windows, [*KEY, "win"], "left_anti").join(t, KEY).filter(
        F.col("min_base") >= F.col("t")).groupBy(*KEY).agg(F.sum("records").alias("_unread"))
    return t.join(read, KEY, "left").join(unread, KEY, "left").select(
        *KEY, (F.coalesce(F.col("_read"), F.lit(0)) + F.coalesce(F.col("_unread"), F.lit(0)))
        .cast("bigint").alias("removed_records"))
