"""Leader against each follower (SPEC 5's decision table) and the per-partition checks."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from auditor.checks.rows import Kind, finding, findings, s
from auditor.compare.windows import removed_records
from auditor.ingest.kraft import is_kraft
from auditor.semantics.divergence import (
    compared_batches,
    divergence_offsets,
    first_missing,
    raft_offsets,
    same_epoch_conflicts,
)
from auditor.semantics.eoe import cache_arrays
from auditor.semantics.kraft import SNAPSHOT_ID
from auditor.semantics.truncation import least_strict, truncate_epoch, truncate_one_step

KEY = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]
EPOCH_PROTOCOLS = ("epoch", "kip-101", "kraft")


def build_pairs(facts: DataFrame, cache: DataFrame, scope: DataFrame) -> DataFrame:
    """One row per follower whose leader is known and holds dumps.

    Columns: ``KEY`` (``replica`` = the follower), ``leader``, the follower's and leader's
    LEO, HWM, log start, epoch cache arrays, ``lso`` and ``hmax`` (the higher of the two),
    ``compacted``, ``epochless`` (either side's dumps carry no epoch). ``f_lso``, ``l_lso``
    and ``lso`` are local log start offsets (SPEC 2: every comparison starts there);
    ``f_log_start`` and ``l_log_start`` the log start offsets, for ``details``.
    """
    arrays = cache_arrays(cache)
    f = facts.filter((F.col("role") == "follower") & F.col("leader_present") & F.col("has_dump")).join(
        arrays.select(*KEY, F.col("entries").alias("f_entries")), KEY, "left")
    lead = facts.filter(F.col("role") == "leader").join(
        arrays.select(*KEY, F.col("entries").alias("l_entries")), KEY, "left").select(
        *PARTITION, F.col("replica").alias("leader"), F.col("log_end_offset").alias("l_leo"),
        F.col("high_watermark").alias("l_hwm"), F.col("local_log_start_offset").alias("l_lso"), "l_entries",
        F.col("log_start_offset").alias("l_log_start"), F.col("epochless").alias("l_epochless"))
    return f.join(lead, [*PARTITION, "leader"]).join(scope, PARTITION, "left").select(
        *KEY, "leader", F.col("log_end_offset").alias("f_leo"), F.col("high_watermark").alias("f_hwm"),
        F.col("local_log_start_offset").alias("f_lso"), "f_entries", "l_leo", "l_hwm", "l_lso", "l_entries",
        F.col("log_start_offset").alias("f_log_start"), "l_log_start",
        F.greatest("f_lso", "l_lso").alias("lso"), F.greatest("f_hwm", "l_hwm").alias("hmax"),
        F.coalesce(F.col("compacted"), F.lit(False)).alias("compacted"),
        (F.coalesce(F.col("epochless"), F.lit(False)) | F.coalesce(F.col("l_epochless"), F.lit(False)))
        .alias("epochless"),
    )


def truncations(pairs: DataFrame, batches: DataFrame, protocol: str, snapshot_starts: bool = False, *,
                 compared: DataFrame, answers: DataFrame, kraft: DataFrame | None = None) -> DataFrame:
    """Per evaluable follower: where it truncates (SPEC 4.3), ``KEY`` +
    :data:`auditor.semantics.truncation.RESULT_COLUMNS` (+ ``fetch_snapshot`` with ``kraft``).

    Truncation is not evaluated under an epoch protocol when a dump has no epochs. Best
    stored before :func:`follower_verdicts` reads it: the ``epoch`` protocol's rounds are one
    large expression, which every later DataFrame step would analyse again.
    ``snapshot_starts``: each log starts after a Raft snapshot (``--format etcd``): the
    ``raft`` rule looks only at or above both log starts (see :func:`raft_offsets`).

    Args:
        pairs: :func:`build_pairs`.
        batches: the batches read exactly (see :func:`follower_verdicts`).
        compared, answers: as for :func:`follower_verdicts` (``raft`` only).
        kraft: when the input has KRaft's metadata log (SPEC 4.7): its pairs' truncation by
            the ``kraft`` protocol (:func:`auditor.semantics.kraft.truncate_kraft`), used
            whatever ``protocol`` says.
    """
    evaluable = pairs.filter(~F.col("epochless")) if protocol in EPOCH_PROTOCOLS else pairs
    if kraft is not None:
        evaluable = evaluable.filter(~is_kraft())
    if protocol == "epoch":
        trunc = truncate_epoch(evaluable, batches)
    elif protocol == "raft":
        other = answers.select(*KEY, "first_other")
        raft = raft_offsets(compared, "follower", "leader", snapshot_starts).withColumnRenamed(
            "follower", "replica").drop("leader").join(other, KEY, "full").select(
            *KEY, F.least("raft_offset", "first_other").alias("raft_offset")).filter(F.col("raft_offset").isNotNull())
        trunc = truncate_one_step(evaluable, batches, protocol, raft)
    else:
        trunc = truncate_one_step(evaluable, batches, protocol)
    if kraft is not None:
        trunc = trunc.select("*", F.lit(None).cast(SNAPSHOT_ID).alias("fetch_snapshot")).unionByName(kraft)
    return trunc


def compared_sides(pairs: DataFrame, batches: DataFrame, differing: DataFrame) -> DataFrame:
    """Each follower's batches of the windows decided batch by batch next to its leader's
    (:func:`auditor.semantics.divergence.compared_batches`): what :func:`truncations`
    (``raft``) and :func:`follower_verdicts` compare, best stored once for both."""
    sides = pairs.select(*PARTITION, F.col("replica").alias("follower"), "leader", "lso", "hmax", "compacted").join(
        differing.select(*PARTITION, F.col("replica").alias("follower"), "leader", "win"),
        [*PARTITION, "follower", "leader"])
    return compared_batches(batches, sides, "follower", "leader")


def follower_verdicts(pairs: DataFrame, batches: DataFrame, trunc: DataFrame, compared: DataFrame, *,
                      answers: DataFrame, windows: DataFrame, read_windows: DataFrame, protocol: str,
                      kraft: bool = False) -> DataFrame:
    """Per follower: ``divergence_offset``, truncation results, and the first same-epoch
    conflict.

    Args:
        pairs: :func:`build_pairs`.
        batches: the batches read exactly: both sides of every differing window, the windows
            truncation looks into, and irregular replicas whole (with ``win``).
        trunc: :func:`truncations` of these pairs, best a stored frame.
        compared: :func:`compared_sides` of the windows decided batch by batch
            (``differing``: :func:`auditor.compare.windows.differing_windows`).
        answers: what the other windows' summaries decide
            (:func:`auditor.compare.windows.summary_answers`): ``first_other``, the first
            offset the follower holds that the leader does not hold at all.
        windows: the window summaries; read_windows: ``KEY, win`` of the windows in ``batches``.
        protocol: the audit's protocol (``--protocol``).
        kraft: the input has KRaft's metadata log (SPEC 4.7): the rows then carry
            ``protocol`` (per row: ``kraft`` for the metadata log, else ``protocol``) and
            ``fetch_snapshot`` (from ``trunc``).
    """
    other = answers.select(*KEY, "first_other")
    exact = divergence_offsets(compared, "follower", "leader").withColumnRenamed("follower", "replica")
    d = exact.join(other, KEY, "full").select(
        *KEY, F.least("divergence_offset", "first_other").alias("divergence_offset")).filter(
        F.col("divergence_offset").isNotNull())
    conflicts = same_epoch_conflicts(compared, "follower", "leader").withColumnRenamed("follower", "replica")
    evaluated = trunc.withColumn("evaluated", F.lit(True))
    records = removed_records(trunc.select(*KEY, "truncation_offset").filter(F.col("truncation_offset").isNotNull()),
                              windows, batches, read_windows)
    verdicts = (
        pairs.join(d, KEY, "left")
        .join(conflicts.drop("leader"), KEY, "left")
        .join(evaluated, KEY, "left")
        .join(records, KEY, "left")
        .withColumn("evaluated", F.coalesce(F.col("evaluated"), F.lit(False)))
    )
    if kraft:
        verdicts = verdicts.withColumn("protocol", F.when(is_kraft(), F.lit("kraft")).otherwise(F.lit(protocol)))
    return verdicts


def follower_status(v: DataFrame) -> Column:
    """``replica_status.status`` of a follower row of :func:`follower_verdicts`."""
    d, t = F.col("divergence_offset"), F.col("truncation_offset")
    unknown = ~F.col("evaluated") | F.col("missing_hwm")
    return (
        F.when(unknown, "unknown")
        .when(fetches_snapshot(v), F.when(d.isNotNull(), "divergent_suffix").otherwise("lagging"))
        .when(d.isNotNull() & (t.isNull() | (t > d)), "silent_divergence")
        .when(t.isNotNull() & (d.isNull() | (t < d)), "over_truncation")
        .when(d.isNotNull() & (t == d), "divergent_suffix")
        .when(F.col("f_leo") < F.col("l_leo"), "lagging")
        .otherwise("in_sync")
    )


def fetches_snapshot(v: DataFrame) -> Column:
    """Whether a verdict row's ``kraft`` exchange ended in FETCH_SNAPSHOT (SPEC 4.7)."""
    return F.col("fetch_snapshot").isNotNull() if "fetch_snapshot" in v.columns else F.lit(False)


def _protocol(protocol: str, v: DataFrame) -> Column:
    """The protocol of a verdict row: its own column when rows differ (KRaft's metadata log)."""
    return F.col("protocol") if "protocol" in v.columns else F.lit(protocol)


def _details(protocol: str, v: DataFrame) -> Column:
    extra = [F.col("fetch_snapshot")] if "fetch_snapshot" in v.columns else []
    return F.struct(
        _protocol(protocol, v).alias("protocol"), "leader", F.col("f_leo").alias("follower_log_end_offset"),
        F.col("l_leo").alias("leader_log_end_offset"), F.col("f_hwm").alias("follower_high_watermark"),
        F.col("l_hwm").alias("leader_high_watermark"), F.col("f_log_start").alias("log_start_offset"),
        F.col("f_lso").alias("local_log_start_offset"), F.col("l_log_start").alias("leader_log_start_offset"),
        F.col("l_lso").alias("leader_local_log_start_offset"), "divergence_offset", "truncation_offset",
        "truncation_rounds", "resume_offset", "hwm_fallback", "truncation_offset_2_8",
        F.col("rounds_detail").alias("rounds"), *extra)


def pair_findings(v: DataFrame, protocol: str) -> DataFrame:
    """The leader-against-follower findings of SPEC 5 from :func:`follower_verdicts`."""
    d, t, leo_f, leo_l = F.col("divergence_offset"), F.col("truncation_offset"), F.col("f_leo"), F.col("l_leo")
    judged = F.col("evaluated") & ~F.col("missing_hwm")
    details = _details(protocol, v)
    proto = _protocol(protocol, v)
    # SPEC 4.7: after FETCH_SNAPSHOT the follower restarts from the leader's snapshot, so a
    # divergence is a divergent suffix, never over-truncation or silent divergence
    fs = fetches_snapshot(v)

    def snap_field(name: str) -> Column:
        return F.col(f"fetch_snapshot.{name}") if "fetch_snapshot" in v.columns else F.lit(None).cast("bigint")

    resume_note = F.when(F.col("resume_offset") > t, F.format_string(
        "; Kafka resumes fetching at %d, so offsets %d to %d are never fetched again", F.col("resume_offset"), t,
        F.col("resume_offset") - 1)).otherwise(F.lit(""))
    lag = Kind(
        d.isNull() & (leo_f < leo_l), "FOLLOWER_LAG", "INFO", leo_f, leo_l, None,
        F.format_string("Follower %d is %d offsets behind leader %d (log end %d vs %d).", F.col("replica"),
                        leo_l - leo_f, F.col("leader"), leo_f, leo_l), details)
    suffix = Kind(
        judged & d.isNotNull() & ((t == d) | fs), "DIVERGENT_SUFFIX", "WARNING", d, leo_f, None,
        F.when(fs, F.format_string(
            "Follower %d diverges from leader %d from offset %d; it fetches leader %d's snapshot (end offset %d, "
            "epoch %d) and its log is replaced.", F.col("replica"), F.col("leader"), d, F.col("leader"),
            snap_field("end_offset"), snap_field("epoch")))
        .otherwise(F.format_string(
            "Follower %d diverges from leader %d from offset %d; %s truncation to %d removes exactly "
            "the differing records%s.", F.col("replica"), F.col("leader"), d, proto, t, resume_note)),
        details)
    over = Kind(
        judged & t.isNotNull() & (d.isNull() | (t < d)) & ~fs, "OVER_TRUNCATION", "WARNING", t,
        F.coalesce(d, leo_f), None,
        F.format_string("Follower %d would truncate to %d under %s although its records up to %s match leader "
                        "%d%s.", F.col("replica"), t, proto, s(F.coalesce(d, leo_f) - 1),
                        F.col("leader"), resume_note), details)
    silent = Kind(
        judged & d.isNotNull() & (t.isNull() | (t > d)) & ~fs, "SILENT_DIVERGENCE", "CRITICAL", d,
        F.coalesce(t, leo_f), None,
        F.format_string("Follower %d differs from leader %d from offset %d but %s truncation %s, so it keeps "
                        "records the leader does not have.", F.col("replica"), F.col("leader"), d, proto,
                        F.when(t.isNull(), F.lit("removes nothing")).otherwise(F.format_string("stops at %d", t))),
        details)
    conflict = Kind(
        F.col("conflict").isNotNull(), "SAME_EPOCH_CONFLICT", "CRITICAL", F.col("conflict.base"),
        F.col("conflict.last") + 1, F.col("conflict.epoch"),
        F.format_string("Follower %d and leader %d hold different batches at offset %d in the same epoch %d "
                        "(two writers in one epoch, or corruption).", F.col("replica"), F.col("leader"),
                        F.col("conflict.base"), F.col("conflict.epoch")),
        F.struct("leader", F.col("conflict.base").alias("base_offset"),
                 F.col("conflict.last").alias("follower_last_offset"), F.col("conflict.o_last").alias("leader_last_offset"),
                 F.col("conflict.crc").alias("follower_crc"), F.col("conflict.o_crc").alias("leader_crc")))
    committed = least_strict(F.col("l_hwm"), F.col("f_hwm"))
    matching = Kind(
        d < committed, "LOG_MATCHING_VIOLATION", "CRITICAL", d, committed, None,
        F.format_string("Follower %d and leader %d differ at offset %d, below the committed prefix "
                        "(min HWM %d): the log matching property is broken.", F.col("replica"), F.col("leader"), d,
                        committed), details)
    snap_end = snap_field("end_offset")
    loss = Kind(
        judged & F.when(fs, snap_end < F.col("f_hwm")).otherwise(t < F.col("f_hwm")),
        "COMMITTED_DATA_LOSS", "CRITICAL", F.when(fs, snap_end).otherwise(t), F.col("f_hwm"), None,
        F.when(fs, F.format_string(
            "Follower %d fetches leader %d's snapshot ending at %d, below offset %d that it had seen committed: "
            "offsets %d to %d are lost.", F.col("replica"), F.col("leader"), snap_end, F.col("f_hwm"), snap_end,
            F.col("f_hwm") - 1))
        .otherwise(F.format_string(
            "Follower %d would truncate to %d under %s, deleting offsets up to %d that it had seen "
            "committed (HWM %d).", F.col("replica"), t, proto, F.col("f_hwm") - 1, F.col("f_hwm"))),
        details)
    return findings(v, [lag, suffix, over, silent, conflict, matching, loss])


def isr_incomplete(facts: DataFrame, batches: DataFrame, scope: DataFrame, differing: DataFrame,
                   answers: DataFrame) -> DataFrame:
    """``ISR_INCOMPLETE``: an ISR/ELR member lacks an agreeing copy of a leader batch below HWM(L).

    Windows decided batch by batch (``differing``, keyed by the member as ``replica``) are
    compared here; the others' summaries give ``answers.first_lacking``
    (:func:`auditor.compare.windows.summary_answers`)."""
    members = facts.filter(
        (F.coalesce(F.col("in_isr"), F.lit(False)) | F.coalesce(F.col("in_elr"), F.lit(False)))
        & (F.col("role") == "follower") & F.col("has_dump") & F.col("leader_present")).select(
        *PARTITION, F.col("replica").alias("member"), "leader", F.col("high_watermark").alias("m_hwm"),
        F.col("local_log_start_offset").alias("m_lso"), F.col("log_start_offset").alias("m_log_start"))
    lead = facts.filter(F.col("role") == "leader").select(
        *PARTITION, F.col("replica").alias("leader"), F.col("high_watermark").alias("l_hwm"),
        F.col("local_log_start_offset").alias("l_lso"), F.col("log_start_offset").alias("l_log_start"))
    sides = members.join(lead, [*PARTITION, "leader"]).filter(F.col("l_hwm").isNotNull()).join(
        scope, PARTITION, "left").select(
        *PARTITION, "leader", "member", "l_hwm", "m_lso", "l_lso", "m_log_start", "l_log_start",
        F.greatest("m_lso", "l_lso").alias("lso"),
        F.greatest("m_hwm", "l_hwm").alias("hmax"), F.coalesce(F.col("compacted"), F.lit(False)).alias("compacted"))
    in_windows = sides.join(differing.select(*PARTITION, F.col("replica").alias("member"), "leader", "win"),
                            [*PARTITION, "member", "leader"])
    compared = compared_batches(batches, in_windows, "leader", "member")
    lacking = answers.select(*PARTITION, F.col("replica").alias("member"), "leader", "first_lacking")
    gaps = first_missing(compared, "leader", "member", "l_hwm").join(lacking, [*PARTITION, "leader", "member"], "full") \
        .join(sides.select(*PARTITION, "leader", "member", "l_hwm", "m_lso", "l_lso", "m_log_start", "l_log_start"),
              [*PARTITION, "leader", "member"]).select(
        *PARTITION, "leader", "member", "l_hwm", "m_lso", "l_lso", "m_log_start", "l_log_start",
        F.least("first_missing", F.when(F.col("first_lacking") < F.col("l_hwm"), F.col("first_lacking")))
        .alias("first_missing")).filter(F.col("first_missing").isNotNull())
    return finding(
        gaps, "ISR_INCOMPLETE", "CRITICAL", F.col("first_missing"), F.col("l_hwm"), None,
        F.format_string("In-sync replica %d lacks leader %d's batch at offset %d, below the leader's high "
                        "watermark %d.", F.col("member"), F.col("leader"), F.col("first_missing"), F.col("l_hwm")),
        F.struct("leader", "first_missing", F.col("l_hwm").alias("leader_high_watermark"),
                 F.col("m_log_start").alias("log_start_offset"), F.col("m_lso").alias("local_log_start_offset"),
                 F.col("l_log_start").alias("leader_log_start_offset"),
                 F.col("l_lso").alias("leader_local_log_start_offset")), replica=F.col("member"))


def partition_findings(leaders: DataFrame, facts: DataFrame) -> DataFrame:
    """``LEADER_INCOMPLETE``, ``LEADER_UNKNOWN`` and the partition-level ``MISSING_INPUT``."""
    max_hwm = facts.groupBy(*PARTITION).agg(F.max("high_watermark").alias("max_hwm"))
    lead = facts.filter(F.col("role") == "leader").select(*PARTITION, F.col("log_end_offset").alias("l_leo"))
    p = leaders.join(max_hwm, PARTITION, "left").join(lead, PARTITION, "left")
    incomplete = Kind(
        F.col("l_leo") < F.col("max_hwm"), "LEADER_INCOMPLETE", "CRITICAL", F.col("l_leo"), F.col("max_hwm"), None,
        F.format_string("Leader %d's log ends at %d, below the highest high watermark %d of any replica: "
                        "committed records are missing from the leader.", F.col("leader"), F.col("l_leo"),
                        F.col("max_hwm")),
        F.struct("leader", "leader_source", F.col("l_leo").alias("leader_log_end_offset"),
                 F.col("max_hwm").alias("max_high_watermark")), replica=F.lit(None))
    unknown = Kind(
        F.col("leader_source") == "unknown", "LEADER_UNKNOWN", "WARNING", None, None, None,
        F.lit("No leader in the metadata and no replica has an epoch to infer one from: leader-against-follower "
              "checks skipped."), F.struct("leader_source"), replica=F.lit(None))
    absent = Kind(
        (F.col("leader_source") == "metadata") & ~F.col("leader_present"), "MISSING_INPUT", "WARNING",
        None, None, None,
        F.format_string("The metadata leader %d has no dumps in the snapshot: leader-against-follower checks "
                        "skipped.", F.col("leader")),
        F.struct("leader", F.array(F.lit("metadata leader has no data")).alias("reasons")), replica=F.lit(None))
    return findings(p, [incomplete, unknown, absent])


def metadata_conflicts(metadata: DataFrame) -> DataFrame:
    """``METADATA_CONFLICT`` (SPEC 5, per partition): ``topics-describe.txt`` lists the
    partition again with other parsed values; the first line is the one used."""
    return finding(
        metadata.filter(F.size("conflict_lines") > 0), "METADATA_CONFLICT", "WARNING", None, None, None,
        F.format_string("%s lists partition %s-%d %d more time(s) with other values than the line used (leader "
                        "%s): those lines are quarantined.", F.col("file"), F.col("topic"), F.col("partition"),
                        F.size("conflict_lines"), F.coalesce(F.col("leader").cast("string"), F.lit("none"))),
        F.struct("file", F.col("conflict_lines").alias("conflicting_lines"), "leader", "replicas", "isr"),
        replica=F.lit(None))
