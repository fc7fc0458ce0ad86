"""Over-time checks (SPEC 5, "Over time"): each observation (one topic-partition in one
snapshot) against its history, which is the earlier ``snapshot=`` folders of the same input
plus earlier successful runs of the same cluster in OUT.

From OUT only two things are read:
- one aggregate per partition and current snapshot (``partition_status``: P, the latest
  earlier observation, and H_max, the highest HWM of the history);
- P's own rows (``replica_status``, the P leader's ``source = log`` lineage, and its
  findings, for ``first_seen``), pruned to P's days.
The checks: ``HWM_REGRESSION``, ``FOLLOWER_HWM_REGRESSION``, ``STALE_LEADER_HWM``,
``COMMITTED_OFFSET_LOST``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from auditor.checks.rows import Kind, finding, findings, s

PARTITION = ["snapshot", "topic", "partition"]
TP = ["topic", "partition"]


@dataclass(frozen=True)
class History:
    """Earlier successful runs of one cluster in OUT, read narrowly.

    Args:
        observations: ``partition_status`` of those runs (``run_id, snapshot, topic,
            partition, leader, leader_epoch, max_high_watermark``) plus the run's
            ``started_at`` (ties between runs that saw the same snapshot).
        load: ``load(table, days)`` returns that table's rows of those runs whose ``day`` is
            one of ``days`` (Delta partition pruning).
    """

    observations: DataFrame
    load: Callable[[str, list[date]], DataFrame | None]


def _bucket(labels: list[datetime]) -> Column:
    """How many current snapshot labels are at or before the row's snapshot: a history
    row is history for the current snapshots of index >= its bucket."""
    return reduce(lambda acc, lab: acc + (F.col("snapshot") >= F.lit(lab)).cast("int"), labels, F.lit(0))


def previous_observations(current: DataFrame, labels: list[datetime], history: History | None) -> DataFrame:
    """For each current observation (``PARTITION``): P (``p_snapshot, p_run_id, p_leader,
    p_leader_epoch, p_from_out``) and ``h_max``. Only observations with a history appear.

    Args:
        current: per current observation ``leader, leader_epoch, max_high_watermark``.
        labels: the current snapshot labels, sorted.
    """
    labels = sorted(labels)
    order = F.array(*[F.lit(label) for label in labels])
    targets = current.select(*PARTITION).withColumn(
        "_idx", F.array_position(order, F.col("snapshot")).cast("int"))
    cand = current.select(
        *TP, "snapshot", F.lit(None).cast("string").alias("run_id"), "leader", "leader_epoch",
        "max_high_watermark", F.lit(None).cast("timestamp").alias("started_at"),
        F.lit(False).alias("from_out"),
    ).withColumn("_bucket", _bucket(labels))
    if history is not None:
        newest = max(labels)
        h = history.observations.filter(F.col("snapshot") < F.lit(newest)).withColumn("_bucket", _bucket(labels))
        latest = F.max_by(F.struct("snapshot", "run_id", "leader", "leader_epoch"),
                          F.struct("snapshot", "started_at", "run_id"))
        agg = h.groupBy(*TP, "_bucket").agg(
            latest.alias("_p"), F.max("max_high_watermark").alias("max_high_watermark"))
        cand = cand.unionByName(agg.select(
            *TP, F.col("_p.snapshot").alias("snapshot"), F.col("_p.run_id").alias("run_id"),
            F.col("_p.leader").alias("leader"), F.col("_p.leader_epoch").alias("leader_epoch"),
            "max_high_watermark", F.lit(None).cast("timestamp").alias("started_at"),
            F.lit(True).alias("from_out"), "_bucket"))
    # a candidate is history for a target when it is strictly earlier; OUT aggregates carry
    # their bucket (every row in bucket b is earlier than target b+1's label)
    joined = targets.alias("t").join(cand.alias("c"), TP).filter(
        (F.col("c.from_out") & (F.col("c._bucket") < F.col("t._idx")))
        | (~F.col("c.from_out") & (F.col("c.snapshot") < F.col("t.snapshot"))))
    # P: the latest earlier observation; this input's own snapshot wins a tie with OUT
    p = F.max_by(F.struct(F.col("c.snapshot").alias("p_snapshot"), F.col("c.run_id").alias("p_run_id"),
                          F.col("c.leader").alias("p_leader"), F.col("c.leader_epoch").alias("p_leader_epoch"),
                          F.col("c.from_out").alias("p_from_out")),
                 F.struct(F.col("c.snapshot"), (~F.col("c.from_out")).cast("int"), F.col("c.run_id")))
    return joined.groupBy(*[F.col(f"t.{c}").alias(c) for c in PARTITION]).agg(
        p.alias("_p"), F.max("c.max_high_watermark").alias("h_max")).select(*PARTITION, "_p.*", "h_max")


def p_days(prev: DataFrame) -> list[date]:
    """The UTC days of the P observations read from OUT (a handful of values)."""
    rows = prev.filter(F.col("p_from_out")).select(F.to_date("p_snapshot").alias("d")).distinct().collect()
    return sorted(r["d"] for r in rows)


def p_rows(prev: DataFrame, facts: DataFrame, log_lineage: DataFrame, history: History | None,
           days: list[date]) -> tuple[DataFrame, DataFrame]:
    """P's per-replica HWMs (``PARTITION, replica, p_hwm``) and P's leader's log lineage
    (``PARTITION, epoch, start_offset, end_offset``), keyed by the current observation."""
    own = prev.filter(~F.col("p_from_out"))
    hwms = own.join(facts.select(F.col("snapshot").alias("p_snapshot"), *TP, "replica",
                                 F.col("high_watermark").alias("p_hwm")), ["p_snapshot", *TP]
                    ).select(*PARTITION, "replica", "p_hwm")
    lin = own.join(log_lineage.select(F.col("snapshot").alias("p_snapshot"), *TP, F.col("replica").alias("p_leader"),
                                      "epoch", "start_offset", "end_offset"), ["p_snapshot", *TP, "p_leader"]
                   ).select(*PARTITION, "epoch", "start_offset", "end_offset")
    if history is not None:
        out_p = prev.filter(F.col("p_from_out"))
        keys = ["p_run_id", "p_snapshot", *TP]
        rs = history.load("replica_status", days) if days else None
        if rs is not None:
            hwms = hwms.unionByName(out_p.join(rs.select(
                F.col("run_id").alias("p_run_id"), F.col("snapshot").alias("p_snapshot"), *TP, "replica",
                F.col("high_watermark").alias("p_hwm")), keys).select(*PARTITION, "replica", "p_hwm"))
        el = history.load("epoch_lineage", days) if days else None
        if el is not None:
            lin = lin.unionByName(out_p.join(el.filter(F.col("source") == "log").select(
                F.col("run_id").alias("p_run_id"), F.col("snapshot").alias("p_snapshot"), *TP,
                F.col("replica").alias("p_leader"), "epoch", "start_offset", "end_offset"),
                [*keys, "p_leader"]).select(*PARTITION, "epoch", "start_offset", "end_offset"))
    return hwms, lin


@dataclass(frozen=True)
class OverTime:
    """The over-time findings, each current observation's P (``previous_observations``,
    materialised) and the days of the P observations read from OUT."""

    findings: DataFrame
    previous: DataFrame
    p_days: list[date]


def current_observations(facts: DataFrame, leaders: DataFrame, scope: DataFrame) -> DataFrame:
    """Each current observation (``PARTITION``) with its leader, the leader's epoch, HWM,
    local log start (``leader_lso``, SPEC 2) and log start, and the partition's highest HWM
    and compaction scope."""
    lead = facts.filter(F.col("role") == "leader").select(
        *PARTITION, F.col("replica").alias("leader"), F.col("latest_epoch").alias("leader_epoch"),
        F.col("high_watermark").alias("leader_hwm"), F.col("local_log_start_offset").alias("leader_lso"),
        F.col("log_start_offset").alias("leader_log_start"))
    return leaders.select(*PARTITION, "leader").join(lead, [*PARTITION, "leader"], "left").join(
        scope.select(*PARTITION, F.col("hmax").alias("max_high_watermark"), "compacted"), PARTITION, "left")


def over_time_findings(current: DataFrame, prev: DataFrame, facts: DataFrame, log_lineage: DataFrame,
                       history: History | None) -> OverTime:
    """The four over-time checks for every current observation that has a history.

    Args:
        current: :func:`current_observations`.
        prev: :func:`previous_observations` of ``current``, stored (several queries read it).
    """
    days = p_days(prev) if history is not None else []
    hwms, p_lineage = p_rows(prev, facts, log_lineage, history, days)
    obs = current.join(prev, PARTITION).join(
        hwms.withColumnRenamed("replica", "p_leader").withColumnRenamed("p_hwm", "p_leader_hwm"),
        [*PARTITION, "p_leader"], "left")
    evidence = F.struct("p_snapshot", "p_run_id", "p_leader", "p_leader_epoch", "p_leader_hwm", "leader_epoch",
                        "leader_hwm", "h_max")

    same_leader = (F.col("leader") == F.col("p_leader")) & (F.col("leader_epoch") == F.col("p_leader_epoch"))
    regression = Kind(
        same_leader & (F.col("leader_hwm") < F.col("p_leader_hwm")), "HWM_REGRESSION", "CRITICAL",
        F.col("leader_hwm"), F.col("p_leader_hwm"), None,
        F.format_string("Leader %d's high watermark went back from %d (snapshot %s) to %d in the same epoch %d.",
                        F.col("leader"), F.col("p_leader_hwm"), F.col("p_snapshot").cast("string"), F.col("leader_hwm"),
                        F.col("leader_epoch")), evidence, replica=F.col("leader"))

    changed = F.col("leader").isNotNull() & ~(F.col("leader").eqNullSafe(F.col("p_leader"))
                                              & F.col("leader_epoch").eqNullSafe(F.col("p_leader_epoch")))
    stale = Kind(
        changed & (F.col("leader_hwm") < F.col("h_max")), "STALE_LEADER_HWM", "WARNING", F.col("leader_hwm"),
        F.col("h_max"), None,
        F.format_string("New leader %d (epoch %s) has high watermark %d, below %d seen earlier: offsets in "
                        "between were committed before and are not yet committed again.", F.col("leader"),
                        s("leader_epoch"), F.col("leader_hwm"), F.col("h_max")), evidence, replica=F.col("leader"))

    followers = facts.filter(F.col("role") == "follower").select(*PARTITION, "replica", "high_watermark")
    f = followers.join(prev.select(*PARTITION, "p_snapshot", "p_run_id"), PARTITION).join(
        hwms, [*PARTITION, "replica"]).filter(F.col("high_watermark") < F.col("p_hwm"))
    follower = finding(
        f, "FOLLOWER_HWM_REGRESSION", "INFO", F.col("high_watermark"), F.col("p_hwm"), None,
        F.format_string("Follower %d's high watermark went back from %d (snapshot %s) to %d.", F.col("replica"),
                        F.col("p_hwm"), F.col("p_snapshot").cast("string"), F.col("high_watermark")),
        F.struct("p_snapshot", "p_run_id", "p_hwm", "high_watermark"))

    lost = committed_offsets_lost(obs, p_lineage, log_lineage)
    # (both leader checks read the joined observations: one projection computes them once)
    found = [findings(obs, [regression, stale]), follower, lost]
    return OverTime(reduce(DataFrame.unionByName, found), prev, days)


def committed_offsets_lost(obs: DataFrame, p_lineage: DataFrame, log_lineage: DataFrame) -> DataFrame:
    """``COMMITTED_OFFSET_LOST``: offsets below H_max (and at or above the current leader's
    local log start, SPEC 2) that P's leader held in some epoch and the current leader does not hold in that
    epoch. On compacted topics only offsets both leaders hold are compared."""
    o = obs.filter(F.col("leader").isNotNull() & F.col("p_leader").isNotNull() & F.col("h_max").isNotNull())
    # P's rows clipped to [current leader's local log start, H_max)
    r = p_lineage.join(o.select(*PARTITION, "leader", "leader_lso", "h_max", "compacted"), PARTITION).select(
        *PARTITION, "leader", "compacted", "epoch",
        F.greatest("start_offset", F.coalesce("leader_lso", F.lit(0))).alias("rs"),
        F.least("end_offset", "h_max").alias("re")).filter(F.col("rs") < F.col("re"))
    cur = log_lineage.select(*PARTITION, F.col("replica").alias("leader"), F.col("epoch").alias("c_epoch"),
                             F.col("start_offset").alias("cs"), F.col("end_offset").alias("ce"))
    overlap = (F.col("cs") < F.col("re")) & (F.col("ce") > F.col("rs"))
    pairs = r.join(cur, [*PARTITION, "leader"], "left").withColumn(
        "_overlap", F.coalesce(overlap, F.lit(False)))
    same = F.col("_overlap") & (F.col("c_epoch") == F.col("epoch"))
    # non-compacted: the parts of each P row no same-epoch row of the current leader covers
    # (same-epoch lineage rows of one replica never touch or overlap)
    plain = pairs.filter(~F.coalesce(F.col("compacted"), F.lit(False))).groupBy(
        *PARTITION, "leader", "epoch", "rs", "re").agg(
        F.max(same & (F.col("cs") <= F.col("rs")) & (F.col("ce") > F.col("rs"))).alias("start_covered"),
        F.max(same & (F.col("cs") <= F.col("re") - 1) & (F.col("ce") > F.col("re") - 1)).alias("end_covered"),
        F.min(F.when(same & (F.col("ce") < F.col("re")), F.col("ce"))).alias("first_end"),
        F.max(F.when(same & (F.col("cs") > F.col("rs")), F.col("cs"))).alias("last_start"),
    ).select(*PARTITION, "leader",
             F.when(~F.col("start_covered"), F.col("rs")).otherwise(F.col("first_end")).alias("first"),
             F.when(~F.col("end_covered"), F.col("re") - 1).otherwise(F.col("last_start") - 1).alias("last"))
    # compacted: offsets the current leader holds, but in another epoch
    other = pairs.filter(F.coalesce(F.col("compacted"), F.lit(False)) & F.col("_overlap")
                         & (F.col("c_epoch") != F.col("epoch"))).select(
        *PARTITION, "leader", F.greatest("rs", "cs").alias("first"), (F.least("re", "ce") - 1).alias("last"))
    spans = plain.unionByName(other).filter(F.col("first").isNotNull()).groupBy(*PARTITION, "leader").agg(
        F.min("first").alias("first"), F.max("last").alias("last"))
    found = spans.join(o.select(*PARTITION, "p_snapshot", "p_run_id", "p_leader", "p_leader_epoch", "h_max",
                                "leader_epoch", "leader_lso", "leader_log_start"), PARTITION).withColumn(
        "replica", F.col("leader"))
    return finding(
        found, "COMMITTED_OFFSET_LOST", "CRITICAL", F.col("first"), F.col("last") + 1, None,
        F.format_string("Leader %d no longer holds, in the same epoch, offsets %d to %d that leader %d held in "
                        "snapshot %s below the committed high watermark %d.", F.col("leader"), F.col("first"),
                        F.col("last"), F.col("p_leader"), F.col("p_snapshot").cast("string"), F.col("h_max")),
        F.struct("p_snapshot", "p_run_id", "p_leader", "p_leader_epoch", "leader_epoch", "h_max",
                 F.col("leader_log_start").alias("log_start_offset"),
                 F.col("leader_lso").alias("local_log_start_offset")))
