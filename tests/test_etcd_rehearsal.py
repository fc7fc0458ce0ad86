"""The live rehearsal (issue 12): a real 3-member etcd cluster (Debian's etcd-server, set up
by scripts/test.sh) written to while a follower and then the leader are SIGKILLed and
restarted, its data dirs copied by scripts/etcd-rehearsal.sh and audited with
``--format etcd``; then a copy whose follower WAL carries, at indexes the others hold,
entries of another term (appended with a faithful writer, CRCs correct), as a member that
silently lost the log matching property would."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from deltalake import DeltaTable

from auditor.config import Config
from auditor.ingest.etcd_wal import decode_wal
from auditor.run import run_audit
from tests import etcd_wal_writer as w

pytestmark = [pytest.mark.spark, pytest.mark.slow]
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "etcd-rehearsal.sh"
TOKEN = "PLANTED-etcd-rehearsal-5c1e"


def _rows(out: Path, table: str) -> list[dict]:  # type: ignore[type-arg]
    return DeltaTable(str(out / table)).to_pyarrow_table().to_pylist()


def _everything_under(out: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file())


HEALTHY, TAMPERED = "2026-11-01T10:00:00Z", "2026-11-01T11:00:00Z"


def _free_ports() -> int:
    """A base port whose rehearsal ports (base+11 .. base+32) are all free, below the
    ephemeral range so that no outgoing connection takes one meanwhile."""
    for base in sorted(range(20000, 32000, 100), key=lambda b: (b // 100 + os.getpid()) % 120):
        try:
            for port in range(base + 11, base + 33):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free loopback ports for the etcd rehearsal")


def _last_term_run(wal: Path) -> tuple[int, int, int]:
    """(first index, index after the last, term) of the last term's run of entries in a
    WAL file, as etcd's reader keeps them."""
    log: dict[int, int] = {}
    for r in decode_wal(wal.read_bytes()):
        if r.get("record_type") == "entry":
            log = {i: t for i, t in log.items() if i < r["index"]}
            log[r["index"]] = r["term"]
    last = max(log)
    first = last
    while first - 1 in log and log[first - 1] == log[last]:
        first -= 1
    return first, last + 1, log[last]


@pytest.fixture(scope="module")
def live(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    """One audit of two snapshots of the live cluster's copy: as copied, and with a
    follower's tail rewritten in another term."""
    if shutil.which("etcd") is None or shutil.which("etcdctl") is None:
        pytest.skip("etcd-server and etcd-client are not installed (scripts/test.sh installs them)")
    base = tmp_path_factory.mktemp("etcd")
    healthy = base / "root" / f"snapshot={HEALTHY}"
    env = {**os.environ, "ETCD_REHEARSAL_TOKEN": TOKEN, "ETCD_REHEARSAL_KEYS": "120",
           "ETCD_REHEARSAL_PORT": str(_free_ports())}
    done = subprocess.run(["bash", str(SCRIPT), str(healthy)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    status = json.loads((healthy / "endpoint-status.json").read_text())
    members = {int(line.split("\t")[0]): line.split("\t")[3] for line in (healthy / "members.tsv").read_text().splitlines()}
    leader = next(n for n, url in members.items() for r in status
                  if r["Endpoint"] == url and r["Status"]["leader"] == r["Status"]["header"]["member_id"])
    follower = max(n for n in members if n != leader)
    tampered = base / "root" / f"snapshot={TAMPERED}"
    shutil.copytree(healthy, tampered)
    wal = sorted((tampered / f"member={follower}").rglob("*.wal"))[-1]
    first, end, term = _last_term_run(wal)
    assert term >= 2, "kills and restarts make new terms"
    # The same indexes written again in term - 1 (etcd's reader keeps the later ones: an
    # entry at an index replaces the tail from there), CRCs carried on correctly.
    w.append(wal, [w.entry(term - 1, i, TOKEN.encode() + b"/tampered") for i in range(first, end)])
    out = base / "out"
    result = run_audit(spark, str(base / "root"), str(out), Config(format="etcd", cluster="live"), run_id="live")
    return {"status": status, "members": members, "out": out, "result": result, "follower": follower,
            "first": first}


def _of(rows: list[dict], label: str) -> list[dict]:  # type: ignore[type-arg]
    return [r for r in rows if r["snapshot"].isoformat().replace("+00:00", "Z") == label]


def test_a_live_cluster_after_kills_and_restarts_is_consistent(live) -> None:  # type: ignore[no-untyped-def]
    out = live["out"]
    findings = _of(_rows(out, "findings"), HEALTHY)
    assert not [f for f in findings if f["severity"] in ("CRITICAL", "ERROR")], findings
    before = {r["Endpoint"]: r["Status"] for r in live["status"]}
    by_replica = {r["replica"]: r for r in _of(_rows(out, "replica_status"), HEALTHY)}
    assert sorted(by_replica) == [1, 2, 3] and live["result"].counts["members"] == {"1": 1, "2": 2, "3": 3}
    for replica, url in live["members"].items():
        # etcdctl's raft index and term, taken before the copy, are the member's last entry
        assert by_replica[replica]["log_end_offset"] - 1 == before[url]["raftIndex"], replica
        assert by_replica[replica]["latest_epoch"] == before[url]["raftTerm"], replica
    for r in by_replica.values():  # the members agree on every index they hold
        assert r["divergence_offset"] is None and r["status"] in ("leader", "in_sync"), r
    (ps,) = _of(_rows(out, "partition_status"), HEALTHY)  # a WAL does not say who leads: inferred (SPEC 4.6)
    assert (ps["topic"], ps["partition"], ps["leader_source"]) == ("etcd", 0, "inferred")
    assert TOKEN.encode() not in _everything_under(out)


def test_a_follower_whose_tail_has_another_term_is_named(live) -> None:  # type: ignore[no-untyped-def]
    out, follower = live["out"], live["follower"]
    status = {r["replica"]: r for r in _of(_rows(out, "replica_status"), TAMPERED)}
    # the first rewritten index the follower's log holds (indexes covered by a member's
    # snapshot are not part of its log, and nothing below the pair's two log starts is
    # compared: the leader's and this follower's, not the other follower's)
    (leader,) = [r for r in status.values() if r["status"] == "leader"]
    first = max(live["first"], leader["log_start_offset"], status[follower]["log_start_offset"])
    assert first < status[follower]["high_watermark"], "the rewritten indexes must be committed"
    assert status[follower]["divergence_offset"] == first
    findings = {(f["replica"], f["check"]): f for f in _of(_rows(out, "findings"), TAMPERED)}
    for check in ("LOG_MATCHING_VIOLATION", "COMMITTED_DATA_LOSS"):
        assert findings[(follower, check)]["offset_start"] == first, check
        assert findings[(follower, check)]["severity"] == "CRITICAL"
    assert {r for r, c in findings if c in ("LOG_MATCHING_VIOLATION", "COMMITTED_DATA_LOSS")} == {follower}
