"""Leader against each follower (SPEC 5's decision table) and the per-partition checks."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame

from auditor import columns as F
from auditor.checks.rows import Kind, finding, findings, s
from auditor.columns import col, lit
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
    f = facts.filter((col("role") == "follower") & col("leader_present") & col("has_dump")).join(
        arrays.select(*KEY, col("entries").alias("f_entries")), KEY, "left")
    lead = facts.filter(col("role") == "leader").join(
        arrays.select(*KEY, col("entries").alias("l_entries")), KEY, "left").select(
        *PARTITION, col("replica").alias("leader"), col("log_end_offset").alias("l_leo"),
        col("high_watermark").alias("l_hwm"), col("local_log_start_offset").alias("l_lso"), "l_entries",
        col("log_start_offset").alias("l_log_start"), col("epochless").alias("l_epochless"))
    return f.join(lead, [*PARTITION, "leader"]).join(scope, PARTITION, "left").select(
        *KEY, "leader", col("log_end_offset").alias("f_leo"), col("high_watermark").alias("f_hwm"),
        col("local_log_start_offset").alias("f_lso"), "f_entries", "l_leo", "l_hwm", "l_lso", "l_entries",
        col("log_start_offset").alias("f_log_start"), "l_log_start",
        F.greatest("f_lso", "l_lso").alias("lso"), F.greatest("f_hwm", "l_hwm").alias("hmax"),
        F.coalesce(col("compacted"), lit(False)).alias("compacted"),
        (F.coalesce(col("epochless"), lit(False)) | F.coalesce(col("l_epochless"), lit(False)))
        .alias("epochless"),
    )


def truncations(pairs: DataFrame, batches: DataFrame, protocol: str, snapshot_starts: bool = False, *,
                 compared: DataFrame, answers: DataFrame, kraft: DataFrame | None = None,
                 irregular: DataFrame | None = None, differing: DataFrame | None = None) -> DataFrame:
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
        compared, answers, irregular, differing: as for :func:`follower_verdicts` (``raft``
            only: the leader's batches read, and an irregular follower's batches in windows
            equal on their summaries, are what covers the follower's offsets).
        kraft: when the input has KRaft's metadata log (SPEC 4.7): its pairs' truncation by
            the ``kraft`` protocol (:func:`auditor.semantics.kraft.truncate_kraft`), used
            whatever ``protocol`` says.
    """
    evaluable = pairs.filter(~col("epochless")) if protocol in EPOCH_PROTOCOLS else pairs
    if kraft is not None:
        evaluable = evaluable.filter(~is_kraft())
    if protocol == "epoch":
        trunc = truncate_epoch(evaluable, batches)
    elif protocol == "raft":
        other = answers.select(*KEY, "first_other")
        leader = batches.select(*PARTITION, col("replica").alias("leader"), col("base_offset").alias("base"),
                                col("last_offset").alias("last"), "epoch").join(
            pairs.select(*PARTITION, col("replica").alias("follower"), "leader"), [*PARTITION, "leader"])
        if irregular is not None and differing is not None:
            leader = leader.unionByName(_agreeing_elsewhere(pairs, batches, irregular, differing).drop("win"))
        raft = raft_offsets(compared, leader, "follower", "leader", snapshot_starts).withColumnRenamed(
            "follower", "replica").drop("leader").join(other, KEY, "full").select(
            *KEY, F.least("raft_offset", "first_other").alias("raft_offset")).filter(col("raft_offset").isNotNull())
        trunc = truncate_one_step(evaluable, batches, protocol, raft)
    else:
        trunc = truncate_one_step(evaluable, batches, protocol)
    if kraft is not None:
        trunc = trunc.select("*", lit(None).cast(SNAPSHOT_ID).alias("fetch_snapshot")).unionByName(kraft)
    return trunc


def _agreeing_elsewhere(pairs: DataFrame, batches: DataFrame, irregular: DataFrame, differing: DataFrame) -> DataFrame:
    """The irregular followers' batches (read whole) in the windows not decided batch by
    batch: those are equal to their leaders' on summaries, so each is a batch its leader
    holds too. ``PARTITION, follower, leader, win, base, last, epoch``."""
    sides = [*PARTITION, "follower", "leader"]
    return batches.join(irregular, KEY, "left_semi").join(pairs.select(*KEY, "leader"), KEY).select(
        *PARTITION, col("replica").alias("follower"), "leader", "win", col("base_offset").alias("base"),
        col("last_offset").alias("last"), "epoch").join(
        differing.select(*PARTITION, col("replica").alias("follower"), "leader", "win"), [*sides, "win"],
        "left_anti")


def compared_sides(pairs: DataFrame, batches: DataFrame, differing: DataFrame) -> DataFrame:
    """Each follower's batches of the windows decided batch by batch next to its leader's
    (:func:`auditor.semantics.divergence.compared_batches`): what :func:`truncations`
    (``raft``) and :func:`follower_verdicts` compare, best stored once for both."""
    sides = pairs.select(*PARTITION, col("replica").alias("follower"), "leader", "lso", "hmax", "compacted").join(
        differing.select(*PARTITION, col("replica").alias("follower"), "leader", "win"),
        [*PARTITION, "follower", "leader"])
    return compared_batches(batches, sides, "follower", "leader")


def follower_verdicts(pairs: DataFrame, batches: DataFrame, trunc: DataFrame, compared: DataFrame, *,
                      answers: DataFrame, windows: DataFrame, read_windows: DataFrame, protocol: str,
                      irregular: DataFrame | None = None, differing: DataFrame | None = None,
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
        irregular: ``KEY`` of the replicas read whole, whose batches may overlap (SPEC 4.4:
            a follower's offset covered by an agreeing batch of its own agrees), with
            ``differing`` (``PARTITION, replica, leader, win``: the windows ``compared``
            holds); the follower's other windows are equal to its leader's.
        kraft: the input has KRaft's metadata log (SPEC 4.7): the rows then carry
            ``protocol`` (per row: ``kraft`` for the metadata log, else ``protocol``) and
            ``fetch_snapshot`` (from ``trunc``).
    """
    other = answers.select(*KEY, "first_other")
    overlapping, covering = None, None
    if irregular is not None and differing is not None:
        overlapping = irregular.select(*PARTITION, col("replica").alias("follower"))
        covering = _agreeing_elsewhere(pairs, batches, irregular, differing)
    exact = divergence_offsets(compared, "follower", "leader", overlapping, covering).withColumnRenamed(
        "follower", "replica")
    d = exact.join(other, KEY, "full").select(
        *KEY, F.least("divergence_offset", "first_other").alias("divergence_offset")).filter(
        col("divergence_offset").isNotNull())
    conflicts = same_epoch_conflicts(compared, "follower", "leader").withColumnRenamed("follower", "replica")
    evaluated = trunc.withColumn("evaluated", lit(True))
    records = removed_records(trunc.select(*KEY, "truncation_offset").filter(col("truncation_offset").isNotNull()),
                              windows, batches, read_windows)
    verdicts = (
        pairs.join(d, KEY, "left")
        .join(conflicts.drop("leader"), KEY, "left")
        .join(evaluated, KEY, "left")
        .join(records, KEY, "left")
        .withColumn("evaluated", F.coalesce(col("evaluated"), lit(False)))
    )
    if kraft:
        verdicts = verdicts.withColumn("protocol", F.when(is_kraft(), lit("kraft")).otherwise(lit(protocol)))
    return verdicts


def follower_status(v: DataFrame) -> Column:
    """``replica_status.status`` of a follower row of :func:`follower_verdicts`."""
    d, t = col("divergence_offset"), col("truncation_offset")
    unknown = ~col("evaluated") | col("missing_hwm")
    return (
        F.when(unknown, "unknown")
        .when(fetches_snapshot(v), F.when(d.isNotNull(), "divergent_suffix").otherwise("lagging"))
        .when(d.isNotNull() & (t.isNull() | (t > d)), "silent_divergence")
        .when(t.isNotNull() & (d.isNull() | (t < d)), "over_truncation")
        .when(d.isNotNull() & (t == d), "divergent_suffix")
        .when(col("f_leo") < col("l_leo"), "lagging")
        .otherwise("in_sync")
    )


def fetches_snapshot(v: DataFrame) -> Column:
    """Whether a verdict row's ``kraft`` exchange ended in FETCH_SNAPSHOT (SPEC 4.7)."""
    return col("fetch_snapshot").isNotNull() if "fetch_snapshot" in v.columns else lit(False)


def _protocol(protocol: str, v: DataFrame) -> Column:
    """The protocol of a verdict row: its own column when rows differ (KRaft's metadata log)."""
    return col("protocol") if "protocol" in v.columns else lit(protocol)


def _details(protocol: str, v: DataFrame) -> Column:
    extra = [col("fetch_snapshot")] if "fetch_snapshot" in v.columns else []
    return F.struct(
        _protocol(protocol, v).alias("protocol"), "leader", col("f_leo").alias("follower_log_end_offset"),
        col("l_leo").alias("leader_log_end_offset"), col("f_hwm").alias("follower_high_watermark"),
        col("l_hwm").alias("leader_high_watermark"), col("f_log_start").alias("log_start_offset"),
        col("f_lso").alias("local_log_start_offset"), col("l_log_start").alias("leader_log_start_offset"),
        col("l_lso").alias("leader_local_log_start_offset"), "divergence_offset", "truncation_offset",
        "truncation_rounds", "resume_offset", "hwm_fallback", "truncation_offset_2_8",
        col("rounds_detail").alias("rounds"), *extra)


def pair_findings(v: DataFrame, protocol: str) -> DataFrame:
    """The leader-against-follower findings of SPEC 5 from :func:`follower_verdicts`."""
    d, t, leo_f, leo_l = col("divergence_offset"), col("truncation_offset"), col("f_leo"), col("l_leo")
    judged = col("evaluated") & ~col("missing_hwm")
    details = _details(protocol, v)
    proto = _protocol(protocol, v)
    # SPEC 4.7: after FETCH_SNAPSHOT the follower restarts from the leader's snapshot, so a
    # divergence is a divergent suffix, never over-truncation or silent divergence
    fs = fetches_snapshot(v)

    def snap_field(name: str) -> Column:
        return col(f"fetch_snapshot.{name}") if "fetch_snapshot" in v.columns else lit(None).cast("bigint")

    resume_note = F.when(col("resume_offset") > t, F.format_string(
        "; Kafka resumes fetching at %d, so offsets %d to %d are never fetched again", col("resume_offset"), t,
        col("resume_offset") - 1)).otherwise(lit(""))
    lag = Kind(
        d.isNull() & (leo_f < leo_l), "FOLLOWER_LAG", "INFO", leo_f, leo_l, None,
        F.format_string("Follower %d is %d offsets behind leader %d (log end %d vs %d).", col("replica"),
                        leo_l - leo_f, col("leader"), leo_f, leo_l), details)
    suffix = Kind(
        judged & d.isNotNull() & ((t == d) | fs), "DIVERGENT_SUFFIX", "WARNING", d, leo_f, None,
        F.when(fs, F.format_string(
            "Follower %d diverges from leader %d from offset %d; it fetches leader %d's snapshot (end offset %d, "
            "epoch %d) and its log is replaced.", col("replica"), col("leader"), d, col("leader"),
            snap_field("end_offset"), snap_field("epoch")))
        .otherwise(F.format_string(
            "Follower %d diverges from leader %d from offset %d; %s truncation to %d removes exactly "
            "the differing records%s.", col("replica"), col("leader"), d, proto, t, resume_note)),
        details)
    over = Kind(
        judged & t.isNotNull() & (d.isNull() | (t < d)) & ~fs, "OVER_TRUNCATION", "WARNING", t,
        F.coalesce(d, leo_f), None,
        F.format_string("Follower %d would truncate to %d under %s although its records up to %s match leader "
                        "%d%s.", col("replica"), t, proto, s(F.coalesce(d, leo_f) - 1),
                        col("leader"), resume_note), details)
    silent = Kind(
        judged & d.isNotNull() & (t.isNull() | (t > d)) & ~fs, "SILENT_DIVERGENCE", "CRITICAL", d,
        F.coalesce(t, leo_f), None,
        F.format_string("Follower %d differs from leader %d from offset %d but %s truncation %s, so it keeps "
                        "records the leader does not have.", col("replica"), col("leader"), d, proto,
                        F.when(t.isNull(), lit("removes nothing")).otherwise(F.format_string("stops at %d", t))),
        details)
    conflict = Kind(
        col("conflict").isNotNull(), "SAME_EPOCH_CONFLICT", "CRITICAL", col("conflict.base"),
        col("conflict.last") + 1, col("conflict.epoch"),
        F.format_string("Follower %d and leader %d hold different batches at offset %d in the same epoch %d "
                        "(two writers in one epoch, or corruption).", col("replica"), col("leader"),
                        col("conflict.base"), col("conflict.epoch")),
        F.struct("leader", col("conflict.base").alias("base_offset"),
                 col("conflict.last").alias("follower_last_offset"), col("conflict.o_last").alias("leader_last_offset"),
                 col("conflict.crc").alias("follower_crc"), col("conflict.o_crc").alias("leader_crc")))
    committed = least_strict(col("l_hwm"), col("f_hwm"))
    matching = Kind(
        d < committed, "LOG_MATCHING_VIOLATION", "CRITICAL", d, committed, None,
        F.format_string("Follower %d and leader %d differ at offset %d, below the committed prefix "
                        "(min HWM %d): the log matching property is broken.", col("replica"), col("leader"), d,
                        committed), details)
    snap_end = snap_field("end_offset")
    loss = Kind(
        judged & F.when(fs, snap_end < col("f_hwm")).otherwise(t < col("f_hwm")),
        "COMMITTED_DATA_LOSS", "CRITICAL", F.when(fs, snap_end).otherwise(t), col("f_hwm"), None,
        F.when(fs, F.format_string(
            "Follower %d fetches leader %d's snapshot ending at %d, below offset %d that it had seen committed: "
            "offsets %d to %d are lost.", col("replica"), col("leader"), snap_end, col("f_hwm"), snap_end,
            col("f_hwm") - 1))
        .otherwise(F.format_string(
            "Follower %d would truncate to %d under %s, deleting offsets up to %d that it had seen "
            "committed (HWM %d).", col("replica"), t, proto, col("f_hwm") - 1, col("f_hwm"))),
        details)
    return findings(v, [lag, suffix, over, silent, conflict, matching, loss])


def isr_incomplete(facts: DataFrame, batches: DataFrame, scope: DataFrame, differing: DataFrame,
                   answers: DataFrame) -> DataFrame:
    """``ISR_INCOMPLETE``: an ISR/ELR member lacks an agreeing copy of a leader batch below HWM(L).

    Windows decided batch by batch (``differing``, keyed by the member as ``replica``) are
    compared here; the others' summaries give ``answers.first_lacking``
    (:func:`auditor.compare.windows.summary_answers`)."""
    members = facts.filter(
        (F.coalesce(col("in_isr"), lit(False)) | F.coalesce(col("in_elr"), lit(False)))
        & (col("role") == "follower") & col("has_dump") & col("leader_present")).select(
        *PARTITION, col("replica").alias("member"), "leader", col("high_watermark").alias("m_hwm"),
        col("local_log_start_offset").alias("m_lso"), col("log_start_offset").alias("m_log_start"))
    lead = facts.filter(col("role") == "leader").select(
        *PARTITION, col("replica").alias("leader"), col("high_watermark").alias("l_hwm"),
        col("local_log_start_offset").alias("l_lso"), col("log_start_offset").alias("l_log_start"))
    sides = members.join(lead, [*PARTITION, "leader"]).filter(col("l_hwm").isNotNull()).join(
        scope, PARTITION, "left").select(
        *PARTITION, "leader", "member", "l_hwm", "m_lso", "l_lso", "m_log_start", "l_log_start",
        F.greatest("m_lso", "l_lso").alias("lso"),
        F.greatest("m_hwm", "l_hwm").alias("hmax"), F.coalesce(col("compacted"), lit(False)).alias("compacted"))
    in_windows = sides.join(differing.select(*PARTITION, col("replica").alias("member"), "leader", "win"),
                            [*PARTITION, "member", "leader"])
    compared = compared_batches(batches, in_windows, "leader", "member")
    lacking = answers.select(*PARTITION, col("replica").alias("member"), "leader", "first_lacking")
    gaps = first_missing(compared, "leader", "member", "l_hwm").join(lacking, [*PARTITION, "leader", "member"], "full") \
        .join(sides.select(*PARTITION, "leader", "member", "l_hwm", "m_lso", "l_lso", "m_log_start", "l_log_start"),
              [*PARTITION, "leader", "member"]).select(
        *PARTITION, "leader", "member", "l_hwm", "m_lso", "l_lso", "m_log_start", "l_log_start",
        F.least("first_missing", F.when(col("first_lacking") < col("l_hwm"), col("first_lacking")))
        .alias("first_missing")).filter(col("first_missing").isNotNull())
    return finding(
        gaps, "ISR_INCOMPLETE", "CRITICAL", col("first_missing"), col("l_hwm"), None,
        F.format_string("In-sync replica %d lacks leader %d's batch at offset %d, below the leader's high "
                        "watermark %d.", col("member"), col("leader"), col("first_missing"), col("l_hwm")),
        F.struct("leader", "first_missing", col("l_hwm").alias("leader_high_watermark"),
                 col("m_log_start").alias("log_start_offset"), col("m_lso").alias("local_log_start_offset"),
                 col("l_log_start").alias("leader_log_start_offset"),
                 col("l_lso").alias("leader_local_log_start_offset")), replica=col("member"))


def partition_findings(leaders: DataFrame, facts: DataFrame) -> DataFrame:
    """``LEADER_INCOMPLETE``, ``LEADER_UNKNOWN`` and the partition-level ``MISSING_INPUT``."""
    max_hwm = facts.groupBy(*PARTITION).agg(F.max("high_watermark").alias("max_hwm"))
    lead = facts.filter(col("role") == "leader").select(*PARTITION, col("log_end_offset").alias("l_leo"))
    p = leaders.join(max_hwm, PARTITION, "left").join(lead, PARTITION, "left")
    incomplete = Kind(
        col("l_leo") < col("max_hwm"), "LEADER_INCOMPLETE", "CRITICAL", col("l_leo"), col("max_hwm"), None,
        F.format_string("Leader %d's log ends at %d, below the highest high watermark %d of any replica: "
                        "committed records are missing from the leader.", col("leader"), col("l_leo"),
                        col("max_hwm")),
        F.struct("leader", "leader_source", col("l_leo").alias("leader_log_end_offset"),
                 col("max_hwm").alias("max_high_watermark")), replica=lit(None))
    unknown = Kind(
        col("leader_source") == "unknown", "LEADER_UNKNOWN", "WARNING", None, None, None,
        lit("No leader in the metadata and no replica has an epoch to infer one from: leader-against-follower "
              "checks skipped."), F.struct("leader_source"), replica=lit(None))
    absent = Kind(
        (col("leader_source") == "metadata") & ~col("leader_present"), "MISSING_INPUT", "WARNING",
        None, None, None,
        F.format_string("The metadata leader %d has no dumps in the snapshot: leader-against-follower checks "
                        "skipped.", col("leader")),
        F.struct("leader", F.array(lit("metadata leader has no data")).alias("reasons")), replica=lit(None))
    return findings(p, [incomplete, unknown, absent])


def metadata_conflicts(metadata: DataFrame) -> DataFrame:
    """``METADATA_CONFLICT`` (SPEC 5, per partition): ``topics-describe.txt`` lists the
    partition again with other parsed values; the first line is the one used."""
    return finding(
        metadata.filter(F.size("conflict_lines") > 0), "METADATA_CONFLICT", "WARNING", None, None, None,
        F.format_string("%s lists partition %s-%d %d more time(s) with other values than the line used (leader "
                        "%s): those lines are quarantined.", col("file"), col("topic"), col("partition"),
                        F.size("conflict_lines"), F.coalesce(col("leader").cast("string"), lit("none"))),
        F.struct("file", col("conflict_lines").alias("conflicting_lines"), "leader", "replicas", "isr"),
        replica=lit(None))
