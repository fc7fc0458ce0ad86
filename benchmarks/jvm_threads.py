"""Where the CPU of in-process audits goes: the driver JVM's threads, Python, the machine.

    .venv/bin/python benchmarks/jvm_threads.py SNAPSHOT [--audits 4] [--json]

Audits SNAPSHOT ``--audits`` times in one process (one SparkSession, as the CLI builds it
for that input), each into a fresh OUT under a temporary folder, and prints per audit:

- ``wall_s``: the audit's wall time (``auditor.run.run_audit``);
- ``python_s``: this process's CPU (user + system) during the audit;
- ``jvm_s``: the driver JVM's CPU (``/proc/PID/stat``; in local mode the executors' tasks
  run in it too);
- ``threads``: that CPU by thread group, from ``/proc/PID/task/*/stat``, named as the
  kernel keeps a thread's name (its first 15 characters) with the digits removed: the JIT's
  compilers (``C2 CompilerThre``, ``C1 CompilerThre``) are ``C CompilerThre``, the py4j
  threads that build the DataFrames ``Thread-``, the tasks ``Executor task l``, the
  collector ``GC Thread#``;
  ``exited`` is the JVM's CPU of threads that ended during the audit (PySpark's
  ``serve-Arrow`` threads, where a small input's cut points are planned and run: a thread
  per collect), the difference between ``jvm_s`` and the living threads' sum;
- ``machine_busy_s`` of ``machine_s``: every core's busy and total time (``/proc/stat``):
  whether any core was idle.

The first audit of a process pays the JVM's warm-up (the JIT compiling Catalyst); the later
ones show what a warm audit costs. That is how docs/performance-log.md's "Where a warm
audit's CPU goes" (2026-11-29) was read. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> Counter[str]:
    """CPU seconds so far of each living thread group of process ``pid``."""
    out: Counter[str] = Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended while we read
            continue
        name = "".join(ch for ch in comm if not ch.isdigit()).strip() or comm
        out[name] += (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    return out


def process_cpu(pid: int) -> float:
    """CPU seconds so far of process ``pid``, every thread it ever had included."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def machine() -> tuple[float, float]:
    """(busy, total) seconds of every core so far."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / TICK, sum(values) / TICK  # idle, iowait


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("snapshot")
    parser.add_argument("--audits", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="one JSON line per audit")
    args = parser.parse_args()

    from auditor.config import Config
    from auditor.run import prepare, run_audit
    from auditor.spark import build_session

    spark = build_session(None, quiet=True, small_input=prepare(args.snapshot, Config()).policy.small_input)
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    work = Path(tempfile.mkdtemp(prefix="jvm-threads-"))
    try:
        for n in range(args.audits):
            out = work / f"out-{n}"
            threads0, jvm0, py0, (busy0, all0) = thread_cpu(pid), process_cpu(pid), own_cpu(), machine()
            start = time.monotonic()
            run_audit(spark, args.snapshot, str(out), Config(fail_on="never"))
            wall = time.monotonic() - start
            threads1, jvm1, py1, (busy1, all1) = thread_cpu(pid), process_cpu(pid), own_cpu(), machine()
            shutil.rmtree(out, ignore_errors=True)
            by_thread = {k: round(v - threads0.get(k, 0.0), 2) for k, v in threads1.items()
                         if v - threads0.get(k, 0.0) >= 0.01}
            jvm = jvm1 - jvm0
            by_thread["exited"] = round(max(0.0, jvm - sum(by_thread.values())), 2)
            row = {"audit": n + 1, "wall_s": round(wall, 2), "python_s": round(py1 - py0, 2),
                   "jvm_s": round(jvm, 2), "machine_busy_s": round(busy1 - busy0, 2),
                   "machine_s": round(all1 - all0, 2),
                   "threads": dict(sorted(by_thread.items(), key=lambda kv: -kv[1]))}
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                top = ", ".join(f"{k} {v:.2f}" for k, v in list(row["threads"].items())[:8])  # type: ignore[union-attr]
                print(f"audit {n + 1}: {row['wall_s']:.2f} s wall; Python {row['python_s']:.2f} s, JVM "
                      f"{row['jvm_s']:.2f} s of CPU ({top}); machine {row['machine_busy_s']:.2f} of "
                      f"{row['machine_s']:.2f} core-s busy", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
