"""The walk of Kafka's segment files (SPEC 3.3), without Spark: against an independent
encoder (kafka-python, a test dependency only), batches captured from real brokers, the
simulator's encoder, every way a walk ends, and a model of the walk on generated damage."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from auditor.ingest.segments import (
    BAD_LENGTH,
    BAD_MAGIC,
    BELOW_MINIMUM,
    END,
    PAST_END,
    SHORT,
    SHRUNK,
    read_file,
    walk_segment,
)
from auditor.simulator.kafka_binary import encode_batch, encode_segment
from auditor.simulator.kafka_text import Batch, Producer
from tests.conftest import FIXTURES
from tests.segment_model import walk as model_walk

GZIP = 1


def v2(base: int, epoch: int, records: int, *, codec: int = 0, value: bytes = b"v", transactional: bool = False,
       producer_id: int = -1) -> bytes:
    """A v2 batch built by kafka-python, then given its base offset and leader epoch as a
    broker gives them (both lie outside the CRC)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=int(transactional),
                                        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                        base_sequence=0 if producer_id >= 0 else -1, batch_size=1 << 26)
    for i in range(records):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=value, headers=[])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base)
    struct.pack_into(">i", data, 12, epoch)
    return bytes(data)


def legacy(magic: int, offsets: list[int], codec: int = 0) -> bytes:
    """Magic 0/1 entries built by kafka-python (a compressed one: a wrapper given the offset
    of its last inner message, as a broker stores it)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, offset in enumerate(offsets):
        builder.append(offset if codec == 0 else i, timestamp=1_700_000_000_000 if magic else None, key=None,
                       value=b"payload")
    data = bytearray(builder.build())
    if codec:
        struct.pack_into(">q", data, 0, offsets[-1])
    return bytes(data)


def walk(data: bytes, *, newest: bool = True, verify_crc: bool = False, base: int = 0) -> list[dict]:
    return walk_segment(lambda p, n: data[p:p + n], len(data), newest=newest, segment_base=base,
                        verify_crc=verify_crc)


def batches_of(rows: list[dict]) -> list[tuple]:
    return [(r["base_offset"], r["last_offset"], r["epoch"], r["record_count"]) for r in rows if r["row_kind"] == "B"]


def balanced(f: dict) -> bool:
    return f["file_bytes"] == f["batch_bytes"] + f["quarantined_bytes"] + f["tail_bytes"] + f["vanished_bytes"]


@pytest.mark.parametrize("codec", [0, GZIP])
@pytest.mark.parametrize("transactional", [False, True])
def test_kafka_python_batches_read_as_kafka_python_reads_them(codec: int, transactional: bool) -> None:
    data = v2(100, 7, 5, codec=codec, transactional=transactional, producer_id=42 if transactional else -1) \
        + v2(105, 8, 1, codec=codec)
    rows = walk(data, verify_crc=True)
    witness = MemoryRecords(data)
    for row in rows[:-1]:
        b = witness.next_batch()
        valid = b.validate_crc()  # (before its records are read)
        assert (row["base_offset"], row["last_offset"], row["epoch"]) == (
            b.base_offset, b.base_offset + b.last_offset_delta, b.leader_epoch)
        assert (row["crc"], row["record_count"], row["codec"]) == (b.crc, len(list(b)), b.compression_type)
        assert row["is_transactional"] == bool(b.is_transactional) and row["is_control"] is False
        assert row["producer_id"] == b.producer_id and row.get("is_valid") is valid is True
    assert witness.next_batch() is None
    f = rows[-1]
    assert f["stop"] == END and f["bytes_read"] == len(data) and balanced(f)


def test_batches_captured_from_real_brokers() -> None:
    """Bytes a 0.10 and a 0.11 broker wrote (kafka-python's test data): magic 0, 1 and 2,
    and a control batch; the CRC verdicts are kafka-python's own."""
    captured = json.loads((FIXTURES / "broker-batches.json").read_text())
    expected = {
        "magic2": [(0, 0, 1, 1), (1, 2, 2, 2), (3, 3, 2, 1), (0, 0, 0, 1)],
        "magic1": [(0, 0, -1, 1), (1, 1, -1, 1), (2, 2, -1, 1), (3, 3, -1, 1)],
        "magic0": [(0, 0, -1, 1), (1, 1, -1, 1), (2, 2, -1, 1), (3, 3, -1, 1)],
        "control_abort": [(0, 0, 0, 1)],
    }
    for name, batches in expected.items():
        data = bytes.fromhex(captured[name])
        rows = walk(data, verify_crc=True)
        assert batches_of(rows) == batches, name
        witness = MemoryRecords(data)
        for row in rows[:-1]:
            assert row.get("is_valid") is witness.next_batch().validate_crc(), name
        assert rows[-1]["stop"] == END and balanced(rows[-1])
    control = walk(bytes.fromhex(captured["control_abort"]))[0]
    assert control["is_control"] and control.get("control_type") == "ABORT"


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_entries(magic: int) -> None:
    """An uncompressed entry is one batch; a compressed wrapper ends at its offset and
    starts after the previous batch (the segment's base for the first)."""
    data = legacy(magic, [10, 11]) + legacy(magic, [12, 13, 14], codec=GZIP) + legacy(magic, [20, 21, 22], codec=GZIP)
    rows = walk(data, base=10, verify_crc=True)
    assert batches_of(rows) == [(10, 10, -1, 1), (11, 11, -1, 1), (12, 14, -1, 3), (15, 22, -1, 8)]
    assert all(r.get("is_valid") for r in rows[:-1]) and {r["magic"] for r in rows[:-1]} == {magic}
    first = walk(legacy(magic, [5, 6, 7], codec=GZIP), base=3)
    assert batches_of(first) == [(3, 7, -1, 5)]


def test_headers_only_reads_61_bytes_per_data_batch_and_control_batches_whole() -> None:
    big = [v2(i * 4, 3, 4, value=b"x" * 4096) for i in range(20)]  # ~16 KiB each
    marker = encode_batch(Batch(80, 80, 3, 1234, producer=Producer(7, control="COMMIT")))
    data = b"".join(big) + marker
    rows = walk(data)
    f = rows[-1]
    assert f["bytes_read"] == 61 * 20 + len(marker) and f["bytes_read"] / 20 <= 128
    assert all(r.get("is_valid") is None for r in rows[:-1]) and f["crc_unverified"] == 21 and f["crc_verified"] == 0
    assert rows[-2]["control_type"] == "COMMIT"
    verified = walk(data, verify_crc=True)[-1]
    assert verified["bytes_read"] == len(data) and verified["crc_verified"] == 21


def test_leader_change_gives_its_leader_id() -> None:
    key = struct.pack(">hh", 0, 2)
    value = struct.pack(">hi", 0, 3002) + b"\x02" + struct.pack(">i", 3001) + b"\x01\x00"
    from auditor.simulator.kafka_binary import record

    body = struct.pack(">hiqqqhii", 0x20, 0, 0, 0, -1, -1, -1, 1) + record(0, value, key)
    import crc32c

    batch = struct.pack(">qiib", 50, len(body) + 9, 4, 2) + struct.pack(">I", crc32c.crc32c(body)) + body
    row = walk(batch, verify_crc=True)[0]
    assert (row.get("control_type"), row.get("leader_id"), row.get("is_valid")) == ("LEADER_CHANGE", 3002, True)
    assert MemoryRecords(batch).next_batch().validate_crc()
    compressed = bytearray(batch)
    struct.pack_into(">h", compressed, 21, 0x21)  # a compressed control batch: unknown type
    row = walk(bytes(compressed))[0]
    assert row["is_control"] and row.get("control_type") is None and row["row_kind"] == "B"


def test_a_flipped_payload_byte_is_invalid_only_when_the_crc_is_checked() -> None:
    data = bytearray(v2(0, 1, 3, value=b"abcdef") + v2(3, 1, 1))
    data[70] ^= 0x01
    witness = MemoryRecords(bytes(data)).next_batch()
    assert witness.validate_crc() is False
    plain, checked = walk(bytes(data)), walk(bytes(data), verify_crc=True)
    assert batches_of(plain) == batches_of(checked) == [(0, 2, 1, 3), (3, 3, 1, 1)]
    assert plain[0].get("is_valid") is None and checked[0].get("is_valid") is False and checked[1].get("is_valid") is True


GOOD = v2(0, 1, 2) + v2(2, 1, 1)


def _header(length: int, magic: int, base: int = 3) -> bytes:
    return struct.pack(">qiib", base, length, 1, magic)


@pytest.mark.parametrize("tail, stop", [
    (b"\x01" * 10, SHORT),  # at most 17 bytes remain
    (_header(13, 2) + b"\x00" * 60, BAD_LENGTH),
    (_header(49, 3) + b"\x00" * 60, BAD_MAGIC),
    (_header(40, 2) + b"\x00" * 60, BELOW_MINIMUM),
    (_header(20, 1) + b"\x00" * 60, BELOW_MINIMUM),
    (_header(500, 2) + b"\x00" * 60, PAST_END),
    (v2(3, 1, 4)[:40], PAST_END),  # a segment truncated mid-header
])
@pytest.mark.parametrize("newest", [True, False])
def test_every_way_a_walk_ends_leaves_invalid_bytes(tail: bytes, stop: str, newest: bool) -> None:
    rows = walk(GOOD + tail, newest=newest)
    f = rows[-1]
    assert batches_of(rows) == [(0, 1, 1, 2), (2, 2, 1, 1)]
    assert (f["stop"], f.get("tail_position"), f["tail_bytes"], f.get("tail_zero") or False) == (stop, len(GOOD), len(tail), False)
    assert balanced(f)


@pytest.mark.parametrize("zeros", [5, 17, 18, 1 << 20])
def test_zero_tails(zeros: int) -> None:
    newest = walk(GOOD + bytes(zeros), newest=True)[-1]
    assert newest.get("tail_zero") is True and newest["tail_bytes"] == zeros
    # fewer than 18 bytes are read to check; else the 17 bytes of a header
    assert newest["bytes_read"] == 2 * 61 + min(zeros, 17)
    older = walk(GOOD + bytes(zeros), newest=False)[-1]
    assert not older.get("tail_zero") and older["tail_bytes"] == zeros and older["bytes_read"] == 2 * 61


@pytest.mark.parametrize("field, value", [(0, -1), (12, -2), (23, -1), (57, -1)])
def test_values_kafka_never_writes_are_quarantined_and_the_walk_goes_on(field: int, value: int) -> None:
    bad = bytearray(v2(2, 1, 1))
    struct.pack_into(">q" if field == 0 else ">i", bad, field, value)
    rows = walk(v2(0, 1, 2) + bytes(bad) + v2(3, 1, 1))
    assert [r["row_kind"] for r in rows] == ["B", "Q", "B", "F"]
    assert rows[1]["position"] == len(v2(0, 1, 2)) and rows[1]["error"]
    assert rows[-1]["quarantined_bytes"] == len(bad) and balanced(rows[-1])
    overflow = bytearray(v2(2**63 - 2, 1, 2))
    struct.pack_into(">i", overflow, 23, 5)
    assert walk(bytes(overflow))[0]["row_kind"] == "Q"


def test_a_file_that_shrinks_while_read_ends_at_the_short_read() -> None:
    data = GOOD + v2(3, 1, 1)
    cut = len(GOOD) + 30

    def read(position: int, n: int) -> bytes:
        return data[position:min(position + n, cut)]

    rows = walk_segment(read, len(data), newest=True, segment_base=0)
    f = rows[-1]
    assert batches_of(rows) == [(0, 1, 1, 2), (2, 2, 1, 1)]
    assert (f["stop"], f["vanished_bytes"], f["tail_bytes"]) == (SHRUNK, len(data) - len(GOOD), 0) and balanced(f)


def test_a_file_that_grows_is_read_up_to_its_size_when_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(GOOD)
    real_fstat = os.fstat

    def fstat_then_append(fd: int) -> os.stat_result:
        result = real_fstat(fd)
        with open(path, "ab") as f:
            f.write(v2(3, 1, 1))  # written after the size was taken
        return result

    monkeypatch.setattr(os, "fstat", fstat_then_append)
    rows = read_file(str(path), newest=True, segment_base=0)
    monkeypatch.undo()
    assert batches_of(rows) == [(0, 1, 1, 2), (2, 2, 1, 1)] and rows[-1]["file_bytes"] == len(GOOD)


def test_an_unreadable_file_is_one_row_that_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "00000000000000000000.log"
    folder.mkdir()  # opens, but cannot be read
    rows = read_file(str(folder), newest=True, segment_base=0)
    assert len(rows) == 1 and rows[0]["unreadable"]
    gone = read_file(str(tmp_path / "00000000000000000007.log"), newest=True, segment_base=7)
    assert len(gone) == 1 and gone[0]["unreadable"]


def test_a_sparse_file_past_2_gib(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    with open(path, "wb") as f:
        f.write(GOOD)
        f.truncate(3 << 30)  # 3 GiB: a preallocated segment, zero past its batches
    newest = read_file(str(path), newest=True, segment_base=0)
    assert batches_of(newest) == [(0, 1, 1, 2), (2, 2, 1, 1)]
    f = newest[-1]
    assert f.get("tail_zero") and f["tail_bytes"] == (3 << 30) - len(GOOD) and f["bytes_read"] == 2 * 61 + 17
    older = read_file(str(path), newest=False, segment_base=0)[-1]
    assert not older.get("tail_zero") and older.get("tail_position") == len(GOOD) and balanced(older)


def test_the_simulators_batches_carry_the_crc_they_are_given() -> None:
    batches = [Batch(0, 4, 1, 0xDEADBEEF, bytes_per_record=18), Batch(5, 5, 1, 77, producer=Producer(9, control="ABORT")),
               Batch(6, 90, 2, 123, bytes_per_record=18, valid=False),
               Batch(91, 91, 2, 5, bytes_per_record=18, producer=Producer(9, base_sequence=3))]
    data = encode_segment(batches, torn_bytes=40)
    rows = walk(data, verify_crc=True)
    assert [(r["base_offset"], r["last_offset"], r["epoch"], r["crc"]) for r in rows[:-1]] == [
        (b.base_offset, b.last_offset, b.epoch, b.crc) for b in batches]
    assert [r["size"] for r in rows[:-1]] == [b.size for b in batches]  # as the dumps print them
    assert [r.get("is_valid") for r in rows[:-1]] == [True, True, False, True]
    witness = MemoryRecords(data[:rows[-1]["tail_position"]])
    assert [witness.next_batch().validate_crc() for _ in batches] == [True, True, False, True]
    assert rows[-1]["tail_bytes"] == 40 and rows[-1]["stop"] == PAST_END


# -- generated segments against the model ----------------------------------------------

@st.composite
def segments(draw: st.DrawFn) -> tuple[bytes, bool]:
    """A segment of kafka-python batches (sizes, codecs, markers, legacy entries) with
    damage: a header byte changed, the file cut, or zeros or noise appended."""
    parts, offset = [], draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["v2", "v2", "gzip", "marker", "legacy"]))
        n = draw(st.integers(1, 5))
        if kind == "marker":
            parts.append(encode_batch(Batch(offset, offset, 2, draw(st.integers(0, 2**32 - 1)),
                                            producer=Producer(5, control="COMMIT"))))
            n = 1
        elif kind == "legacy":
            parts.append(legacy(1, list(range(offset, offset + n)), codec=draw(st.sampled_from([0, GZIP]))))
        else:
            parts.append(v2(offset, draw(st.integers(-1, 5)), n, codec=GZIP if kind == "gzip" else 0,
                            value=b"x" * draw(st.integers(0, 300))))
        offset += n
    data = bytearray(b"".join(parts))
    damage = draw(st.sampled_from(["none", "header", "cut", "zeros", "noise"]))
    if damage == "header" and parts:
        starts = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
        at = draw(st.sampled_from(starts)) + draw(st.integers(0, 60))
        if at < len(data):
            data[at] = draw(st.integers(0, 255))
    elif damage == "cut" and data:
        del data[draw(st.integers(0, len(data) - 1)):]
    elif damage == "zeros":
        data += bytes(draw(st.integers(1, 100)))
    elif damage == "noise":
        data += draw(st.binary(min_size=1, max_size=100))
    return bytes(data), draw(st.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(segments())
def test_the_walk_is_the_models(case: tuple[bytes, bool]) -> None:
    data, newest = case
    expected = model_walk(data, newest)
    rows = walk(data, newest=newest)
    f = rows[-1]
    got = tuple((r["position"], r["size"], r["base_offset"], r["last_offset"], r["epoch"], r["crc"], r["record_count"],
                 r["row_kind"] == "Q") for r in rows[:-1])
    assert got == expected.entries
    tail = "none" if not f["tail_bytes"] else "zero" if f.get("tail_zero") else "invalid"
    assert (f.get("tail_position") if f["tail_bytes"] else len(data), tail) == (expected.stop, expected.tail)
    assert balanced(f) and f["vanished_bytes"] == 0


def test_metadata_log_batches_keep_their_first_and_last_control_types() -> None:
    """The simulator's KRaft batches as Kafka stores them: their control types, the
    LeaderChange's leader, the CRC they are given (kafka-python agrees it matches)."""
    from auditor.simulator.kafka_binary import encode_meta_segment
    from auditor.simulator.kraft_text import MetaBatch

    batches = [MetaBatch(0, 0, ("SnapshotHeader", "KRaftVersion", "KRaftVoters"), 55, voters=(1, 2, 3)),
               MetaBatch(3, 1, ("LeaderChange",), 1234, leader_id=2, voters=(1, 2, 3)),
               MetaBatch(4, 1, ("data", "data"), 99),
               MetaBatch(6, 1, ("SnapshotFooter",), 7, valid=False)]
    data = encode_meta_segment(batches)
    rows = walk(data, verify_crc=True)
    assert [(r["base_offset"], r["last_offset"], r["epoch"], r["crc"], r["is_control"], r.get("control_type"),
             r.get("last_control_type"), r.get("leader_id"), r.get("is_valid")) for r in rows[:-1]] == [
        (0, 2, 0, 55, True, "SNAPSHOT_HEADER", "KRAFT_VOTERS", None, True),
        (3, 3, 1, 1234, True, "LEADER_CHANGE", "LEADER_CHANGE", 2, True),
        (4, 5, 1, 99, False, None, None, None, True),
        (6, 6, 1, 7, True, "SNAPSHOT_FOOTER", "SNAPSHOT_FOOTER", None, False)]
    witness = MemoryRecords(data)
    assert [witness.next_batch().validate_crc() for _ in batches] == [True, True, True, False]
