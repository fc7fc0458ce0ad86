"""Every era and mode of kafka-dump-log.sh output parses to the right batches, and every
line is accounted for (parsed + skipped + quarantined = lines read)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from auditor import load_snapshot
from tests.conftest import checkpoint, copy_fixture, large_input, physical_lines, write

pytestmark = pytest.mark.spark

# fixture file -> (partition folder, expected batches (base, last, epoch, crc, records),
#                  (parsed, skipped, quarantined))
CASES: dict[str, tuple[str, list[tuple[int, int, int, int | None, int]], tuple[int, int, int]]] = {
    "era-a-0.8-shallow.txt": ("legacy08-0", [
        (0, 0, -1, None, 1), (1, 1, -1, None, 1), (2, 2, -1, None, 1)], (3, 2, 0)),
    "era-b-0.10.1-print-data.txt": ("legacy010-0", [
        (0, 0, -1, None, 1), (1, 1, -1, None, 1), (2, 2, -1, None, 1)], (3, 2, 0)),
    "era-c-0.10.2-deep-gzip.txt": ("gzip0102-0", [
        (100, 102, -1, None, 3), (103, 103, -1, None, 1)], (4, 2, 0)),
    "era-d-1.0-shallow.txt": ("kip101-0", [
        (0, 2, 0, 2581712934, 3), (3, 3, 0, 1034920043, 1), (4, 9, 2, 4100234551, 6)], (3, 2, 0)),
    "era-d-1.1-deep-records-only.txt": ("deep11-0", [
        (0, 1, -1, None, 2), (2, 2, -1, None, 1)], (3, 2, 0)),
    "era-d-0.11.0-deep-no-producer-epoch.txt": ("deep0110-0", [(0, 1, -1, None, 2)], (2, 2, 0)),
    "era-d-2.1-shallow-count-iscontrol.txt": ("shallow21-0", [
        (0, 4, 3, 302391102, 5), (5, 6, 3, 3012455879, 2), (7, 7, 3, 1200993310, 1)], (3, 2, 0)),
    "era-e-2.4-deep-txn.txt": ("txn24-0", [
        (0, 1, 5, 2345612345, 2), (2, 2, 5, 1976000410, 1), (3, 3, -1, 12345, 1)], (7, 2, 0)),
    "era-f-2.8-record-regression.txt": ("rec28-0", [(0, 1, 2, 3101010101, 2)], (3, 2, 0)),
    "era-g-3.0-legacy-brace.txt": ("brace30-0", [
        (0, 2, 7, 3933393339, 3), (3, 3, -1, 99887766, 1)], (6, 2, 0)),
    "era-h-3.2-delete-horizon.txt": ("horizon32-0", [
        (0, 0, 4, 1111111111, 1), (3, 5, 4, 2222222222, 3)], (2, 2, 0)),
    "era-i-3.8-multi-section-index-torn.txt": ("multi38-0", [
        (0, 9, 11, 701234567, 10), (10, 14, 12, 802345678, 5), (15, 15, 12, 903456789, 1)], (6, 13, 0)),
    "era-j-4.3-java-port.txt": ("java43-0", [
        (20, 24, 30, 1357924680, 5), (25, 25, 30, 24680135, 1)], (8, 2, 0)),
    "bad-lines-and-secrets.txt": ("badlines-0", [(0, 0, 1, 55, 1), (1, 1, 1, 56, 1)], (3, 5, 4)),
}


@pytest.fixture(scope="module")
def era_snapshot(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("eras")
    for name, (folder, _, _) in CASES.items():
        copy_fixture(name, root / "broker=1" / "data" / folder)
    write(root / "broker=1" / "data" / "replication-offset-checkpoint",
          checkpoint([(f.rsplit("-", 1)[0], 0, 1) for f, _, _ in CASES.values()]))
    snap = load_snapshot(spark, str(root))
    return root, snap


def test_every_era_yields_its_batches(era_snapshot) -> None:  # type: ignore[no-untyped-def]
    _, snap = era_snapshot
    rows = snap.batches.select("topic", "base_offset", "last_offset", "epoch", "crc", "record_count").collect()
    got: dict[str, list[tuple[int, int, int, int | None, int]]] = {}
    for r in rows:
        got.setdefault(r.topic, []).append((r.base_offset, r.last_offset, r.epoch, r.crc, r.record_count))
    for name, (folder, expected, _) in CASES.items():
        topic = folder.rsplit("-", 1)[0]
        assert sorted(got.get(topic, [])) == sorted(expected), name


def test_every_line_is_accounted_for(era_snapshot) -> None:  # type: ignore[no-untyped-def]
    root, snap = era_snapshot
    acc = {r.rel: r for r in snap.accounting.collect()}
    for name, (folder, _, (parsed, skipped, quarantined)) in CASES.items():
        rel = f"broker=1/data/{folder}/{name}"
        row = acc[rel]
        assert row.lines == physical_lines(root / rel), name
        assert row.lines == row.lines_parsed + row.lines_skipped + row.lines_quarantined, name
        assert (row.lines_parsed, row.lines_skipped, row.lines_quarantined) == (parsed, skipped, quarantined), name
    for row in acc.values():
        assert row.lines == row.lines_parsed + row.lines_skipped + row.lines_quarantined


def test_quarantined_lines_name_file_line_and_reason(era_snapshot) -> None:  # type: ignore[no-untyped-def]
    _, snap = era_snapshot
    errors = snap.parse_errors.filter(F.col("file").contains("badlines")).orderBy("line_number").collect()
    assert [e.line_number for e in errors] == [7, 8, 9, 12]
    assert "unrecognised line" in errors[0].error
    assert "partitionLeaderEpoch" in errors[1].error
    assert "index-style" in errors[2].error
    assert "lastOffset below baseOffset" in errors[3].error
    assert all(e.broker == 1 for e in errors)


def test_payloads_are_never_stored(era_snapshot) -> None:  # type: ignore[no-untyped-def]
    _, snap = era_snapshot
    text = " ".join(str(v) for r in snap.parse_errors.collect() for v in r.asDict().values())
    for secret in ("hunter2", "SECRET123", "user-7", "hello"):
        assert secret not in text
    assert "batch" not in snap.batches.columns  # no raw text column kept
    assert not any(c in snap.batches.columns for c in ("key", "payload", "value", "text"))


def test_flags_and_segments(era_snapshot) -> None:  # type: ignore[no-untyped-def]
    _, snap = era_snapshot
    ctrl = snap.batches.filter((F.col("topic") == "shallow21") & F.col("is_control")).collect()
    assert [(b.base_offset, b.is_transactional) for b in ctrl] == [(7, True)]
    invalid = snap.batches.filter(~F.col("is_valid")).select("topic", "base_offset").collect()
    assert sorted((r.topic, r.base_offset) for r in invalid) == [("legacy010", 2), ("multi38", 15)]
    segs = snap.segments.filter(F.col("topic") == "multi38").orderBy("segment_base_offset").collect()
    assert [(s.segment_base_offset, s.invalid_bytes) for s in segs] == [(0, None), (10, 47)]
    java = snap.segments.filter(F.col("topic") == "java43").collect()
    assert [s.segment_base_offset for s in java] == [20]


def test_hwm_resolved_per_replica(era_snapshot) -> None:  # type: ignore[no-untyped-def]
    _, snap = era_snapshot
    hwm = {r.topic: r.high_watermark for r in snap.hwm.collect()}
    assert hwm["multi38"] == 1 and len(hwm) == len(CASES)


def test_big_file_split_across_many_tasks_parses_identically(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A dump split into many input splits keeps every line's section and line number."""
    lines = []
    for seg in range(3):
        base = seg * 400
        lines += [f"Dumping /kafka/big-0/{base:020d}.log", f"Log starting offset: {base}"]
        for i in range(200):
            off = base + 2 * i
            lines.append(
                f"baseOffset: {off} lastOffset: {off + 1} count: 2 baseSequence: -1 lastSequence: -1 "
                f"producerId: -1 producerEpoch: -1 partitionLeaderEpoch: {seg} isTransactional: false "
                f"isControl: false deleteHorizonMs: OptionalLong.empty position: {i * 80} "
                f"CreateTime: 1 size: 80 magic: 2 compresscodec: none crc: {off} isvalid: true")
            lines.append(f"| offset: {off} CreateTime: 1 keySize: -1 valueSize: 1 sequence: -1 headerKeys: []")
        lines += [f"Dumping /kafka/big-0/{base:020d}.index", "offset: 5 position: 10"]
    write(tmp_path / "broker=3" / "d" / "big-0" / "all.txt", "\n".join(lines) + "\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "2048")
    try:
        with large_input(spark) as policy:  # as a large input is parsed: generated code, broadcasts
            snap = load_snapshot(spark, str(tmp_path), policy=policy)
            n_files = snap.accounting.count()
            rows = snap.batches.orderBy("base_offset").collect()
            acc = snap.accounting.first()
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert n_files == 1
    assert len(rows) == 600
    assert all(r.epoch == r.base_offset // 400 for r in rows)
    assert all(r.segment_base_offset == (r.base_offset // 400) * 400 for r in rows)
    # line numbers are exact: header, start line, then 2 lines per batch
    assert all(r.line_number == 3 + (r.base_offset % 400) + (r.base_offset // 400) * 404 for r in rows)
    assert acc.lines == len(lines) and acc.lines_quarantined == 0
    assert acc.lines_parsed == 1200 and acc.lines_skipped == len(lines) - 1200


def test_contents_never_reach_parse_errors(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Record contents, header keys and orphan payload lines are cut before anything is kept."""
    text = "\n".join([
        "Dumping /kafka/leak-0/00000000000000000000.log",
        "Log starting offset: 0",
        "payload: card=4111111111111111",                        # content before any batch line
        "| key: user-42 payload: ssn=078-05-1120",               # same, with the 2.8+ prefix
        "| offset: 0 CreateTime: 1 keySize: 5 valueSize: 9 sequence: -1 headerKeys: [tenant-secret] payload: x",
        "baseOffset: 0 lastOffset: 0 count: 1 partitionLeaderEpoch: 1 crc: 7 isvalid: true",
    ]) + "\n"
    write(tmp_path / "broker=1" / "d" / "leak-0" / "0.log.txt", text)
    snap = load_snapshot(spark, str(tmp_path))
    errors = snap.parse_errors.orderBy("line_number").collect()
    assert [e.line_number for e in errors] == [3, 4, 5]
    stored = " ".join(str(e.line) for e in errors)
    for secret in ("4111111111111111", "user-42", "078-05-1120", "tenant-secret"):
        assert secret not in stored
    assert errors[2].line.startswith("| offset: 0 CreateTime: 1 keySize: 5 valueSize: 9 sequence: -1")


@pytest.mark.parametrize("with_count", [True, False])
def test_record_lines_without_contents_belong_to_their_batch(spark, tmp_path: Path, with_count: bool) -> None:  # type: ignore[no-untyped-def]
    """A deep 2.2+ dump whose record lines print neither key nor payload: every record line
    belongs to the batch line above it (no 'record line before any batch line'), and a batch
    printed without ``count:`` takes its record count from them."""
    lines = ["Dumping /var/lib/kafka/data/plainrec-0/00000000000000000000.log", "Starting offset: 0"]
    for i, (base, last) in enumerate([(0, 1), (2, 2), (3, 5)]):
        count = f"count: {last - base + 1} " if with_count else ""
        lines.append(f"baseOffset: {base} lastOffset: {last} {count}baseSequence: -1 lastSequence: -1 "
                     f"producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false "
                     f"isControl: false position: {i * 90} CreateTime: 1 size: 90 magic: 2 "
                     f"compresscodec: NONE crc: {100 + i} isvalid: true")
        lines += [f"| offset: {o} CreateTime: 1 keysize: -1 valuesize: 8 sequence: -1 headerKeys: []"
                  for o in range(base, last + 1)]
    write(tmp_path / "broker=1" / "data" / "plainrec-0" / "00000000000000000000.log.txt", "\n".join(lines) + "\n")
    snap = load_snapshot(spark, str(tmp_path))
    assert snap.parse_errors.count() == 0
    got = sorted((r.base_offset, r.last_offset, r.record_count) for r in snap.batches.collect())
    assert got == [(0, 1, 2), (2, 2, 1), (3, 5, 3)]
    acc = snap.accounting.first()
    assert acc.lines == len(lines) and acc.lines_quarantined == 0
