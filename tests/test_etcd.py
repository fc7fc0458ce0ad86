"""``--format etcd`` (auditor.ingest.etcd) on WAL files built by a faithful writer: the log
as etcd's own reader returns it, checked against a small model on random member histories,
and one cluster whose members show every kind of damage the mapping promises to report."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor import audit, load_snapshot
from auditor.ingest.etcd import replica_ids
from auditor.ingest.etcd_wal import decode_wal
from tests import etcd_wal_writer as w

pytestmark = pytest.mark.spark
TOKEN = b"PLANTED-etcd-value-7f3a"


def data(term: int, index: int) -> bytes:
    """An entry's data: the same on every member for one (term, index), holding the token."""
    return TOKEN + f"/{term}/{index}".encode()


# --- the model: what etcd's wal.ReadAll returns, written as plainly as possible -----------

@dataclass
class Member:
    """One member's WAL as written: its files' records, and what the model expects."""

    files: list[list[tuple[int, bytes]]] = field(default_factory=lambda: [[]])
    written: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)  # every record, in order

    def add(self, kind: str, *values: int) -> None:
        record = {"entry": lambda t, i: w.entry(t, i, data(t, i)), "state": w.state,
                  "snapshot": w.snapshot, "metadata": lambda: w.metadata()}[kind](*values)
        self.files[-1].append(record)
        self.written.append((kind, values))


def model(member: Member) -> tuple[list[tuple[int, int, int]], int | None, int | None]:
    """(entries as (index, term, crc), HWM, log start) as etcd's reader would read them:
    entries at or below the latest snapshot's index are skipped, and an entry at or below
    the last one replaces the tail from its index."""
    snapshots = [v[0] for kind, v in member.written if kind == "snapshot"]
    start = snapshots[-1] if snapshots else None
    log: list[tuple[int, int, int]] = []
    commit = None
    for kind, values in member.written:
        if kind == "entry":
            term, index = values
            if start is not None and index <= start:
                continue
            log = [e for e in log if e[0] < index]
            log.append((index, term, crc32c.crc32c(w.entry(term, index, data(term, index))[1])))
        elif kind == "state":
            commit = values[2]
    hwm = None if commit is None else commit + 1
    log_start = start + 1 if start is not None else (log[0][0] if log else None)
    return log, hwm, log_start


def random_member(rng: random.Random, steps: int) -> Member:
    """A Raft member's WAL: appends in its term, new terms that overwrite the uncommitted
    tail, hard states, snapshots at or below the commit index, and new files."""
    m = Member()
    m.add("metadata")
    m.add("snapshot", 0, 0)
    term, last, commit, start = 1, 0, 0, 0
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.45:
            for _ in range(rng.randint(1, 6)):
                last += 1
                m.add("entry", term, last)
        elif roll < 0.6:  # a new leader's entries replace the uncommitted tail
            term += rng.randint(1, 2)
            last = rng.randint(max(commit, start) + 1, last + 1) - 1
            for _ in range(rng.randint(1, 4)):
                last += 1
                m.add("entry", term, last)
        elif roll < 0.8:
            commit = rng.randint(commit, last)
            m.add("state", term, 1, commit)
        elif roll < 0.9:
            start = rng.randint(start, commit)
            m.add("snapshot", start, term)
        else:
            m.files.append([])
    return m


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seeds=st.lists(st.integers(0, 2**32 - 1), min_size=6, max_size=6))
def test_the_log_is_what_etcds_reader_returns(spark, tmp_path_factory, seeds: list[int]) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("etcd-model")
    members = {f"m{i}": random_member(random.Random(seed), 40) for i, seed in enumerate(seeds)}
    for name, member in members.items():
        w.write_member(root / f"member={name}", [f for f in member.files if f] or [[]])
    ids = replica_ids(sorted(members))
    snap = load_snapshot(spark, str(root), format="etcd")
    got = {r.replica: [] for r in snap.replicas.collect()}
    for r in snap.batches.orderBy("replica", "base_offset").collect():
        assert r.base_offset == r.last_offset and r.record_count == 1 and r.topic == "etcd"
        got[r.replica].append((r.base_offset, r.epoch, r.crc))
    hwm = {r.replica: r.high_watermark for r in snap.hwm.collect()}
    start = {r.replica: r.log_start_offset for r in snap.log_start.collect()}
    assert snap.parse_errors.count() == 0
    for name, member in members.items():
        log, want_hwm, want_start = model(member)
        rid = ids[name]
        assert got[rid] == log, name
        assert hwm.get(rid) == want_hwm and start.get(rid) == want_start, name


def test_member_names_become_replica_ids() -> None:
    assert replica_ids(["3", "1", "2"]) == {"1": 1, "2": 2, "3": 3}
    assert replica_ids(["infra2", "infra10", "infra1"]) == {"infra1": 1, "infra10": 2, "infra2": 3}
    assert replica_ids(["1", "b"]) == {"1": 1, "b": 2}


# --- one cluster, one audit: each member shows one kind of damage --------------------------

def _history(m: Member, terms: list[tuple[int, int, int]], commit_after: int, commit: int) -> None:
    """Entries ``(term, first, last)``; a hard state early (commit 9 after entry 10) and one
    with ``commit`` right after entry ``commit_after``."""
    for term, first, last in terms:
        for i in range(first, last + 1):
            m.add("entry", term, i)
            if i == 10:
                m.add("state", term, 1, 9)
            if i == commit_after:
                m.add("state", term, 1, commit)


def _record_end(raw: bytes, offset: int) -> int:
    """Where the record framed at ``offset`` ends (its padding included)."""
    length = int.from_bytes(raw[offset:offset + 8], "little")
    pad = (length >> 56) & 0x7 if length >> 63 else 0
    return offset + 8 + (length & ((1 << 56) - 1)) + pad


@pytest.fixture(scope="module")
def damaged(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("etcd-damaged")
    good = [(2, 1, 20), (3, 21, 40)]

    def files_of(terms: list[tuple[int, int, int]], split: int | None = None,
                 snapshot_after: int | None = None) -> list[list[tuple[int, bytes]]]:
        m = Member()
        m.add("metadata")
        m.add("snapshot", 0, 0)
        for term, first, last in terms:
            _history(m, [(term, first, last)], 38, 38)
            if snapshot_after == last:
                m.add("snapshot", 10, term)
        records = m.files[0]
        if split is None:
            return [records]
        at = next(i for i, (k, d) in enumerate(records)
                  if k == w.ENTRY and w._messages()["Entry"].FromString(d).Index == split)
        return [records[:at], records[at:]]

    # alpha: the leader; a snapshot at index 10 (its log starts at 11)
    w.write_member(root / "member=alpha", files_of(good, snapshot_after=20))
    # bravo: its tail holds entries of term 2 where the others hold term 3, committed
    w.write_member(root / "member=bravo", files_of([(2, 1, 40)]))
    # charlie: a flipped byte inside entry 20 of its first WAL file (of two)
    (first, offsets), _ = w.write_member(root / "member=charlie", files_of(good, split=26))
    raw = bytearray(first.read_bytes())
    victim = next(r["byte_offset"] for r in decode_wal(bytes(raw)) if r.get("index") == 20)
    raw[victim + 8 + 12] ^= 0x01
    first.write_bytes(bytes(raw))
    # delta: its last record (entry 40) torn: the frame written, the record's bytes still
    # zeros, as a crash between two sector writes leaves it
    ((path, offsets),) = w.write_member(root / "member=delta", files_of(good))
    raw = bytearray(path.read_bytes())
    raw[offsets[-1] + 8:_record_end(bytes(raw), offsets[-1])] = bytes(_record_end(bytes(raw), offsets[-1]) - offsets[-1] - 8)
    path.write_bytes(bytes(raw))
    # echo: two WAL files, the second's records consistent with its own crc record, which
    # does not carry on the first file's running CRC: the chain between them breaks
    head, tail = files_of(good, split=26)
    ((_, _),) = w.write_member(root / "member=echo", [head])
    w.write(root / "member=echo" / "member" / "wal" / w.wal_name(1, 26), tail, prev_crc=0xBAD)
    # foxtrot: an uncommitted tail of term 2 (21-25), replaced later in the same file by the
    # leader's term-3 entries: after etcd's overwrite it agrees with the leader
    m = Member()
    m.add("metadata")
    m.add("snapshot", 0, 0)
    _history(m, [(2, 1, 25)], 0, 0)
    _history(m, [(3, 21, 40)], 38, 38)
    w.write_member(root / "member=foxtrot", m.files)

    tables = audit(load_snapshot(spark, str(root), format="etcd"), run_id="etcd")
    return root, {name: t.toPandas() if name != "findings" else t.collect() for name, t in tables.items()}


def test_each_damage_is_found_where_it_starts(damaged) -> None:  # type: ignore[no-untyped-def]
    _, tables = damaged
    # replica ids: alpha 1, bravo 2, charlie 3, delta 4, echo 5, foxtrot 6
    got = sorted((f.replica, f.check, f.severity, f.offset_start, f.offset_end) for f in tables["findings"])
    assert got == sorted([
        (2, "DIVERGENT_SUFFIX", "WARNING", 21, 41),
        (2, "LOG_MATCHING_VIOLATION", "CRITICAL", 21, 39),
        (2, "COMMITTED_DATA_LOSS", "CRITICAL", 21, 39),
        (3, "CORRUPT_BATCH", "CRITICAL", 20, None),
        (3, "FOLLOWER_LAG", "INFO", 20, 41),
        (4, "CORRUPT_BATCH", "INFO", 40, None),
        (4, "FOLLOWER_LAG", "INFO", 40, 41),
        (5, "CORRUPT_BATCH", "CRITICAL", 26, None),
        (5, "FOLLOWER_LAG", "INFO", 26, 41),
    ])
    by = {(f.replica, f.check): f for f in tables["findings"]}
    assert "etcd member charlie" in by[(3, "CORRUPT_BATCH")].message and "CRC mismatch" in by[(3, "CORRUPT_BATCH")].message
    assert "torn final write" in by[(4, "CORRUPT_BATCH")].message
    assert "CRC chain breaks" in by[(5, "CORRUPT_BATCH")].message


def test_replica_status_follows_the_mapping(damaged) -> None:  # type: ignore[no-untyped-def]
    _, tables = damaged
    rs = tables["replica_status"].set_index("replica")
    assert rs.loc[1, "role"] == "leader" and rs.loc[1, "log_start_offset"] == 11
    assert list(rs["log_end_offset"].sort_index()) == [41, 41, 20, 40, 26, 41]
    assert list(rs["high_watermark"].sort_index()) == [39, 39, 10, 39, 10, 39]
    assert list(rs["latest_epoch"].sort_index()) == [3, 2, 2, 3, 3, 3]
    assert rs.loc[2, "divergence_offset"] == 21 and rs.loc[6, "status"] == "in_sync"
    ps = tables["partition_status"].iloc[0]
    assert (ps["topic"], ps["partition"], ps["leader"], ps["leader_source"]) == ("etcd", 0, 1, "inferred")
    pe = tables["parse_errors"].sort_values("file")
    assert [Path(f).parts[0] for f in pe["file"]] == ["member=charlie", "member=delta", "member=echo"]
    assert pe["byte_offset"].notna().all()


def test_no_key_or_value_bytes_are_kept(damaged) -> None:  # type: ignore[no-untyped-def]
    _, tables = damaged
    for name, t in tables.items():
        assert TOKEN.decode() not in repr(t if name == "findings" else t.to_dict("records")), name


def test_what_the_walk_reads_skips_and_reports(tmp_path: Path) -> None:
    from datetime import datetime, timezone

    from auditor.errors import InputError, UsageError
    from auditor.ingest.etcd import discover_etcd

    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with pytest.raises(InputError, match="no member=NAME folder"):
        discover_etcd(str(tmp_path), now, None)
    wal = tmp_path / "member=a" / "member" / "wal"
    w.write(wal / w.wal_name(0, 0), [w.metadata()])
    (wal / "0.tmp").write_bytes(bytes(64))  # etcd's preallocated next file
    (wal / "bogus.wal").write_bytes(b"x")
    (tmp_path / "member=b").mkdir()
    found = discover_etcd(str(tmp_path), now, None)
    assert [(f.rel, name, seq) for f, name, seq, _ in found.wal_files] == [
        ("member=a/member/wal/0000000000000000-0000000000000000.wal", "a", 0)]
    assert sorted((rel, err.split(":")[0]) for _, rel, err in found.problems) == [
        ("member=a/member/wal/bogus.wal", "not an etcd WAL file"),
        ("member=b", "no etcd WAL file (member/wal/<seq>-<index>.wal) in this member's folder")]
    assert found.skipped["not a WAL file"] == 1 and found.members == {"a": 1, "b": 2}
    (tmp_path / "snapshot=2026-01-01").mkdir()
    with pytest.raises(UsageError, match="both snapshot= and member="):
        discover_etcd(str(tmp_path), now, None)
