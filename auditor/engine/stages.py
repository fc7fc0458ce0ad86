"""The stages of ``auditor.audit``, in data order (see :func:`auditor.engine.audit`).

Each stage is a function of the snapshot and what the stages before it stored; each ends
in one or two cut points (:class:`auditor.engine.cuts.Cuts`), so the next stage plans over
stored rows. Replicas are compared on their summaries first; only the windows where they
differ, the windows truncation looks into and the irregular replicas are read as batches
(the drill-downs), and all batch-level work happens in :func:`batch_level`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

from auditor import columns as F
from auditor.checks import status
from auditor.checks.overtime import current_observations, previous_observations
from auditor.checks.pairs import build_pairs, compared_sides, truncations
from auditor.columns import col, lit
from auditor.compare.drill import drill, drill_files
from auditor.compare.windows import (
    differing_windows,
    probe_windows,
    summary_answers,
    truncation_probes,
    window_verdicts,
)
from auditor.engine.cuts import Cuts
from auditor.engine.tables import compaction_scope
from auditor.ingest.kraft import is_kraft
from auditor.ingest.model import Snapshot
from auditor.materialise import stored_rows
from auditor.policy import Plan
from auditor.semantics import lineage
from auditor.semantics.kraft import (
    committed_bound,
    kraft_inputs,
    named_leaders,
    own_snapshot_bound,
    truncate_kraft,
)
from auditor.semantics.leader import choose_leaders
from auditor.sinks.history import History
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

KEY = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]


def in_kraft(snapshot: Snapshot) -> F.Column:
    """Rows of KRaft's metadata log (SPEC 4.7), audited with its own rules."""
    return is_kraft() if snapshot.kraft is not None else lit(False)


def _irregular(replicas: DataFrame) -> DataFrame:
    return replicas.filter(~col("regular")).select(*KEY)


def _no_windows(summaries: DataFrame) -> DataFrame:
    return summaries.select(*KEY, "win").filter(lit(False))


@dataclass(frozen=True)
class Rolled:
    """The summaries rolled up (stage 1), and which replicas are read whole."""

    windows: DataFrame
    epochs: DataFrame
    replicas: DataFrame
    offsets: DataFrame
    irregular: DataFrame  # read whole: a gap, an overlap, a repeat, a regression, a corrupt batch
    cacheless: DataFrame  # irregular ones without a usable checkpoint: read first
    first_files: dict[int, frozenset[int]]


def roll_up(cuts: Cuts, snapshot: Snapshot, rereads: bool) -> Rolled:
    """Stage 1: per replica, per epoch and per window, from the summary rows; with the file
    list of the first drill-down when dumps are read again."""
    summaries = snapshot.summaries
    assert summaries is not None
    checkpointless = snapshot.replicas.filter(~col("epoch_file_usable")).select(*KEY)
    per_epoch = epoch_summaries(summaries)
    per_replica = replica_summaries(summaries, per_epoch)

    def first_listing() -> DataFrame:
        # The files of the replicas read first, from the summaries of the replicas without a
        # usable checkpoint only (usually none): the same replicas and files as from all of
        # them, without aggregating every summary row again in this job.
        candidates = summaries.join(checkpointless, KEY, "left_semi")
        irregular = _irregular(replica_summaries(candidates, epoch_summaries(candidates)))
        return drill_files(candidates, irregular, _no_windows(summaries))

    # (the summaries, when log-sized, are rolled up over the session's cores, as they are
    # compared in stage 4)
    plan = cuts.plan(snapshot.summary_rows)
    with cuts.applied(plan):
        rolled, first_files = cuts.cut_listing(
            ("first_files", first_listing()) if rereads else None, plan,
            windows=window_summaries(summaries), epochs=per_epoch, replicas=per_replica)
    reps = rolled["replicas"]
    irregular = _irregular(reps)
    return Rolled(windows=rolled["windows"], epochs=rolled["epochs"], replicas=reps,
                  offsets=replica_offsets(reps, snapshot.segments, snapshot.log_start), irregular=irregular,
                  cacheless=irregular.join(checkpointless, KEY, "left_semi"), first_files=first_files)


def epoch_caches(cuts: Cuts, snapshot: Snapshot, rolled: Rolled) -> tuple[DataFrame, DataFrame]:
    """Stage 2: the first drill-down (the irregular replicas without a usable checkpoint,
    whose cache is rebuilt from their log: leaders and truncation need it) and every
    replica's effective epoch cache (SPEC 4.1). Returns (first drilled batches, cache)."""
    assert snapshot.summaries is not None
    first = drill(snapshot.source, snapshot.summaries, rolled.cacheless, _no_windows(snapshot.summaries),
                  cuts.work_dir, f"{cuts.label}-drill-1", cuts.policy, cuts.plans, sections=rolled.first_files)
    rebuilt = cuts.union([regular_rebuilt_cache(rolled.epochs, rolled.replicas), lineage.rebuilt_cache(first)])
    cache = cuts.cut(cache=lineage.effective_cache(snapshot.epoch_cache, rebuilt, snapshot.replicas,
                                                   rolled.offsets))["cache"]
    return first, cache


@dataclass(frozen=True)
class Facts:
    """Per replica and per partition facts (stage 3)."""

    facts: DataFrame  # replica facts with role, epochless and the checks' HWMs
    scope: DataFrame  # per partition: compacted, hmax
    leaders: DataFrame
    committed: DataFrame | None  # KRaft's committed bound C


def replica_facts(cuts: Cuts, snapshot: Snapshot, rolled: Rolled, cache: DataFrame,
                  compacted_topics: tuple[str, ...]) -> Facts:
    """Stage 3: offsets, HWMs and latest epochs per replica, the leader of each partition
    (SPEC 4.6, 4.7) and each replica's role."""
    kraft, kraft_rows = snapshot.kraft, in_kraft(snapshot)
    # no file holds the metadata log's HWM: an entry naming it is not used (SPEC 4.7)
    base = status.replica_facts(snapshot.replicas, rolled.offsets, snapshot.hwm.filter(~kraft_rows),
                                lineage.latest_epochs(cache), snapshot.metadata)
    named, committed = None, None
    if kraft is not None:
        parts = base.filter(kraft_rows).select(*PARTITION).distinct()
        named = named_leaders(parts, kraft.quorum_state, kraft.status)
        committed = committed_bound(parts, kraft.snapshots, kraft.status)
    leaders = cuts.cut(leaders=choose_leaders(base, named))["leaders"]
    with_roles = base.join(leaders, PARTITION, "left").join(
        rolled.replicas.select(*KEY, "epochless"), KEY, "left").select(
        "*",
        F.when(col("leader").isNull(), lit(None))
        .when(col("replica") == col("leader"), lit("leader")).otherwise(lit("follower")).alias("role"),
    ).withColumn("epochless", F.coalesce(col("epochless"), lit(False)))
    if kraft is not None and committed is not None:
        # the checks' HWMs of the metadata log: HWM(L) = C, HWM(F) = the end of F's own
        # latest snapshot (replica_status shows none: no file holds it)
        with_roles = with_roles.join(committed, PARTITION, "left").join(
            own_snapshot_bound(kraft.snapshots), KEY, "left").select(
            *[c for c in with_roles.columns if c != "high_watermark"],
            F.when(~kraft_rows, col("high_watermark")).when(col("role") == "leader", col("committed"))
            .otherwise(col("own_hwm")).alias("high_watermark"), kraft_rows.alias("kraft"),
            # the node's own snapshot ids, shown on the report's lanes; "[]" when it has none
            F.when(kraft_rows & col("own_snapshots").isNull(), lit("[]"))
            .when(kraft_rows, F.to_json("own_snapshots")).alias("kraft_snapshots"))
    # (the scope is a small aggregate of the facts: computed in their job)
    roles = cuts.cut(facts=with_roles, scope=compaction_scope(with_roles, snapshot.topics, compacted_topics))
    return Facts(facts=roles["facts"], scope=roles["scope"], leaders=leaders, committed=committed)


def pairs_and_history(cuts: Cuts, snapshot: Snapshot, facts: Facts, cache: DataFrame,
                      history: History | None) -> tuple[DataFrame, DataFrame, DataFrame]:
    """Stage 3b: leader against each follower (``pairs``), and each observation's
    predecessor P and H_max (SPEC 5, over time). Returns (current, previous, pairs)."""
    current = current_observations(facts.facts, facts.leaders, facts.scope)
    stored = cuts.cut(previous=previous_observations(current, snapshot.snapshots, history),
                      pairs=build_pairs(facts.facts, cache, facts.scope))
    return current, stored["previous"], stored["pairs"]


@dataclass(frozen=True)
class Compared:
    """The window comparison (stage 4): what differs and what must be read."""

    verdicts: DataFrame  # per window of each pair
    differing: DataFrame
    answers: DataFrame  # truncation answers the summaries decide
    wanted: DataFrame  # KEY, win of the windows the second drill-down reads
    later: DataFrame  # irregular replicas read whole in the second drill-down
    second_files: dict[int, frozenset[int]]


def compare_windows(cuts: Cuts, snapshot: Snapshot, rolled: Rolled, pairs: DataFrame, protocol: str,
                    evaluable: DataFrame, rereads: bool) -> Compared:
    """Stage 4: leader against follower on the window summaries; the windows where they
    differ and those truncation looks into are wanted as batches."""
    summaries = snapshot.summaries
    assert summaries is not None
    later = rolled.irregular.join(rolled.cacheless, KEY, "left_anti")
    plan = cuts.plan(snapshot.summary_rows)

    def wanted_of(verdicts: DataFrame, probed: DataFrame, in_plan: Plan | None) -> DataFrame:
        differing = differing_windows(verdicts)
        return cuts.union([differing.select(*KEY, "win"),
                           differing.select(*PARTITION, col("leader").alias("replica"), "win"),
                           probed], in_plan).join(rolled.irregular, KEY, "left_anti")

    window_rows = window_verdicts(pairs, rolled.windows, tail_batches(summaries), rolled.replicas, summaries,
                                  all_windows=protocol == "raft" and snapshot.format != "etcd")
    probe_rows = probe_windows(truncation_probes(evaluable, protocol), rolled.windows)
    # (when the summaries are log-sized the comparison runs over the session's cores: at
    # 10M lines their 280,000 rows took one interpreted task 15 s)
    with cuts.applied(plan):
        needs, second_files = cuts.cut_listing(
            ("second_files", drill_files(summaries, later, wanted_of(window_rows, probe_rows, plan)))
            if rereads else None, plan, verdicts=window_rows, probed=probe_rows)
    verdicts = needs["verdicts"]
    return Compared(verdicts=verdicts, differing=differing_windows(verdicts), answers=summary_answers(verdicts),
                    wanted=wanted_of(verdicts, needs["probed"], None), later=later, second_files=second_files)


@dataclass(frozen=True)
class BatchLevel:
    """What is computed from batches (stage 6)."""

    drilled: DataFrame  # every drilled batch
    whole: DataFrame  # the batches of the replicas read whole
    read_windows: DataFrame  # KEY, win of every window read as batches
    per_log: dict[str, DataFrame]  # trunc, compared, rebuilt, log_lineage, counts, seg_ends


def drilled_rows(cuts: Cuts) -> int:
    """How many batches the two drill-downs stored."""
    return sum(stored_rows(cuts.work_dir, f"{cuts.label}-drill-{k}", "drilled") for k in (1, 2))


def batch_level(cuts: Cuts, plan: Plan, snapshot: Snapshot, rolled: Rolled, pairs: DataFrame, compared: Compared,
                first: DataFrame, second: DataFrame, protocol: str) -> BatchLevel:
    """Stage 6, the one place batch rows are worked on: the truncation of every follower
    (SPEC 4.3, 4.7), the batches compared leader against follower (4.4), and the whole
    replicas' lineage, rebuilt cache, counts and segment ends. Runs in ``plan``, the one
    :meth:`Cuts.plan` gives the drilled rows (a wide divergence makes them log-sized)."""
    kraft, kraft_rows = snapshot.kraft, in_kraft(snapshot)
    drilled = cuts.union([first, second], plan)
    read_windows = cuts.union([compared.wanted, rolled.windows.join(rolled.irregular, KEY, "left_semi")
                               .select(*KEY, "win")], plan)
    whole = drilled.join(rolled.irregular, KEY, "left_semi")
    # KRaft's metadata log is truncated by the kraft protocol (SPEC 4.7), whatever `protocol`
    kraft_truncated = truncate_kraft(
        pairs.filter(kraft_rows & ~col("epochless")),
        kraft_inputs(pairs.filter(kraft_rows), kraft.snapshots, whole.filter(kraft_rows)), whole.filter(kraft_rows)) \
        if kraft is not None else None
    compared_pairs = compared_sides(pairs, drilled, compared.differing)
    per_log = cuts.cut(
        plan,
        # the truncations are one large expression each: stored here, the verdicts' plan
        # reads them instead of analysing them again at every step; the batches compared
        # leader against follower are stored once for both (raft's truncation reads them)
        trunc=truncations(pairs, drilled, protocol, snapshot_starts=snapshot.format == "etcd",
                          compared=compared_pairs, answers=compared.answers, kraft=kraft_truncated,
                          irregular=rolled.irregular, differing=compared.differing),
        compared=compared_pairs,
        rebuilt=cuts.union([regular_rebuilt_cache(rolled.epochs, rolled.replicas), lineage.rebuilt_cache(whole)], plan),
        log_lineage=cuts.union([regular_lineage(rolled.epochs, rolled.replicas), lineage.log_lineage(whole)], plan),
        counts=whole.groupBy(*KEY).agg(F.count(lit(1)).cast("bigint").alias("batch_count"),
                                       F.sum("record_count").cast("bigint").alias("record_count")),
        seg_ends=segment_ends(snapshot.summaries, snapshot.sections))
    return BatchLevel(drilled=drilled, whole=whole, read_windows=read_windows, per_log=per_log)


def second_drill(cuts: Cuts, snapshot: Snapshot, compared: Compared) -> DataFrame:
    """Stage 5: the batches of the differing and probed windows and of the irregular
    replicas not read in stage 2."""
    assert snapshot.summaries is not None
    return drill(snapshot.source, snapshot.summaries, compared.later, compared.wanted, cuts.work_dir,
                 f"{cuts.label}-drill-2", cuts.policy, cuts.plans, sections=compared.second_files)


__all__ = ["BatchLevel", "Compared", "Facts", "Rolled", "batch_level", "compare_windows", "epoch_caches",
           "in_kraft", "pairs_and_history", "replica_facts", "roll_up", "second_drill"]
