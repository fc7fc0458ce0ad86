"""--format table: Parquet and CSV tables, one file or a folder, bad values quarantined."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from auditor import audit, load_snapshot
from auditor.errors import InputError
from tests.conftest import write

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("tables")
    # openraft example: terms are epochs, indexes are offsets (seed openraft-append-entries.md)
    write(root / "batches" / "part-0.csv",
          "topic,partition,replica,base_offset,last_offset,epoch,crc\n"
          "raft,0,3,0,0,3,30\nraft,0,3,1,1,3,31\nraft,0,3,2,2,3,32\n"
          "raft,0,5,0,0,2,20\n\nraft,0,5,1,1,4,41\nraft,0,5,2,2,4,42\n"
          "raft,0,x9,0,0,1,1\nraft,zero,5,3,3,4,43\nraft,0,5,4,,4,44\n")
    pq.write_table(pa.table({
        "topic": ["raft", "raft"], "partition": [1, 1], "replica": [1, 2],
        "base_offset": [0, 0], "last_offset": [9, 9], "epoch": [1, 1],
        "snapshot": ["2026-02-01T00:00:00Z", "2026-02-01T00:00:00Z"]}), root / "batches" / "part-1.parquet")
    pq.write_table(pa.table({"topic": ["raft"], "partition": [0], "replica": ["five"], "high_watermark": [2]}),
                   root / "hwm.parquet")
    write(root / "metadata.csv", 'topic,partition,leader,replicas,isr\nraft,0,5,"3,5","5"\n')
    snap = load_snapshot(spark, str(root), format="table", snapshot="2026-01-01T00:00:00Z")
    return root, snap


def test_batches_from_csv_and_parquet(tables) -> None:  # type: ignore[no-untyped-def]
    _, snap = tables
    got = sorted((r.partition, r.replica, r.base_offset, r.last_offset, r.epoch, r.crc, r.record_count)
                 for r in snap.batches.collect())
    assert got == [(0, 3, 0, 0, 3, 30, 1), (0, 3, 1, 1, 3, 31, 1), (0, 3, 2, 2, 3, 32, 1),
                   (0, 5, 0, 0, 2, 20, 1), (0, 5, 1, 1, 4, 41, 1), (0, 5, 2, 2, 4, 42, 1),
                   (1, 1, 0, 9, 1, None, 10), (1, 2, 0, 9, 1, None, 10)]
    snaps = {(r.partition, str(r.snapshot)) for r in snap.batches.select("partition", "snapshot").distinct().collect()}
    assert snaps == {(0, "2026-01-01 00:00:00"), (1, "2026-02-01 00:00:00")}


def test_bad_values_are_quarantined_with_position(tables) -> None:  # type: ignore[no-untyped-def]
    _, snap = tables
    errors = sorted((e.file, e.line_number, e.error) for e in snap.parse_errors.collect())
    assert errors == [
        ("batches/part-0.csv", 9, "column replica: x9 is not a valid int"),
        ("batches/part-0.csv", 10, "column partition: zero is not a valid int"),
        ("batches/part-0.csv", 11, "column last_offset is empty"),
        ("hwm.parquet", 1, "column replica: five is not a valid int"),
    ]
    acc = {r.rel: r for r in snap.accounting.collect()}
    csv = acc["batches/part-0.csv"]
    assert (csv.lines, csv.lines_parsed, csv.lines_skipped, csv.lines_quarantined) == (11, 6, 2, 3)
    assert acc["hwm.parquet"].lines_quarantined == 1


def test_metadata_and_audit_of_tables(tables) -> None:  # type: ignore[no-untyped-def]
    _, snap = tables
    md = snap.metadata.first()
    assert (md.leader, md.replicas, md.isr) == (5, [3, 5], [5])
    out = audit(snap, run_id="t", cluster="raft")
    rs = {(r.partition, r.replica): r for r in out["replica_status"].collect()}
    assert rs[(0, 5)].role == "leader" and rs[(0, 3)].in_isr is False
    assert rs[(0, 5)].latest_epoch == 4 and rs[(0, 3)].log_end_offset == 3


def test_missing_batches_table(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path / "hwm.csv", "topic,partition,replica,high_watermark\n")
    with pytest.raises(InputError, match="no batches table"):
        load_snapshot(spark, str(tmp_path), format="table")


#: The raft rule offset by offset (SPEC 4.3): one partition per case, leader 5 and follower
#: 3, ``(base, last, epoch)`` of each; windows are 2^16 offsets wide (a batch from 65,530
#: to 65,536 or later crosses an edge). The follower's truncation offset under ``raft``.
RAFT_CASES = {
    # one leader batch, the follower's offsets in two of the same term: nothing conflicts
    "split": ([(0, 9, 1)], [(0, 4, 1), (5, 9, 1)], None),
    # one follower batch over two leader batches, the second of another term: 5 conflicts,
    # and the follower's batch holding it goes (floor_F(5) = 0)
    "span": ([(0, 4, 1), (5, 9, 2)], [(0, 9, 1)], 0),
    # the leader's batch crosses a window edge, the follower's two do not: the follower's
    # window after the edge has no leader batch starting in it, yet each offset is covered
    "edge-leader-absent": ([(65530, 65545, 1)], [(65530, 65535, 1), (65536, 65545, 1)], None),
    # ... with the follower holding only a prefix of the leader's window before the edge
    "edge-prefix": ([(0, 0, 1), (65530, 65545, 1)], [(0, 0, 1), (65536, 65545, 1)], None),
    # ... and holding nothing before it
    "edge-follower-absent": ([(65530, 65545, 1)], [(65536, 65545, 1)], None),
    # the follower's batch crosses the edge: the leader's batches after it cover its offsets
    # there (the follower holds no batch starting in that window)
    "edge-follower-crossing": ([(65530, 65535, 1), (65536, 65540, 1), (65541, 65545, 1)], [(65530, 65540, 1)], None),
    # the crossing batch covers less than the follower holds after the edge: 65,541 conflicts
    "edge-short": ([(65530, 65540, 1)], [(65530, 65535, 1), (65536, 65545, 1)], 65536),
}


def test_raft_truncation_looks_offset_by_offset(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rows = [f"{case},0,{replica},{base},{last},{epoch},{base * 7 + replica}\n"
            for case, (leader, follower, _) in RAFT_CASES.items()
            for replica, batches in ((5, leader), (3, follower)) for base, last, epoch in batches]
    write(tmp_path / "batches.csv", "topic,partition,replica,base_offset,last_offset,epoch,crc\n" + "".join(rows))
    write(tmp_path / "metadata.csv", "topic,partition,leader,replicas,isr\n"
          + "".join(f'{case},0,5,"3,5","3,5"\n' for case in RAFT_CASES))
    out = audit(load_snapshot(spark, str(tmp_path), format="table"), run_id="raft-offsets")
    got = {r.topic: r.truncation_offset for r in out["replica_status"].filter("replica = 3").collect()}
    assert got == {case: want for case, (_, _, want) in RAFT_CASES.items()}
