"""Where each follower truncates, per protocol (SPEC 4.3).

``epoch`` runs Kafka's OffsetsForLeaderEpoch exchange in rounds: the bounded loop is an
``aggregate`` over the rounds inside one projection, with ``floor_F`` of every offset a
round can reach computed beforehand. ``kip-101``, ``hwm`` and ``raft``
take one step. ``floor_F(o)``, the base offset of the follower batch containing ``o``,
is an equi-join on the replica with a range filter.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame

from auditor import columns as F
from auditor.columns import col, lit
from auditor.semantics.eoe import ENTRY, eoe, latest_epoch

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
    b = batches.select(*KEY, col("base_offset").alias("_b"), col("last_offset").alias("_l"))
    p = probes.select(*KEY, col(column).alias("_o")).filter(col("_o").isNotNull()).distinct()
    hit = p.join(b, KEY).filter((col("_b") <= col("_o")) & (col("_l") >= col("_o"))).groupBy(
        *KEY, "_o").agg(F.min("_b").alias("_fb"))
    return p.join(hit, [*KEY, "_o"], "left").select(
        *KEY, col("_o").alias(column), F.coalesce(col("_fb"), col("_o")).alias(f"{column}_floor"))


def candidate_floors(pairs: DataFrame, batches: DataFrame, extra: Column | None = None) -> DataFrame:
    """``floor_F`` of every offset the ``epoch`` protocol can truncate to, as a map.

    Each round's offset is the smaller of values taken from the two epoch caches' start
    offsets, the two LEOs, the follower's HWM and earlier rounds' effective offsets, which
    are floors of those. So the floors of these candidates, and the floors of the floors
    (overlapping batches), are all any round looks up.

    ``extra``: an array column of more candidates (``kraft``: snapshot ends, log starts).

    Returns:
        ``KEY`` + ``floors`` (``map<bigint,bigint>``) for followers with a candidate.
    """
    empty = F.array().cast(f"array<{ENTRY}>")
    starts = lambda c: F.transform(F.coalesce(col(c), empty), lambda x: x["start_offset"])  # noqa: E731
    cands = pairs.select(*KEY, F.explode(F.array_distinct(F.concat(
        starts("f_entries"), starts("l_entries"),
        F.array(col("l_leo"), col("f_leo"), col("f_hwm")),
        *([extra.cast("array<bigint>")] if extra is not None else [])))).alias("o"))
    first = floors(cands, batches, "o")
    second = floors(first.select(*KEY, col("o_floor").alias("o")), batches, "o")
    both = first.unionByName(second).distinct()
    return both.groupBy(*KEY).agg(
        F.map_from_entries(F.collect_list(F.struct("o", "o_floor"))).alias("floors"))


ROUND = ("struct<round:int,requested_epoch:int,leader_epoch:int,leader_offset:bigint,"
         "follower_epoch:int,follower_offset:bigint,offset:bigint,effective_offset:bigint>")


def let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(v)`` with ``v`` bound to ``value`` evaluated once (a one-element ``transform``).

    Column expressions are trees: using a sub-expression twice copies it, and a round that
    reuses its intermediate values would grow exponentially with nesting. Binding each
    intermediate once keeps the round's expression linear in size.
    """
    return F.transform(F.array(value), body)[0]


def _round(acc: Column, max_rounds: int) -> Column:
    """One OffsetsForLeaderEpoch round of SPEC 4.3 on the state ``acc`` (a no-op once done)."""

    def asked(a: Column) -> Column:  # the follower's epoch and the leader's answer
        e = latest_epoch(a["cur"])
        el, ol = eoe(a["l_entries"], a["l_leo"], e)
        return F.struct(e.alias("e"), el.alias("el"), ol.alias("ol"))

    def answered(a: Column, q: Column) -> Column:  # the follower's own lookup, the offset o
        ef, of = eoe(a["cur"], a["leo"], q["el"])
        return F.struct(ef.alias("ef"), of.alias("of"))

    def decided(a: Column, q: Column, r: Column) -> Column:
        leo, hwm, e, el, ol, ef, of = a["leo"], a["f_hwm"], q["e"], q["el"], q["ol"], r["ef"], r["of"]
        diverge = ~((el >= e) & (ol >= leo))
        undefined = ol == -1
        o = (
            F.when(~diverge, lit(None).cast("bigint"))
            .when(undefined, least_strict(hwm, leo))
            .when(of == -1, F.least(ol, leo))
            .when(ef != el, F.least(of, leo))
            .otherwise(F.least(of, ol, leo))
        )
        o28 = F.when(diverge & undefined & (e != -1) & ~a["hwm_fallback"], F.least(a["l_leo"], leo))
        return F.struct(
            diverge.alias("diverge"), o.alias("o"), o28.alias("o28"),
            (undefined | (of == -1) | (ef == el)).alias("final"),
            (diverge & undefined & hwm.isNull()).alias("missing_now"))

    def floored(a: Column, d: Column) -> Column:
        def floor(x: Column) -> Column:
            return F.when(x.isNotNull(), F.coalesce(F.try_element_at(a["floors"], x), x))

        return F.struct(floor(d["o"]).alias("cut"), floor(d["o28"]).alias("cut28"))

    def stepped(a: Column, q: Column, r: Column, d: Column, c: Column) -> Column:
        cur, leo, cut = a["cur"], a["leo"], c["cut"]
        truncates = cut.isNotNull() & (cut < leo)
        rounds = a["truncation_rounds"] + d["diverge"].cast("int")
        detail = F.struct(
            rounds.alias("round"), q["e"].alias("requested_epoch"), q["el"].alias("leader_epoch"),
            q["ol"].alias("leader_offset"), r["ef"].alias("follower_epoch"), r["of"].alias("follower_offset"),
            d["o"].alias("offset"), cut.alias("effective_offset"))
        return F.struct(
            a["l_entries"].alias("l_entries"), a["l_leo"].alias("l_leo"), a["f_hwm"].alias("f_hwm"),
            a["floors"].alias("floors"),
            F.when(cut.isNotNull(), F.filter(cur, lambda x: x["start_offset"] < cut)).otherwise(cur)
            .cast(f"array<{ENTRY}>").alias("cur"),
            F.when(truncates, cut).otherwise(leo).alias("leo"),
            F.when(d["missing_now"], lit(None).cast("bigint"))
            .when(truncates, cut).otherwise(a["truncation_offset"]).alias("truncation_offset"),
            rounds.alias("truncation_rounds"),
            F.when(truncates, d["o"]).otherwise(a["resume_offset"]).alias("resume_offset"),
            (a["missing_hwm"] | d["missing_now"]).alias("missing_hwm"),
            (a["hwm_fallback"] | d["o28"].isNotNull()).alias("hwm_fallback"),
            F.coalesce(a["truncation_offset_2_8"], F.when(c["cut28"] < leo, c["cut28"])).alias("truncation_offset_2_8"),
            F.when(d["diverge"], F.concat(a["rounds_detail"], F.array(detail))).otherwise(a["rounds_detail"])
            .cast(f"array<{ROUND}>").alias("rounds_detail"),
            (~d["diverge"] | d["final"] | d["missing_now"] | (rounds >= max_rounds)).alias("done"),
        )

    step = let(asked(acc), lambda q: let(answered(acc, q), lambda r: let(
        decided(acc, q, r), lambda d: let(floored(acc, d), lambda c: stepped(acc, q, r, d, c)))))
    return F.when(acc["done"], acc).otherwise(step)


def truncate_epoch(pairs: DataFrame, batches: DataFrame, max_rounds: int = MAX_ROUNDS) -> DataFrame:
    """The ``epoch`` protocol (Kafka 2.0.1+, and truncate-on-fetch from 2.8).

    The bounded loop of SPEC 4.3 is one ``aggregate`` over ``max_rounds`` steps per
    follower (a finished exchange leaves its state unchanged), so every follower is
    decided in a single projection, with ``floor_F`` looked up in a small per-follower map
    (:func:`candidate_floors`).

    Args:
        pairs: one row per follower: ``KEY`` (``replica`` = the follower), ``l_entries``,
            ``l_leo`` (leader cache and LEO), ``f_entries``, ``f_leo``, ``f_hwm``.
        batches: all batches (``KEY``, ``base_offset``, ``last_offset``).

    Returns:
        ``KEY`` + :data:`RESULT_COLUMNS`.
    """
    with_floors = pairs.join(candidate_floors(pairs, batches), KEY, "left")
    init = F.struct(
        col("l_entries").cast(f"array<{ENTRY}>").alias("l_entries"), col("l_leo").cast("bigint").alias("l_leo"),
        col("f_hwm").cast("bigint").alias("f_hwm"),
        F.coalesce(col("floors"), F.create_map().cast("map<bigint,bigint>")).alias("floors"),
        col("f_entries").cast(f"array<{ENTRY}>").alias("cur"), col("f_leo").cast("bigint").alias("leo"),
        lit(None).cast("bigint").alias("truncation_offset"),
        lit(0).alias("truncation_rounds"),
        lit(None).cast("bigint").alias("resume_offset"),
        lit(False).alias("missing_hwm"), lit(False).alias("hwm_fallback"),
        lit(None).cast("bigint").alias("truncation_offset_2_8"),
        F.array().cast(f"array<{ROUND}>").alias("rounds_detail"),
        col("f_leo").isNull().alias("done"),
    )
    final = F.aggregate(F.sequence(lit(1), lit(max_rounds)), init, lambda acc, _: _round(acc, max_rounds))
    return with_floors.select(*KEY, final.alias("_s")).select(*KEY, *[col(f"_s.{c}").alias(c) for c in RESULT_COLUMNS])


def kip101_offset(l_entries: Column, l_leo: Column, f_entries: Column) -> Column:
    """The leader's KIP-101 answer A (Kafka 0.11 to 1.1), null when undefined."""
    e = latest_epoch(f_entries)
    safe = F.coalesce(l_entries, F.array().cast(f"array<{ENTRY}>"))
    first = F.try_element_at(safe, lit(1))["epoch"]
    latest = F.try_element_at(safe, lit(-1))["epoch"]
    higher = F.try_element_at(F.filter(safe, lambda x: x["epoch"] > e), lit(1))
    return (
        F.when((e == -1) | (F.size(safe) == 0) | (e < first), lit(None).cast("bigint"))
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
    leo, hwm = col("f_leo"), col("f_hwm")
    if protocol == "kip-101":
        answer = kip101_offset(col("l_entries"), col("l_leo"), col("f_entries"))
        base = pairs.select("*", answer.alias("answer"))
        o = (F.when(col("answer").isNull(), least_strict(hwm, leo))
             .when(col("answer") >= leo, lit(None).cast("bigint")).otherwise(col("answer")))
        missing = col("answer").isNull() & hwm.isNull()
    elif protocol == "hwm":
        base = pairs.select("*", lit(None).cast("bigint").alias("answer"))
        o = least_strict(hwm, leo)
        missing = hwm.isNull()
    elif protocol == "raft":
        assert raft_offsets is not None
        base = pairs.join(raft_offsets, KEY, "left").withColumnRenamed("raft_offset", "answer")
        o = col("answer")
        missing = lit(False)
    else:
        raise ValueError(f"unknown protocol {protocol}")
    step = base.select("*", o.alias("o"), missing.alias("missing_hwm"))
    step = step.join(floors(step, batches, "o"), [*KEY, "o"], "left")
    truncates = col("o_floor").isNotNull() & (col("o_floor") < col("f_leo"))
    # the epoch protocol's round shape (fields these protocols do not have are null, and
    # ``to_json`` leaves null fields out): rows of several protocols can share one frame
    none = lit(None)
    detail = F.struct(lit(1).alias("round"), none.cast("int").alias("requested_epoch"),
                      none.cast("int").alias("leader_epoch"), col("answer").cast("bigint").alias("leader_offset"),
                      none.cast("int").alias("follower_epoch"), none.cast("bigint").alias("follower_offset"),
                      col("o").cast("bigint").alias("offset"), col("o_floor").cast("bigint").alias("effective_offset"))
    return step.select(
        *KEY,
        F.when(truncates, col("o_floor")).alias("truncation_offset"),
        F.when(truncates, 1).otherwise(0).alias("truncation_rounds"),
        F.when(truncates, col("o")).alias("resume_offset"),
        "missing_hwm",
        lit(False).alias("hwm_fallback"),
        lit(None).cast("bigint").alias("truncation_offset_2_8"),
        F.array(detail).alias("rounds_detail"),
    )
