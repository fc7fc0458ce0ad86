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

from dataclasses import dataclass
from datetime import date, datetime
from functools import reduce

from pyspark.sql import Column, DataFrame

from auditor import columns as F
from auditor.checks.rows import Kind, finding, findings, s
from auditor.columns import col, lit
from auditor.sinks.history import History

PARTITION = ["snapshot", "topic", "partition"]
TP = ["topic", "partition"]


def _bucket(labels: list[datetime]) -> Column:
    """How many current snapshot labels are at or before the row's snapshot: a history
    row is history for the current snapshots of index >= its bucket."""
    return reduce(lambda acc, lab: acc + (col("snapshot") >= lit(lab)).cast("int"), labels, lit(0))


def previous_observations(current: DataFrame, labels: list[datetime], history: History | None) -> DataFrame:
    """For each current observation (``PARTITION``): P (``p_snapshot, p_run_id, p_leader,
    p_leader_epoch, p_from_out``) and ``h_max``. Only observations with a history appear.

    Args:
        current: per current observation ``leader, leader_epoch, max_high_watermark``.
        labels: the current snapshot labels, sorted.
    """
    labels = sorted(labels)
    order = F.array(*[lit(label) for label in labels])
    targets = current.select(*PARTITION).withColumn(
        "_idx", F.array_position(order, col("snapshot")).cast("int"))
    cand = current.select(
        *TP, "snapshot", lit(None).cast("string").alias("run_id"), "leader", "leader_epoch",
        "max_high_watermark", lit(None).cast("timestamp").alias("started_at"),
        lit(False).alias("from_out"),
    ).withColumn("_bucket", _bucket(labels))
    if history is not None:
        newest = max(labels)
        h = history.observations.filter(col("snapshot") < lit(newest)).withColumn("_bucket", _bucket(labels))
        latest = F.max_by(F.struct("snapshot", "run_id", "leader", "leader_epoch"),
                          F.struct("snapshot", "started_at", "run_id"))
        agg = h.groupBy(*TP, "_bucket").agg(
            latest.alias("_p"), F.max("max_high_watermark").alias("max_high_watermark"))
        cand = cand.unionByName(agg.select(
            *TP, col("_p.snapshot").alias("snapshot"), col("_p.run_id").alias("run_id"),
            col("_p.leader").alias("leader"), col("_p.leader_epoch").alias("leader_epoch"),
            "max_high_watermark", lit(None).cast("timestamp").alias("started_at"),
            lit(True).alias("from_out"), "_bucket"))
    # a candidate is history for a target when it is strictly earlier; OUT aggregates carry
    # their bucket (every row in bucket b is earlier than target b+1's label)
    joined = targets.alias("t").join(cand.alias("c"), TP).filter(
        (col("c.from_out") & (col("c._bucket") < col("t._idx")))
        | (~col("c.from_out") & (col("c.snapshot") < col("t.snapshot"))))
    # P: the latest earlier observation; this input's own snapshot wins a tie with OUT
    p = F.max_by(F.struct(col("c.snapshot").alias("p_snapshot"), col("c.run_id").alias("p_run_id"),
                          col("c.leader").alias("p_leader"), col("c.leader_epoch").alias("p_leader_epoch"),
                          col("c.from_out").alias("p_from_out")),
                 F.struct(col("c.snapshot"), (~col("c.from_out")).cast("int"), col("c.run_id")))
    return joined.groupBy(*[col(f"t.{c}").alias(c) for c in PARTITION]).agg(
        p.alias("_p"), F.max("c.max_high_watermark").alias("h_max")).select(*PARTITION, "_p.*", "h_max")


def p_days(prev: DataFrame) -> list[date]:
    """The UTC days of the P observations read from OUT (a handful of values)."""
    rows = prev.filter(col("p_from_out")).select(F.to_date("p_snapshot").alias("d")).distinct().collect()
    return sorted(r["d"] for r in rows)


def p_rows(prev: DataFrame, facts: DataFrame, log_lineage: DataFrame, history: History | None,
           days: list[date]) -> tuple[DataFrame, DataFrame]:
    """P's per-replica HWMs (``PARTITION, replica, p_hwm``) and P's leader's log lineage
    (``PARTITION, epoch, start_offset, end_offset``), keyed by the current observation."""
    own = prev.filter(~col("p_from_out"))
    hwms = own.join(facts.select(col("snapshot").alias("p_snapshot"), *TP, "replica",
                                 col("high_watermark").alias("p_hwm")), ["p_snapshot", *TP]
                    ).select(*PARTITION, "replica", "p_hwm")
    lin = own.join(log_lineage.select(col("snapshot").alias("p_snapshot"), *TP, col("replica").alias("p_leader"),
                                      "epoch", "start_offset", "end_offset"), ["p_snapshot", *TP, "p_leader"]
                   ).select(*PARTITION, "epoch", "start_offset", "end_offset")
    if history is not None:
        out_p = prev.filter(col("p_from_out"))
        keys = ["p_run_id", "p_snapshot", *TP]
        rs = history.load("replica_status", days) if days else None
        if rs is not None:
            hwms = hwms.unionByName(out_p.join(rs.select(
                col("run_id").alias("p_run_id"), col("snapshot").alias("p_snapshot"), *TP, "replica",
                col("high_watermark").alias("p_hwm")), keys).select(*PARTITION, "replica", "p_hwm"))
        el = history.load("epoch_lineage", days) if days else None
        if el is not None:
            lin = lin.unionByName(out_p.join(el.filter(col("source") == "log").select(
                col("run_id").alias("p_run_id"), col("snapshot").alias("p_snapshot"), *TP,
                col("replica").alias("p_leader"), "epoch", "start_offset", "end_offset"),
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
    lead = facts.filter(col("role") == "leader").select(
        *PARTITION, col("replica").alias("leader"), col("latest_epoch").alias("leader_epoch"),
        col("high_watermark").alias("leader_hwm"), col("local_log_start_offset").alias("leader_lso"),
        col("log_start_offset").alias("leader_log_start"))
    return leaders.select(*PARTITION, "leader").join(lead, [*PARTITION, "leader"], "left").join(
        scope.select(*PARTITION, col("hmax").alias("max_high_watermark"), "compacted"), PARTITION, "left")


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

    same_leader = (col("leader") == col("p_leader")) & (col("leader_epoch") == col("p_leader_epoch"))
    regression = Kind(
        same_leader & (col("leader_hwm") < col("p_leader_hwm")), "HWM_REGRESSION", "CRITICAL",
        col("leader_hwm"), col("p_leader_hwm"), None,
        F.format_string("Leader %d's high watermark went back from %d (snapshot %s) to %d in the same epoch %d.",
                        col("leader"), col("p_leader_hwm"), col("p_snapshot").cast("string"), col("leader_hwm"),
                        col("leader_epoch")), evidence, replica=col("leader"))

    changed = col("leader").isNotNull() & ~(col("leader").eqNullSafe(col("p_leader"))
                                              & col("leader_epoch").eqNullSafe(col("p_leader_epoch")))
    stale = Kind(
        changed & (col("leader_hwm") < col("h_max")), "STALE_LEADER_HWM", "WARNING", col("leader_hwm"),
        col("h_max"), None,
        F.format_string("New leader %d (epoch %s) has high watermark %d, below %d seen earlier: offsets in "
                        "between were committed before and are not yet committed again.", col("leader"),
                        s("leader_epoch"), col("leader_hwm"), col("h_max")), evidence, replica=col("leader"))

    followers = facts.filter(col("role") == "follower").select(*PARTITION, "replica", "high_watermark")
    f = followers.join(prev.select(*PARTITION, "p_snapshot", "p_run_id"), PARTITION).join(
        hwms, [*PARTITION, "replica"]).filter(col("high_watermark") < col("p_hwm"))
    follower = finding(
        f, "FOLLOWER_HWM_REGRESSION", "INFO", col("high_watermark"), col("p_hwm"), None,
        F.format_string("Follower %d's high watermark went back from %d (snapshot %s) to %d.", col("replica"),
                        col("p_hwm"), col("p_snapshot").cast("string"), col("high_watermark")),
        F.struct("p_snapshot", "p_run_id", "p_hwm", "high_watermark"))

    lost = committed_offsets_lost(obs, p_lineage, log_lineage)
    # (both leader checks read the joined observations: one projection computes them once)
    found = [findings(obs, [regression, stale]), follower, lost]
    return OverTime(reduce(DataFrame.unionByName, found), prev, days)


def committed_offsets_lost(obs: DataFrame, p_lineage: DataFrame, log_lineage: DataFrame) -> DataFrame:
    """``COMMITTED_OFFSET_LOST``: offsets below H_max (and at or above the current leader's
    local log start, SPEC 2) that P's leader held in some epoch and the current leader does not hold in that
    epoch. On compacted topics only offsets both leaders hold are compared."""
    o = obs.filter(col("leader").isNotNull() & col("p_leader").isNotNull() & col("h_max").isNotNull())
    # P's rows clipped to [current leader's local log start, H_max)
    r = p_lineage.join(o.select(*PARTITION, "leader", "leader_lso", "h_max", "compacted"), PARTITION).select(
        *PARTITION, "leader", "compacted", "epoch",
        F.greatest("start_offset", F.coalesce("leader_lso", lit(0))).alias("rs"),
        F.least("end_offset", "h_max").alias("re")).filter(col("rs") < col("re"))
    cur = log_lineage.select(*PARTITION, col("replica").alias("leader"), col("epoch").alias("c_epoch"),
                             col("start_offset").alias("cs"), col("end_offset").alias("ce"))
    overlap = (col("cs") < col("re")) & (col("ce") > col("rs"))
    pairs = r.join(cur, [*PARTITION, "leader"], "left").withColumn(
        "_overlap", F.coalesce(overlap, lit(False)))
    same = col("_overlap") & (col("c_epoch") == col("epoch"))
    # non-compacted: the parts of each P row no same-epoch row of the current leader covers
    # (same-epoch lineage rows of one replica never touch or overlap)
    plain = pairs.filter(~F.coalesce(col("compacted"), lit(False))).groupBy(
        *PARTITION, "leader", "epoch", "rs", "re").agg(
        F.max(same & (col("cs") <= col("rs")) & (col("ce") > col("rs"))).alias("start_covered"),
        F.max(same & (col("cs") <= col("re") - 1) & (col("ce") > col("re") - 1)).alias("end_covered"),
        F.min(F.when(same & (col("ce") < col("re")), col("ce"))).alias("first_end"),
        F.max(F.when(same & (col("cs") > col("rs")), col("cs"))).alias("last_start"),
    ).select(*PARTITION, "leader",
             F.when(~col("start_covered"), col("rs")).otherwise(col("first_end")).alias("first"),
             F.when(~col("end_covered"), col("re") - 1).otherwise(col("last_start") - 1).alias("last"))
    # compacted: offsets the current leader holds, but in another epoch
    other = pairs.filter(F.coalesce(col("compacted"), lit(False)) & col("_overlap")
                         & (col("c_epoch") != col("epoch"))).select(
        *PARTITION, "leader", F.greatest("rs", "cs").alias("first"), (F.least("re", "ce") - 1).alias("last"))
    spans = plain.unionByName(other).filter(col("first").isNotNull()).groupBy(*PARTITION, "leader").agg(
        F.min("first").alias("first"), F.max("last").alias("last"))
    found = spans.join(o.select(*PARTITION, "p_snapshot", "p_run_id", "p_leader", "p_leader_epoch", "h_max",
                                "leader_epoch", "leader_lso", "leader_log_start"), PARTITION).withColumn(
        "replica", col("leader"))
    return finding(
        found, "COMMITTED_OFFSET_LOST", "CRITICAL", col("first"), col("last") + 1, None,
        F.format_string("Leader %d no longer holds, in the same epoch, offsets %d to %d that leader %d held in "
                        "snapshot %s below the committed high watermark %d.", col("leader"), col("first"),
                        col("last"), col("p_leader"), col("p_snapshot").cast("string"), col("h_max")),
        F.struct("p_snapshot", "p_run_id", "p_leader", "p_leader_epoch", "leader_epoch", "h_max",
                 col("leader_log_start").alias("log_start_offset"),
                 col("leader_lso").alias("local_log_start_offset")))
