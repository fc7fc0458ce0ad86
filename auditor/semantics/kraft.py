"""KRaft's metadata log (SPEC 4.7): committed bound, leader, and the ``kraft`` truncation.

No file holds the metadata log's HWM. The committed bound C of a partition is the highest
end offset of any node's snapshots and the status file's ``HighWatermark:``; in the checks
HWM(L) = C and HWM(F) = the highest end offset of F's own snapshots. The leader comes from
``quorum-state`` (then the status file), else SPEC 4.6.

``kraft`` truncation is Kafka's ``ReplicatedLog.validateOffsetAndEpoch`` on the leader and
``truncateToEndOffset`` on the follower (KRAFT.md rule 5), round by round like the ``epoch``
protocol (:mod:`auditor.semantics.truncation`): one ``aggregate`` over at most 64 rounds, with
``floor_F`` looked up in a per-follower map; a FETCH_SNAPSHOT answer ends the exchange.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame

from auditor import columns as F
from auditor.columns import col, lit
from auditor.semantics.eoe import ENTRY, eoe, latest_epoch
from auditor.semantics.truncation import MAX_ROUNDS, RESULT_COLUMNS, ROUND, candidate_floors, let

KEY = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]
SNAPSHOT_ID = "struct<end_offset:bigint,epoch:int>"


def own_snapshot_bound(snapshots: DataFrame) -> DataFrame:
    """``KEY, own_hwm, own_snapshots``: the highest end offset of each node's own snapshots
    (valid or not), and their ids, ``array<struct<end_offset, epoch>>`` sorted (a total order:
    one element per id)."""
    return snapshots.groupBy(*KEY).agg(
        F.max("end_offset").alias("own_hwm"),
        F.array_sort(F.collect_set(F.struct("end_offset", "epoch"))).alias("own_snapshots"))


def committed_bound(partitions: DataFrame, snapshots: DataFrame, status: DataFrame) -> DataFrame:
    """``PARTITION, committed``: C of each metadata log partition (null when there is none).

    Args:
        partitions: ``PARTITION`` of the metadata log partitions.
        snapshots: :attr:`auditor.ingest.kraft.KRaft.snapshots`.
        status: :attr:`auditor.ingest.kraft.KRaft.status` (one per snapshot at most).
    """
    snap = snapshots.groupBy(*PARTITION).agg(F.max("end_offset").alias("_s"))
    hw = status.groupBy("snapshot").agg(F.max("high_watermark").alias("_h"))
    return partitions.join(snap, PARTITION, "left").join(hw, "snapshot", "left").select(
        *PARTITION, F.greatest("_s", "_h").alias("committed"))


def named_leaders(partitions: DataFrame, quorum: DataFrame, status: DataFrame) -> DataFrame:
    """``PARTITION, named_leader``: the leader ``quorum-state`` names (SPEC 4.7): of the files
    naming a ``leaderId`` >= 0, those with the highest ``leaderEpoch``, when they all name the
    same leader; else the status file's ``LeaderId:``. Partitions without either: no row."""
    q = quorum.filter(col("leader_id") >= 0)
    top = q.groupBy(*PARTITION).agg(F.max("leader_epoch").alias("leader_epoch"))
    agreed = q.join(top, [*PARTITION, "leader_epoch"]).groupBy(*PARTITION).agg(
        F.min("leader_id").alias("_lo"), F.max("leader_id").alias("_hi")).filter(col("_lo") == col("_hi"))
    st = status.filter(col("leader_id") >= 0).groupBy("snapshot").agg(F.min("leader_id").alias("_st"))
    return partitions.join(agreed, PARTITION, "left").join(st, "snapshot", "left").select(
        *PARTITION, F.coalesce("_lo", "_st").alias("named_leader")).filter(col("named_leader").isNotNull())


def kraft_inputs(pairs: DataFrame, snapshots: DataFrame, batches: DataFrame) -> DataFrame:
    """What ``kraft`` truncation needs beyond :func:`auditor.checks.pairs.build_pairs`, per
    follower: the leader's earliest and latest snapshot ids (``l_first``, ``l_latest``), the
    follower's earliest snapshot id and latest snapshot's epoch (``f_first``,
    ``f_snap_epoch``), and the follower's lowest batch base offset (``f_min_base``)."""
    ids = snapshots.groupBy(*KEY).agg(
        F.min(F.struct("end_offset", "epoch")).alias("first"), F.max(F.struct("end_offset", "epoch")).alias("latest"))
    lead = ids.select(*PARTITION, col("replica").alias("leader"), col("first").alias("l_first"),
                      col("latest").alias("l_latest"))
    mine = ids.select(*KEY, col("first").alias("f_first"), col("latest.epoch").alias("f_snap_epoch"))
    lowest = batches.groupBy(*KEY).agg(F.min("base_offset").alias("f_min_base"))
    return pairs.select(*KEY, "leader").join(lead, [*PARTITION, "leader"], "left").join(mine, KEY, "left").join(
        lowest, KEY, "left").drop("leader")


def _eoe(entries: Column, leo: Column, requested: Column) -> Column:
    """:func:`eoe` as one struct (``epoch``, ``offset``), to bind once with :func:`let`."""
    epoch, offset = eoe(entries, leo, requested)
    return F.struct(epoch.alias("epoch"), offset.alias("offset"))


def _round(acc: Column, max_rounds: int) -> Column:
    """One fetch of SPEC 4.7's ``kraft`` exchange on the state ``acc`` (a no-op once done)."""

    def asked(a: Column) -> Column:  # the follower's fetch and the leader's validation
        leo, l_first = a["leo"], a["l_first"]
        holds = a["f_min_base"].isNotNull() & (a["f_min_base"] < leo)

        def validated(e: Column, v: Column) -> Column:
            el0, ol0 = v["epoch"], v["offset"]
            snapshot = l_first.isNotNull() & (
                (leo < a["l_log_start"]) | ((leo == a["l_log_start"]) & (e != l_first["epoch"]))
                | (e < l_first["epoch"]) | (leo == 0))
            to_snapshot = l_first.isNotNull() & (el0 == e) & (ol0 == a["l_log_start"])
            undefined = (el0 == -1) & (ol0 == -1)
            el = F.when(to_snapshot, l_first["epoch"]).when(undefined, e).otherwise(el0)
            ol = F.when(to_snapshot, l_first["end_offset"]).when(undefined, a["l_leo"]).otherwise(ol0)
            return F.struct(holds.alias("holds"), e.alias("e"), snapshot.alias("snapshot"), el.alias("el"),
                            ol.alias("ol"))

        e = F.when(holds, latest_epoch(a["cur"])).otherwise(F.coalesce(a["f_snap_epoch"], latest_epoch(a["cur"])))
        return let(e, lambda e: let(_eoe(a["l_entries"], a["l_leo"], e), lambda v: validated(e, v)))

    def answered(a: Column, q: Column) -> Column:  # the follower's own end offset for EL
        def checked(v: Column) -> Column:
            ef0, of0, f_first = v["epoch"], v["offset"], a["f_first"]
            to_snapshot = f_first.isNotNull() & (ef0 == q["el"]) & (of0 == a["f_log_start"])
            undefined = (ef0 == -1) & (of0 == -1)
            ef = F.when(to_snapshot, f_first["epoch"]).when(undefined, q["el"]).otherwise(ef0)
            of = F.when(to_snapshot, f_first["end_offset"]).when(undefined, a["leo"]).otherwise(of0)
            return F.struct(ef.alias("ef"), of.alias("of"))

        return let(_eoe(a["cur"], a["leo"], q["el"]), checked)

    def decided(a: Column, q: Column, r: Column) -> Column:
        leo, el, ol, ef, of = a["leo"], q["el"], q["ol"], r["ef"], r["of"]
        agree = ~q["snapshot"] & (el == q["e"]) & (ol >= leo)
        o = (F.when(q["snapshot"] | agree, lit(None).cast("bigint"))
             .when(el == 0, F.least(ol, leo))
             .when(ef == el, F.least(of, ol))
             .otherwise(of))
        final = q["snapshot"] | (el == 0) | (ef == el)
        return F.struct((~agree).alias("diverge"), o.alias("o"), final.alias("final"))

    def stepped(a: Column, q: Column, r: Column, d: Column) -> Column:
        cur, leo = a["cur"], a["leo"]
        cut = F.when(d["o"].isNotNull(), F.coalesce(F.try_element_at(a["floors"], d["o"]), d["o"]))
        truncates = cut.isNotNull() & (cut < leo)
        rounds = a["truncation_rounds"] + d["diverge"].cast("int")
        fetch = q["snapshot"] & d["diverge"]
        detail = F.struct(
            rounds.alias("round"), q["e"].alias("requested_epoch"),
            F.when(~q["snapshot"], q["el"]).alias("leader_epoch"), F.when(~q["snapshot"], q["ol"]).alias("leader_offset"),
            F.when(~q["snapshot"] & (q["el"] != 0), r["ef"]).alias("follower_epoch"),
            F.when(~q["snapshot"] & (q["el"] != 0), r["of"]).alias("follower_offset"),
            d["o"].alias("offset"), cut.alias("effective_offset"))
        truncation = (F.when(fetch, F.when(q["holds"], a["f_lso"]).otherwise(a["truncation_offset"]))
                      .when(truncates, cut).otherwise(a["truncation_offset"]))
        return F.struct(
            *[a[c].alias(c) for c in ("l_entries", "l_leo", "l_log_start", "l_first", "l_latest", "f_first",
                                      "f_snap_epoch", "f_min_base", "f_log_start", "f_lso", "floors")],
            F.when(cut.isNotNull(), F.filter(cur, lambda x: x["start_offset"] < cut)).otherwise(cur)
            .cast(f"array<{ENTRY}>").alias("cur"),
            F.when(truncates, cut).otherwise(leo).alias("leo"),
            truncation.alias("truncation_offset"),
            rounds.alias("truncation_rounds"),
            F.when(fetch, a["l_latest"]).otherwise(a["fetch_snapshot"]).alias("fetch_snapshot"),
            F.when(d["diverge"], F.concat(a["rounds_detail"], F.array(detail))).otherwise(a["rounds_detail"])
            .cast(f"array<{ROUND}>").alias("rounds_detail"),
            (~d["diverge"] | d["final"] | (rounds >= max_rounds)).alias("done"),
        )

    step = let(asked(acc), lambda q: let(answered(acc, q), lambda r: let(
        decided(acc, q, r), lambda d: stepped(acc, q, r, d))))
    return F.when(acc["done"], acc).otherwise(step)


def truncate_kraft(pairs: DataFrame, inputs: DataFrame, batches: DataFrame, max_rounds: int = MAX_ROUNDS) -> DataFrame:
    """The ``kraft`` protocol (SPEC 4.7) for each follower of ``pairs``.

    Args:
        pairs: :func:`auditor.checks.pairs.build_pairs` rows of metadata log followers.
        inputs: :func:`kraft_inputs` of those pairs.
        batches: all batches of those replicas (``KEY``, ``base_offset``, ``last_offset``).

    Returns:
        ``KEY`` + :data:`auditor.semantics.truncation.RESULT_COLUMNS` + ``fetch_snapshot``
        (the leader's latest snapshot id when the exchange ended in FETCH_SNAPSHOT).
    """
    joined = pairs.join(inputs, KEY, "left")
    snap_ends = F.filter(F.array(col("l_first.end_offset"), col("f_first.end_offset"), col("l_log_start"),
                                 col("f_log_start")), lambda x: x.isNotNull())
    with_floors = joined.join(candidate_floors(joined, batches, snap_ends), KEY, "left")
    snap_id = f"{SNAPSHOT_ID}"
    init = F.struct(
        col("l_entries").cast(f"array<{ENTRY}>").alias("l_entries"), col("l_leo").cast("bigint").alias("l_leo"),
        col("l_log_start").cast("bigint").alias("l_log_start"),
        col("l_first").cast(snap_id).alias("l_first"), col("l_latest").cast(snap_id).alias("l_latest"),
        col("f_first").cast(snap_id).alias("f_first"), col("f_snap_epoch").cast("int").alias("f_snap_epoch"),
        col("f_min_base").cast("bigint").alias("f_min_base"), col("f_log_start").cast("bigint").alias("f_log_start"),
        col("f_lso").cast("bigint").alias("f_lso"),
        F.coalesce(col("floors"), F.create_map().cast("map<bigint,bigint>")).alias("floors"),
        col("f_entries").cast(f"array<{ENTRY}>").alias("cur"), col("f_leo").cast("bigint").alias("leo"),
        lit(None).cast("bigint").alias("truncation_offset"),
        lit(0).alias("truncation_rounds"),
        lit(None).cast(snap_id).alias("fetch_snapshot"),
        F.array().cast(f"array<{ROUND}>").alias("rounds_detail"),
        col("f_leo").isNull().alias("done"),
    )
    final = F.aggregate(F.sequence(lit(1), lit(max_rounds)), init, lambda acc, _: _round(acc, max_rounds))
    s = with_floors.select(*KEY, final.alias("_s"))
    fixed = {"resume_offset": lit(None).cast("bigint"), "missing_hwm": lit(False), "hwm_fallback": lit(False),
             "truncation_offset_2_8": lit(None).cast("bigint")}
    return s.select(*KEY, *[fixed[c].alias(c) if c in fixed else col(f"_s.{c}").alias(c) for c in RESULT_COLUMNS],
                    col("_s.fetch_snapshot").alias("fetch_snapshot"))
