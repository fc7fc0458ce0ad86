"""Every run leaves exactly one honest ``runs`` row (SPEC 7): SIGTERM at any stage, SIGINT,
an early failure; exit status 2 for all of them, earlier runs untouched."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from auditor import run as run_module
from auditor.cli import audit as cli_audit
from auditor.cli import main
from auditor.config import Config
from auditor.errors import Stopped, failure_recorded
from auditor.simulator.kafka_text import PartitionMeta
from auditor.sinks import commit
from auditor.sinks import delta as io
from auditor.sinks.schemas import OUTPUT_TABLES
from auditor.version import __version__
from auditor.workdir import new_work_dir
from tests.scenarios import Replica, write_describe, write_partition
from tests.test_commit import land_run

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent


def small_snapshot(root: Path) -> Path:
    """One partition, a follower that diverged: findings in every table."""
    write_partition(root, "orders", 0, {
        1: Replica([(0, 9, 0), (10, 19, 1), (20, 29, 2)], hwm=30),
        2: Replica([(0, 9, 0), (10, 19, 1), (20, 24, 1)], hwm=20, salt={20: "other"}),
        3: Replica([(0, 9, 0), (10, 19, 1), (20, 29, 2)], hwm=30),
    })
    write_describe(root, {"orders": [PartitionMeta(0, 1, [1, 2, 3], [1, 3])]})
    return root


def runs_rows(out: Path) -> list[dict]:  # type: ignore[type-arg]
    return DeltaTable(str(out / "runs")).to_pyarrow_table().to_pylist()


def table_bytes(out: Path) -> dict[str, list[str]]:
    """Every table's rows, as text, in a fixed order (what "byte-identical" compares)."""
    found = {}
    for name in OUTPUT_TABLES:
        if (out / name).exists():
            found[name] = sorted(map(repr, DeltaTable(str(out / name)).to_pyarrow_table().to_pylist()))
    return found


# (the stages a run goes through after it has computed its tables, in write order)
WRITE_STAGES = [*[f"writing {name}" for name in
                  ("parse_errors", "epoch_lineage", "replica_status", "partition_status", "findings")],
                "writing runs"]


def test_sigterm_during_each_table_write_leaves_one_failed_row(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real SIGTERM, through the CLI's own handler, at the start of each write of a re-run
    of a landed run: its writes are undone, exactly one FAILED row per attempt, the landed
    run byte-identical (SPEC 7: a failed re-run keeps the SUCCEEDED row). The audit is
    computed once; each attempt lands it (the code every run lands with)."""
    from auditor.cli.audit import _stop_on_sigterm

    snap = small_snapshot(tmp_path / "snap")
    out = tmp_path / "out"
    out.mkdir()
    config = Config(cluster="c")
    writer = io.DeltaRsWriter()
    identity = commit.RunIdentity(
        run_id="killed", cluster="c", started_at=datetime.now(timezone.utc), input=str(snap), format="kafka",
        protocol="epoch", writer=writer.name, tool_version=__version__, spark_version=spark.version)
    work_dir = new_work_dir(str(tmp_path))
    computed = run_module.compute_run(spark, str(snap), str(out), config, identity, work_dir,
                                      run_module.prepare(str(snap), config))
    run_module.land_run(computed, str(out), config, writer)
    assert [r["status"] for r in runs_rows(out)] == ["SUCCEEDED"]
    stages_seen: list[str] = []
    for attempt, stage in enumerate(WRITE_STAGES, start=1):
        before = table_bytes(out)

        def kill_at(message: str, stage: str = stage) -> None:
            stages_seen.append(message)
            if message == stage:
                os.kill(os.getpid(), signal.SIGTERM)  # the handler raises in this thread, now

        previous = _stop_on_sigterm()
        try:
            with pytest.raises(Stopped) as stopped:
                with run_module.recorded_end(writer, str(out), identity):
                    run_module.land_run(computed, str(out), config, writer, progress=kill_at)
        finally:
            signal.signal(signal.SIGTERM, previous)
        assert failure_recorded(stopped.value) and stopped.value.code == 2
        after = table_bytes(out)
        assert {t: v for t, v in after.items() if t != "runs"} == {t: v for t, v in before.items() if t != "runs"}, stage
        assert set(before["runs"]) <= set(after["runs"]) and len(after["runs"]) == len(before["runs"]) + 1, stage
        statuses = sorted(r["status"] for r in runs_rows(out))
        assert statuses == ["FAILED"] * attempt + ["SUCCEEDED"], stage
        assert all("stopped by SIGTERM" in r["counts"] for r in runs_rows(out) if r["status"] == "FAILED")
    assert set(WRITE_STAGES) <= set(stages_seen)
    shutil.rmtree(work_dir, ignore_errors=True)


def _cli(args: list[str]) -> subprocess.Popen:  # type: ignore[type-arg]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", "from auditor.cli import main; main()", *args],
                            stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def test_sigterm_while_parsing_exits_2_with_one_failed_row(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The real CLI in its own process, sent SIGTERM by another (a scheduler's timeout):
    exit 2, one FAILED row, the earlier run's rows byte-identical."""
    snap = small_snapshot(tmp_path / "snap")
    out = tmp_path / "out"
    land_run(str(out), "earlier", 3)  # an earlier run's rows (synthetic, cluster "c")
    before = table_bytes(out)
    proc = _cli(["audit", str(snap), "--out", str(out), "--run-id", "stopped", "--cluster", "other"])
    assert proc.stderr is not None
    lines = []
    for text in proc.stderr:
        lines.append(text)
        if "reading and parsing" in text:
            time.sleep(1.0)
            proc.send_signal(signal.SIGTERM)
            break
    else:
        pytest.fail(f"the run never started parsing: {''.join(lines)[-2000:]}")
    rest = proc.communicate(timeout=300)[1]
    assert proc.returncode == 2, rest
    assert "stopped by SIGTERM" in rest
    after = table_bytes(out)
    assert {t: v for t, v in after.items() if t != "runs"} == {t: v for t, v in before.items() if t != "runs"}
    assert set(before["runs"]) < set(after["runs"])
    new = [r for r in runs_rows(out) if r["run_id"] == "stopped"]
    assert [(r["status"], r["cluster"]) for r in new] == [("FAILED", "other")]
    assert len(after["runs"]) == len(before["runs"]) + 1
    assert "stopped by SIGTERM" in new[0]["counts"] and new[0]["spark_version"]


def test_sigterm_while_auditing_exits_2_with_one_failed_row(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM to the CLI's own process in the middle of the engine (at its second stored
    intermediate): exit 2, one FAILED row, the earlier run's rows byte-identical."""
    import auditor.engine.cuts as engine

    snap = small_snapshot(tmp_path / "snap")
    out = tmp_path / "out"
    land_run(str(out), "earlier", 3)  # an earlier run's rows (synthetic, cluster "c")
    before = table_bytes(out)
    real, calls = engine.materialise, []

    def materialise(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "materialise", materialise)
    handler = signal.getsignal(signal.SIGTERM)
    result = CliRunner().invoke(main, ["audit", str(snap), "--out", str(out), "--run-id", "mid",
                                       "--cluster", "other"])
    assert signal.getsignal(signal.SIGTERM) == handler  # the CLI puts the handler back
    assert result.exit_code == 2 and "stopped by SIGTERM" in result.output, result.output
    assert len(calls) == 2
    after = table_bytes(out)
    assert {t: v for t, v in after.items() if t != "runs"} == {t: v for t, v in before.items() if t != "runs"}
    assert set(before["runs"]) < set(after["runs"]) and len(after["runs"]) == len(before["runs"]) + 1
    assert [r["status"] for r in runs_rows(out) if r["run_id"] == "mid"] == ["FAILED"]


def test_an_early_failure_leaves_exactly_one_failed_row(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """No broker= folder (found inside the run), an unreadable config, a missing input, an
    incremental run of another format: one FAILED row each, under the run id given, exit 2."""
    out = tmp_path / "out"
    out.mkdir()
    empty = tmp_path / "empty"
    (empty / "something").mkdir(parents=True)
    bad_conf = tmp_path / "bad.toml"
    bad_conf.write_text("[audit\n")
    runner = CliRunner()
    cases = {
        "no-broker": ["audit", str(empty), "--out", str(out), "--run-id", "no-broker"],
        "bad-conf": ["audit", str(empty), "--out", str(out), "--run-id", "bad-conf", "--conf", str(bad_conf)],
        "missing-input": ["audit", str(tmp_path / "nope"), "--out", str(out), "--run-id", "missing-input"],
        "bad-usage": ["audit", str(empty), "--out", str(out), "--run-id", "bad-usage", "--format", "etcd",
                      "--incremental"],
    }
    for run_id, args in cases.items():
        result = runner.invoke(main, args)
        assert result.exit_code == 2, (run_id, result.output)
        rows = [r for r in runs_rows(out) if r["run_id"] == run_id]
        assert [r["status"] for r in rows] == ["FAILED"], (run_id, rows)
    # an OUT inside the input is never written to, even to record the failure
    inside = empty / "out"
    inside.mkdir()
    result = runner.invoke(main, ["audit", str(empty), "--out", str(inside), "--run-id", "inside"])
    assert result.exit_code == 2 and not any(inside.iterdir())


def test_sigint_is_recorded_like_sigterm(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C (KeyboardInterrupt) once the run has started: one FAILED row, exit 2."""
    snap = small_snapshot(tmp_path / "snap")
    out = tmp_path / "out"
    out.mkdir()

    def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "load_snapshot", interrupted)
    result = CliRunner().invoke(main, ["audit", str(snap), "--out", str(out), "--run-id", "ctrl-c", "--cluster", "c"])
    assert result.exit_code == 2 and "stopped by SIGINT" in result.output, result.output
    rows = runs_rows(out)
    assert [(r["run_id"], r["status"]) for r in rows] == [("ctrl-c", "FAILED")] and "SIGINT" in rows[0]["counts"]
    assert rows[0]["spark_version"]  # recorded by the run itself, not by the CLI's early handler


@pytest.mark.spark
def test_sigterm_during_a_jvm_call_leaves_the_next_call_its_own_answer(spark) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM's Stopped can interrupt a JVM call halfway (found as a flaky run that failed
    with "'m'" instead of "stopped by SIGTERM"): py4j keeps one connection per thread, so
    without :func:`auditor.spark.drop_pending_jvm_call` the next call read the abandoned
    call's answer."""
    jvm = spark.sparkContext._jvm
    previous = signal.signal(signal.SIGTERM, cli_audit._raise_stopped)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    answers = []
    try:
        timer.start()
        try:
            jvm.java.lang.Thread.sleep(3000)  # the JVM answers this call 2.5 s after Stopped
        finally:  # as the run's own finally clauses do, while Stopped unwinds
            answers.append(jvm.java.lang.Math.abs(-5))
    except Stopped:
        answers.append(spark.range(3).count())
    finally:
        timer.cancel()
        signal.signal(signal.SIGTERM, previous)
    assert answers == [5, 3]
