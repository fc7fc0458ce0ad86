"""The file walk classifies the SPEC 3.1 layout and rejects bad roots (no Spark needed)."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from auditor.errors import InputError, UsageError
from auditor.ingest import discovery as d
from tests.conftest import write

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _layout(root: Path) -> None:
    write(root / "broker=1" / "data" / "orders-0" / "00000000000000000000.log.txt", "x\n")
    write(root / "broker=1" / "data" / "orders-0" / "leader-epoch-checkpoint", "0\n0\n")
    write(root / "broker=1" / "data" / "orders-0" / "partition.metadata", "version: 0")
    write(root / "broker=1" / "data" / "orders-0" / "00000000000000000000.index", "")
    write(root / "broker=1" / "data" / "my-topic-12" / "seg.dump", "x\n")
    write(root / "broker=1" / "data" / "orders-1.abc-delete" / "0.log.txt", "x\n")
    write(root / "broker=1" / "data" / "orders-2-future" / "0.log.txt", "x\n")
    write(root / "broker=1" / "data" / "replication-offset-checkpoint", "0\n0\n")
    write(root / "broker=1" / "data" / "cleaner-offset-checkpoint", "0\n0\n")
    write(root / "broker=1" / "data" / "meta.properties", "broker.id=1\n")
    write(root / "broker=1" / "all-sections.txt", "x\n")
    write(root / "broker=2" / "d2" / "orders-0" / "leader-epoch-checkpoint", "0\n0\n")
    write(root / "topics-describe.txt", "x\n")
    write(root / "expected_findings.json", "{}")


def test_layout_is_classified(tmp_path: Path) -> None:
    _layout(tmp_path)
    found = d.discover(tmp_path, NOW)
    by_rel = {f.rel: f for f in found.files}
    seg = by_rel["broker=1/data/orders-0/00000000000000000000.log.txt"]
    assert (seg.kind, seg.broker, seg.topic, seg.partition, seg.log_dir) == (
        d.DUMP, 1, "orders", 0, "broker=1/data")
    assert by_rel["broker=1/data/my-topic-12/seg.dump"].topic == "my-topic"
    assert by_rel["broker=1/data/my-topic-12/seg.dump"].partition == 12
    assert by_rel["broker=1/data/replication-offset-checkpoint"].kind == d.HWM
    collector = by_rel["broker=1/all-sections.txt"]
    assert collector.kind == d.DUMP and collector.topic is None and collector.broker == 1
    assert by_rel["broker=2/d2/orders-0/leader-epoch-checkpoint"].kind == d.LEADER_EPOCH
    assert by_rel["topics-describe.txt"].kind == d.DESCRIBE
    assert not any("delete" in r or "future" in r for r in by_rel)
    assert found.skipped["folder delete"] == 1 and found.skipped["folder future"] == 1
    assert found.skipped["known non-input file"] == 4  # partition.metadata, .index, cleaner cp, meta.properties
    assert found.skipped["file at the snapshot root"] == 1
    assert found.snapshots == [NOW] and all(f.snapshot == NOW for f in found.files)


def test_snapshot_folders_are_instants(tmp_path: Path) -> None:
    write(tmp_path / "snapshot=2026-01-01T00:00:00Z" / "broker=1" / "a-0" / "x.txt", "x\n")
    write(tmp_path / "snapshot=2026-01-01T01:00:00+01:00" / "broker=1" / "a-0" / "x.txt", "x\n")
    with pytest.raises(UsageError, match="same instant"):
        d.discover(tmp_path, NOW)
    os.rename(tmp_path / "snapshot=2026-01-01T01:00:00+01:00", tmp_path / "snapshot=2026-01-01T06:30:00")
    found = d.discover(tmp_path, NOW)
    assert found.snapshots == [datetime(2026, 1, 1, tzinfo=timezone.utc),
                               datetime(2026, 1, 1, 6, 30, tzinfo=timezone.utc)]
    with pytest.raises(UsageError, match="--snapshot"):
        d.discover(tmp_path, NOW, snapshot_label="2026-01-01T00:00:00Z")


@pytest.mark.parametrize("setup, error, message", [
    (lambda p: None, InputError, "holds no broker=N folder"),
    (lambda p: write(p / "broker=1" / "a-0" / "x.txt", "x") and write(p / "snapshot=2026-01-01" / "broker=1" / "x.txt", "x"),
     UsageError, "both snapshot= and broker="),
    (lambda p: write(p / "snapshot=yesterday" / "broker=1" / "a-0" / "x.txt", "x"), UsageError, "ISO-8601"),
])
def test_bad_roots(tmp_path: Path, setup, error, message) -> None:  # type: ignore[no-untyped-def]
    setup(tmp_path)
    with pytest.raises(error, match=message):
        d.discover(tmp_path, NOW)


def test_missing_and_unreadable_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        d.discover(tmp_path / "nope", NOW)
    f = write(tmp_path / "file", "x")
    with pytest.raises(InputError, match="not a directory"):
        d.discover(f, NOW)


def test_unreadable_file_is_a_problem_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = write(tmp_path / "broker=1" / "a-0" / "0.log.txt", "x\n")
    real_access = os.access
    monkeypatch.setattr(d.os, "access", lambda path, mode: False if str(path) == str(p) else real_access(path, mode))
    found = d.discover(tmp_path, NOW)
    assert [x.error for x in found.problems] == ["file cannot be read: permission denied"]


def test_broker_id_must_be_an_integer(tmp_path: Path) -> None:
    write(tmp_path / "broker=one" / "a-0" / "0.log.txt", "x\n")
    write(tmp_path / "broker=2" / "a-0" / "0.log.txt", "x\n")
    found = d.discover(tmp_path, NOW)
    assert [p.rel for p in found.problems] == ["broker=one"]
    assert [f.broker for f in found.files] == [2]


def test_labels() -> None:
    assert d.parse_snapshot_label("2026-11-22T10:00:00+02:00") == datetime(2026, 11, 22, 8, tzinfo=timezone.utc)
    assert d.parse_snapshot_label("2026-11-22") == datetime(2026, 11, 22, tzinfo=timezone.utc)
    with pytest.raises(UsageError):
        d.parse_snapshot_label("last tuesday")
