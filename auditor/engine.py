"""``auditor.audit``: from a parsed snapshot to the output tables (SPEC sections 4 to 6)."""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from datetime import date, datetime, timezone

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from auditor.checks import replica as replica_checks
from auditor.checks import status
from auditor.checks.kraft import kraft_findings
from auditor.checks.overtime import (
    History,
    current_observations,
    over_time_findings,
    previous_observations,
)
from auditor.checks.pairs import (
    EPOCH_PROTOCOLS,
    build_pairs,
    compared_sides,
    follower_status,
    follower_verdicts,
    isr_incomplete,
    metadata_conflicts,
    pair_findings,
    partition_findings,
    truncations,
)
from auditor.checks.registry import ALWAYS_COMPACTED, DEFAULT_PROTOCOL, PROTOCOLS
from auditor.compare.drill import drill, drill_files, stored_drill_files
from auditor.compare.windows import (
    differing_windows,
    probe_windows,
    summary_answers,
    truncation_probes,
    window_verdicts,
)
from auditor.config import Config
from auditor.errors import UsageError
from auditor.ingest.kraft import is_kraft
from auditor.ingest.model import Snapshot
from auditor.materialise import materialise, stored_rows
from auditor.semantics import lineage
from auditor.semantics.kraft import (
    committed_bound,
    kraft_inputs,
    named_leaders,
    own_snapshot_bound,
    truncate_kraft,
)
from auditor.semantics.leader import choose_leaders
from auditor.sinks import schemas
from auditor.spark import one_partition, spread_out, union_all
from auditor.summarise.replicas import (
    epoch_summaries,
    regular_lineage,
    regular_rebuilt_cache,
    replica_summaries,
    segment_ends,
    tail_batches,
    window_summaries,
)
from auditor.summarise.replicas import offsets as replica_offsets
from auditor.workdir import new_work_dir

KEY = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]


def with_one_partition(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with its frames in one partition when the audit's work is small
    (:func:`auditor.spark.one_partition`)."""
    frames = {f.name: one_partition(getattr(snapshot, f.name)) for f in dataclasses.fields(snapshot)
              if isinstance(getattr(snapshot, f.name), DataFrame)}
    return dataclasses.replace(snapshot, **frames)


def conform(df: DataFrame, schema: StructType) -> DataFrame:
    """Select ``schema``'s columns in order, each cast to its declared type."""
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def with_run_columns(df: DataFrame, run_id: str, cluster: str, audit_time: datetime) -> DataFrame:
    """Add the columns every output row carries: run id, cluster, audit time, day."""
    snapshot_or_now: Column = (
        F.col("snapshot") if "snapshot" in df.columns else F.lit(audit_time))
    return df.select(
        "*",
        F.lit(run_id).alias("run_id"),
        F.lit(cluster).alias("cluster"),
        F.lit(audit_time).cast("timestamp").alias("audit_time"),
        F.to_date(F.coalesce(snapshot_or_now, F.lit(audit_time).cast("timestamp"))).alias("day"),
    )


def compaction_scope(facts: DataFrame, topics: DataFrame, configured: tuple[str, ...]) -> DataFrame:
    """Per partition: ``compacted`` (SPEC 4.5) and ``hmax``, the highest HWM of any replica."""
    always = list(ALWAYS_COMPACTED) + list(configured)
    policy = topics.groupBy("snapshot", "topic").agg(
        F.max(F.coalesce(F.col("cleanup_policy"), F.lit("")).contains("compact")).alias("_by_config"))
    return facts.groupBy(*PARTITION).agg(F.max("high_watermark").alias("hmax")).join(
        policy, ["snapshot", "topic"], "left").select(
        *PARTITION, "hmax",
        (F.coalesce(F.col("_by_config"), F.lit(False)) | F.col("topic").isin(always)).alias("compacted"))


def apply_policy(found: DataFrame, config: Config) -> DataFrame:
    """Severity overrides (``[severity]``) and the allowlist (``suppressed = true``)."""
    severity = F.col("severity")
    for check, level in config.severity.items():
        severity = F.when(F.col("check") == check, F.lit(level)).otherwise(severity)
    suppressed = F.lit(False)
    for rule in config.allowlist:
        match = F.col("check") == rule.check
        if rule.topic is not None:
            match = match & (F.col("topic") == rule.topic)
        if rule.partition is not None:
            match = match & (F.col("partition") == rule.partition)
        if rule.replica is not None:
            match = match & F.col("replica").eqNullSafe(F.lit(rule.replica))
        suppressed = suppressed | match
    return found.withColumn("severity", severity).withColumn("suppressed", suppressed)


#: SPEC 5's checks with one finding per occurrence: two of them in one replica and snapshot
#: can share offset_start, so their identity also covers epoch, offset_end and the segment.
PER_OCCURRENCE = ("OFFSET_GAP", "OFFSET_OVERLAP", "EPOCH_REGRESSION", "CORRUPT_BATCH", "EPOCH_CACHE_MISMATCH",
                  "KRAFT_EPOCH_START", "KRAFT_SNAPSHOT_INVALID")


def finding_id(cluster: str) -> Column:
    """A finding's stable identity (SPEC 6): a hash of cluster, topic, partition, replica,
    check and offset_start, and for the per-occurrence checks also epoch, offset_end and the
    segment (its base offset, which names the segment file: trailing invalid bytes), so it is
    unique within a run and the same in every run that sees the same problem. The other
    checks keep the identity they always had (their ``first_seen`` carries on)."""
    def text(c: Column) -> Column:
        return F.coalesce(c.cast("string"), F.lit(""))

    parts = [F.lit(cluster), F.col("topic"), F.col("partition").cast("string"), text(F.col("replica")),
             F.col("check"), text(F.col("offset_start"))]
    occurrence = F.concat_ws("|", text(F.col("epoch")), text(F.col("offset_end")),
                             text(F.get_json_object("details", "$.segment_base_offset")))
    base = F.concat_ws("|", *parts)
    return F.sha2(F.when(F.col("check").isin(*PER_OCCURRENCE), F.concat_ws("|", base, occurrence))
                  .otherwise(base), 256)


def with_identity(found: DataFrame, cluster: str, previous: DataFrame, days: list[date],
                  history: History | None) -> DataFrame:
    """Add ``finding_id`` and ``first_seen``: the earliest snapshot in which the finding was
    seen, in this run or (carried forward) in P's run of the partition in OUT (``days``:
    the days of those P observations)."""
    ided = found.withColumn("finding_id", finding_id(cluster)).withColumn(
        "first_seen", F.min("snapshot").over(Window.partitionBy("finding_id")))
    earlier = history.load("findings", days) if history is not None and days else None
    if earlier is None:
        return ided
    p = previous.filter(F.col("p_from_out")).select(*PARTITION, "p_run_id", "p_snapshot")
    seen = p.join(earlier.select(F.col("run_id").alias("p_run_id"), F.col("snapshot").alias("p_snapshot"),
                                 "topic", "partition", "finding_id", F.col("first_seen").alias("_earlier")),
                  ["p_run_id", "p_snapshot", "topic", "partition"]).groupBy(*PARTITION, "finding_id").agg(
        F.min("_earlier").alias("_earlier"))
    return ided.join(seen, [*PARTITION, "finding_id"], "left").withColumn(
        "first_seen", F.least("first_seen", F.coalesce("_earlier", "first_seen"))).drop("_earlier")


def audit(
    snapshot: Snapshot,
    protocol: str | None = None,
    *,
    run_id: str | None = None,
    cluster: str = "default",
    audit_time: datetime | None = None,
    config: Config | None = None,
    history: History | None = None,
) -> dict[str, DataFrame]:
    """Build every output table of SPEC section 6 except ``runs``, before writing.

    Args:
        snapshot: from :func:`auditor.load_snapshot`.
        protocol: ``epoch``, ``kip-101``, ``hwm`` or ``raft``; None: the format's default.
        run_id: stored in every row (default: a new UUID).
        cluster: stored in every row.
        audit_time: the run's start (default: now, UTC).
        config: severity overrides, allowlist and compacted topics (default: none).
        history: earlier runs of the cluster (:func:`auditor.sinks.delta.read_history`); without it
            the over-time checks see only the snapshots inside ``snapshot``.

    Returns:
        ``{table name: DataFrame}`` with exactly the columns of :mod:`auditor.sinks.schemas`.
    """
    chosen = protocol or DEFAULT_PROTOCOL[snapshot.format]
    if chosen not in PROTOCOLS:
        raise UsageError(f"unknown protocol {chosen!r}")
    run_id = run_id or str(uuid.uuid4())
    audit_time = audit_time or datetime.now(timezone.utc)

    config = config or Config(cluster=cluster)
    # Intermediates read by several tables are stored (one small job each) under the
    # snapshot's work dir: later queries read files, never a recomputation.
    work_dir = snapshot.work_dir or new_work_dir()
    label, serial = f"engine-{uuid.uuid4().hex[:12]}", itertools.count()

    def _cut(**frames: DataFrame) -> dict[str, DataFrame]:
        return materialise(frames, work_dir, f"{label}-{next(serial)}")

    # Dump files are read again by the drill-downs (a large input): the files each one reads,
    # and their sections it parses, are listed in the job of the cut before it (a frame of
    # file ids and sections, read back without Spark), not by a job of their own.
    rereads = snapshot.source.dumps is not None and snapshot.source.stored is None

    def _cut_listing(files: tuple[str, DataFrame] | None,
                     **frames: DataFrame) -> tuple[dict[str, DataFrame], dict[int, frozenset[int]]]:
        """A cut that also stores a drill-down's file list (``files``: its name and frame),
        returned read back (empty when ``files`` is None: nothing is read again)."""
        cut = f"{label}-{next(serial)}"
        stored = materialise({**frames, **({files[0]: files[1]} if files is not None else {})}, work_dir, cut)
        return stored, stored_drill_files(work_dir, cut, files[0]) if files is not None else {}

    # Cut points: each is one Spark job computing one or more frames that later queries
    # read more than once. Frames that do not depend on each other share a job; a frame
    # built on another is cut after it (planning a query over a stored frame is much
    # cheaper than over the plan that made it: each DataFrame step re-analyses its plan).
    snapshot = with_one_partition(snapshot)
    summaries = snapshot.summaries
    # KRaft's metadata log (SPEC 4.7) is small and audited with its own rules: read whole.
    kraft = snapshot.kraft
    in_kraft = is_kraft() if kraft is not None else F.lit(False)

    def irregular_of(replicas: DataFrame) -> DataFrame:
        return replicas.filter(~F.col("regular")).select(*KEY)

    checkpointless = snapshot.replicas.filter(~F.col("epoch_file_usable")).select(*KEY)

    # An irregular replica (a gap, an overlap, a repeated batch, an epoch regression, a corrupt
    # batch) is read whole. One without a usable checkpoint first: its cache is rebuilt from
    # its log, and leaders and truncation need it.
    none = summaries.select(*KEY, "win").filter(F.lit(False))
    # (the replicas' rows read the epochs' aggregate: one job computes both from the summaries)
    per_epoch = epoch_summaries(summaries)
    per_replica = replica_summaries(summaries, per_epoch)

    def first_listing() -> DataFrame:
        # The files of the replicas read first, from the summaries of the replicas without a
        # usable checkpoint only (usually none): the same replicas and files as from all of
        # them, without aggregating every summary row again in this job.
        candidates = summaries.join(checkpointless, KEY, "left_semi")
        irregular = irregular_of(replica_summaries(candidates, epoch_summaries(candidates)))
        return drill_files(candidates, irregular, none)

    # (the summaries, when log-sized, are rolled up over the session's cores, as they are
    # compared below)
    with spread_out(summaries.sparkSession, snapshot.summary_rows):
        rolled, first_files = _cut_listing(
            ("first_files", first_listing()) if rereads else None,
            windows=window_summaries(summaries), epochs=per_epoch, replicas=per_replica)
    windows, epochs, reps = rolled["windows"], rolled["epochs"], rolled["replicas"]
    offsets = replica_offsets(reps, snapshot.segments, snapshot.log_start)
    irregular = irregular_of(reps)
    cacheless = irregular.join(checkpointless, KEY, "left_semi")
    first = drill(snapshot.source, summaries, cacheless, none, work_dir, f"{label}-drill-1", sections=first_files)
    rebuilt_early = union_all([regular_rebuilt_cache(epochs, reps), lineage.rebuilt_cache(first)])
    cache = _cut(cache=lineage.effective_cache(snapshot.epoch_cache, rebuilt_early, snapshot.replicas, offsets))["cache"]
    # no file holds the metadata log's HWM: an entry naming it is not used (SPEC 4.7)
    base_facts = status.replica_facts(
        snapshot.replicas, offsets, snapshot.hwm.filter(~in_kraft), lineage.latest_epochs(cache), snapshot.metadata)
    named, committed = None, None
    if kraft is not None:
        kraft_parts = base_facts.filter(in_kraft).select(*PARTITION).distinct()
        named = named_leaders(kraft_parts, kraft.quorum_state, kraft.status)
        committed = committed_bound(kraft_parts, kraft.snapshots, kraft.status)
    leaders = _cut(leaders=choose_leaders(base_facts, named))["leaders"]
    with_roles = base_facts.join(leaders, PARTITION, "left").join(
        reps.select(*KEY, "epochless"), KEY, "left").select(
        "*",
        F.when(F.col("leader").isNull(), F.lit(None))
        .when(F.col("replica") == F.col("leader"), F.lit("leader")).otherwise(F.lit("follower")).alias("role"),
    ).withColumn("epochless", F.coalesce(F.col("epochless"), F.lit(False)))
    if kraft is not None and committed is not None:
        # the checks' HWMs of the metadata log: HWM(L) = C, HWM(F) = the end of F's own
        # latest snapshot (replica_status shows none: no file holds it)
        with_roles = with_roles.join(committed, PARTITION, "left").join(
            own_snapshot_bound(kraft.snapshots), KEY, "left").select(
            *[c for c in with_roles.columns if c != "high_watermark"],
            F.when(~in_kraft, F.col("high_watermark")).when(F.col("role") == "leader", F.col("committed"))
            .otherwise(F.col("own_hwm")).alias("high_watermark"), in_kraft.alias("kraft"),
            # the node's own snapshot ids, shown on the report's lanes; "[]" when it has none
            F.when(in_kraft & F.col("own_snapshots").isNull(), F.lit("[]"))
            .when(in_kraft, F.to_json("own_snapshots")).alias("kraft_snapshots"))
    # (the scope is a small aggregate of the facts: computed in their job)
    roles = _cut(facts=with_roles, scope=compaction_scope(with_roles, snapshot.topics, config.compacted_topics))
    facts, scope = roles["facts"], roles["scope"]

    current = current_observations(facts, leaders, scope)
    compared = _cut(previous=previous_observations(current, snapshot.snapshots, history),
                    pairs=build_pairs(facts, cache, scope))
    pairs = compared["pairs"]
    # Leader against follower on the window summaries; the batches of the windows where they
    # differ, of the windows truncation looks into, and of irregular replicas, read exactly.
    evaluable = pairs.filter(~F.col("epochless")) if chosen in EPOCH_PROTOCOLS else pairs

    def wanted_of(verdicts: DataFrame, probed: DataFrame) -> DataFrame:
        differing = differing_windows(verdicts)
        return union_all([differing.select(*KEY, "win"),
                          differing.select(*PARTITION, F.col("leader").alias("replica"), "win"),
                          probed]).join(irregular, KEY, "left_anti")

    later = irregular.join(cacheless, KEY, "left_anti")
    window_rows = window_verdicts(pairs, windows, tail_batches(summaries), reps, summaries,
                                  all_windows=chosen == "raft" and snapshot.format != "etcd")
    probe_rows = probe_windows(truncation_probes(evaluable, chosen), windows)
    # (when the summaries are log-sized the comparison runs over the session's cores: at
    # 10M lines their 280,000 rows took one interpreted task 15 s)
    with spread_out(summaries.sparkSession, snapshot.summary_rows):
        needs, second_files = _cut_listing(
            ("second_files", drill_files(summaries, later, wanted_of(window_rows, probe_rows))) if rereads else None,
            verdicts=window_rows, probed=probe_rows)
    differing = differing_windows(needs["verdicts"])
    answers = summary_answers(needs["verdicts"])
    wanted = wanted_of(needs["verdicts"], needs["probed"])
    second = drill(snapshot.source, summaries, later, wanted, work_dir, f"{label}-drill-2", sections=second_files)
    # Drilled batches of many replicas (a wide divergence, many irregular logs) are log-sized:
    # the cuts that read them (joined with the pairs, whole logs rebuilt, the verdicts, the
    # findings) run over the session's cores, not in one partition. (At 10M lines with one
    # partition in 20 diverged, the verdicts' and findings' cuts each read 1.9M and 2.7M
    # stored rows in one interpreted task: 9.5 and 19 s.)
    drilled_rows = sum(stored_rows(work_dir, f"{label}-drill-{k}", "drilled") for k in (1, 2))
    with spread_out(summaries.sparkSession, drilled_rows):
        drilled = union_all([first, second])
        read_windows = union_all([wanted, windows.join(irregular, KEY, "left_semi").select(*KEY, "win")])
        whole = drilled.join(irregular, KEY, "left_semi")
        # KRaft's metadata log is truncated by the kraft protocol (SPEC 4.7), whatever `chosen`
        kraft_rows = truncate_kraft(
            pairs.filter(in_kraft & ~F.col("epochless")),
            kraft_inputs(pairs.filter(in_kraft), kraft.snapshots, whole.filter(in_kraft)), whole.filter(in_kraft)) \
            if kraft is not None else None
        compared_pairs = compared_sides(pairs, drilled, differing)
        per_log = _cut(
            # the truncations are one large expression each: stored here, the verdicts' plan
            # reads them instead of analysing them again at every step; the batches compared
            # leader against follower are stored once for both (raft's truncation reads them)
            trunc=truncations(pairs, drilled, chosen, snapshot_starts=snapshot.format == "etcd", compared=compared_pairs,
                              answers=answers, kraft=kraft_rows),
            compared=compared_pairs,
            rebuilt=union_all([regular_rebuilt_cache(epochs, reps), lineage.rebuilt_cache(whole)]),
            log_lineage=union_all([regular_lineage(epochs, reps), lineage.log_lineage(whole)]),
            counts=whole.groupBy(*KEY).agg(F.count(F.lit(1)).cast("bigint").alias("batch_count"),
                                           F.sum("record_count").cast("bigint").alias("record_count")),
            seg_ends=segment_ends(summaries, snapshot.sections))
        rebuilt, log_lineage = per_log["rebuilt"], per_log["log_lineage"]
        verdicts = _cut(verdicts=follower_verdicts(
            pairs, drilled, per_log["trunc"], per_log["compared"], answers=answers, windows=windows,
            read_windows=read_windows, kraft=kraft is not None, protocol=chosen))["verdicts"]
        over_time = over_time_findings(current, compared["previous"], facts, log_lineage, history)
        usable_checkpoint = snapshot.epoch_cache.join(
            snapshot.replicas.filter(F.col("epoch_file_usable")).select(*KEY), KEY)
        raw_findings = union_all([
            replica_checks.batch_sequence_checks(whole, scope),
            replica_checks.corrupt_batches(whole, snapshot.segments, per_log["seg_ends"]),
            replica_checks.epoch_cache_mismatches(
                usable_checkpoint.join(facts.filter(~F.col("epochless")).select(*KEY), KEY), rebuilt, facts, scope),
            replica_checks.fact_findings(facts, snapshot.format != "kafka"),
            pair_findings(verdicts, chosen),
            *([kraft_findings(kraft, facts.filter(in_kraft))] if kraft is not None else []),
            replica_checks.compacted_cache_disagreements(pairs, cache),
            isr_incomplete(facts, drilled, scope, differing, answers),
            partition_findings(leaders, facts),
            metadata_conflicts(snapshot.metadata),
            over_time.findings.filter(~in_kraft),  # SPEC 4.7: not for the metadata log
            *([replica_checks.unreadable_wal(snapshot.wal_problems)] if snapshot.wal_problems is not None else []),
        ])
        all_findings = _cut(findings=with_identity(apply_policy(
            raw_findings.join(leaders.select(*PARTITION, "leader"), PARTITION, "left"), config),
            cluster, over_time.previous, over_time.p_days, history))["findings"]

    follower_rows = verdicts.select(
        *KEY, "divergence_offset", "truncation_offset", "truncation_rounds",
        F.when(F.col("evaluated") & ~F.col("missing_hwm"), F.coalesce(F.col("removed_records"), F.lit(0)))
        .alias("records_to_truncate"),
        follower_status(verdicts).alias("follower_status"))
    counted = per_log["counts"].select(*KEY, F.col("batch_count").alias("_bc"), F.col("record_count").alias("_rc"))
    replica_rows = facts.join(follower_rows, KEY, "left").join(counted, KEY, "left").select(
        *[c for c in facts.columns if c not in ("batch_count", "record_count", "high_watermark")],
        F.when(~in_kraft, F.col("high_watermark")).alias("high_watermark"),
        *[c for c in follower_rows.columns if c not in KEY],
        F.coalesce(F.col("_bc"), F.col("batch_count")).alias("batch_count"),
        F.coalesce(F.col("_rc"), F.col("record_count")).alias("record_count"),
        *([] if "kraft_snapshots" in facts.columns else [F.lit(None).cast("string").alias("kraft_snapshots")]),
        F.when(F.col("role") == "leader", "leader")
        .when(F.col("role") == "follower", F.coalesce(F.col("follower_status"), F.lit("unknown")))
        .otherwise("unknown").alias("status"))
    epoch_lineage = union_all([log_lineage.withColumn("source", F.lit("log")),
                               lineage.checkpoint_lineage(cache).withColumn("source", F.lit("checkpoint"))])
    tables = {
        "parse_errors": snapshot.parse_errors,
        "epoch_lineage": epoch_lineage,
        "replica_status": replica_rows,
        "partition_status": status.partition_status(facts, leaders, all_findings, committed),
        "findings": all_findings,
    }
    return {
        name: conform(with_run_columns(df.drop("run_id", "cluster", "audit_time", "day"),
                                       run_id, cluster, audit_time),
                      schemas.OUTPUT_TABLES[name])
        for name, df in tables.items()
    }
