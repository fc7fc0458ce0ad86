"""Where each follower truncates, per protocol (SPEC 4.3).

``epoch`` runs Kafka's OffsetsForLeaderEpoch exchange in rounds: a bounded loop over a
DataFrame holding only the followers that have not converged (most converge in one
round), each round cut from the previous one's lineage. ``kip-101``, ``hwm`` and ``raft``
take one step. ``floor_F(o)``, the base offset of the follower batch containing ``o``,
is an equi-join on the replica with a range filter.
"""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from auditor.eoe import ENTRY, eoe, latest_epoch

KEY = ["snapshot", "topic", "partition", "replica"]
MAX_ROUNDS = 64

RESULT_COLUMNS = ["truncation_offset", "truncation_rounds", "resume_offset", "missing_hwm",
                  "hwm_fallback", "truncation_offset_2_8", "rounds_detail"]


def least_strict(*cols: Column) -> Column:
    """``least`` that is null when any argument is null (Spark's ``least`` skips nulls)."""
    any_null = cols[0].isNull()
    for c in cols[1:]:
        any_null = any_null | c.isNull()
    return F.when(~any_null, F.least(*cols))


def floors(probes: DataFrame, batches: DataFrame, column: str) -> DataFrame:
    """``floor_F`` of ``probes[column]``: the base offset of the replica's batch containing
    it, or the offset itself when no batch does. Returns ``KEY + [column + "_floor"]``."""
    b = batches.select(*KEY, F.col("base_offset").alias("_b"), F.col("last_offset").alias("_l"))
    p = probes.select(*KEY, F.col(column).alias("_o")).filter(F.col("_o").isNotNull()).distinct()
    hit = p.join(b, KEY).filter((F.col("_b") <= F.col("_o")) & (F.col("_l") >= F.col("_o"))).groupBy(
        *KEY, "_o").agg(F.min("_b").alias("_fb"))
    return p.join(hit, [*KEY, "_o"], "left").select(
        *KEY, F.col("_o").alias(column), F.coalesce(F.col("_fb"), F.col("_o")).alias(f"{column}_floor"))


def _cut(df: DataFrame) -> DataFrame:
    return df.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)


def truncate_epoch(pairs: DataFrame, batches: DataFrame, max_rounds: int = MAX_ROUNDS) -> DataFrame:
    """The ``epoch`` protocol (Kafka 2.0.1+, and truncate-on-fetch from 2.8).

    Args:
        pairs: one row per follower: ``KEY`` (``replica`` = the follower), ``l_entries``,
            ``l_leo`` (leader cache and LEO), ``f_entries``, ``f_leo``, ``f_hwm``.
        batches: all batches (``KEY``, ``base_offset``, ``last_offset``).

    Returns:
        ``KEY`` + :data:`RESULT_COLUMNS`.
    """
    state = _cut(pairs.select(
        *KEY, "l_entries", "l_leo", "f_hwm",
        F.col("f_entries").alias("cur"), F.col("f_leo").alias("leo"),
        F.lit(None).cast("bigint").alias("truncation_offset"),
        F.lit(0).alias("truncation_rounds"),
        F.lit(None).cast("bigint").alias("resume_offset"),
        F.lit(False).alias("missing_hwm"), F.lit(False).alias("hwm_fallback"),
        F.lit(None).cast("bigint").alias("truncation_offset_2_8"),
        F.array().cast("array<struct<round:int,requested_epoch:int,leader_epoch:int,leader_offset:bigint,"
                       "follower_epoch:int,follower_offset:bigint,offset:bigint,effective_offset:bigint>>")
        .alias("rounds_detail"),
        F.col("f_leo").isNull().alias("done"),
    ))
    for _ in range(max_rounds):
        active = state.filter(~F.col("done"))
        if active.limit(1).count() == 0:
            break
        e = latest_epoch(F.col("cur"))
        el, ol = eoe(F.col("l_entries"), F.col("l_leo"), e)
        step = active.select("*", e.alias("e"), el.alias("el"), ol.alias("ol"))
        ef, of = eoe(F.col("cur"), F.col("leo"), F.col("el"))
        step = step.select("*", ef.alias("ef"), of.alias("of"))
        diverge = ~((F.col("el") >= F.col("e")) & (F.col("ol") >= F.col("leo")))
        undefined = F.col("ol") == -1
        o = (
            F.when(~diverge, F.lit(None).cast("bigint"))
            .when(undefined, least_strict(F.col("f_hwm"), F.col("leo")))
            .when(F.col("of") == -1, F.least(F.col("ol"), F.col("leo")))
            .when(F.col("ef") != F.col("el"), F.least(F.col("of"), F.col("leo")))
            .otherwise(F.least(F.col("of"), F.col("ol"), F.col("leo")))
        )
        final = undefined | (F.col("of") == -1) | (F.col("ef") == F.col("el"))
        step = step.select(
            "*", diverge.alias("diverge"), o.alias("o"), final.alias("final"),
            (diverge & undefined & F.col("f_hwm").isNull()).alias("missing_now"),
            F.when(diverge & undefined & (F.col("e") != -1) & ~F.col("hwm_fallback"),
                   F.least(F.col("l_leo"), F.col("leo"))).alias("o28"),
        )
        step = (step.join(floors(step, batches, "o"), [*KEY, "o"], "left")
                .join(floors(step, batches, "o28"), [*KEY, "o28"], "left"))
        cut = F.col("o_floor")
        truncates = cut.isNotNull() & (cut < F.col("leo"))
        rounds = F.col("truncation_rounds") + F.col("diverge").cast("int")
        detail = F.struct(
            rounds.alias("round"), F.col("e").alias("requested_epoch"), F.col("el").alias("leader_epoch"),
            F.col("ol").alias("leader_offset"), F.col("ef").alias("follower_epoch"),
            F.col("of").alias("follower_offset"), F.col("o").alias("offset"), cut.alias("effective_offset"))
        updated = step.select(
            *KEY, "l_entries", "l_leo", "f_hwm",
            F.when(cut.isNotNull(), F.filter("cur", lambda x: x["start_offset"] < F.col("o_floor"))).otherwise(F.col("cur"))
            .cast(f"array<{ENTRY}>").alias("cur"),
            F.when(truncates, cut).otherwise(F.col("leo")).alias("leo"),
            F.when(F.col("missing_now"), F.lit(None).cast("bigint"))
            .when(truncates, cut).otherwise(F.col("truncation_offset")).alias("truncation_offset"),
            rounds.alias("truncation_rounds"),
            F.when(truncates, F.col("o")).otherwise(F.col("resume_offset")).alias("resume_offset"),
            (F.col("missing_hwm") | F.col("missing_now")).alias("missing_hwm"),
            (F.col("hwm_fallback") | F.col("o28").isNotNull()).alias("hwm_fallback"),
            F.coalesce(F.col("truncation_offset_2_8"),
                       F.when(F.col("o28_floor") < F.col("leo"), F.col("o28_floor"))).alias("truncation_offset_2_8"),
            F.when(F.col("diverge"), F.concat("rounds_detail", F.array(detail))).otherwise(F.col("rounds_detail"))
            .alias("rounds_detail"),
            (~F.col("diverge") | F.col("final") | F.col("missing_now") | (rounds >= max_rounds)).alias("done"),
        )
        state = _cut(state.filter(F.col("done")).unionByName(updated))
    return state.select(*KEY, *RESULT_COLUMNS)


def kip101_offset(l_entries: Column, l_leo: Column, f_entries: Column) -> Column:
    """The leader's KIP-101 answer A (Kafka 0.11 to 1.1), null when undefined."""
    e = latest_epoch(f_entries)
    safe = F.coalesce(l_entries, F.array().cast(f"array<{ENTRY}>"))
    first = F.try_element_at(safe, F.lit(1))["epoch"]
    latest = F.try_element_at(safe, F.lit(-1))["epoch"]
    higher = F.try_element_at(F.filter(safe, lambda x: x["epoch"] > e), F.lit(1))
    return (
        F.when((e == -1) | (F.size(safe) == 0) | (e < first), F.lit(None).cast("bigint"))
        .when(e == latest, l_leo)
        .otherwise(higher["start_offset"])
    )


def truncate_one_step(pairs: DataFrame, batches: DataFrame, protocol: str,
                      raft_offsets: DataFrame | None = None) -> DataFrame:
    """``kip-101``, ``hwm`` and ``raft``: one offset ``o``, then ``floor_F(o)`` below LEO(F).

    Args:
        pairs: as for :func:`truncate_epoch`.
        batches: all batches.
        protocol: ``kip-101``, ``hwm`` or ``raft``.
        raft_offsets: for ``raft``: ``KEY`` + ``raft_offset`` (first index where the leader
            has no entry or one of another term); followers without a row have none.
    """
    leo, hwm = F.col("f_leo"), F.col("f_hwm")
    if protocol == "kip-101":
        answer = kip101_offset(F.col("l_entries"), F.col("l_leo"), F.col("f_entries"))
        base = pairs.select("*", answer.alias("answer"))
        o = (F.when(F.col("answer").isNull(), least_strict(hwm, leo))
             .when(F.col("answer") >= leo, F.lit(None).cast("bigint")).otherwise(F.col("answer")))
        missing = F.col("answer").isNull() & hwm.isNull()
    elif protocol == "hwm":
        base = pairs.select("*", F.lit(None).cast("bigint").alias("answer"))
        o = least_strict(hwm, leo)
        missing = hwm.isNull()
    elif protocol == "raft":
        assert raft_offsets is not None
        base = pairs.join(raft_offsets, KEY, "left").withColumnRenamed("raft_offset", "answer")
        o = F.col("answer")
        missing = F.lit(False)
    else:
        raise ValueError(f"unknown protocol {protocol}")
    step = base.select("*", o.alias("o"), missing.alias("missing_hwm"))
    step = step.join(floors(step, batches, "o"), [*KEY, "o"], "left")
    truncates = F.col("o_floor").isNotNull() & (F.col("o_floor") < F.col("f_leo"))
    detail = F.struct(F.lit(1).alias("round"), F.col("answer").alias("leader_offset"),
                      F.col("o").alias("offset"), F.col("o_floor").alias("effective_offset"))
    return step.select(
        *KEY,
        F.when(truncates, F.col("o_floor")).alias("truncation_offset"),
        F.when(truncates, 1).otherwise(0).alias("truncation_rounds"),
        F.when(truncates, F.col("o")).alias("resume_offset"),
        "missing_hwm",
        F.lit(False).alias("hwm_fallback"),
        F.lit(None).cast("bigint").alias("truncation_offset_2_8"),
        F.array(detail).alias("rounds_detail"),
    )
