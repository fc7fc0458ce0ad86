"""``auditor collect`` (SPEC 3.4) on a node's log dirs, without Spark: it runs from a copy of
its one file with the standard library alone, reads the log dirs only and in the consistent
order, writes no payload byte, reuses unchanged older segments with ``--previous``, counts a
file that vanishes, caps its read rate, and ``simulate --format collected`` writes the rows
the walk reads from the simulated segments' bytes. (Its audit: tests/test_collect_audit.py.)"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from auditor import collect as c
from auditor.simulator.collected import segment_rows
from auditor.simulator.kafka_binary import encode_segment
from auditor.simulator.kafka_text import Batch, Producer

COLLECT = Path(c.__file__)
SECRET = b"PAYLOAD-SECRET-7f3a9c"


def _batch(base: int, epoch: int, values: list[bytes]) -> bytes:
    """A v2 batch built by kafka-python (the independent encoder), given its base offset and
    epoch as a broker does."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=value, headers=[])
    data = bytearray(builder.build())
    data[0:8] = base.to_bytes(8, "big")
    data[12:16] = epoch.to_bytes(4, "big")
    return bytes(data)


def _checkpoint(lines: list[str]) -> bytes:
    return ("0\n%d\n" % len(lines) + "".join(line + "\n" for line in lines)).encode()


def make_log_dirs(root: Path, partitions: int = 3, segments: int = 3, per_segment: int = 4) -> list[Path]:
    """Two log dirs of one node: partitions of ``segments`` segments of ``per_segment``
    batches whose records carry :data:`SECRET`; checkpoint files as Kafka writes them."""
    dirs = [root / "data0", root / "data1"]
    for k, log_dir in enumerate(dirs):
        log_dir.mkdir(parents=True)
        hwms, starts = [], []
        for p in range(partitions):
            folder = log_dir / f"t{k}-{p}"
            folder.mkdir()
            offset = 0
            for s in range(segments):
                data = b""
                for _ in range(per_segment):
                    data += _batch(offset, 1, [SECRET + bytes([i]) * 40 for i in range(3)])
                    offset += 3
                base = offset - 3 * per_segment
                (folder / f"{base:020d}.log").write_bytes(data)
                (folder / f"{base:020d}.index").write_bytes(bytes(8))
            (folder / "leader-epoch-checkpoint").write_bytes(_checkpoint(["1 0"]))
            (folder / "partition.metadata").write_text("version: 0\ntopic_id: x\n")
            hwms.append(f"t{k} {p} {offset}")
            starts.append(f"t{k} {p} 0")
        (log_dir / c.HWM).write_bytes(_checkpoint(hwms))
        (log_dir / "log-start-offset-checkpoint").write_bytes(_checkpoint(starts))
        (log_dir / "meta.properties").write_text("node.id=1\n")
    return dirs


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file under ``root``: size, modification time and inode."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ino)
            for p in sorted(root.rglob("*")) if p.is_file()}


def rows(folder: Path, name: str) -> list[dict]:
    path = c.table_path(str(folder), name)
    assert path is not None
    columns = {c.BATCHES: c.BATCH_COLUMNS, c.SEGMENTS: c.SEGMENT_COLUMNS, c.SMALL_FILES: c.SMALL_FILE_COLUMNS}[name]
    return list(c.read_table(path, columns))


def run_copy(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The collector's one file copied elsewhere, run with no site-packages (``-S``) and
    isolated (``-I``): the standard library alone."""
    copy = tmp_path / "bin" / "collect.py"
    copy.parent.mkdir(exist_ok=True)
    shutil.copy(COLLECT, copy)
    return subprocess.run([sys.executable, "-S", "-I", str(copy), *args], capture_output=True, text=True,
                          timeout=120, check=False)


def test_a_copy_of_its_one_file_runs_with_the_standard_library_alone(tmp_path: Path) -> None:
    dirs = make_log_dirs(tmp_path / "node")
    out = tmp_path / "out"
    done = run_copy(tmp_path, "--broker-id", "1", "--log-dirs", ",".join(map(str, dirs)), "--out", str(out),
                    "--verify-crc")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "broker=1" / c.MANIFEST).read_text())
    # no pyarrow, no crc32c package: gzip CSV tables and the pure-Python CRC-32C
    assert manifest["table_format"] == "csv.gz" and manifest["crc_implementation"] == "python"
    assert manifest["format_version"] == c.FORMAT_VERSION and manifest["node_id"] == 1
    assert [d["label"] for d in manifest["log_dirs"]] == ["logdir=0", "logdir=1"]
    batches = rows(out / "broker=1" / "logdir=0", c.BATCHES)
    assert len(batches) == 3 * 3 * 4 and all(r["is_valid"] is True for r in batches)
    assert all(r["segment_base_offset"] == int(r["file"][:20]) and r["snapshot_id"] is None for r in batches)
    assert sorted(os.listdir(out / "broker=1" / "logdir=0")) == [
        "batches.csv.gz", "log-start-offset-checkpoint", c.HWM, "segments.csv.gz", "small-files.csv.gz"]
    assert "read: 18 segments" in done.stdout and "verified (python)" in done.stdout
    # the pure-Python CRC-32C agrees with the C package on every batch
    with_c = tmp_path / "out-c"
    assert c.main(["--broker-id", "1", "--log-dirs", ",".join(map(str, dirs)), "--out", str(with_c),
                   "--verify-crc"]) == 0
    assert [r["crc"] for r in rows(with_c / "broker=1" / "logdir=0", c.BATCHES)] == [r["crc"] for r in batches]


def _python39() -> str | None:
    """A Python 3.9 interpreter (SPEC 3.4's oldest), when this machine has one."""
    for candidate in (shutil.which("python3.9"), *sorted(Path("/root/.pyenv/versions").glob("3.9*/bin/python3.9"))):
        if candidate and subprocess.run([str(candidate), "-c", "import sys; assert sys.version_info[:2] == (3, 9)"],
                                        capture_output=True, check=False).returncode == 0:
            return str(candidate)
    return None


def test_it_runs_on_python_3_9(tmp_path: Path) -> None:
    python = _python39()
    if python is None:
        pytest.skip("no Python 3.9 on this machine")
    dirs = make_log_dirs(tmp_path / "node", partitions=1)
    copy = tmp_path / "collect.py"
    shutil.copy(COLLECT, copy)
    done = subprocess.run([python, "-S", "-I", str(copy), "--broker-id", "1", "--log-dirs", ",".join(map(str, dirs)),
                           "--out", str(tmp_path / "out"), "--verify-crc"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert len(rows(tmp_path / "out" / "broker=1" / "logdir=0", c.BATCHES)) == 3 * 4


AUDIT_HOOK = r"""
import json, os, sys
events = []
def hook(event, args):
    if event == "open" and isinstance(args[0], str):
        events.append(["open", args[0], args[2] if len(args) > 2 and isinstance(args[2], int) else None,
                       args[1] if len(args) > 1 else None])
    elif event in ("os.rename", "os.remove", "os.unlink", "os.rmdir", "shutil.rmtree", "os.truncate",
                   "os.utime", "os.chmod", "os.mkdir", "fcntl.flock", "fcntl.lockf"):
        events.append([event, str(args[0]) if args else None, None, None])
sys.addaudithook(hook)
sys.path.insert(0, sys.argv[1])
import collect
code = collect.main(sys.argv[3:])
with open(sys.argv[2], "w") as f:
    json.dump(events, f)
sys.exit(code)
"""


def test_it_reads_the_log_dirs_only_and_in_a_consistent_order(tmp_path: Path) -> None:
    """Nothing under a log dir is written, renamed, locked or deleted; every file there is
    opened read-only; each log dir's high watermarks come before any segment, and the
    partitions' epoch checkpoints and the log dirs' other checkpoints after every segment."""
    node = tmp_path / "node"
    dirs = make_log_dirs(node)
    before = tree(node)
    script = tmp_path / "hook.py"
    script.write_text(AUDIT_HOOK)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(COLLECT, bin_dir / "collect.py")
    log = tmp_path / "events.json"
    done = subprocess.run([sys.executable, "-S", "-I", str(script), str(bin_dir), str(log), "--broker-id", "1",
                           "--log-dirs", ",".join(map(str, dirs)), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert tree(node) == before
    events = json.loads(log.read_text())
    inside = [e for e in events if e[1] and e[1].startswith(str(node))]
    assert inside and all(e[0] == "open" for e in inside), [e for e in inside if e[0] != "open"]
    for _, path, flags, mode in inside:
        assert flags is None or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND) == 0, path
        assert mode is None or not isinstance(mode, str) or set(mode) <= {"r", "b", "t"}, (path, mode)
    order = [Path(e[1]).name for e in inside]
    first_log = next(i for i, n in enumerate(order) if n.endswith(".log"))
    last_log = max(i for i, n in enumerate(order) if n.endswith(".log"))
    assert [i for i, n in enumerate(order) if n == c.HWM] and max(
        i for i, n in enumerate(order) if n == c.HWM) < first_log
    late = [i for i, n in enumerate(order) if n in (c.LEADER_EPOCH, "log-start-offset-checkpoint")]
    assert late and min(late) > last_log


def test_no_payload_byte_is_written(tmp_path: Path) -> None:
    dirs = make_log_dirs(tmp_path / "node")
    for fmt, run in (("parquet", lambda out: c.main(["--broker-id", "1", "--log-dirs", ",".join(map(str, dirs)),
                                                     "--out", str(out), "--verify-crc"])),
                     ("csv", lambda out: run_copy(tmp_path, "--broker-id", "1", "--log-dirs",
                                                  ",".join(map(str, dirs)), "--out", str(out)).returncode)):
        out = tmp_path / f"out-{fmt}"
        assert run(out) == 0
        for path in out.rglob("*"):
            if not path.is_file():
                continue
            data = path.read_bytes()
            if path.name.endswith(".gz"):
                data = gzip.decompress(data)
            elif path.name.endswith(".parquet"):
                data = json.dumps(pq.read_table(path).to_pylist(), default=str).encode()
            assert SECRET not in data and SECRET[:12] not in data, path


def _collect(dirs: list[Path], out: Path, *extra: str) -> dict:
    assert c.main(["--broker-id", "1", "--log-dirs", ",".join(map(str, dirs)), "--out", str(out), *extra]) == 0
    return json.loads((out / "broker=1" / c.MANIFEST).read_text())


def _comparable(out: Path, k: int) -> tuple[list, list]:
    """A log dir's batch rows and segment rows, what a reuse may change aside."""
    folder = out / "broker=1" / f"logdir={k}"
    segments = [{key: v for key, v in r.items() if key not in ("reused", "bytes_read")} for r in rows(folder, c.SEGMENTS)]
    batches = sorted(rows(folder, c.BATCHES), key=lambda r: (r["topic"], r["partition"], r["file"], r["position"]))
    return batches, sorted(segments, key=lambda r: (r["topic"], r["partition"], r["file"]))


def test_previous_reuses_the_older_segments_that_did_not_change(tmp_path: Path) -> None:
    dirs = make_log_dirs(tmp_path / "node")
    first = _collect(dirs, tmp_path / "one")
    second = _collect(dirs, tmp_path / "two", "--previous", str(tmp_path / "one"))
    # 2 log dirs x 3 partitions x 3 segments: the 12 older ones reused, the 6 newest read
    assert (second["counts"]["segments_reused"], second["counts"]["segments_read"]) == (12, 6)
    assert second["counts"]["bytes_read"] == 6 * 4 * 61 < first["counts"]["bytes_read"]
    for k in (0, 1):
        assert _comparable(tmp_path / "one", k) == _comparable(tmp_path / "two", k)
    # the same place, another file (a compaction swapped in a file of the same size and mtime)
    older = dirs[0] / "t0-0" / f"{0:020d}.log"
    stat = older.stat()
    data = bytearray(older.read_bytes())
    data[12:16] = (2).to_bytes(4, "big")  # its first batch's epoch, outside the CRC
    replacement = older.with_name("swap")
    replacement.write_bytes(bytes(data))
    os.replace(replacement, older)
    os.utime(older, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    third = _collect(dirs, tmp_path / "three", "--previous", str(tmp_path / "two"))
    assert third["counts"]["segments_reused"] == 11
    epochs = {r["epoch"] for r in rows(tmp_path / "three" / "broker=1" / "logdir=0", c.BATCHES)
              if r["topic"] == "t0" and r["partition"] == 0 and r["file"] == older.name}
    assert epochs == {1, 2}


def test_previous_keeps_a_collection_all_verified_or_none(tmp_path: Path) -> None:
    dirs = make_log_dirs(tmp_path / "node", partitions=1)
    _collect(dirs, tmp_path / "plain")
    verified = _collect(dirs, tmp_path / "verified", "--verify-crc", "--previous", str(tmp_path / "plain"))
    assert verified["counts"]["segments_reused"] == 0  # no verdict to take: everything read whole
    assert all(r["is_valid"] for r in rows(tmp_path / "verified" / "broker=1" / "logdir=0", c.BATCHES))
    plain = _collect(dirs, tmp_path / "again", "--previous", str(tmp_path / "verified"))
    assert plain["counts"]["segments_reused"] == 4 and not plain["crc_verified"]
    again = rows(tmp_path / "again" / "broker=1" / "logdir=0", c.BATCHES)
    assert {r["is_valid"] for r in again} == {None}  # verdicts taken from PREV are dropped
    segs = rows(tmp_path / "again" / "broker=1" / "logdir=0", c.SEGMENTS)
    assert sum(s["crc_verified"] for s in segs) == 0 and sum(s["crc_unverified"] for s in segs) == len(again)


def test_a_previous_of_another_node_is_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dirs = make_log_dirs(tmp_path / "node", partitions=1)
    assert c.main(["--broker-id", "2", "--log-dirs", ",".join(map(str, dirs)), "--out", str(tmp_path / "two")]) == 0
    manifest = _collect(dirs, tmp_path / "one", "--previous", str(tmp_path / "two"))
    assert manifest["counts"]["segments_reused"] == 0 and manifest["previous"] is None
    assert "no collection of node 1" in capsys.readouterr().err


@pytest.mark.parametrize("problem", ["missing", "inside", "rate", "usage"])
def test_bad_usage_exits_2(tmp_path: Path, problem: str, capsys: pytest.CaptureFixture[str]) -> None:
    dirs = make_log_dirs(tmp_path / "node", partitions=1)
    args = {"missing": ["--log-dirs", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")],
            "inside": ["--log-dirs", str(dirs[0]), "--out", str(dirs[0] / "out")],
            "rate": ["--log-dirs", str(dirs[0]), "--out", str(tmp_path / "out"), "--max-read-mb-per-s", "0"],
            "usage": ["--log-dirs", str(dirs[0])]}[problem]
    assert c.main(["--broker-id", "1", *args]) == 2
    assert capsys.readouterr().err
    assert not (dirs[0] / "out").exists()


def test_a_file_that_vanishes_while_collected_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = make_log_dirs(tmp_path / "node", partitions=1)
    doomed = dirs[0] / "t0-0" / f"{0:020d}.log"
    walk = c.walk_path

    def retention_first(path: str, **kw: object) -> object:
        if path == str(doomed):
            doomed.unlink()  # retention deletes the oldest segment between listing and reading
        return walk(path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(c, "walk_path", retention_first)
    manifest = _collect(dirs, tmp_path / "out")
    assert manifest["counts"]["vanished_files"] == 1 and manifest["counts"]["segments_read"] == 5
    assert doomed.name not in {r["file"] for r in rows(tmp_path / "out" / "broker=1" / "logdir=0", c.SEGMENTS)}


def test_the_read_rate_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    slept: list[float] = []
    monkeypatch.setattr(c.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(c.time, "sleep", lambda s: (slept.append(s), now.__setitem__(0, now[0] + s)))
    throttle = c.Throttle(1_000_000)
    for _ in range(10):
        throttle(250_000)  # 2.5 MB at 1 MB/s: 2.5 s
    assert sum(slept) == pytest.approx(2.5)


_batches = st.lists(st.tuples(st.integers(1, 5), st.integers(0, 4), st.booleans(),
                              st.sampled_from([None, "txn", "COMMIT", "ABORT"])), min_size=0, max_size=8)


@settings(max_examples=60, deadline=None)
@given(shape=_batches, torn=st.sampled_from([0, 5, 17, 18, 40, 90]), newest=st.booleans(),
       record_bytes=st.integers(12, 40))
def test_simulated_rows_are_what_the_walk_reads_from_the_simulated_bytes(
        shape: list[tuple[int, int, bool, str | None]], torn: int, newest: bool, record_bytes: int) -> None:
    batches, offset = [], 10
    for count, epoch, valid, who in shape:
        producer = None if who is None else Producer(7, 1, offset, True, None if who == "txn" else who)
        n = 1 if producer is not None and producer.control else count
        batches.append(Batch(offset, offset + n - 1, epoch, (offset * 2654435761) & 0xFFFFFFFF, timestamp=offset,
                             valid=valid, bytes_per_record=record_bytes, producer=producer))
        offset += n
    data = encode_segment(batches, torn_bytes=torn if batches else 0)
    walked: list = []
    facts = c.walk_entries(lambda at, n: data[at:at + n], len(data), walked, newest=newest, segment_base=10,
                           verify_crc=True)
    entries, simulated = segment_rows(batches, torn if batches else 0, newest)
    assert entries == walked
    assert simulated == facts


def test_bootstrap_runs_kafkas_tool_first_and_writes_its_output(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """--bootstrap-server runs kafka-topics.sh (a stand-in on the PATH here) before any log
    file is read and writes its output at OUT's root; without the tool, a notice."""
    dirs = make_log_dirs(tmp_path / "node", partitions=1)
    bin_dir = tmp_path / "kafka-bin"
    bin_dir.mkdir()
    tool = bin_dir / "kafka-topics.sh"
    marker = tmp_path / "logs-untouched"
    # (the stand-in records whether the collector had written any table yet)
    tool.write_text("#!/bin/sh\n[ -z \"$(find %s -name 'batches.*' 2>/dev/null)\" ] && touch %s\n"
                    "echo \"Topic: t0	PartitionCount: 1	args: $*\"\n" % (tmp_path / "out", marker))
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    manifest = _collect(dirs, tmp_path / "out", "--bootstrap-server", "localhost:9092")
    text = (tmp_path / "out" / "topics-describe.txt").read_text()
    assert "Topic: t0" in text and "--bootstrap-server localhost:9092 --describe" in text
    assert marker.exists() and manifest["tools"] == {"topics-describe.txt": "written"}
    monkeypatch.setenv("PATH", "/nonexistent")
    manifest = _collect(dirs, tmp_path / "again", "--bootstrap-controller", "localhost:9093")
    assert manifest["tools"] == {"metadata-quorum-status.txt": "tool not on the PATH"}
    assert not (tmp_path / "again" / "metadata-quorum-status.txt").exists()
