"""Stages 7 and 8 of ``auditor.audit``: each follower's verdict (divergence, truncation,
records removed) and every finding of SPEC 5, made final (overrides, allowlist, identity)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from auditor.checks import replica as replica_checks
from auditor.checks.kraft import kraft_findings
from auditor.checks.overtime import OverTime, over_time_findings
from auditor.checks.pairs import (
    follower_verdicts,
    isr_incomplete,
    metadata_conflicts,
    pair_findings,
    partition_findings,
)
from auditor.columns import col
from auditor.config import Config
from auditor.engine.cuts import Cuts
from auditor.engine.stages import BatchLevel, Compared, Facts, Rolled, in_kraft
from auditor.engine.tables import apply_policy, with_identity
from auditor.ingest.model import Snapshot
from auditor.policy import Plan
from auditor.sinks.history import History

KEY = ["snapshot", "topic", "partition", "replica"]
PARTITION = ["snapshot", "topic", "partition"]


def verdicts(cuts: Cuts, plan: Plan, snapshot: Snapshot, rolled: Rolled, pairs: DataFrame, compared: Compared,
             batches: BatchLevel, protocol: str) -> DataFrame:
    """Stage 7: per follower, its divergence and truncation offsets, rounds and the records
    its truncation removes (SPEC 4.3-4.4), stored."""
    return cuts.cut(plan, verdicts=follower_verdicts(
        pairs, batches.drilled, batches.per_log["trunc"], batches.per_log["compared"], answers=compared.answers,
        windows=rolled.windows, read_windows=batches.read_windows, irregular=rolled.irregular,
        differing=compared.differing, kraft=snapshot.kraft is not None, protocol=protocol))["verdicts"]


def final_findings(cuts: Cuts, plan: Plan, snapshot: Snapshot, facts: Facts, pairs: DataFrame, cache: DataFrame,
                   compared: Compared, batches: BatchLevel, follower: DataFrame, current: DataFrame,
                   previous: DataFrame, protocol: str, config: Config, cluster: str,
                   history: History | None) -> tuple[DataFrame, OverTime]:
    """Stage 8: every check's findings (SPEC 5, 4.7), with severity overrides, the
    allowlist, ``finding_id`` and ``first_seen``, stored. Returns them and the over-time
    findings' inputs."""
    kraft, kraft_rows = snapshot.kraft, in_kraft(snapshot)
    f, scope = facts.facts, facts.scope
    over_time = over_time_findings(current, previous, f, batches.per_log["log_lineage"], history)
    usable_checkpoint = snapshot.epoch_cache.join(
        snapshot.replicas.filter(col("epoch_file_usable")).select(*KEY), KEY)
    raw = cuts.union([
        replica_checks.batch_sequence_checks(batches.whole, scope),
        replica_checks.corrupt_batches(batches.whole, snapshot.segments, batches.per_log["seg_ends"]),
        replica_checks.epoch_cache_mismatches(
            usable_checkpoint.join(f.filter(~col("epochless")).select(*KEY), KEY), batches.per_log["rebuilt"],
            f, scope),
        replica_checks.fact_findings(f, snapshot.format != "kafka"),
        pair_findings(follower, protocol),
        *([kraft_findings(kraft, f.filter(kraft_rows))] if kraft is not None else []),
        replica_checks.compacted_cache_disagreements(pairs, cache),
        isr_incomplete(f, batches.drilled, scope, compared.differing, compared.answers),
        partition_findings(facts.leaders, f),
        metadata_conflicts(snapshot.metadata),
        over_time.findings.filter(~kraft_rows),  # SPEC 4.7: not for the metadata log
        *([replica_checks.unreadable_wal(snapshot.wal_problems)] if snapshot.wal_problems is not None else []),
    ], plan)
    found = with_identity(apply_policy(raw.join(facts.leaders.select(*PARTITION, "leader"), PARTITION, "left"),
                                       config), cluster, over_time.previous, over_time.p_days, history)
    return cuts.cut(plan, findings=found)["findings"], over_time
