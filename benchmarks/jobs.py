"""Benchmark: how many Spark jobs an audit runs, against its budget of 20 (the count does
not grow with the input: one job per cut point, one per broadcast and, per drill-down that
reads files again, two more: the read, then its batches stored).

    .venv/bin/python benchmarks/jobs.py [--workdir DIR] [--budget 20]

Audits the merged simulated cases of ``tests/test_simulator_precision.py`` as a large
input (the scan keeps summaries only, the drill-downs read the dump files again), in a
fresh session, and counts the jobs of the load and the audit (output tables included).
Prints one JSON line; exits 1 when the count is outside [12, budget]. A job more than the
budget is a cut point, a broadcast or a listing job that crept in: each costs a cold
audit about a second.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.test_simulator_precision import merged_input  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--budget", type=int, default=20)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-jobs-"))
    root = work / "merged"
    root.mkdir(parents=True, exist_ok=True)
    merged_input(root)

    from auditor import audit, load_snapshot
    from auditor.policy import Limits, SizePolicy
    from auditor.spark import build_session

    spark = build_session("local[2]", quiet=True, conf={"spark.ui.enabled": "false"})
    group = "jobs"
    spark.sparkContext.setJobGroup(group, group)
    large = SizePolicy(limits=Limits(small_input_bytes=-1, local_frame_rows=-1))
    snap = load_snapshot(spark, str(root), policy=large)
    tables = audit(snap, "epoch", run_id="jobs")
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
    findings = tables["findings"].count()
    ok = 12 <= jobs <= args.budget
    print(json.dumps({"jobs": jobs, "budget": args.budget, "findings": findings, "within": ok}), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
