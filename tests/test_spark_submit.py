"""``spark-submit jobs/audit.py`` with the pyspark distribution's own spark-submit, local mode:
the job runs, writes the tables, prints the summary and sets the exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
from deltalake import DeltaTable

from auditor.simulator import simulate

pytestmark = pytest.mark.spark
ROOT = Path(__file__).parent.parent


def test_spark_submit_local(tmp_path: Path) -> None:
    simulate(tmp_path / "snap", topics=1, partitions=2, batches=10, faults="unclean-election", seed=3)
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run(
        [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.shuffle.partitions=2", str(ROOT / "jobs" / "audit.py"),
         str(tmp_path / "snap"), "--out", str(tmp_path / "out"), "--cluster", "submitted", "--run-id", "sub-1"],
        capture_output=True, text=True, env=env, timeout=600)
    # the unclean election leaves CRITICAL findings: exit 1 under the default --fail-on critical
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "run sub-1:" in proc.stdout and "CRITICAL" in proc.stdout
    runs = DeltaTable(str(tmp_path / "out" / "runs")).to_pyarrow_table().to_pylist()
    assert [(r["run_id"], r["status"], r["cluster"], r["writer"]) for r in runs] == [
        ("sub-1", "SUCCEEDED", "submitted", "deltalake")]
    assert DeltaTable(str(tmp_path / "out" / "findings")).to_pyarrow_table().num_rows > 0
