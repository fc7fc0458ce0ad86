"""Real audits into one OUT at once, and a real audit killed while it parses.

Each audit is ``auditor audit`` in its own process (its own JVM), as a scheduler starts
them; the killed audit's rerun runs in the test's process. ``test_commit.py`` covers kills
at random points of the writes in many more cases.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from auditor.cli import main
from auditor.sinks import commit
from tests.handmade_snapshot import write_demo_snapshot
from tests.test_commit import land_run, rows_of

pytestmark = pytest.mark.spark

AUDITOR = [str(Path(sys.executable).with_name("auditor"))]


def _audit(snapshot: Path, out: Path, run_id: str, label: str, *more: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*AUDITOR, "audit", str(snapshot), "--out", str(out), "--run-id", run_id, "--snapshot", label,
         "--cluster", "c", "--fail-on", "never", *more],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _table(out: Path, name: str) -> list[dict]:  # type: ignore[type-arg]
    return DeltaTable(str(out / name)).to_pyarrow_table().to_pylist()


def test_two_audits_into_one_out_at_once_both_land_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    land_run(str(out), "earlier", 3)  # an earlier run of the same cluster and day
    earlier = {t: rows_of(out, t, "earlier") for t in ("findings", "replica_status", "runs")}
    snaps = [write_demo_snapshot(tmp_path / f"snap{i}") for i in range(2)]
    procs = [_audit(snap, out, f"r{i}", f"2026-11-23T0{i}:00:00Z") for i, snap in enumerate(snaps)]
    results = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in results]
    runs = {r["run_id"]: r for r in _table(out, "runs")}
    for i in range(2):
        run = runs[f"r{i}"]
        assert run["status"] == "SUCCEEDED"
        counts = json.loads(run["counts"])
        mine = [r for r in _table(out, "replica_status") if r["run_id"] == f"r{i}"]
        assert len(mine) == counts["replicas"] > 0
        found = [r for r in _table(out, "findings") if r["run_id"] == f"r{i}"]
        assert len(found) == sum(counts["findings"].values()) > 0
    assert {t: rows_of(out, t, "earlier") for t in earlier} == earlier
    assert not (out / commit.STATE_DIR / commit.JOURNAL_FILE).exists()


def test_an_audit_killed_while_parsing_leaves_nothing_and_its_rerun_lands_once(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    land_run(str(out), "earlier", 3)
    before = {t: rows_of(out, t) for t in ("findings", "replica_status", "runs")}
    snap = write_demo_snapshot(tmp_path / "snap")
    work = tmp_path / "work"  # both runs' work dirs (the killed one cannot remove its own)
    proc = _audit(snap, out, "k1", "2026-11-23T05:00:00Z", "--work-dir", str(work))
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + 300
    while "reading and parsing" not in seen:
        line = proc.stderr.readline()
        assert line and time.monotonic() < deadline, seen[-2000:]
        seen += line
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its JVM
    proc.wait(30)
    assert {t: rows_of(out, t) for t in before} == before
    left = sorted(work.iterdir())
    assert len(left) == 2 and all(p.name.startswith("auditor-work-") for p in left), left
    # one holds the run's cut points, the other its JVM's temporary files (Spark's local
    # dir: blockmgr-*, shuffle and spill files), which a killed JVM never removes
    assert [p for p in left if any(q.name.startswith("blockmgr-") for q in p.iterdir())], left
    # the rerun (same run id) in this process, on the suite's session: what it meets in OUT
    # is what the killed process left, whichever JVM reads it (a new process per audit is
    # the other test's; this one costs the suite a cold JVM less)
    rerun = CliRunner().invoke(main, ["audit", str(snap), "--out", str(out), "--run-id", "k1", "--snapshot",
                                      "2026-11-23T05:00:00Z", "--cluster", "c", "--fail-on", "never",
                                      "--work-dir", str(work)])
    assert rerun.exit_code == 0, rerun.output[-2000:]
    assert list(work.iterdir()) == []  # the killed run's and its JVM's dirs swept, the rerun's removed
    statuses = [r["status"] for r in _table(out, "runs") if r["run_id"] == "k1"]
    assert statuses == ["SUCCEEDED"]
    counts = json.loads(next(r["counts"] for r in _table(out, "runs") if r["run_id"] == "k1"))
    assert len([r for r in _table(out, "replica_status") if r["run_id"] == "k1"]) == counts["replicas"]
