"""The cluster path: one simulated snapshot with faults, audited three ways, gives the same
tables row for row (run columns aside):

- ``auditor audit --master local[2]`` (driver and executors in one JVM; the CLI run in the
  test's process, on the suite's session),
- ``auditor audit --master spark://...`` against a real standalone cluster on loopback
  (``scripts/local-cluster.sh``: a master and two workers, each its own JVM, so shuffles
  and stored intermediates cross processes),
- ``spark-submit --master spark://... jobs/audit.py``, with the default ``--fail-on``
  (``critical``): the job's exit status is the CLI's (1: the faults leave CRITICAL
  findings).

The two cluster runs keep Spark's event log (``--event-log``), and their driver runs with
its own empty TMPDIR: no path that an executor reads or writes (every file scan and every
write in the event log's plans) may lie in the driver's temporary folder, which on a real
cluster is a folder only the driver's machine has.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from auditor.cli import main
from auditor.simulator import simulate

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / "scripts" / "local-cluster.sh"
LABEL = "2026-03-01T06:00:00Z"
TABLES = ("runs", "findings", "replica_status", "partition_status", "epoch_lineage", "parse_errors")
#: Columns that name the run, not what it found.
RUN_COLUMNS = {"run_id", "audit_time", "started_at", "finished_at", "day"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and two workers (1 core, 1 GB each), stopped at the end."""
    folder = tmp_path_factory.mktemp("local-cluster")
    env = {**os.environ, "PYTHON": sys.executable}
    started = subprocess.run(["bash", str(SCRIPT), "start", str(folder)], capture_output=True, text=True,
                             env=env, timeout=180)
    try:
        assert started.returncode == 0, started.stderr
        url = started.stdout.strip().splitlines()[-1]
        assert re.fullmatch(r"spark://127\.0\.0\.1:\d+", url), started.stdout
        yield url
    finally:
        stopped = subprocess.run(["bash", str(SCRIPT), "stop", str(folder)], capture_output=True, text=True,
                                 env=env, timeout=120)
        assert stopped.returncode == 0, stopped.stderr
    assert not any(folder.glob("*.pid")), "every daemon stopped"


def table_rows(out: Path, name: str) -> list[tuple[object, ...]]:
    """One output table's rows without the run-naming columns, sorted."""
    table = DeltaTable(str(out / name)).to_pyarrow_table()
    keep = [c for c in table.column_names if c not in RUN_COLUMNS]
    return sorted((tuple(r[c] for c in keep) for r in table.select(keep).to_pylist()), key=repr)


def plan_paths(event_log_dir: Path) -> list[str]:
    """Every file path in the plans of an event log: file scans' locations and writes' targets."""
    logs = sorted(p for p in event_log_dir.rglob("events_*") if p.is_file())  # Spark 4: rolling files
    assert logs, list(event_log_dir.rglob("*"))
    paths: list[str] = []
    for line in "\n".join(p.read_text(encoding="utf-8") for p in logs).splitlines():
        event = json.loads(line)
        if event.get("Event", "").endswith("SparkListenerSQLExecutionStart"):
            paths += re.findall(r"file:(/[^\s,\]\)]+)", event.get("physicalPlanDescription", ""))
    return paths


def test_local_cluster_and_spark_submit_give_the_same_tables(tmp_path: Path, cluster: str, spark: object) -> None:
    snap = tmp_path / "snap"
    simulate(snap, topics=2, partitions=3, batches=40, faults="all", seed=3)
    auditor = str(Path(sys.executable).with_name("auditor"))
    submit = str(Path(pyspark.__file__).parent / "bin" / "spark-submit")
    # (Uncompressed event logs, for this test to read; Spark's default is zstd.)
    conf = tmp_path / "auditor.toml"
    conf.write_text('[spark]\nconf = { "spark.eventLog.compress" = "false" }\n', encoding="utf-8")
    common = [str(snap), "--cluster", "three-ways", "--snapshot", LABEL, "--conf", str(conf)]
    never = ["--fail-on", "never"]
    # local[2]: the CLI in this process, on the suite's session (local[2], 2 shuffle
    # partitions where the cluster runs have 4: results must not depend on it).
    in_process = CliRunner().invoke(main, ["audit", *common, *never, "--master", "local[2]",
                                           "--out", str(tmp_path / "local-out")])
    assert in_process.exit_code == 0, in_process.output
    runs = {  # name: (command, exit status)
        "cluster": ([auditor, "audit", *common, *never, "--master", cluster], 0),
        "submit": ([submit, "--master", cluster, "--conf", "spark.ui.enabled=false",
                    str(ROOT / "jobs" / "audit.py"), *common, "--run-id", "sub-1"], 1),
    }
    for name, (command, status) in runs.items():
        driver_tmp = tmp_path / f"{name}-driver-tmp"
        driver_tmp.mkdir()
        events = tmp_path / f"{name}-events"
        extra = ["--out", str(tmp_path / f"{name}-out"), "--event-log", str(events)]
        env = {**os.environ, "TMPDIR": str(driver_tmp), "PYSPARK_PYTHON": sys.executable,
               "PYSPARK_DRIVER_PYTHON": sys.executable}
        proc = subprocess.run([*command, *extra], capture_output=True, text=True, env=env, timeout=900)
        assert proc.returncode == status, f"{name}: {proc.stderr[-4000:]}"
        assert ("run sub-1:" if name == "submit" else "run ") in proc.stdout and "CRITICAL" in proc.stdout, proc.stdout
        paths = plan_paths(events)
        assert any(p.startswith(str(snap)) for p in paths), "the event log's plans name the input"
        inside = [p for p in paths if p.startswith(str(driver_tmp))]
        assert not inside, f"{name}: executors were given driver-only paths: {inside[:3]}"

    local = {t: table_rows(tmp_path / "local-out", t) for t in TABLES}
    assert len(local["findings"]) > 10 and len(local["replica_status"]) == 24
    for name in ("cluster", "submit"):
        for table in TABLES:
            assert table_rows(tmp_path / f"{name}-out", table) == local[table], f"{name}: {table}"
    # the submitted job's run, under the id it was given, written by the writer every
    # session without Delta's jars uses
    (submitted,) = DeltaTable(str(tmp_path / "submit-out" / "runs")).to_pyarrow_table().to_pylist()
    assert (submitted["run_id"], submitted["status"], submitted["writer"]) == ("sub-1", "SUCCEEDED", "deltalake")
