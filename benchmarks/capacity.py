"""Capacity model: where an audit's time goes, by phase, at 1, 2 (and more) cores' worth of
executors, for an input heavy in batch lines and one heavy in partitions. One JSON line per
(size, cores); docs/capacity.md turns them into a model.

    .venv/bin/python benchmarks/capacity.py [--sizes 1M,10kp] [--cores 1,2] [--workdir DIR] [--keep]

Sizes as in ``benchmarks/bench_audit.py``: ``1M`` is about 1M batch lines (1,000 partitions
x 333 batches x 3 replicas), ``10kp`` is 10,000 partitions x 3 replicas x 3 batches; one
partition in 20 diverged by an unclean election. Each (size, cores) is one audit in a fresh
process (``--master local[N]``: N task slots; driver and executors share one JVM) with
Spark's event log kept. From the event log, the wall time of the Spark jobs of each phase:

- ``parse_s``: the scan (every dump line read, classified and aggregated where it is read)
  and the split of its stored rows into the snapshot's tables;
- ``summaries_s``: the work on summaries and replica-sized tables (the engine's cut points);
- ``drill_s``: the drill-downs (the batches of differing windows and irregular replicas,
  re-read from only the files that hold them);
- ``output_s``: the job that computes every output table;
- ``driver_s``: everything else, on the driver alone: JVM start, listing the input, building
  and planning queries between jobs, the Delta writes (``deltalake``, in the driver).

Each phase's seconds are the wall time its jobs cover (a query's broadcasts are jobs of
their own that run at the same time); ``<phase>_task_s`` is the time its tasks ran, summed
over tasks: the work that more executor cores share.

Also ``audit_s`` (process start to tables written), ``jobs``, ``tasks``, ``jvm_peak_mb``
(the JVM's peak resident set) and the input's ``batch_lines``, ``files`` and ``partitions``.
Only the task-parallel phases can gain from more cores; ``driver_s`` cannot.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_audit import dump_files, parse_size  # noqa: E402

PY = sys.executable
PHASES = ("parse_s", "summaries_s", "drill_s", "output_s")

AUDIT = """
import json, sys, time
t0 = time.perf_counter()
from auditor.config import Config
from auditor.run import prepare, run_audit
from auditor.spark import build_session
snapshot, out, cores, events = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
spark = build_session(f"local[{cores}]", quiet=True, small_input=prepare(snapshot, Config()).policy.small_input,
                      conf={"spark.eventLog.enabled": "true", "spark.eventLog.dir": events,
                            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"})
result = run_audit(spark, snapshot, out, Config(cluster="capacity", fail_on="never"))
seconds = time.perf_counter() - t0
jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
status = open(f"/proc/{jvm_pid}/status").read()
peak_kb = int(next(l.split()[1] for l in status.splitlines() if l.startswith("VmHWM:")))
print(json.dumps({"audit_s": seconds, "jvm_peak_mb": peak_kb // 1024, "counts": result.counts}))
"""


def phase(description: str) -> str:
    """The phase of a Spark job, from the description the audit gives each job."""
    label = description.split(":", 1)[0]
    if "drill" in label or label.startswith("all-batches"):
        return "drill_s"
    if label in ("scan", "snapshot", "summaries") or label.startswith(("store", "etcd")):
        return "parse_s"
    if label.startswith("engine"):
        return "summaries_s"
    return "output_s"


def union_seconds(intervals: list[tuple[int, int]]) -> float:
    """Seconds covered by at least one of the (start, end) millisecond intervals."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total / 1000


def job_phases(event_log: Path) -> dict[str, float]:
    """Per phase, from an event log: the wall seconds its Spark jobs cover (jobs of one
    phase can overlap: a query's broadcasts run as jobs of their own at the same time)
    and the seconds its tasks ran (``*_task_s``: the work more cores share). Also the
    seconds any job ran (``in_jobs_s``), the number of jobs and tasks."""
    starts: dict[int, tuple[int, str]] = {}
    stage_phase: dict[int, str] = {}
    spans: dict[str, list[tuple[int, int]]] = {p: [] for p in PHASES}
    task_ms = dict.fromkeys(PHASES, 0)
    jobs = tasks = 0
    for line in event_log.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        kind = event.get("Event", "")
        if kind == "SparkListenerJobStart":
            description = (event.get("Properties") or {}).get("spark.job.description") or ""
            starts[event["Job ID"]] = (event["Submission Time"], phase(description))
            for stage in event.get("Stage IDs", []):
                stage_phase[stage] = phase(description)
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in starts:
            submitted, name = starts.pop(event["Job ID"])
            spans[name].append((submitted, event["Completion Time"]))
            jobs += 1
        elif kind == "SparkListenerTaskEnd":
            tasks += 1
            name = stage_phase.get(event["Stage ID"], "output_s")
            task_ms[name] += (event.get("Task Metrics") or {}).get("Executor Run Time", 0)
    result: dict[str, float] = {p: round(union_seconds(spans[p]), 2) for p in PHASES}
    result.update({p.replace("_s", "_task_s"): round(task_ms[p] / 1000, 2) for p in PHASES})
    result["in_jobs_s"] = round(union_seconds([i for p in PHASES for i in spans[p]]), 2)
    result.update(jobs=jobs, tasks=tasks)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1M,10kp")
    parser.add_argument("--cores", default="1,2")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the generated snapshots")
    args = parser.parse_args()
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="auditor-capacity-"))
    work.mkdir(parents=True, exist_ok=True)
    auditor = str(Path(PY).with_name("auditor"))
    print(json.dumps({"machine_cores": os.cpu_count()}), flush=True)
    for size in args.sizes.split(","):
        label, sim_args = parse_size(size)
        root = work / f"snap-{label}"
        if not (root / "topics-describe.txt").exists():
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run([auditor, "simulate", str(root), "--seed", "11", "--kafka-version", "3.3",
                            "--no-shapes", *sim_args], check=True, capture_output=True)
        files = dump_files(root)
        for cores in (int(c) for c in args.cores.split(",")):
            out, events = work / f"out-{label}-{cores}", work / f"events-{label}-{cores}"
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(events, ignore_errors=True)
            events.mkdir()
            t0 = time.perf_counter()
            done = subprocess.run([PY, "-c", AUDIT, str(root), str(out), str(cores), str(events)],
                                  capture_output=True, text=True, cwd=str(REPO))
            wall = time.perf_counter() - t0
            if done.returncode != 0:
                raise SystemExit(f"audit of {label} at {cores} cores failed:\n{done.stderr[-3000:]}")
            info = json.loads(done.stdout.strip().splitlines()[-1])
            logs = [p for p in events.iterdir() if p.is_file()]
            phases = job_phases(logs[0])
            in_jobs = phases.pop("in_jobs_s")
            counts = info["counts"]
            print(json.dumps({
                "size": label, "cores": cores, "audit_s": round(wall, 2),
                "driver_s": round(wall - in_jobs, 2), **phases, "jvm_peak_mb": info["jvm_peak_mb"],
                "batch_lines": counts.get("batches"), "files": len(files), "partitions": counts.get("partitions"),
            }), flush=True)
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(events, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
