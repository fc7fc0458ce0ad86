"""``auditor.audit``: from a loaded snapshot to the output tables (SPEC sections 4 to 6).

The audit is its stages, in data order (:mod:`auditor.engine.stages`,
:mod:`auditor.engine.findings`), each ending in a cut point:

1. roll up the summaries per replica, epoch and window;
2. the first drill-down and every replica's epoch cache;
3. replica facts, leaders and roles; leader-follower pairs and the history;
4. leader against follower, window by window, on the summaries;
5. the second drill-down: the batches of what differs;
6. the batch-level work: truncation, compared batches, lineage, counts;
7. the followers' verdicts;
8. every finding, made final;

then the output tables, computed into the work dir by one job.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from pyspark.sql import DataFrame

from auditor.checks import status
from auditor.checks.pairs import EPOCH_PROTOCOLS
from auditor.columns import col, lit
from auditor.config import Config
from auditor.engine import findings as final
from auditor.engine import stages
from auditor.engine.cuts import Cuts
from auditor.engine.tables import replica_rows, shaped
from auditor.errors import UsageError
from auditor.ingest.model import Snapshot
from auditor.materialise import materialise
from auditor.policy import Plans
from auditor.registry import DEFAULT_PROTOCOL, PROTOCOLS
from auditor.semantics import lineage
from auditor.sinks.history import History

__all__ = ["audit"]


def audit(
    snapshot: Snapshot,
    protocol: str | None = None,
    *,
    run_id: str | None = None,
    cluster: str = "default",
    audit_time: datetime | None = None,
    config: Config | None = None,
    history: History | None = None,
    plans: Plans | None = None,
    output: str | None = None,
) -> dict[str, DataFrame]:
    """Every output table of SPEC section 6 except ``runs``, computed (not yet written).

    Args:
        snapshot: from :func:`auditor.load_snapshot`.
        protocol: ``epoch``, ``kip-101``, ``hwm`` or ``raft``; None: the format's default.
        run_id: stored in every row (default: a new UUID).
        cluster: stored in every row.
        audit_time: the run's start (default: now, UTC).
        config: severity overrides, allowlist and compacted topics (default: none).
        history: earlier runs of the cluster (:func:`auditor.sinks.history.read_history`);
            without it the over-time checks see only the snapshots inside ``snapshot``.
        plans: how the audit is planned (default: the snapshot's, from its size policy).
        output: the label of the cut point holding the tables in the snapshot's work dir
            (default: a new one).

    Returns:
        ``{table name: DataFrame}`` over the stored rows, with exactly the columns of
        :mod:`auditor.sinks.schemas`.
    """
    chosen = protocol or DEFAULT_PROTOCOL[snapshot.format]
    if chosen not in PROTOCOLS:
        raise UsageError(f"unknown protocol {chosen!r}")
    assert snapshot.summaries is not None, "audit a snapshot from auditor.load_snapshot"
    plans = plans or snapshot.plans
    cuts = Cuts(snapshot.summaries.sparkSession, snapshot.work_dir, snapshot.policy, plans)
    with plans.after_scan.applied(cuts.spark):
        tables = _tables(cuts, _narrowed(snapshot, plans), chosen, config or Config(cluster=cluster), cluster,
                         history)
        return materialise(shaped(tables, run_id or str(uuid.uuid4()), cluster,
                                  audit_time or datetime.now(timezone.utc)),
                           snapshot.work_dir, output or f"{cuts.label}-output", plans.after_scan)


def _narrowed(snapshot: Snapshot, plans: Plans) -> Snapshot:
    """``snapshot`` with its frames in one partition when the work after the scan is."""
    return snapshot.with_frames(plans.after_scan.narrowed)


def _tables(cuts: Cuts, snapshot: Snapshot, protocol: str, config: Config, cluster: str,
            history: History | None) -> dict[str, DataFrame]:
    # Dump files are read again by the drill-downs (a large input): the files each one
    # reads are listed in the job of the cut before it.
    rereads = snapshot.source.dumps is not None and snapshot.source.stored is None
    rolled = stages.roll_up(cuts, snapshot, rereads)
    first, cache = stages.epoch_caches(cuts, snapshot, rolled)
    facts = stages.replica_facts(cuts, snapshot, rolled, cache, config.compacted_topics)
    current, previous, pairs = stages.pairs_and_history(cuts, snapshot, facts, cache, history)
    evaluable = pairs.filter(~col("epochless")) if protocol in EPOCH_PROTOCOLS else pairs
    compared = stages.compare_windows(cuts, snapshot, rolled, pairs, protocol, evaluable, rereads)
    second = stages.second_drill(cuts, snapshot, compared)
    # Drilled batches of many replicas (a wide divergence, many irregular logs) are
    # log-sized: the stages that read them run spread out, not in one partition.
    plan = cuts.plan(stages.drilled_rows(cuts))
    with cuts.applied(plan):
        batches = stages.batch_level(cuts, plan, snapshot, rolled, pairs, compared, first, second, protocol)
        follower = final.verdicts(cuts, plan, snapshot, rolled, pairs, compared, batches, protocol)
        found, _ = final.final_findings(cuts, plan, snapshot, facts, pairs, cache, compared, batches, follower,
                                        current, previous, protocol, config, cluster, history)
    log_lineage = batches.per_log["log_lineage"]
    return {
        "parse_errors": snapshot.parse_errors,
        "epoch_lineage": cuts.union([log_lineage.withColumn("source", lit("log")),
                                     lineage.checkpoint_lineage(cache).withColumn("source", lit("checkpoint"))]),
        "replica_status": replica_rows(facts.facts, follower, batches.per_log["counts"], stages.in_kraft(snapshot)),
        "partition_status": status.partition_status(facts.facts, facts.leaders, found, facts.committed),
        "findings": found,
    }
