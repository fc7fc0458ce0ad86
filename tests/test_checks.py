"""Every SPEC 5 check on a purpose-built snapshot: per replica, leader against follower,
per partition, the leader choice, a healthy cluster without findings, and the policy
(severity overrides and allowlist)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from auditor import audit, load_snapshot
from auditor.config import AllowRule, Config
from auditor.simulator.kafka_text import (
    Batch,
    PartitionMeta,
    checkpoint_text,
    content_crc,
    dump_segment,
)
from auditor.summary import finding_summary
from tests.scenarios import Replica, add_hwm, write_describe, write_partition

pytestmark = pytest.mark.spark
HEALTHY = [(0, 4, 1), (5, 9, 2)]


@pytest.fixture(scope="module")
def checked(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    root: Path = tmp_path_factory.mktemp("checks")
    meta: dict[str, list[PartitionMeta]] = {}
    for p in range(3):
        write_partition(root, "healthy", p, {b: Replica(HEALTHY, 10) for b in (1, 2, 3)})
    meta["healthy"] = [PartitionMeta(p, 1 + p, (1, 2, 3), (1, 2, 3)) for p in range(3)]
    seq = Replica([(0, 4, 1), (10, 14, 1), (12, 13, 1), (15, 16, 3), (17, 18, 2), (19, 20, 2)], 21,
                  checkpoint=[(1, 0), (2, 17)])
    write_partition(root, "seq", 0, {1: seq})
    # make the epoch-3 batch invalid (isvalid: false)
    seg = root / "broker=1" / "data" / "seq-0" / f"{0:020d}.log.txt"
    seg.write_text(seg.read_text().replace("crc: " + str(content_crc("seq", 0, 15, 16, 3, "")) + " isvalid: true",
                            "crc: " + str(content_crc("seq", 0, 15, 16, 3, "")) + " isvalid: false"))
    meta["seq"] = [PartitionMeta(0, 1, (1,), (1,))]
    torn = root / "broker=1" / "data" / "torn-0"
    torn.mkdir(parents=True)
    for base, invalid in ((0, 30), (5, 12)):
        (torn / f"{base:020d}.log.txt").write_text(dump_segment(
            "/d", "torn", 0, base, [Batch(base, base + 4, 1, content_crc(base))], invalid_bytes=invalid))
    (torn / "leader-epoch-checkpoint").write_text(checkpoint_text([(1, 0)]))
    add_hwm(root, 1, "torn", 0, 10)
    write_partition(root, "torn", 1, {1: Replica([(0, 0, 1)], 1)})
    meta["torn"] = [PartitionMeta(0, 1, (1,), (1,)), PartitionMeta(1, 1, (1,), (1,))]
    write_partition(root, "cache", 0, {1: Replica([(0, 4, 1), (5, 9, 2), (10, 14, 4)], 15,
                                                  checkpoint=[(1, 0), (2, 6), (5, 20), (6, 30)])})
    meta["cache"] = [PartitionMeta(0, 1, (1,), (1,))]
    write_partition(root, "inputs", 0, {1: Replica([(0, 4, 1)], 5), 2: Replica([(0, 4, 1)], None)})
    (root / "broker=2" / "data" / "inputs-0" / "leader-epoch-checkpoint").unlink()
    meta["inputs"] = [PartitionMeta(0, 1, (1, 2), (1,))]
    write_partition(root, "legacy", 0, {1: Replica([(0, 2, -1)], 3), 2: Replica([(0, 2, -1)], 3)})
    write_partition(root, "inferred", 0, {
        1: Replica([(0, 4, 1), (5, 9, 2)], 5), 2: Replica([(0, 4, 1), (5, 9, 2), (10, 11, 2)], 5),
        3: Replica([(0, 4, 1)], 5)})
    write_partition(root, "incomplete", 0, {1: Replica([(0, 4, 1)], 5), 2: Replica([(0, 4, 1), (5, 9, 1)], 10)})
    meta["incomplete"] = [PartitionMeta(0, 1, (1, 2), (1, 2))]
    write_partition(root, "isr", 0, {1: Replica([(0, 4, 1), (5, 9, 1)], 10), 2: Replica([(0, 4, 1)], 5),
                                     3: Replica([(0, 4, 1), (5, 9, 1)], 12)})
    meta["isr"] = [PartitionMeta(0, 1, (1, 2, 3), (1, 2, 3))]
    # the leader holds two batches at base 3 (an overlap, the second in a lower epoch); the
    # member holds a copy of one of them, not of the other: that one is lacking
    write_partition(root, "isr-overlap", 0, {1: Replica([(0, 2, 1), (3, 3, 0), (3, 3, 1)], 4),
                                             2: Replica([(0, 2, 1), (3, 3, 1)], 4)})
    meta["isr-overlap"] = [PartitionMeta(0, 1, (1, 2), (1, 2))]
    # the follower's batch at 3 is one the leader lacks, but its own agreeing batches cover
    # offsets 3 and 4 (and, in partition 0, 5 and 6 too): it agrees there (SPEC 4.4)
    write_partition(root, "covered", 0, {1: Replica([(0, 4, 1), (5, 9, 1)], 10),
                                         2: Replica([(0, 4, 1), (3, 6, 1), (5, 9, 1)], 10)})
    write_partition(root, "covered", 1, {1: Replica([(0, 4, 1), (5, 9, 1)], 10),
                                         2: Replica([(0, 4, 1), (3, 7, 1)], 5)})
    meta["covered"] = [PartitionMeta(p, 1, (1, 2), (1, 2)) for p in range(2)]
    # both logs start at 5 (log-start-offset-checkpoint), inside the leader's batch [3, 7],
    # which the member holds with other content: that batch does not start at or above the
    # local log starts, so it is not lacking (SPEC 5); in partition 1 [8, 9] is
    start_at_5 = [(0, 2, 1), (3, 7, 1), (8, 9, 1)]
    for p, salt in ((0, {3: "x"}), (1, {3: "x", 8: "x"})):
        write_partition(root, "isr-start", p, {1: Replica(start_at_5, 10), 2: Replica(start_at_5, 10, salt=salt)})
    for b in (1, 2):
        (root / f"broker={b}" / "data" / "log-start-offset-checkpoint").write_text("0\n2\nisr-start 0 5\nisr-start 1 5\n")
    meta["isr-start"] = [PartitionMeta(p, 1, (1, 2), (1, 2)) for p in range(2)]
    write_partition(root, "absent", 0, {1: Replica([(0, 4, 1)], 5), 2: Replica([(0, 4, 1)], 5)})
    meta["absent"] = [PartitionMeta(0, 9, (9, 1, 2), (9, 1, 2))]
    # compacted: the follower's cleaner removed epoch 2 entirely, and its cache lost the entry
    write_partition(root, "compacted", 0, {
        1: Replica([(0, 4, 1), (10, 14, 2), (20, 29, 3)], 30),
        2: Replica([(0, 4, 1), (20, 29, 3)], 30)})
    meta["compacted"] = [PartitionMeta(0, 1, (1, 2), (1, 2))]
    # compacted, HWM 20: a gap ending exactly at the HWM is the cleaner's; one above it is not
    write_partition(root, "compacted-edge", 0, {
        1: Replica([(0, 9, 1), (20, 24, 1), (30, 39, 1)], 20),
        2: Replica([(0, 9, 1), (10, 19, 1), (20, 24, 1), (30, 39, 1)], 20)})
    meta["compacted-edge"] = [PartitionMeta(0, 1, (1, 2), (1, 2))]
    write_describe(root, meta, configs={"compacted": {"cleanup.policy": "compact"},
                                        "compacted-edge": {"cleanup.policy": "compact"}})
    config = Config(severity={"FOLLOWER_LAG": "WARNING"},
                    allowlist=(AllowRule("ISR_INCOMPLETE", topic="isr", partition=0, replica=2),))
    return audit(load_snapshot(spark, str(root)), run_id="checks", config=config)


def found(tables, topic: str, partition: int = 0) -> set[tuple]:  # type: ignore[no-untyped-def,type-arg]
    rows = tables["findings"].filter((F.col("topic") == topic) & (F.col("partition") == partition)).collect()
    return {(r.check, r.severity, r.replica, r.offset_start, r.offset_end, r.epoch) for r in rows}


def test_healthy_cluster_has_no_finding(checked) -> None:  # type: ignore[no-untyped-def]
    assert checked["findings"].filter(F.col("topic") == "healthy").count() == 0
    rs = checked["replica_status"].filter(F.col("topic") == "healthy").collect()
    assert sorted(r.status for r in rs) == ["in_sync"] * 6 + ["leader"] * 3
    assert all(r.records_to_truncate == 0 for r in rs if r.status == "in_sync")


def test_log_sequence_checks(checked) -> None:  # type: ignore[no-untyped-def]
    assert found(checked, "seq") == {
        ("OFFSET_GAP", "WARNING", 1, 5, 10, 1),
        ("OFFSET_OVERLAP", "ERROR", 1, 12, 14, 1),
        ("CORRUPT_BATCH", "CRITICAL", 1, 15, 17, 3),
        # one per batch in epoch 2 after epoch 3 (SPEC 5: per occurrence, the batch)
        ("EPOCH_REGRESSION", "ERROR", 1, 17, 19, 2), ("EPOCH_REGRESSION", "ERROR", 1, 19, 21, 2),
    }


def test_invalid_trailing_bytes(checked) -> None:  # type: ignore[no-untyped-def]
    assert found(checked, "torn") == {
        ("CORRUPT_BATCH", "CRITICAL", 1, 5, None, None),   # an older segment
        ("CORRUPT_BATCH", "WARNING", 1, 10, None, None),   # the newest segment: a torn read
    }


def test_epoch_cache_mismatches(checked) -> None:  # type: ignore[no-untyped-def]
    assert found(checked, "cache") == {
        ("EPOCH_CACHE_MISMATCH", "ERROR", 1, 6, 20, 2),    # epoch 2 starts at 5 in the log
        ("EPOCH_CACHE_MISMATCH", "ERROR", 1, 10, 15, 4),   # the checkpoint lacks epoch 4
        ("EPOCH_CACHE_MISMATCH", "INFO", 1, 20, 30, 5),    # beyond the LEO
        ("EPOCH_CACHE_MISMATCH", "INFO", 1, 30, 30, 6),
    }


def test_missing_inputs_and_rebuilt_cache(checked) -> None:  # type: ignore[no-untyped-def]
    import json

    (row,) = checked["findings"].filter(F.col("topic") == "inputs").collect()
    assert (row.check, row.severity, row.replica) == ("MISSING_INPUT", "WARNING", 2)
    reasons = json.loads(row.details)["reasons"]
    assert len(reasons) == 2 and "rebuilt from the log" in reasons[0] and "high watermark" in reasons[1]
    st = {r.replica: r for r in checked["replica_status"].filter(F.col("topic") == "inputs").collect()}
    assert st[2].latest_epoch == 1 and st[2].status == "in_sync"


def test_leader_unknown_and_epochless_dumps(checked) -> None:  # type: ignore[no-untyped-def]
    got = found(checked, "legacy")
    assert ("LEADER_UNKNOWN", "WARNING", None, None, None, None) in got
    assert {g[2] for g in got if g[0] == "MISSING_INPUT"} == {1, 2}
    ps = checked["partition_status"].filter(F.col("topic") == "legacy").first()
    assert (ps.leader, ps.leader_source) == (None, "unknown")
    roles = {r.role for r in checked["replica_status"].filter(F.col("topic") == "legacy").collect()}
    assert roles == {None}


def test_inferred_leader_and_severity_override(checked) -> None:  # type: ignore[no-untyped-def]
    ps = checked["partition_status"].filter(F.col("topic") == "inferred").first()
    assert (ps.leader, ps.leader_source, ps.leader_epoch, ps.leader_log_end_offset) == (2, "inferred", 2, 12)
    # FOLLOWER_LAG is INFO by default; the config raised it to WARNING
    assert found(checked, "inferred") == {("FOLLOWER_LAG", "WARNING", 1, 10, 12, None),
                                          ("FOLLOWER_LAG", "WARNING", 3, 5, 12, None)}


def test_leader_incomplete_and_committed_loss(checked) -> None:  # type: ignore[no-untyped-def]
    assert found(checked, "incomplete") == {
        ("LEADER_INCOMPLETE", "CRITICAL", None, 5, 10, None),
        ("DIVERGENT_SUFFIX", "WARNING", 2, 5, 10, None),
        ("COMMITTED_DATA_LOSS", "CRITICAL", 2, 5, 10, None),
    }
    st = checked["replica_status"].filter((F.col("topic") == "incomplete") & (F.col("replica") == 2)).first()
    assert (st.divergence_offset, st.truncation_offset, st.truncation_rounds, st.records_to_truncate) == (5, 5, 1, 5)


def test_isr_and_hwm_checks_with_allowlist(checked) -> None:  # type: ignore[no-untyped-def]
    assert found(checked, "isr") == {
        ("ISR_INCOMPLETE", "CRITICAL", 2, 5, 10, None),
        ("FOLLOWER_LAG", "WARNING", 2, 5, 10, None),
        ("HWM_ABOVE_LEO", "CRITICAL", 3, 10, 12, None),
        ("LEADER_INCOMPLETE", "CRITICAL", None, 10, 12, None),
    }
    sup = {r.check: r.suppressed for r in checked["findings"].filter(F.col("topic") == "isr").collect()}
    assert sup["ISR_INCOMPLETE"] is True and sup["HWM_ABOVE_LEO"] is False
    leaders = {r.leader for r in checked["findings"].filter(F.col("topic") == "isr").collect()}
    assert leaders == {1}


def test_offsets_covered_by_agreeing_batches_agree(checked) -> None:  # type: ignore[no-untyped-def]
    rs = {r.partition: r for r in checked["replica_status"].filter(
        (F.col("topic") == "covered") & (F.col("replica") == 2)).collect()}
    # partition 0: every offset it holds is covered by a batch the leader holds too
    assert (rs[0].divergence_offset, rs[0].status) == (None, "in_sync")
    # partition 1: offsets 5 to 7 only by the batch at 3, which the leader lacks
    assert (rs[1].divergence_offset, rs[1].truncation_offset, rs[1].status) == (5, None, "silent_divergence")
    assert ("SILENT_DIVERGENCE", "CRITICAL", 2, 5, 8, None) in found(checked, "covered", 1)
    assert ("OFFSET_OVERLAP", "ERROR", 2, 3, 7, 1) in found(checked, "covered", 0)
    assert not {f for f in found(checked, "covered", 0) if f[0] in ("SILENT_DIVERGENCE", "DIVERGENT_SUFFIX")}


def test_a_leader_batch_across_the_local_log_start_is_never_lacking(checked) -> None:  # type: ignore[no-untyped-def]
    isr = lambda p: {f for f in found(checked, "isr-start", p) if f[0] == "ISR_INCOMPLETE"}  # noqa: E731
    assert isr(0) == set() and isr(1) == {("ISR_INCOMPLETE", "CRITICAL", 2, 8, 10, None)}
    # the offsets from the log start on still differ
    assert ("LOG_MATCHING_VIOLATION", "CRITICAL", 2, 5, 10, None) in found(checked, "isr-start", 0)


def test_a_leader_batch_beside_an_agreeing_one_at_its_base_is_lacking(checked) -> None:  # type: ignore[no-untyped-def]
    assert {f for f in found(checked, "isr-overlap") if f[2] == 2} == {("ISR_INCOMPLETE", "CRITICAL", 2, 3, 4, None)}


def test_compacted_topic_caches_must_agree_below_the_hwm(checked) -> None:  # type: ignore[no-untyped-def]
    assert found(checked, "compacted") == {
        ("OFFSET_GAP", "INFO", 1, 5, 10, 2), ("OFFSET_GAP", "INFO", 1, 15, 20, 3),
        ("OFFSET_GAP", "INFO", 2, 5, 20, 3),
        ("EPOCH_CACHE_MISMATCH", "ERROR", 2, 10, 20, 2),
    }
    st = checked["replica_status"].filter((F.col("topic") == "compacted") & (F.col("replica") == 2)).first()
    assert (st.divergence_offset, st.truncation_offset, st.status) == (None, None, "in_sync")


def test_a_compacted_gap_is_the_cleaners_only_wholly_below_the_hwm(checked) -> None:  # type: ignore[no-untyped-def]
    """SPEC 4.5: OFFSET_GAP is INFO below the higher HWM. The gap [10, 20) ends at the HWM
    (20): INFO; [25, 30) lies above it: WARNING, on both replicas."""
    assert found(checked, "compacted-edge") == {
        ("OFFSET_GAP", "INFO", 1, 10, 20, 1), ("OFFSET_GAP", "WARNING", 1, 25, 30, 1),
        ("OFFSET_GAP", "WARNING", 2, 25, 30, 1),
    }


def test_metadata_leader_without_data(checked) -> None:  # type: ignore[no-untyped-def]
    assert found(checked, "absent") == {("MISSING_INPUT", "WARNING", None, None, None, None)}
    st = {r.replica: (r.role, r.status) for r in checked["replica_status"].filter(F.col("topic") == "absent").collect()}
    assert st == {1: ("follower", "unknown"), 2: ("follower", "unknown")}


def test_every_finding_is_well_formed(checked) -> None:  # type: ignore[no-untyped-def]
    import json

    for r in checked["findings"].collect():
        assert r.message and r.message.endswith(".")
        assert isinstance(json.loads(r.details), dict)
        if r.offset_end is not None and r.offset_start is not None:
            assert r.offset_start <= r.offset_end, r


def test_fail_on_counts_unsuppressed_findings_at_or_above(checked) -> None:  # type: ignore[no-untyped-def]
    f = checked["findings"]
    crit = f.filter((F.col("severity") == "CRITICAL") & ~F.col("suppressed")).count()
    assert finding_summary(f, "critical")[1] == crit > 0
    assert finding_summary(f, "never")[1] == 0
    assert finding_summary(f, "info")[1] == f.filter(~F.col("suppressed")).count()


def test_kinds_in_one_projection_give_the_rows_of_one_filter_per_kind(spark) -> None:  # type: ignore[no-untyped-def]
    """``rows.findings`` equals ``rows.finding`` of a filter per kind, unioned: a row where
    several kinds hold gives one finding each, a null or false condition gives none, and
    the one-kind case takes the plain path. Its plan reads the source frame once."""
    from auditor.checks.rows import FINDING_COLUMNS, Kind, finding, findings

    rows = [("s", "t", 0, r, a, b) for r, a, b in
            [(1, 5, 2), (2, 1, 1), (3, None, 7), (4, 9, None), (5, 0, 0), (6, 3, 8), (7, 9, 8)]]
    df = spark.createDataFrame(rows, "snapshot string, topic string, partition int, replica int, a bigint, b bigint")
    kinds = [
        Kind(F.col("a") > F.col("b"), "OFFSET_GAP", F.when(F.col("a") > 4, "INFO").otherwise("WARNING"),
             F.col("b"), F.col("a"), None, F.format_string("a %d above b %d.", F.col("a"), F.col("b")),
             F.struct("a", "b")),
        Kind(F.col("a") == F.col("b"), "OFFSET_OVERLAP", "ERROR", F.col("a"), None, F.lit(3),
             F.lit("equal."), F.struct("a")),
        Kind(F.col("b") > 6, "LEADER_UNKNOWN", "WARNING", None, F.col("b"), None, F.lit("b high."),
             F.struct("b"), replica=F.lit(None)),
    ]

    def as_set(frame):  # type: ignore[no-untyped-def]
        assert frame.columns == FINDING_COLUMNS
        return sorted((tuple(r) for r in frame.collect()), key=repr)

    expected = [finding(df.filter(k.where), k.check, k.severity, k.start, k.end, k.epoch, k.message, k.details,
                        k.replica) for k in kinds]
    union = expected[0].unionByName(expected[1]).unionByName(expected[2])
    got = as_set(findings(df, kinds))
    assert got == as_set(union)
    # replica 1: a gap; 2 and 5: overlaps; 3: b high only (a is null); 4: nothing (b null);
    # 6: b high; 7: a gap and b high, two findings from one row.
    assert [(r[3], r[4]) for r in got if r[4] != "LEADER_UNKNOWN"] == [
        (1, "OFFSET_GAP"), (2, "OFFSET_OVERLAP"), (5, "OFFSET_OVERLAP"), (7, "OFFSET_GAP")]
    assert sorted(r[7] for r in got if r[4] == "LEADER_UNKNOWN") == [7, 8, 8]
    assert as_set(findings(df, kinds[1:2])) == as_set(expected[1])
    plan = findings(df, kinds)._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("LocalRelation") + plan.count("LogicalRDD") == 1, plan
