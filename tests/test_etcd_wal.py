"""Decoding etcd's WAL (docs/etcd-wal.md) against a faithful writer: records, the rolling
CRC across files, a flipped byte, a torn tail, and entry data never kept."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from auditor.ingest.etcd import discover_etcd
from auditor.ingest.etcd_wal import decode_wal, read_wal_records
from tests import etcd_wal_writer as w

SECRET = b"TOKEN-etcd-key=/registry/secrets/db-password"


def _history(first: int, last: int, term: int) -> list[tuple[int, bytes]]:
    return [w.entry(term, i, SECRET + bytes([i % 251])) for i in range(first, last + 1)]


def test_records_decode_with_their_offsets_and_no_data() -> None:
    records = [w.metadata(), w.snapshot(0, 0), *_history(1, 5, 2), w.state(2, 0x8E9E05C52164694D, 4)]
    data, _, offsets = w.encode(records, preallocate=8192)
    rows = decode_wal(data)
    assert [r["record_type"] for r in rows] == ["crc", "metadata", "snapshot", *["entry"] * 5, "state"]
    assert [r["byte_offset"] for r in rows] == offsets
    assert [(r["term"], r["index"]) for r in rows if r["record_type"] == "entry"] == [(2, i) for i in range(1, 6)]
    assert all(r["data_bytes"] == len(SECRET) + 1 for r in rows if r["record_type"] == "entry")
    assert rows[-1]["hs_vote"] == "8e9e05c52164694d" and rows[-1]["hs_commit"] == 4
    assert not any(r.get("problem") for r in rows)
    assert "TOKEN" not in repr(rows)


def test_the_crc_runs_across_files() -> None:
    first, crc, _ = w.encode([w.metadata(), *_history(1, 3, 1)])
    second, _, _ = w.encode(_history(4, 6, 1), prev_crc=crc)
    assert not any(r.get("problem") for r in decode_wal(first) + decode_wal(second))
    # the first file's final running CRC is what the second file's crc record carries
    assert decode_wal(first)[-1]["crc"] == crc == decode_wal(second)[0]["crc"]
    wrong, _, _ = w.encode(_history(4, 6, 1), prev_crc=crc ^ 1)  # a crc record that is not the running one
    rows = decode_wal(wrong)
    assert not any(r.get("problem") for r in rows)  # each file is checked from its own crc record ...
    assert rows[0]["crc"] != decode_wal(first)[-1]["crc"]  # ... the chain across files tells


def test_a_flipped_byte_in_the_middle_stops_at_that_record() -> None:
    data, _, offsets = w.encode([w.metadata(), *_history(1, 8, 3)], preallocate=8192)
    bad = bytearray(data)
    victim = offsets[5]  # the 4th entry (index 4): flip a byte inside its data
    bad[victim + 8 + 20] ^= 0x40
    rows = decode_wal(bytes(bad))
    assert [r["index"] for r in rows if r.get("record_type") == "entry" and not r.get("problem")] == [1, 2, 3]
    assert rows[-1]["byte_offset"] == victim and "CRC mismatch" in rows[-1]["problem"]
    assert rows[-1]["torn"] is False


def test_a_torn_tail_is_told_apart() -> None:
    data, _, offsets = w.encode([w.metadata(), *[w.entry(2, i, b"v" * 700) for i in range(1, 6)]], preallocate=16384)
    torn = bytearray(data)
    start = offsets[-1] + 8
    sector = (start // 512 + 1) * 512  # zero a whole sector inside the last record
    torn[sector:sector + 512] = b"\x00" * 512
    rows = decode_wal(bytes(torn))
    assert rows[-1]["byte_offset"] == offsets[-1] and rows[-1]["problem"] and rows[-1]["torn"] is True
    cut = decode_wal(data[: offsets[-1] + 40])  # the file ends inside the last record
    assert cut[-1]["problem"] == "the record runs past the end of the file"


@pytest.mark.spark
def test_spark_decodes_each_file_where_it_is_read(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    crc, _ = w.write(tmp_path / "member=a" / "member" / "wal" / "0000000000000000-0000000000000000.wal",
                     [w.metadata(), *_history(1, 4, 1)])
    w.write(tmp_path / "member=a" / "member" / "wal" / "0000000000000001-0000000000000005.wal",
            [*_history(5, 6, 2), w.state(2, 1, 6)], prev_crc=crc)
    w.write(tmp_path / "member=b" / "member" / "wal" / "0000000000000000-0000000000000000.wal",
            [w.metadata(), *_history(1, 3, 1)])
    found = discover_etcd(str(tmp_path), datetime(2026, 1, 1, tzinfo=timezone.utc), None)
    indexed = list(enumerate(f for f, _, _, _ in found.wal_files))
    member_of = {i: name for i, (_, name, _, _) in enumerate(found.wal_files)}
    got = read_wal_records(spark, indexed).collect()
    assert len(got) == sum(len(decode_wal(Path(f.path).read_bytes())) for _, f in indexed)
    entries = sorted((member_of[r["file_id"]], r["index"], r["term"]) for r in got if r["record_type"] == "entry")
    assert entries == sorted([("a", i, 1) for i in range(1, 5)] + [("a", 5, 2), ("a", 6, 2)]
                             + [("b", i, 1) for i in range(1, 4)])
    assert not any(r.problem for r in got)
    assert "TOKEN" not in repr([r.asDict() for r in got])
