"""Benchmark: incremental audits (``audit --incremental``) against full audits of the same
snapshots. One JSON line per size.

    .venv/bin/python benchmarks/bench_incremental.py [--sizes 1M] [--new 0.01] [--workdir DIR] [--keep]

Each size is a number of batch lines in an ``auditor simulate`` cluster (3 replicas per
partition, 333 batches per replica, segments of 50 batches, one partition in 20 diverged by
an unclean election, 3.3 dump style). The next snapshot continues it (``simulate
--continue-from``) with enough steps that about ``--new`` of its batch lines are new: every
partition gets them, so every active segment changes, as in a cluster where every partition
takes writes. Rolled segments keep their bytes and times. Measured, one after the other:

- ``tiny_s``: a full audit of a one-partition cluster: the fixed cost of any audit (Spark
  start, jobs, tables);
- ``seed_s``: the first incremental audit, of the first snapshot, into an empty OUT (it
  parses everything and fills the store);
- ``full_s``: a full audit of the next snapshot, into an OUT that holds a full audit of the
  first one (the same history as the incremental OUT: the over-time checks compare with it);
- ``incremental_s``: the incremental audit of the next snapshot into the seeded OUT;
  ``files_parsed``/``files`` and ``lines_parsed_share``: what it re-parsed;
- ``unchanged_s``: the same next snapshot audited incrementally again: nothing changed, so
  it takes the incremental run's tables, that run's over-time findings left out
  (``unchanged_took_previous``; :mod:`auditor.sinks.unchanged`);
- ``incremental_over_full`` (issue 13's bar: at most 0.25) and ``unchanged_over_tiny``.

Every audit is a fresh process, as a scheduler runs it, timed from process start to tables
written. The incremental and the full audit of the next snapshot must report the same
findings (run columns aside).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from auditor.sinks.unchanged import OVER_TIME  # noqa: E402
from benchmarks.bench_audit import BATCHES, parse_size  # noqa: E402

PY = sys.executable
SEGMENT = 50

AUDIT = """
import json, sys, time
t0 = time.perf_counter()
from auditor.config import Config
from auditor.run import prepare, run_audit
from auditor.spark import build_session
snapshot, out, incremental = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
config = Config(cluster="bench", fail_on="never", incremental=incremental)
spark = build_session(None, quiet=True, small_input=prepare(snapshot, config).policy.small_input)
result = run_audit(spark, snapshot, out, config)
print(json.dumps({"seconds": time.perf_counter() - t0, "run_id": result.run_id}))
"""


def audit(snapshot: Path, out: Path, incremental: bool) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run([PY, "-c", AUDIT, str(snapshot), str(out), "1" if incremental else "0"],
                          capture_output=True, text=True, cwd=str(REPO), check=False)
    seconds = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        raise SystemExit(f"audit of {snapshot} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, json.loads(done.stdout.strip().splitlines()[-1])["run_id"]


def run_row(out: Path, run_id: str) -> dict[str, object]:
    from auditor.sinks.arrow_read import read_delta

    rows = read_delta(str(out / "runs")).to_pylist()
    row = next(r for r in rows if r["run_id"] == run_id)
    return json.loads(row["counts"]) if isinstance(row["counts"], str) else dict(row["counts"])


def findings(out: Path, run_id: str) -> list[tuple]:
    from auditor.sinks.arrow_read import read_delta

    table = read_delta(str(out / "findings"), filters=[("run_id", "=", run_id)])
    keys = ("check", "severity", "topic", "partition", "replica", "offset_start", "offset_end")
    return sorted(tuple(r[k] for k in keys) for r in table.to_pylist())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1M")
    parser.add_argument("--new", type=float, default=0.01, help="share of the next snapshot's batch lines that are new")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="auditor-bench-incr-"))
    auditor = str(Path(PY).with_name("auditor"))
    tiny = work / "tiny"
    if not (tiny / "topics-describe.txt").exists():
        subprocess.run([auditor, "simulate", str(tiny), "--topics", "1", "--partitions", "1", "--seed", "3", "--no-shapes"],
                       check=True, capture_output=True)
    for size in args.sizes.split(","):
        label, sim_args = parse_size(size)
        first, second = work / f"snap-{label}-1", work / f"snap-{label}-2"
        steps = max(1, round(BATCHES * args.new))
        if not (second / "topics-describe.txt").exists():
            for p in (first, second):
                shutil.rmtree(p, ignore_errors=True)
            subprocess.run([auditor, "simulate", str(first), "--seed", "3", "--segment-batches", str(SEGMENT),
                            *sim_args], check=True, capture_output=True)
            subprocess.run([auditor, "simulate", str(second), "--continue-from", str(first), "--steps", str(steps)],
                           check=True, capture_output=True)
        row: dict[str, object] = {"size": label, "steps": steps}
        outs = {name: work / f"out-{label}-{name}" for name in ("tiny", "full", "incremental")}
        for out in outs.values():
            shutil.rmtree(out, ignore_errors=True)
        row["tiny_s"], _ = audit(tiny, outs["tiny"], False)
        row["seed_s"], _ = audit(first, outs["incremental"], True)
        audit(first, outs["full"], False)
        row["full_s"], full_id = audit(second, outs["full"], False)
        row["incremental_s"], incr_id = audit(second, outs["incremental"], True)
        row["unchanged_s"], again_id = audit(second, outs["incremental"], True)
        full_counts, incr_counts = run_row(outs["full"], full_id), run_row(outs["incremental"], incr_id)
        row["files"] = incr_counts["files"]
        row["files_parsed"] = incr_counts["files_parsed"]
        again_counts = run_row(outs["incremental"], again_id)
        row["files_parsed_unchanged"] = again_counts["files_parsed"]
        # whether the unchanged run took the incremental run's tables (auditor.sinks.unchanged)
        row["unchanged_took_previous"] = again_counts.get("reused_run") == incr_id
        row["batch_lines"] = full_counts["lines_parsed"]
        assert findings(outs["full"], full_id) == findings(outs["incremental"], incr_id), "findings differ"
        # (nothing changed: no over-time finding, the rest as before; auditor.sinks.unchanged)
        assert findings(outs["incremental"], again_id) == [
            f for f in findings(outs["incremental"], incr_id) if f[0] not in OVER_TIME], "findings differ"
        for key in ("tiny_s", "seed_s", "full_s", "incremental_s", "unchanged_s"):
            row[key] = round(float(row[key]), 2)  # type: ignore[arg-type]
        row["incremental_over_full"] = round(float(row["incremental_s"]) / float(row["full_s"]), 3)  # type: ignore[arg-type]
        row["unchanged_over_tiny"] = round(float(row["unchanged_s"]) / float(row["tiny_s"]), 2)  # type: ignore[arg-type]
        print(json.dumps(row), flush=True)
        if not args.keep:
            for p in (first, second, *outs.values()):
                shutil.rmtree(p, ignore_errors=True)


if __name__ == "__main__":
    main()
