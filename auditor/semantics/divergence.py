"""Ground truth, independent of any protocol (SPEC 4.4 and 4.5).

Two replicas agree at an offset when both hold a batch covering it with the same base
offset, last offset and epoch (and CRC when both print one). Agreement needs identical
batches, so comparing two replicas is an equi-join of their batches on ``base_offset``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window

from auditor import columns as F
from auditor.columns import col, lit

PARTITION = ["snapshot", "topic", "partition"]


def compared_batches(batches: DataFrame, pairs: DataFrame, own: str, other: str) -> DataFrame:
    """Each batch of replica ``own`` next to the batch replica ``other`` holds at its base.

    Args:
        batches: the batches (``replica``, ``base_offset``, ``last_offset``, ``epoch``, ``crc``
            and, when ``pairs`` has it, ``win``).
        pairs: ``PARTITION + [own, other, "lso", "hmax", "compacted"]``: ``lso`` is the
            higher log start offset of the two replicas, ``hmax`` the higher HWM; with a
            ``win`` column, only those windows of ``own`` are compared (one row per window).

    Returns:
        One row per batch of ``own`` and batch of ``other`` at the same base (or none):
        ``PARTITION, own, other, base, last, epoch, crc, o_last, o_epoch, o_crc, agrees,
        in_scope``. ``in_scope``: the batch reaches ``lso``, and on compacted topics it
        reaches ``hmax`` (below it each replica's cleaner works on its own).
    """
    by_window = ["win"] if "win" in pairs.columns else []
    mine = batches.select(
        *PARTITION, col("replica").alias(own), col("base_offset").alias("base"),
        col("last_offset").alias("last"), "epoch", "crc", *by_window,
    ).join(pairs, [*PARTITION, own, *by_window])
    theirs = batches.select(
        *PARTITION, col("replica").alias(other), col("base_offset").alias("base"),
        col("last_offset").alias("o_last"), col("epoch").alias("o_epoch"), col("crc").alias("o_crc"))
    joined = mine.join(theirs, [*PARTITION, other, "base"], "left")
    agrees = (
        col("o_last").isNotNull() & (col("last") == col("o_last")) & (col("epoch") == col("o_epoch"))
        & (col("crc").isNull() | col("o_crc").isNull() | (col("crc") == col("o_crc")))
    )
    reaches_lso = col("lso").isNull() | (col("last") >= col("lso"))
    reaches_hmax = ~col("compacted") | col("hmax").isNull() | (col("last") >= col("hmax"))
    return joined.select("*", agrees.alias("agrees"), (reaches_lso & reaches_hmax).alias("in_scope"))


def _first_offset_in_scope() -> F.Column:
    """The first offset of a batch that lies in scope (at or above lso and, compacted, hmax)."""
    return F.greatest(
        col("base"),
        F.coalesce(col("lso"), col("base")),
        F.when(col("compacted"), F.coalesce(col("hmax"), col("base"))).otherwise(col("base")),
    )


def divergence_offsets(compared: DataFrame, own: str, other: str, overlapping: DataFrame | None = None,
                       covering: DataFrame | None = None) -> DataFrame:
    """``divergence_offset`` of ``own`` against ``other``: the smallest offset ``own`` holds
    in scope where the two do not agree; no row when every batch in scope agrees.

    Where ``own``'s batches do not overlap, each offset lies in one batch, and the first
    in-scope offset of the first batch that agrees with nothing is the answer. Where they
    do (``overlapping``: ``PARTITION`` + ``own``, the replicas whose own batches may overlap),
    an offset also agrees when another batch of ``own`` covering it agrees: the answer is
    the smallest offset of a disagreeing batch that no agreeing batch covers
    (:func:`_first_uncovered`). ``covering``: ``PARTITION, own, other, base, last`` of
    further batches of those replicas known to agree (the windows equal on their summaries,
    not compared batch by batch).
    """
    per_batch = compared.filter(col("in_scope")).groupBy(*PARTITION, own, other, "base", "last", "lso", "hmax",
                                                             "compacted").agg(
        F.max(col("agrees").cast("int")).alias("agree"))
    if overlapping is None:
        return _first_disagreeing(per_batch, own, other)
    own_key = [*PARTITION, own]
    apart = _first_disagreeing(per_batch.join(overlapping, own_key, "left_anti"), own, other)
    return apart.unionByName(_first_uncovered(per_batch.join(overlapping, own_key, "left_semi"), covering, own, other))


def _first_disagreeing(per_batch: DataFrame, own: str, other: str) -> DataFrame:
    return per_batch.filter(col("agree") == 0).groupBy(*PARTITION, own, other).agg(
        F.min(_first_offset_in_scope()).alias("divergence_offset"))


def _first_uncovered(per_batch: DataFrame, covering: DataFrame | None, own: str, other: str) -> DataFrame:
    """The smallest offset of ``per_batch``'s disagreeing batches (from their first offset in
    scope) that none of its agreeing batches, nor ``covering``'s, covers."""
    pair = [*PARTITION, own, other]
    agreeing = per_batch.filter(col("agree") == 1).select(*pair, "base", "last")
    if covering is not None:
        agreeing = agreeing.unionByName(covering.select(*pair, "base", "last"))
    disagreeing = per_batch.filter(col("agree") == 0).select(*pair, _first_offset_in_scope().alias("pos"), "last")
    return uncovered(disagreeing, agreeing, pair).withColumnRenamed("first_uncovered", "divergence_offset")


def uncovered(held: DataFrame, cover: DataFrame, keys: list[str]) -> DataFrame:
    """Per ``keys``: the smallest offset of ``held``'s stretches (``pos`` to ``last``) that
    none of ``cover``'s batches (``base`` to ``last``) covers; no row when each is covered.
    ``keys + ["first_uncovered"]``.

    That offset is a stretch's first offset or one past a covering batch's last (the offset
    before it is either not held or covered). So each of those offsets is a candidate,
    placed after every covering batch starting at or before it: the running maximum of the
    covering batches' last offsets says whether one covers it, that of the held stretches'
    (each its own candidate) whether it is held there."""
    # (only the keys with a held stretch: the others have no answer)
    cover = cover.select(*keys, "base", "last").join(held.select(*keys).distinct(), keys, "left_semi")
    # covering batches (kind 0) before the candidates at their offset (kind 1): each held
    # stretch at its first offset, and one past each covering batch
    none = lit(None).cast("bigint")
    events = (cover.select(*keys, col("base").alias("pos"), lit(0).alias("kind"), col("last").alias("a_end"),
                           none.alias("x_end"))
              .unionByName(held.select(*keys, "pos", lit(1).alias("kind"), none.alias("a_end"),
                                       col("last").alias("x_end")))
              .unionByName(cover.select(*keys, (col("last") + 1).alias("pos"), lit(1).alias("kind"),
                                        none.alias("a_end"), none.alias("x_end"))))
    # (a total order: rows that tie on every column are the same row; the running maxima
    # at a candidate are over every batch starting at or before it)
    upto = Window.partitionBy(*keys).orderBy("pos", "kind", "a_end", "x_end")
    running = events.select(*keys, "pos", "kind", F.max("a_end").over(upto).alias("covered_to"),
                            F.max("x_end").over(upto).alias("held_to"))
    free = (col("kind") == 1) & (col("held_to") >= col("pos")) & (
        col("covered_to").isNull() | (col("covered_to") < col("pos")))
    return running.filter(free).groupBy(*keys).agg(F.min("pos").alias("first_uncovered"))


def same_epoch_conflicts(compared: DataFrame, own: str, other: str) -> DataFrame:
    """The first batch base where both hold a batch in the same epoch with a different CRC
    or last offset (two writers in one epoch, or corruption)."""
    conflict = (
        col("o_last").isNotNull() & (col("epoch") == col("o_epoch")) & (col("epoch") >= 0)
        & ((col("last") != col("o_last"))
           | (col("crc").isNotNull() & col("o_crc").isNotNull() & (col("crc") != col("o_crc"))))
    )
    return compared.filter(col("in_scope") & conflict).groupBy(*PARTITION, own, other).agg(
        F.min(F.struct("base", "last", "epoch", "crc", "o_last", "o_crc")).alias("conflict"))


def first_missing(compared: DataFrame, own: str, other: str, below: str) -> DataFrame:
    """The first base offset of a batch of ``own`` (starting in scope, below column
    ``below``) that ``other`` does not hold an agreeing copy of. SPEC 5, ``ISR_INCOMPLETE``:
    "some batch the leader holds, with base offset below HWM(L) and at or above both local
    log start offsets, has no agreeing batch": a batch across a local log start is not
    one (its range would start below it, where nothing is "not held", SPEC 2). Each batch
    on its own: where ``own`` holds two batches at one base offset (an overlap), ``other``
    holding a copy of one of them does not make it hold the other."""
    starts_in_scope = col("in_scope") & (_first_offset_in_scope() == col("base"))
    per_batch = compared.filter(starts_in_scope & (col("base") < col(below))).groupBy(
        *PARTITION, own, other, "base", "last", "epoch", "crc").agg(F.max(col("agrees").cast("int")).alias("agree"))
    return per_batch.filter(col("agree") == 0).groupBy(*PARTITION, own, other).agg(
        F.min("base").alias("first_missing"))


def raft_offsets(compared: DataFrame, leader: DataFrame, own: str, other: str, from_log_start: bool = False) -> DataFrame:
    """openraft's conflict index (SPEC 4.3): the first index ``own`` holds at which ``other``
    has no entry or an entry of another term, offset by offset: an offset of one of
    ``own``'s batches agrees when a batch of ``other`` in that batch's epoch covers it,
    whatever their base offsets. Same-term entries are never truncated.

    Args:
        compared: :func:`compared_batches` of ``own``'s batches to look at.
        leader: ``PARTITION, own, other, base, last, epoch`` of ``other``'s batches that may
            cover them (those read exactly; an irregular ``own``'s batches in windows equal
            on their summaries are ``other``'s too).
        from_log_start: only indexes at or above both log starts count. For logs whose
            start is a Raft snapshot (``--format etcd``), the leader's entries below its
            start are in its snapshot, not missing: a leader never sends entries there (it
            sends the snapshot, which a follower holding the snapshot's entry keeps its log
            against).
    """
    if from_log_start:
        compared = compared.filter(col("lso").isNull() | (col("last") >= col("lso")))
    keys = [*PARTITION, own, other, "epoch"]
    held = compared.select(*keys, col("base").alias("pos"), "last").distinct()
    cover = leader.filter(col("epoch").isNotNull()).select(*keys, "base", "last")
    return uncovered(held, cover, keys).groupBy(*PARTITION, own, other).agg(
        F.min("first_uncovered").alias("raft_offset"))
