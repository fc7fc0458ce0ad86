"""Tiered storage (KIP-405) and retention: SPEC 2's local log start offset.

Hand-worked partitions, one topic each, audited together. The partition's history:
epoch 0 on [0, 400), epoch 1 on [400, 900), epoch 2 on [900, 2000), in batches of 50
offsets. Every replica's ``leader-epoch-checkpoint`` covers the whole history (Kafka keeps
the entries of remote offsets), and ``log-start-offset-checkpoint`` holds the partition's
log start; the dumps show only what each broker holds on its own disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor.config import Config
from auditor.run import run_audit
from auditor.simulator.kafka_text import PartitionMeta
from tests.scenarios import Replica, write_describe, write_partition

pytestmark = pytest.mark.spark

HISTORY = [(0, 0), (1, 400), (2, 900)]  # (epoch, start offset)
END = 2000


def spans(start: int, end: int = END) -> list[tuple[int, int, int]]:
    """The history's batches on [start, end)."""
    def epoch(o: int) -> int:
        return max(e for e, s in HISTORY if s <= o)
    return [(b, b + 49, epoch(b)) for b in range(start, end, 50)]


def add_log_start(root: Path, broker: int, topic: str, partition: int, log_start: int) -> None:
    path = root / f"broker={broker}" / "data" / "log-start-offset-checkpoint"
    lines = path.read_text().splitlines()[2:] if path.exists() else []
    lines.append(f"{topic} {partition} {log_start}")
    path.write_text("\n".join(["0", str(len(lines)), *lines]) + "\n", encoding="utf-8")


def tiered_snapshot(root: Path) -> Path:
    replicas = (1, 2, 3)
    # all replicas tiered: the leader keeps [1500, 2000) locally, followers more or less
    write_partition(root, "remote-all", 0, {
        1: Replica(spans(1500), hwm=END, checkpoint=HISTORY),
        2: Replica(spans(1000), hwm=END, checkpoint=HISTORY),
        3: Replica(spans(1800), hwm=END, checkpoint=HISTORY)})
    # one replica tiered: the leader holds everything, one follower only [1000, 2000)
    write_partition(root, "remote-one", 0, {
        1: Replica(spans(0), hwm=END, checkpoint=HISTORY),
        2: Replica(spans(1000), hwm=END, checkpoint=HISTORY),
        3: Replica(spans(0), hwm=END, checkpoint=HISTORY)})
    # no tiering, DeleteRecords at 1025: the log start inside the first segment [1000, ...),
    # the checkpoint truncated from the start (its first entry moved to 1025)
    write_partition(root, "retained", 0, {b: Replica(spans(1000), hwm=END, checkpoint=[(2, 1025)])
                                          for b in replicas})
    # tiered, and a real divergence above both local log starts: follower 2's batch at 1700
    # has other content in the same epoch
    write_partition(root, "diverged", 0, {
        1: Replica(spans(1500), hwm=END, checkpoint=HISTORY),
        2: Replica(spans(1000), hwm=END, checkpoint=HISTORY, salt={1700: "other"}),
        3: Replica(spans(1500), hwm=END, checkpoint=HISTORY)})
    # one replica, tiered, whose checkpoint says epoch 3 began at 950, below its local log
    # start 1000: epoch 3 is then in force at 1000, but the log's first batch is in epoch 2
    write_partition(root, "stale-cache", 0, {1: Replica(spans(1000), hwm=END, checkpoint=[*HISTORY, (3, 950)])})
    add_log_start(root, 1, "stale-cache", 0, 0)
    for topic in ("remote-all", "remote-one", "diverged"):
        for b in replicas:
            add_log_start(root, b, topic, 0, 0)
    for b in replicas:
        add_log_start(root, b, "retained", 0, 1025)
    write_describe(root, {**{t: [PartitionMeta(0, 1, replicas, replicas)]
                             for t in ("remote-all", "remote-one", "retained", "diverged")},
                          "stale-cache": [PartitionMeta(0, 1, (1,), (1,))]})
    return root


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    from deltalake import DeltaTable

    base = tmp_path_factory.mktemp("tiered")
    snap = tiered_snapshot(base / "snap")
    out = base / "out"
    run_audit(spark, str(snap), str(out), Config(cluster="t", fail_on="never"), run_id="tiered")
    return {name: DeltaTable(str(out / name)).to_pyarrow_table().to_pylist()
            for name in ("findings", "replica_status", "parse_errors")}


def loud(findings: list[dict], topic: str) -> list[tuple]:  # type: ignore[type-arg]
    return sorted((f["replica"], f["check"], f["severity"], f["offset_start"], f["offset_end"]) for f in findings
                  if f["topic"] == topic and f["severity"] in ("CRITICAL", "ERROR", "WARNING"))


@pytest.mark.parametrize("topic", ["remote-all", "remote-one", "retained"])
def test_a_healthy_tiered_or_retained_partition_has_no_finding_at_warning_or_above(audited, topic) -> None:  # type: ignore[no-untyped-def]
    assert audited["parse_errors"] == []
    assert loud(audited["findings"], topic) == []
    status = {r["replica"]: r for r in audited["replica_status"] if r["topic"] == topic}
    assert all(r["divergence_offset"] is None for r in status.values())
    # replica_status.log_start_offset stays the log start offset (SPEC 2)
    assert {r["log_start_offset"] for r in status.values()} == {1025 if topic == "retained" else 0}
    assert all(r["status"] in ("leader", "in_sync", "lagging") for r in status.values()), status


def test_a_divergence_above_the_local_log_starts_is_found_exactly(audited) -> None:  # type: ignore[no-untyped-def]
    status = {r["replica"]: r for r in audited["replica_status"] if r["topic"] == "diverged"}
    assert status[2]["divergence_offset"] == 1700 and status[3]["divergence_offset"] is None
    found = loud(audited["findings"], "diverged")
    assert {(r, c) for r, c, *_ in found} == {
        (2, "SAME_EPOCH_CONFLICT"), (2, "LOG_MATCHING_VIOLATION"), (2, "SILENT_DIVERGENCE"), (2, "ISR_INCOMPLETE")}
    assert {start for *_, start, _ in found} == {1700}
    silent = next(f for f in audited["findings"] if f["topic"] == "diverged" and f["check"] == "SILENT_DIVERGENCE")
    details = json.loads(silent["details"])
    # details name both the log start and the local log start
    assert (details["log_start_offset"], details["local_log_start_offset"]) == (0, 1000)
    assert (details["leader_log_start_offset"], details["leader_local_log_start_offset"]) == (0, 1500)


def test_the_last_remote_entry_is_in_force_at_the_local_log_start(audited) -> None:  # type: ignore[no-untyped-def]
    """Entries below the local log start are not compared with the log, except the last of
    them: the log's first epoch must not be lower than its (SPEC 5 EPOCH_CACHE_MISMATCH)."""
    assert loud(audited["findings"], "stale-cache") == [(1, "EPOCH_CACHE_MISMATCH", "ERROR", 950, END)]
    (found,) = [f for f in audited["findings"] if f["topic"] == "stale-cache"]
    assert found["epoch"] == 3
    details = json.loads(found["details"])
    assert (details["log_start_offset"], details["local_log_start_offset"]) == (0, 1000)


def test_a_window_the_local_log_start_cuts_is_compared_in_scope(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A window (2^16 offsets: here every log's only one) holding both replicas' local log
    starts is compared on what lies at or above the floor (the higher local log start): a
    follower whose older segment is gone needs no batch read when it agrees in scope, and
    is a prefix when it lags within the tail; a floor inside a summary row (the leader's
    oldest segment, which holds no tail rows), or a difference in scope, is drilled."""
    from pyspark.sql import functions as F

    from auditor import load_snapshot
    from auditor.compare.windows import window_verdicts
    from auditor.summarise.replicas import (
        epoch_summaries,
        replica_summaries,
        tail_batches,
        window_summaries,
    )

    one = [(i, i, 1) for i in range(30)]
    leader = Replica(one, 30, segments=3)  # segments at 0, 10 and 20; tails in the last two
    cases = {"same": Replica(one[10:], 30, segments=2), "lags": Replica(one[10:29], 29, segments=2),
             "mid-segment": Replica(one[5:], 30, segments=2), "differs": Replica(one[10:], 30, segments=2, salt={25: "x"})}
    for topic, follower in cases.items():
        write_partition(tmp_path, topic, 0, {1: leader, 2: follower})
    write_describe(tmp_path, {t: [PartitionMeta(0, 1, (1, 2), (1, 2))] for t in cases})
    summaries = load_snapshot(spark, str(tmp_path)).summaries
    pairs = summaries.filter(F.col("replica") == 2).select("snapshot", "topic", "partition", "replica").distinct() \
        .select("*", F.lit(1).alias("leader"), F.when(F.col("topic") == "mid-segment", 5).otherwise(10).alias("lso"),
                F.lit(None).cast("bigint").alias("hmax"), F.lit(False).alias("compacted"))
    replicas = replica_summaries(summaries, epoch_summaries(summaries))
    rows = window_verdicts(pairs, window_summaries(summaries), tail_batches(summaries), replicas, summaries).collect()
    got = {(r.topic, r.verdict, r.extra_first) for r in rows}
    assert got == {("lags", "prefix", 29), ("mid-segment", "drill", None), ("differs", "drill", None)}, got
