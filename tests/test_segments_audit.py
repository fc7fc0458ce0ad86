"""Auditing Kafka's own segment files (SPEC 3.3) and what ``auditor collect`` writes of them
(3.4) end to end, in this process: the same simulated cluster written as segments, as dumps,
collected (with and without pyarrow and --verify-crc) and simulated as collected gives the
same tables; the byte accounting of ``runs.counts``; segments beside dumps; damage named by
file and byte; a collected folder of an unknown format version ends the run."""

from __future__ import annotations

import io
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from auditor import collect
from auditor.cli import main
from auditor.config import Config
from auditor.errors import InputError
from auditor.explain import explain
from auditor.run import run_audit
from auditor.simulator import simulate
from auditor.simulator.kafka_binary import encode_batch, encode_segment
from auditor.simulator.kafka_text import Batch, dump_segment
from tests.conftest import checkpoint, write
from tests.segment_model import walk as model_walk

pytestmark = pytest.mark.spark

LABEL = "2026-03-01T00:00:00Z"
#: columns that name the run or where a batch was read (a dump's line, a segment's byte)
RUN_COLUMNS = {"run_id", "audit_time", "finding_id", "first_seen"}
PLACE_KEYS = ("file", "line_number", "byte_offset", "first")


def tables(out: Path) -> dict[str, list[str]]:
    """The data tables under ``out``, rows as sorted JSON, run and place columns aside."""
    found = {}
    for name in ("findings", "replica_status", "partition_status", "epoch_lineage"):
        rows = []
        for r in DeltaTable(str(out / name)).to_pyarrow_table().to_pylist():
            r = {k: v for k, v in r.items() if k not in RUN_COLUMNS}
            if r.get("details"):
                details = json.loads(r["details"])
                for key in PLACE_KEYS:
                    details.pop(key, None)
                r["details"] = details
            if r.get("message"):  # (a file named in a message: a dump is named <file>.txt)
                r["message"] = r["message"].replace(".checkpoint.txt", ".checkpoint").replace(".log.txt", ".log")
            rows.append(json.dumps(r, sort_keys=True, default=str))
        found[name] = sorted(rows)
    return found


def counts(out: Path) -> dict:
    return json.loads(DeltaTable(str(out / "runs")).to_pyarrow_table().column("counts")[0].as_py())


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("both-ways")
    for fmt in ("dumps", "segments"):
        simulate(base / fmt, brokers=3, topics=3, partitions=1, batches=24, seed=11, kraft_controllers=3,
                 log_format=fmt, segment_batches=10)
    return {"dumps": base / "dumps", "segments": base / "segments", "base": base}


def collect_snapshot(src: Path, dst: Path, *extra: str, standalone: bool = False) -> Path:
    """Each ``broker=N`` folder of ``src`` collected as a node whose log dirs are its
    folders (``auditor collect``; ``standalone``: its one file copied and run with the
    standard library alone, so gzip CSV tables), the root's text files copied."""
    copy = dst.parent / "collect-copy.py"
    if standalone:
        shutil.copy(collect.__file__, copy)
    for node in sorted(p for p in src.iterdir() if p.name.startswith("broker=")):
        args = ["--broker-id", node.name.split("=")[1], "--log-dirs",
                ",".join(str(p) for p in sorted(node.iterdir()) if p.is_dir()), "--out", str(dst), *extra]
        if standalone:
            done = subprocess.run([sys.executable, "-S", "-I", str(copy), *args], capture_output=True, text=True,
                                  timeout=300, check=False)
            assert done.returncode == 0, done.stderr
        else:
            assert collect.main(args) == 0
    for text in src.glob("*.txt"):
        shutil.copy(text, dst / text.name)
    return dst


@pytest.fixture(scope="module")
def audited(spark: object, both_ways: dict[str, Path]) -> dict[str, Path]:
    base = both_ways["base"]
    collected = collect_snapshot(both_ways["segments"], base / "collected")
    standalone = collect_snapshot(both_ways["segments"], base / "collected-csv", "--verify-crc", standalone=True)
    simulate(base / "simulated", brokers=3, topics=3, partitions=1, batches=24, seed=11, kraft_controllers=3,
             log_format="collected", segment_batches=10)
    outs = {}
    for name, path, verify in (("dumps", both_ways["dumps"], False), ("segments", both_ways["segments"], False),
                               ("verified", both_ways["segments"], True), ("collected", collected, True),
                               ("collected-csv", standalone, False), ("simulated", base / "simulated", False)):
        out = base / f"out-{name}"
        run_audit(spark, str(path), str(out), Config(verify_crc=verify), run_id="r", snapshot_label=LABEL)
        outs[name] = out
    return outs


def test_segments_and_dumps_of_one_cluster_give_the_same_tables(audited: dict[str, Path]) -> None:
    dumps, verified = tables(audited["dumps"]), tables(audited["verified"])
    assert any('"CORRUPT_BATCH"' in r for r in dumps["findings"])  # the cluster has damage to find
    assert any('"KRAFT_SNAPSHOT_INVALID"' in r for r in dumps["findings"])  # and its metadata log too
    assert dumps == verified


def _unplaced(found: dict[str, list[str]]) -> dict[str, list[str]]:
    """Tables with the files' names left out of the messages (a collected file's name is its
    virtual path ``broker=N/logdir=<k>/...``, SPEC 3.4 sets messages aside)."""
    return {name: sorted(json.dumps({k: v for k, v in json.loads(r).items() if k != "message"}, sort_keys=True)
                         for r in rows) for name, rows in found.items()}


def test_collected_segments_give_the_tables_of_the_segments(audited: dict[str, Path]) -> None:
    """SPEC 3.4's contract: the audit of what collect wrote (with pyarrow, headers only; by
    its one file alone, gzip CSV, --verify-crc) is the audit of the log dirs themselves,
    whatever the audit's own --verify-crc (collected rows keep their verdicts)."""
    assert _unplaced(tables(audited["collected"])) == _unplaced(tables(audited["segments"]))
    assert _unplaced(tables(audited["collected-csv"])) == _unplaced(tables(audited["verified"]))
    plain, verified = counts(audited["collected"]), counts(audited["collected-csv"])
    assert plain["bytes_read"] == verified["bytes_read"] == 0  # the audit reads no segment byte
    assert plain["crc_verified"] is False and verified["crc_verified"] is True
    assert plain["segment_bytes"] == verified["segment_bytes"] == counts(audited["segments"])["segment_bytes"]
    assert plain["batches"] == counts(audited["segments"])["batches"]


def test_a_simulated_collection_is_the_collection_of_the_simulated_segments(audited: dict[str, Path]) -> None:
    """``simulate --format collected`` (rows made without segment files) gives the tables
    of the same cluster's segments read with --verify-crc: the same ground truth."""
    assert _unplaced(tables(audited["simulated"])) == _unplaced(tables(audited["verified"]))


def test_a_collected_folder_of_an_unknown_format_version_ends_the_run(spark: object, audited: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    root = tmp_path / "snap"
    shutil.copytree(audited["collected"].parent / "collected", root)
    manifest = root / "broker=1" / collect.MANIFEST
    manifest.write_text(manifest.read_text().replace(f'"format_version": {collect.FORMAT_VERSION}',
                                                     '"format_version": 99'))
    with pytest.raises(InputError, match="version 99"):
        run_audit(spark, str(root), str(tmp_path / "o1"), Config(), run_id="r", snapshot_label=LABEL)
    out = tmp_path / "out"
    out.mkdir()
    result = CliRunner().invoke(main, ["audit", str(root), "--out", str(out), "--run-id", "r-2"])
    assert result.exit_code == 2 and "version 99" in result.output
    assert not (out / "findings").exists()
    runs = DeltaTable(str(out / "runs")).to_pyarrow_table().to_pylist()
    assert [(r["run_id"], r["status"]) for r in runs] == [("r-2", "FAILED")]


def test_headers_only_knows_no_batch_to_be_invalid(audited: dict[str, Path]) -> None:
    """Without --verify-crc only the batches whose CRC does not match are missed: every
    other row is the same."""
    dumps, plain = tables(audited["dumps"]), tables(audited["segments"])
    missed = sorted(set(dumps["findings"]) - set(plain["findings"]))
    assert missed and all('"CORRUPT_BATCH"' in r and '"CRITICAL"' in r and "isvalid" in r for r in missed)
    assert set(plain["findings"]) <= set(dumps["findings"])
    assert plain["replica_status"] == dumps["replica_status"] and plain["epoch_lineage"] == dumps["epoch_lineage"]
    c = counts(audited["segments"])
    # (the batches of the metadata log's snapshot files are read and counted too)
    in_snapshots = sum(len(model_walk(p.read_bytes(), newest=False).entries)
                       for p in audited["segments"].parent.joinpath("segments").rglob("*.checkpoint"))
    assert in_snapshots > 0
    assert c["crc_verified"] is False and c["crc_verified_batches"] == 0
    assert c["crc_unverified_batches"] == c["batches"] + in_snapshots
    assert counts(audited["verified"])["crc_verified"] is True
    assert counts(audited["dumps"])["crc_verified"] is None and counts(audited["dumps"])["segment_files"] == 0


def test_byte_accounting(audited: dict[str, Path], both_ways: dict[str, Path]) -> None:
    """SPEC 3.3's accounting over the segment files and the metadata log's snapshot files."""
    logs = sorted(both_ways["segments"].rglob("*.log"))
    snapshots = [p for p in both_ways["segments"].rglob("*.checkpoint") if p.stat().st_size]
    assert logs and snapshots
    size = sum(p.stat().st_size for p in [*logs, *snapshots])
    for name in ("segments", "verified"):
        c = counts(audited[name])
        assert c["segment_files"] == len(logs) + len(snapshots) and c["segment_bytes"] == size
        assert size == c["batch_bytes"] + c["quarantined_bytes"] + c["zero_tail_bytes"] + c["invalid_tail_bytes"] \
            + c["vanished_bytes"]
        assert c["invalid_tail_bytes"] > 0  # the simulated torn writes
    plain, verified = counts(audited["segments"]), counts(audited["verified"])
    # --verify-crc: every batch read whole once, plus at most 17 bytes to look at each
    # newest segment's tail; never more than the files hold
    beyond = verified["bytes_read"] - verified["batch_bytes"] - verified["quarantined_bytes"]
    assert 0 < beyond <= 17 * verified["replicas"] and verified["bytes_read"] <= size
    # headers only: 61 bytes per data batch, control batches whole, the newest segments'
    # tails looked at (the model's walk of each file, independently)
    expected = 0
    for path in [*logs, *snapshots]:
        data = path.read_bytes()
        newest = path.suffix == ".log" and max(p.name for p in path.parent.glob("*.log")) == path.name
        walked = model_walk(data, newest=newest)
        expected += sum(length if data[pos + 22] & 0x20 else 61 for pos, length, *_ in walked.entries)
        if newest and walked.stop < len(data):
            expected += min(len(data) - walked.stop, 17)
    assert plain["bytes_read"] == expected < plain["batch_bytes"]


def test_a_damaged_snapshot_file_is_an_invalid_snapshot(spark: object, both_ways: dict[str, Path],
                                                        audited: dict[str, Path], tmp_path: Path) -> None:
    """Damage inside a KRaft snapshot file read in binary is KRAFT_SNAPSHOT_INVALID, never
    CORRUPT_BATCH. Each non-empty snapshot file beside a dump of itself: the file is read
    (the damage is found), the dump skipped, its lines counted as skipped (SPEC 3.3)."""
    root = tmp_path / "snap"
    shutil.copytree(both_ways["segments"], root)
    target = next(p for p in sorted(root.rglob("*.checkpoint")) if p.stat().st_size)
    data = target.read_bytes()
    target.write_bytes(data[:-10])  # a torn snapshot: its footer batch cut
    # (a zero-length snapshot file beside its dump is a bare copy, the dump read: not these)
    dumps = [p for p in sorted(both_ways["dumps"].rglob("*.checkpoint.txt"))
             if (root / p.relative_to(both_ways["dumps"]).with_suffix("")).stat().st_size]
    assert len(dumps) >= 2
    for p in dumps:
        shutil.copy(p, root / p.relative_to(both_ways["dumps"]))
    out = tmp_path / "out"
    run_audit(spark, str(root), str(out), Config(), run_id="r", snapshot_label=LABEL)
    findings = DeltaTable(str(out / "findings")).to_pyarrow_table().to_pylist()
    rel = str(target.relative_to(root))
    invalid = [f for f in findings if f["check"] == "KRAFT_SNAPSHOT_INVALID" and rel in f["message"]]
    assert len(invalid) == 1 and "the file is damaged" in invalid[0]["message"], invalid
    assert not [f for f in findings if f["check"] == "CORRUPT_BATCH" and rel in f["details"]]
    c, before = counts(out), counts(audited["segments"])
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in dumps)
    assert (c["lines"] - before["lines"], c["lines_skipped"] - before["lines_skipped"]) == (lines, lines)
    assert (c["lines_parsed"], c["lines_quarantined"]) == (before["lines_parsed"], before["lines_quarantined"])


def _replica(root: Path, broker: int, topic: str = "t", partition: int = 0) -> Path:
    folder = root / f"broker={broker}" / "data" / f"{topic}-{partition}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _log_dir(root: Path, broker: int, hwm: int) -> None:
    write(root / f"broker={broker}" / "data" / "replication-offset-checkpoint", checkpoint([("t", 0, hwm)]))


def _batches(first: int, n: int, epoch: int = 1) -> list[Batch]:
    return [Batch(o, o, epoch, 1000 + o, bytes_per_record=18) for o in range(first, first + n)]


def test_segments_beside_dumps(spark: object, tmp_path: Path) -> None:
    """A replica's segments are the union of its .log files and its dump sections: a dump of
    a segment the .log holds is skipped (its lines counted as skipped), a dump of a newer
    segment is read, and that newer segment is the newest (the .log's zero tail is then
    invalid bytes)."""
    root = tmp_path / "snap"
    leader = _replica(root, 1)
    (leader / "00000000000000000000.log").write_bytes(encode_segment(_batches(0, 5)))
    # the same segment dumped (with different CRCs: were it read, the replicas would differ)
    write(leader / "00000000000000000000.log.txt",
          dump_segment("/k", "t", 0, 0, [Batch(o, o, 1, 9, bytes_per_record=18) for o in range(5)]))
    write(leader / "00000000000000000005.log.txt", dump_segment("/k", "t", 0, 5, _batches(5, 3)))
    write(leader / "leader-epoch-checkpoint", checkpoint([(1, 0)]))
    (leader / "00000000000000000000.log.swap").write_bytes(encode_segment(_batches(0, 2)))  # compaction's result
    (leader / "00000000000000000000.index").write_bytes(bytes(16))
    follower = _replica(root, 2)
    (follower / "00000000000000000000.log").write_bytes(encode_segment(_batches(0, 5)) + bytes(40))
    write(follower / "00000000000000000005.log.txt", dump_segment("/k", "t", 0, 5, _batches(5, 3)))
    write(follower / "leader-epoch-checkpoint", checkpoint([(1, 0)]))
    for b in (1, 2):
        _log_dir(root, b, 8)
    write(root / "topics-describe.txt", "Topic: t\tPartitionCount: 1\tReplicationFactor: 2\tConfigs: \n"
          "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n")
    out = tmp_path / "out"
    run_audit(spark, str(root), str(out), Config(), run_id="r", snapshot_label=LABEL)
    status = {r["replica"]: r for r in DeltaTable(str(out / "replica_status")).to_pyarrow_table().to_pylist()}
    assert {b: (s["log_end_offset"], s["batch_count"], s["status"]) for b, s in status.items()} == {
        1: (8, 8, "leader"), 2: (8, 8, "in_sync")}
    findings = DeltaTable(str(out / "findings")).to_pyarrow_table().to_pylist()
    torn = [f for f in findings if f["check"] == "CORRUPT_BATCH"]
    assert len(torn) == 1 and torn[0]["replica"] == 2 and torn[0]["severity"] == "CRITICAL"
    details = json.loads(torn[0]["details"])
    assert details["byte_offset"] == 5 * 79 and details["invalid_bytes"] == 40 and details["newest_segment"] is False
    assert details["file"] == "broker=2/data/t-0/00000000000000000000.log"
    c = counts(out)
    assert c["lines_skipped"] >= 7 and c["segment_files"] == 2 and c["invalid_tail_bytes"] == 40
    assert c["swap_files"] == ["broker=1/data/t-0/00000000000000000000.log.swap"] and c["files_skipped"] == 2


def test_damage_is_named_by_file_and_byte(spark: object, tmp_path: Path) -> None:
    root = tmp_path / "snap"
    folder = _replica(root, 1)
    good = encode_segment(_batches(0, 3))
    bad = bytearray(encode_batch(Batch(3, 3, 1, 5, bytes_per_record=18)))
    struct.pack_into(">i", bad, 12, -7)  # an epoch Kafka never writes
    flipped = encode_batch(Batch(4, 4, 1, 6, bytes_per_record=18, valid=False))
    (folder / "00000000000000000000.log").write_bytes(good + bytes(bad) + flipped)
    write(folder / "leader-epoch-checkpoint", checkpoint([(1, 0)]))
    _log_dir(root, 1, 5)
    out = tmp_path / "out"
    run_audit(spark, str(root), str(out), Config(verify_crc=True), run_id="r", snapshot_label=LABEL)
    errors = DeltaTable(str(out / "parse_errors")).to_pyarrow_table().to_pylist()
    assert len(errors) == 1
    e = errors[0]
    assert (e["file"], e["line_number"], e["byte_offset"]) == ("broker=1/data/t-0/00000000000000000000.log", None,
                                                               len(good))
    assert "partitionLeaderEpoch -7" in e["error"] and "partitionLeaderEpoch: -7" in e["line"]
    corrupt = [f for f in DeltaTable(str(out / "findings")).to_pyarrow_table().to_pylist()
               if f["check"] == "CORRUPT_BATCH"]
    assert len(corrupt) == 1 and corrupt[0]["offset_start"] == 4
    assert json.loads(corrupt[0]["details"])["byte_offset"] == len(good) + len(bad)
    c = counts(out)
    assert c["quarantined_bytes"] == len(bad) and c["batches"] == 4 and c["files_unusable"] == 0
    buf = io.StringIO()
    explain(str(out), "t", 0, file=buf)
    assert f"[broker=1/data/t-0/00000000000000000000.log byte {len(good) + len(bad)}]" in buf.getvalue()
    shutil.rmtree(out)
    # collected (--verify-crc on the node): named by the virtual path of the file it came from
    collected = collect_snapshot(root, tmp_path / "collected", "--verify-crc")
    run_audit(spark, str(collected), str(out), Config(), run_id="r", snapshot_label=LABEL)
    (e,) = DeltaTable(str(out / "parse_errors")).to_pyarrow_table().to_pylist()
    virtual = "broker=1/logdir=0/t-0/00000000000000000000.log"
    assert (e["file"], e["line_number"], e["byte_offset"]) == (virtual, None, len(good))
    assert "partitionLeaderEpoch: -7" in e["line"]
    (corrupt,) = [f for f in DeltaTable(str(out / "findings")).to_pyarrow_table().to_pylist()
                  if f["check"] == "CORRUPT_BATCH"]
    assert json.loads(corrupt["details"])["byte_offset"] == len(good) + len(bad)
    buf = io.StringIO()
    explain(str(out), "t", 0, file=buf)
    assert f"[{virtual} byte {len(good) + len(bad)}]" in buf.getvalue()
