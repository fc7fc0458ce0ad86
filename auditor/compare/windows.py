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

from pyspark.sql import Column, DataFrame, Window

from auditor import columns as F
from auditor.columns import col, lit
from auditor.semantics.eoe import ENTRY, eoe, latest_epoch
from auditor.semantics.truncation import kip101_offset, least_strict
from auditor.summarise.digest import COMBINE, DIGEST_SUMS, digest, fold, window_start

KEY = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]


def scope_floor() -> Column:
    """The first offset a comparison looks at: the higher of both local log start offsets
    (``lso``, SPEC 2) and, on a compacted topic, the higher HWM (``hmax``; SPEC 4.5)."""
    compacted = F.coalesce(col("compacted"), lit(False)) & col("hmax").isNotNull()
    return F.greatest(F.coalesce(col("lso"), lit(0)), F.when(compacted, col("hmax")).otherwise(lit(0)))


#: What a window comparison concludes (``window_verdicts.verdict``).
DRILL, FOLLOWER_ABSENT, LEADER_ABSENT, PREFIX = "drill", "follower-absent", "leader-absent", "prefix"


def window_verdicts(pairs: DataFrame, windows: DataFrame, tails: DataFrame, replicas: DataFrame,
                    summaries: DataFrame, all_windows: bool = False) -> DataFrame:
    """Leader against follower, per window both or either hold, where they are not equal.

    A window the two hold equally says nothing more. Of the others, when both replicas are
    regular (:mod:`auditor.summarise.replicas`) and the window lies wholly in scope:

    - ``follower-absent``: only the leader holds batches there; its first one (``l_first``)
      is the first the follower lacks (for ``ISR_INCOMPLETE``);
    - ``leader-absent``: only the follower does; its first batch (``f_first``) agrees with
      nothing (divergence, the ``raft`` rule);
    - ``prefix``: the follower lags inside the window: take from the leader's window the
      batches that start after the follower's last one, all among the leader's last lines
      (``tails``), and what is left is the follower's window, count and both digests. Every
      batch the follower holds there agrees; the first leader batch it lacks is
      ``extra_first``.

    Any other difference (``drill``) is decided batch by batch.

    A window the scope's floor cuts (a tiered or retained replica's local log starts inside
    it, or a compacted topic's HWM lies in it) is compared on what lies in scope only, when
    the summary rows allow it (:func:`in_scope`): below the floor the two logs may differ
    without consequence (another local log start, another compaction), and a window equal
    in scope, or one the follower holds a prefix of, needs no batch.

    Args:
        pairs: one row per follower (``replica``) with ``leader, lso, hmax, compacted``.
        windows: :func:`auditor.summarise.replicas.window_summaries`.
        tails: :func:`auditor.summarise.replicas.tail_batches`.
        replicas: ``KEY, regular``.
        summaries: the summary rows (:mod:`auditor.summarise.scan`) the windows roll up.
        all_windows: also windows wholly below the scope (the ``raft`` rule reads every
            batch of the follower).

    Returns:
        ``PARTITION, replica, leader, win, verdict, f_first, l_first, extra_first``.
    """
    regular = replicas.select(*KEY, col("regular").alias("_regular"))
    p = (pairs.select(*PARTITION, "replica", "leader", "lso", "hmax", "compacted")
         .join(regular.withColumnRenamed("_regular", "f_regular"), KEY, "left")
         .join(regular.select(*PARTITION, col("replica").alias("leader"), col("_regular").alias("l_regular")),
               [*PARTITION, "leader"], "left")
         .withColumn("floor", scope_floor()))
    sums = ("n", "min_base", "max_base", "max_last", "crcless", "d1_lo", "d1_hi", "d2_lo", "d2_hi", "d1", "d2")
    f = windows.select(*PARTITION, "replica", "win", *[col(c).alias(f"f_{c}") for c in sums])
    lw = windows.select(*PARTITION, col("replica").alias("leader"), "win", *[col(c).alias(f"l_{c}") for c in sums])
    keys = [*PARTITION, "replica", "leader", "floor", "f_regular", "l_regular", "win"]
    both = p.join(f, [*PARTITION, "replica"]).select(*keys, *[f"f_{c}" for c in sums]).join(
        p.join(lw, [*PARTITION, "leader"]).select(*keys, *[f"l_{c}" for c in sums]), keys, "full")
    same = ((col("f_n") == col("l_n")) & (col("f_d1") == col("l_d1")) & (col("f_d2") == col("l_d2"))
            & (col("f_crcless") == 0) & (col("l_crcless") == 0))
    if all_windows:
        both = both.select("*", _straddles().alias("straddle"))
    reaches = F.greatest(col("f_max_last"), col("l_max_last")) >= col("floor")
    differ = both.filter(~F.coalesce(same, lit(False)) & (lit(all_windows) | reaches))
    if not all_windows:
        differ = in_scope(differ, summaries, sums).filter(~F.coalesce(same, lit(False)))
    # the leader's tail batches after the follower's last batch, where both hold the window
    t = tails.select(*PARTITION, col("replica").alias("leader"), "win", col("base").alias("x_base"),
                     col("crcless").alias("x_crcless"), *[col(c).alias(f"x_{c}") for c in DIGEST_SUMS])
    extra = differ.filter(col("f_n").isNotNull() & col("l_n").isNotNull()).select(
        *PARTITION, "replica", "leader", "win", "f_max_base").join(t, [*PARTITION, "leader", "win"]).filter(
        col("x_base") > col("f_max_base")).groupBy(*PARTITION, "replica", "leader", "win").agg(
        F.count(lit(1)).alias("x_n"), F.min("x_base").alias("x_first"), F.sum("x_crcless").alias("x_crcless"),
        *[F.sum(f"x_{c}").alias(f"x_{c}") for c in DIGEST_SUMS])
    judged = differ.join(extra, [*PARTITION, "replica", "leader", "win"], "left")
    left_d1 = fold(col("l_d1_hi") - col("x_d1_hi"), col("l_d1_lo") - col("x_d1_lo"))
    left_d2 = fold(col("l_d2_hi") - col("x_d2_hi"), col("l_d2_lo") - col("x_d2_lo"))
    prefix = ((col("l_n") - col("x_n") == col("f_n")) & (left_d1 == col("f_d1")) & (left_d2 == col("f_d2"))
              & (col("f_crcless") == 0) & (col("l_crcless") == 0))
    known = F.coalesce(col("f_regular"), lit(False)) & F.coalesce(col("l_regular"), lit(False))
    if all_windows:  # (the raft rule: a batch across a window edge is read)
        known = known & ~col("straddle")
    verdict = (
        F.when(~known, lit(DRILL))
        .when(col("f_n").isNull(), F.when(col("l_min_base") >= col("floor"), lit(FOLLOWER_ABSENT)))
        .when(col("l_n").isNull(), F.when(col("f_min_base") >= col("floor"), lit(LEADER_ABSENT)))
        .when(F.coalesce(prefix, lit(False)) & (col("f_min_base") >= col("floor")), lit(PREFIX))
    )
    return judged.select(
        *PARTITION, "replica", "leader", "win", F.coalesce(verdict, lit(DRILL)).alias("verdict"),
        col("f_min_base").alias("f_first"), col("l_min_base").alias("l_first"),
        col("x_first").alias("extra_first"))


def _straddles() -> Column:
    """Whether a batch of either replica crosses the window's edges: one of an earlier
    window reaches into it, or its last batch reaches into a later one. The ``raft`` rule
    looks offset by offset (SPEC 4.3: an offset the follower holds is covered by any leader
    batch of its epoch holding it), so such a window is read batch by batch, with the
    window the batch starts in: a verdict on summaries (the leader absent, the follower
    absent or holding a prefix) speaks of batches by their base offsets, and a crossing
    batch holds or covers offsets of another window."""
    pair = Window.partitionBy(*PARTITION, "replica", "leader").orderBy("win")
    reach = F.greatest(col("f_max_last"), col("l_max_last"))
    before = F.max(reach).over(pair.rowsBetween(Window.unboundedPreceding, -1))
    return (F.coalesce(before >= window_start(col("win")), lit(False))
            | F.coalesce(reach >= window_start(col("win") + 1), lit(False)))


#: The sums of a window summary that :func:`in_scope` restricts, and how each combines.
_RESTRICTED = {c: COMBINE[c] for c in ("n", "min_base", "max_base", "max_last", "crcless", *DIGEST_SUMS)}


def in_scope(differ: DataFrame, summaries: DataFrame, sums: tuple[str, ...]) -> DataFrame:
    """``differ``'s windows that the floor cuts (either side holds a batch starting below
    it), each side's ``f_``/``l_`` sums replaced by those of its batches at or above the
    floor, where that is exact: where no summary row of either side in the window holds a
    batch starting below the floor together with one reaching it. A summary row covers one
    file section, window and epoch, so a floor at a segment's base offset (a local log
    start is one) never splits one. A side with no batch in scope is absent (null sums).
    Other windows, and the windows a row splits, come back as they were.

    Args:
        differ: the differing windows, ``PARTITION, replica, leader, win, floor`` and each
            side's ``sums`` (``f_`` follower, ``l_`` leader).
        summaries: the summary rows, ``KEY, win`` and :data:`_RESTRICTED`'s columns.
        sums: the summed columns of ``differ`` (``d1, d2`` are folded from the digest sums).
    """
    keys = [*PARTITION, "replica", "leader", "win"]
    cut = differ.filter(F.least(col("f_min_base"), col("l_min_base")) < col("floor")).select(*keys, "floor")
    rows = summaries.select(*PARTITION, col("replica").alias("_holder"), "win", *_RESTRICTED)
    sides = cut.join(rows, [*PARTITION, "win"]).filter(
        (col("_holder") == col("replica")) | (col("_holder") == col("leader")))
    above = col("min_base") >= col("floor")

    def side(prefix: str, holder: str) -> list[Column]:
        mine = (col("_holder") == col(holder)) & above
        return [fn(F.when(mine, col(c))).alias(f"_r{prefix}_{c}") for c, fn in _RESTRICTED.items()]

    restricted = sides.groupBy(*keys).agg(
        F.max(~above & (col("max_last") >= col("floor"))).alias("_split"),
        *side("f", "replica"), *side("l", "leader"))
    joined = differ.join(restricted, keys, "left")
    exact = F.coalesce(~col("_split"), lit(False))

    def pick(prefix: str, c: str) -> Column:
        if c in ("d1", "d2"):
            value = digest(f"_r{prefix}_d")[("d1", "d2").index(c)]
        else:
            value = col(f"_r{prefix}_{c}")
        return F.when(exact, value).otherwise(col(f"{prefix}_{c}")).alias(f"{prefix}_{c}")

    replaced = [f"{p}_{c}" for p in ("f", "l") for c in sums]
    return joined.select(*[c for c in differ.columns if c not in replaced],
                         *[pick(p, c) for p in ("f", "l") for c in sums])


def differing_windows(verdicts: DataFrame) -> DataFrame:
    """The windows decided batch by batch: ``PARTITION, replica, leader, win``."""
    return verdicts.filter(col("verdict") == DRILL).select(*PARTITION, "replica", "leader", "win")


def summary_answers(verdicts: DataFrame) -> DataFrame:
    """Per follower, what the windows decided on their summaries say:
    ``first_other`` (the first offset it holds that its leader does not: ``leader-absent``
    windows) and ``first_lacking`` (the first leader batch it lacks: ``follower-absent`` and
    ``prefix`` windows). ``KEY, leader, first_other, first_lacking``."""
    return verdicts.groupBy(*PARTITION, "replica", "leader").agg(
        F.min(F.when(col("verdict") == LEADER_ABSENT, col("f_first"))).alias("first_other"),
        F.min(F.when(col("verdict") == FOLLOWER_ABSENT, col("l_first"))
              .when(col("verdict") == PREFIX, col("extra_first"))).alias("first_lacking"))


def truncation_probes(pairs: DataFrame, protocol: str) -> DataFrame:
    """The offsets whose ``floor_F`` a follower's truncation may look up, for the followers
    whose protocol truncates at all (the others never look one up).

    ``epoch``: a follower whose first OffsetsForLeaderEpoch round reports divergence (later
    rounds and the 2.8 fallback only use the epoch caches' start offsets, both LEOs, the
    HWM and their floors). ``kip-101`` and ``hwm``: the one offset, when it is below the
    follower's LEO. ``raft``: none (its offset lies in a batch the follower holds in a
    window read batch by batch).

    Returns:
        ``KEY`` (``replica`` = the follower) and ``probe``.
    """
    empty = F.array().cast(f"array<{ENTRY}>")
    leo, hwm = col("f_leo"), col("f_hwm")
    if protocol == "epoch":
        e = latest_epoch(col("f_entries"))
        el, ol = eoe(col("l_entries"), col("l_leo"), e)
        diverges = leo.isNotNull() & ~((el >= e) & (ol >= leo))
        starts = lambda c: F.transform(F.coalesce(col(c), empty), lambda x: x["start_offset"])  # noqa: E731
        probes = F.when(diverges, F.concat(starts("f_entries"), starts("l_entries"),
                                           F.array(col("l_leo"), leo, hwm)))
    elif protocol in ("kip-101", "hwm"):
        if protocol == "kip-101":
            answer = kip101_offset(col("l_entries"), col("l_leo"), col("f_entries"))
            o = F.when(answer.isNull(), least_strict(hwm, leo)).when(answer < leo, answer)
        else:
            o = least_strict(hwm, leo)
        probes = F.when(o < leo, F.array(o))
    else:
        return pairs.select(*KEY, lit(None).cast("bigint").alias("probe")).filter(lit(False))
    return pairs.select(*KEY, F.explode(F.array_distinct(probes)).alias("probe")).filter(col("probe").isNotNull())


def probe_windows(probes: DataFrame, windows: DataFrame) -> DataFrame:
    """The windows of each replica holding a batch that may contain a probed offset
    (``min_base <= probe <= max_last``): ``KEY, win``."""
    w = windows.select(*KEY, "win", "min_base", "max_last")
    return probes.join(w, KEY).filter((col("min_base") <= col("probe")) & (col("probe") <= col("max_last"))) \
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
    t = truncated.select(*KEY, col("truncation_offset").alias("t"))
    read = drilled.join(t, KEY).filter(col("last_offset") >= col("t")).groupBy(*KEY).agg(
        F.sum("record_count").alias("_read"))
    unread = windows.join(drilled_windows, [*KEY, "win"], "left_anti").join(t, KEY).filter(
        col("min_base") >= col("t")).groupBy(*KEY).agg(F.sum("records").alias("_unread"))
    return t.join(read, KEY, "left").join(unread, KEY, "left").select(
        *KEY, (F.coalesce(col("_read"), lit(0)) + F.coalesce(col("_unread"), lit(0)))
        .cast("bigint").alias("removed_records"))
