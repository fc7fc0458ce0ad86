"""Over-time checks (SPEC 5) in both forms: several ``snapshot=`` folders in one input, and
successive runs into one OUT (only SUCCEEDED runs of the same cluster count); plus
``finding_id`` / ``first_seen``."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from auditor import audit, load_snapshot
from auditor.config import Config
from auditor.run import run_audit
from auditor.simulator.kafka_text import PartitionMeta
from auditor.sinks.history import read_history
from tests.scenarios import Replica, write_describe, write_partition

pytestmark = pytest.mark.spark

DAY1, DAY2 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"
COMPACT = {"compacted": {"cleanup.policy": "compact"}}
OVER_TIME = {"HWM_REGRESSION", "FOLLOWER_HWM_REGRESSION", "STALE_LEADER_HWM", "COMMITTED_OFFSET_LOST"}


def spans(start: int, end: int, epoch: int, step: int = 10) -> list[tuple[int, int, int]]:
    return [(o, min(o + step, end) - 1, epoch) for o in range(start, end, step)]


def write_day1(root: Path) -> None:
    for t in ("regress", "failover", "healthy"):
        hwm = 50 if t == "healthy" else 100
        write_partition(root, t, 0, {b: Replica(spans(0, 100, 1), hwm) for b in (1, 2, 3)})
    # compacted: the cleaner left a gap at [40, 60)
    write_partition(root, "compacted", 0, {b: Replica(spans(0, 40, 1) + spans(60, 100, 1), 100) for b in (1, 2, 3)})
    write_describe(root, {t: [PartitionMeta(0, 1, (1, 2, 3), (1, 2, 3))]
                          for t in ("regress", "failover", "healthy", "compacted")}, COMPACT)


def write_day2(root: Path) -> None:
    # regress: same leader and epoch, HWMs went back (leader 100 -> 80, followers -> 90)
    write_partition(root, "regress", 0, {1: Replica(spans(0, 100, 1), 80), 2: Replica(spans(0, 100, 1), 90),
                                         3: Replica(spans(0, 100, 1), 90)})
    # failover: broker 2 became leader in epoch 2 holding only [0, 60) of epoch 1
    new = spans(0, 60, 1) + spans(60, 80, 2)
    write_partition(root, "failover", 0, {2: Replica(new, 60, salt={o: "new" for o in range(60, 80)}),
                                          3: Replica(new, 60, salt={o: "new" for o in range(60, 80)})})
    write_partition(root, "healthy", 0, {1: Replica(spans(0, 120, 1), 70), 2: Replica(spans(0, 120, 1), 70),
                                         3: Replica(spans(0, 110, 1), 70)})  # lags: FOLLOWER_LAG in every run
    # compacted: new leader 2 holds [60, 80) in epoch 2 (lost in epoch 1) and not [80, 100)
    # at all: on a compacted topic only offsets both leaders hold are compared
    moved = spans(0, 40, 1) + spans(60, 80, 2)
    write_partition(root, "compacted", 0, {b: Replica(moved, 80, salt={o: "new" for o in range(60, 80)})
                                           for b in (2, 3)})
    write_describe(root, {"regress": [PartitionMeta(0, 1, (1, 2, 3), (1, 2, 3))],
                          "failover": [PartitionMeta(0, 2, (1, 2, 3), (2, 3))],
                          "healthy": [PartitionMeta(0, 1, (1, 2, 3), (1, 2, 3))],
                          "compacted": [PartitionMeta(0, 2, (1, 2, 3), (2, 3))]}, COMPACT)


EXPECTED = {
    ("regress", 1, "HWM_REGRESSION", 80, 100),
    ("regress", 2, "FOLLOWER_HWM_REGRESSION", 90, 100),
    ("regress", 3, "FOLLOWER_HWM_REGRESSION", 90, 100),
    ("failover", 2, "STALE_LEADER_HWM", 60, 100),
    ("failover", 2, "COMMITTED_OFFSET_LOST", 60, 100),
    ("failover", 3, "FOLLOWER_HWM_REGRESSION", 60, 100),
    ("compacted", 2, "STALE_LEADER_HWM", 80, 100),
    ("compacted", 2, "COMMITTED_OFFSET_LOST", 60, 80),
    ("compacted", 3, "FOLLOWER_HWM_REGRESSION", 80, 100),
}


def over_time(rows) -> set:  # type: ignore[no-untyped-def]
    return {(r["topic"], r["replica"], r["check"], r["offset_start"], r["offset_end"])
            for r in rows if r["check"] in OVER_TIME}


def test_several_snapshots_in_one_input(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write_day1(tmp_path / f"snapshot={DAY1}")
    write_day2(tmp_path / f"snapshot={DAY2}")
    tables = audit(load_snapshot(spark, str(tmp_path)), run_id="one")
    rows = [r.asDict() for r in tables["findings"].collect()]
    assert over_time(rows) == EXPECTED
    assert {str(r["snapshot"])[:10] for r in rows if r["check"] in OVER_TIME} == {"2026-01-02"}
    severity = {r["check"]: r["severity"] for r in rows if r["check"] in OVER_TIME}
    assert severity == {"HWM_REGRESSION": "CRITICAL", "FOLLOWER_HWM_REGRESSION": "INFO",
                        "STALE_LEADER_HWM": "WARNING", "COMMITTED_OFFSET_LOST": "CRITICAL"}


def _findings(out: Path, run_id: str) -> list[dict]:  # type: ignore[type-arg]
    return [r for r in DeltaTable(str(out / "findings")).to_pyarrow_table().to_pylist() if r["run_id"] == run_id]


def test_successive_runs_use_only_succeeded_runs_of_the_cluster(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    write_day1(tmp_path / "d1")
    write_day2(tmp_path / "d2")
    run_audit(spark, str(tmp_path / "d1"), str(out), Config(cluster="prod"), run_id="r1", snapshot_label=DAY1)
    # A later observation that must not count: rows of a run that did not succeed (a run
    # that fails or is killed mid-write has its rows undone, as test_run and test_commit
    # check; these stay, as if undoing them had failed too): every HWM 0, half a day after
    # r1, with a FAILED runs row. Counting them would hide the regressions below.
    for table in ("findings", "replica_status", "partition_status", "epoch_lineage", "runs"):
        rows = DeltaTable(str(out / table)).to_pyarrow_table(filters=[("run_id", "=", "r1")])
        for name, value in (("run_id", "f1"), ("snapshot", datetime(2026, 1, 1, 12, tzinfo=timezone.utc)),
                            ("high_watermark", 0), ("max_high_watermark", 0), ("status", "FAILED")):
            if name in rows.column_names and (name != "status" or table == "runs"):
                i = rows.column_names.index(name)
                rows = rows.set_column(i, name, pa.array([value] * rows.num_rows, rows.schema.field(name).type))
        write_deltalake(str(out / table), rows, mode="append")
    # history is per cluster: another cluster has none here
    assert read_history(spark, str(out), "other", "any") is None

    first = run_audit(spark, str(tmp_path / "d2"), str(out), Config(cluster="prod"), run_id="r2", snapshot_label=DAY2)
    assert first.exit_code == 1
    rows = _findings(out, "r2")
    assert over_time(rows) == EXPECTED

    # finding identity: stable across runs; first_seen carried from the earlier run
    again = run_audit(spark, str(tmp_path / "d2"), str(out), Config(cluster="prod"), run_id="r3",
                      snapshot_label="2026-01-03T00:00:00Z")
    assert again.exit_code == 0  # P is r2's day-2 observation, the same data: nothing over time
    assert over_time(_findings(out, "r3")) == set()
    r2 = {r["finding_id"]: r for r in rows}
    r3 = {r["finding_id"]: r for r in _findings(out, "r3")}
    lag = [i for i, r in r3.items() if r["check"] == "FOLLOWER_LAG"]
    assert lag and all(i in r2 for i in lag)
    assert all(str(r3[i]["first_seen"])[:10] == "2026-01-02" for i in lag)
    # The compacted topic's gap [40, 60) is in r1 and r2, but the batch after it is in epoch 1
    # on day 1 and in epoch 2 on day 2: a per-occurrence finding's identity covers its epoch
    # (SPEC 6), so r2's gaps are new occurrences, first seen on day 2, like all of r2's.
    r1 = _findings(out, "r1")
    r1_ids = {r["finding_id"] for r in r1}
    gap = {(r["replica"], r["offset_start"], r["offset_end"], r["epoch"]) for r in r1 if r["check"] == "OFFSET_GAP"}
    assert {(2, 40, 60, 1), (3, 40, 60, 1)} <= gap
    assert {(r["replica"], r["offset_start"], r["offset_end"], r["epoch"]) for r in rows
            if r["check"] == "OFFSET_GAP"} == {(2, 40, 60, 2), (3, 40, 60, 2)}
    assert not any(r["finding_id"] in r1_ids for r in rows)
    assert all(str(r["first_seen"])[:10] == "2026-01-02" for r in rows)
    # seen again unchanged (r3: the same data), those gaps keep their identity and first_seen
    gaps = [i for i, r in r3.items() if r["check"] == "OFFSET_GAP"]
    assert len(gaps) == 2 and all(i in r2 for i in gaps)
    assert all(str(r3[i]["first_seen"])[:10] == "2026-01-02" for i in gaps)
