"""Ambiguous or impossible input is never resolved silently (SPEC 5 METADATA_CONFLICT, SPEC 8):
a partition described twice, epochs below -1, offsets outside [0, 2^63 - 1]; and
``finding_id`` is unique per run and snapshot (SPEC 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable
from pyspark.sql import functions as F

from auditor.cli import main
from auditor.engine.tables import PER_OCCURRENCE, finding_id
from auditor.simulator.kafka_text import PartitionMeta
from tests.scenarios import Replica, write_describe, write_partition

pytestmark = pytest.mark.spark

TOO_BIG = "9223372036854775808"  # 2^63


def rows(out: Path, table: str) -> list[dict]:  # type: ignore[type-arg]
    return DeltaTable(str(out / table)).to_pyarrow_table().to_pylist()


def damaged_snapshot(root: Path) -> Path:
    """Three healthy replicas of orders-0 and of orders-1, then every kind of damage at once."""
    healthy = [(0, 9, 0), (10, 19, 1), (20, 29, 2)]
    for p in (0, 1):
        write_partition(root, "orders", p, {b: Replica(list(healthy), hwm=30) for b in (1, 2, 3)})
    meta = [PartitionMeta(0, 1, [1, 2, 3], [1, 2, 3]), PartitionMeta(1, 2, [2, 3, 1], [2, 3, 1])]
    write_describe(root, {"orders": meta})
    describe = root / "topics-describe.txt"
    lines = describe.read_text().splitlines()
    p0 = next(line for line in lines if "Partition: 0" in line)
    p1 = next(line for line in lines if "Partition: 1" in line)
    # orders-0 listed again, equal (ISR in another order: a set) and then with another leader
    same = p0.replace("Isr: 1,2,3", "Isr: 3,2,1")
    assert same != p0
    other = p0.replace("Leader: 1", "Leader: 3")
    describe.write_text("\n".join([*lines, same, other, p1]) + "\n")
    # broker 2's dump of orders-1: a batch with an epoch below -1, one with baseOffset 2^63
    dump = next((root / "broker=2" / "data" / "orders-1").glob("*.log.txt"))
    text = dump.read_text().splitlines()
    text.append(text[-1].replace("baseOffset: 20 ", "baseOffset: 30 ").replace("lastOffset: 29", "lastOffset: 31")
                .replace("partitionLeaderEpoch: 2", "partitionLeaderEpoch: -12"))
    text.append(text[-2].replace("baseOffset: 20 ", f"baseOffset: {TOO_BIG} "))
    dump.write_text("\n".join(text) + "\n")
    # broker 3's leader-epoch-checkpoint of orders-1 holds an epoch below -1: unusable
    cp = root / "broker=3" / "data" / "orders-1" / "leader-epoch-checkpoint"
    cp.write_text("0\n4\n0 0\n1 10\n2 20\n-12 100\n")
    # broker 1's replication-offset-checkpoint: one offset at 2^63
    hwm = root / "broker=1" / "data" / "replication-offset-checkpoint"
    hwm_lines = hwm.read_text().splitlines()
    hwm.write_text("\n".join([hwm_lines[0], str(len(hwm_lines) - 1), *hwm_lines[2:], f"other 0 {TOO_BIG}"]) + "\n")
    return root


def test_every_kind_of_damage_at_once_is_quarantined_and_reported(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    snap = damaged_snapshot(tmp_path / "snap")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["audit", str(snap), "--out", str(out), "--run-id", "bad", "--fail-on", "never"])
    assert result.exit_code == 0, result.output
    errors = {(r["file"], r["line_number"]): r["error"] for r in rows(out, "parse_errors")}
    by_file: dict[str, list[str]] = {}
    for (file, _), error in errors.items():
        by_file.setdefault(file.split("/")[-1] if "describe" in file else file, []).append(error)
    describe_errors = by_file.pop("topics-describe.txt")
    assert len(describe_errors) == 1 and "listed again with other values" in describe_errors[0]
    assert "than on line 2 of topics-describe.txt, which is used" in describe_errors[0]  # the first line
    dump_errors = sorted(e for f, es in by_file.items() if f.endswith(".log.txt") for e in es)
    assert dump_errors == [f"baseOffset {TOO_BIG} out of range (at most 2^63 - 1: a value Kafka never writes)",
                           "partitionLeaderEpoch below -1 (a value Kafka never writes)"]
    cp_errors = [e for f, es in by_file.items() if f.endswith("leader-epoch-checkpoint") for e in es]
    assert cp_errors and all("an epoch outside [0, 2^31 - 1]" in e for e in cp_errors)
    hwm_errors = [e for f, es in by_file.items() if f.endswith("replication-offset-checkpoint") for e in es]
    assert hwm_errors and all("an offset outside [0, 2^63 - 1]" in e for e in hwm_errors)
    (run,) = rows(out, "runs")
    counts = json.loads(run["counts"])
    assert counts["lines"] == counts["lines_parsed"] + counts["lines_skipped"] + counts["lines_quarantined"]
    assert counts["parse_errors"] == len(errors)
    findings = rows(out, "findings")
    conflict = [f for f in findings if f["check"] == "METADATA_CONFLICT"]
    assert [(f["topic"], f["partition"], f["replica"], f["severity"]) for f in conflict] == [("orders", 0, None, "WARNING")]
    assert json.loads(conflict[0]["details"])["conflicting_lines"] == [len(snap.joinpath("topics-describe.txt")
                                                                           .read_text().splitlines()) - 1]
    # the first line is the one used: leader 1
    (p0,) = [r for r in rows(out, "partition_status") if r["partition"] == 0]
    assert p0["leader"] == 1
    # the damaged lines are never used: orders-1 on broker 2 ends at 30, as on the others
    status = {(r["partition"], r["replica"]): r for r in rows(out, "replica_status")}
    assert status[(1, 2)]["log_end_offset"] == 30 and status[(1, 2)]["latest_epoch"] == 2
    # the unusable checkpoint: MISSING_INPUT for broker 3's orders-1, its cache rebuilt from its log
    assert any(f["check"] == "MISSING_INPUT" and (f["partition"], f["replica"]) == (1, 3) for f in findings)
    assert not any(f["check"] == "EPOCH_CACHE_MISMATCH" for f in findings)
    ids = [f["finding_id"] for f in findings]
    assert len(ids) == len(set(ids))


def test_identical_repeated_describe_lines_are_skipped_and_counted(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from auditor.load import load_snapshot

    root = tmp_path / "snap"
    write_partition(root, "t", 0, {b: Replica([(0, 4, 0)], hwm=5) for b in (1, 2)})
    write_describe(root, {"t": [PartitionMeta(0, 1, [1, 2], [1, 2])]})
    describe = root / "topics-describe.txt"
    lines = describe.read_text().splitlines()
    describe.write_text("\n".join([*lines, lines[-1], lines[-1].replace("Leader: 1", "Leader: -1")]) + "\n")
    snap = load_snapshot(spark, str(root))
    acc = snap.accounting.filter(F.col("rel").endswith("topics-describe.txt")).collect()
    assert [(a.lines, a.lines_parsed, a.lines_skipped, a.lines_quarantined) for a in acc] == [(4, 2, 1, 1)]
    (meta,) = snap.metadata.collect()
    assert (meta.leader, list(meta.conflict_lines)) == (1, [4])


def test_finding_id_tells_occurrences_apart_and_keeps_other_ids(spark) -> None:  # type: ignore[no-untyped-def]
    """Two EPOCH_CACHE_MISMATCH findings of one replica that differ only by epoch get two
    ids; a check with one finding per replica keeps the identity it always had."""
    import hashlib

    cols = "snapshot string, topic string, partition int, replica int, check string, offset_start bigint, " \
           "offset_end bigint, epoch int, details string"
    found = spark.createDataFrame([
        ("s", "t", 0, 1, "EPOCH_CACHE_MISMATCH", 10, None, 3, "{}"),
        ("s", "t", 0, 1, "EPOCH_CACHE_MISMATCH", 10, None, 4, "{}"),
        ("s", "t", 0, 1, "CORRUPT_BATCH", 40, None, None, '{"segment_base_offset": 0}'),
        ("s", "t", 0, 1, "CORRUPT_BATCH", 40, None, None, '{"segment_base_offset": 40}'),
        ("s", "t", 0, 2, "HWM_ABOVE_LEO", 7, 9, None, "{}"),
    ], cols)
    ids = [r.id for r in found.select(finding_id("c").alias("id")).collect()]
    assert len(set(ids)) == len(ids)
    assert ids[-1] == hashlib.sha256("c|t|0|2|HWM_ABOVE_LEO|7".encode()).hexdigest()
    assert "HWM_ABOVE_LEO" not in PER_OCCURRENCE and "EPOCH_CACHE_MISMATCH" in PER_OCCURRENCE
