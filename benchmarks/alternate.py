"""Benchmark: the same CLI audits from two or more source trees, in alternating runs.

    .venv/bin/python benchmarks/alternate.py --tree before=/tmp/before --tree after=. \
        --rounds 5 SNAPSHOT [SNAPSHOT ...]

Each round runs ``auditor audit SNAPSHOT --out <tmp> --fail-on never`` once per tree and
snapshot, the trees in turn (A B A B ...: drift of the machine over the run falls on both),
each in a fresh process started with that tree first on ``sys.path`` and this
interpreter's packages, and first on ``PYTHONPATH``: Spark's Python workers (where segment
files and etcd WALs are decoded) import that tree's code too, not the installed package's
(until 2026-12-02 they imported the installed one's, so a change to the decoders measured
the same code twice). Prints one JSON line per snapshot: every run's seconds per tree,
their median, and each tree's median over the first tree's; with ``perf`` on the PATH also
the CPU seconds of the run's whole process tree, the JVM included (``perf stat -e
task-clock``), which varies less than wall time on a machine shared with others. Extra ``auditor audit``
options follow ``--``; environment settings for one tree go in ``--env TREE:NAME=VALUE``
(for example ``--env after:AUDITOR_LOCAL_JAR=0`` to measure a tree without the jar).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RUN = "import sys; sys.path.insert(0, sys.argv.pop(1)); from auditor.cli import main; main()"


def audit_seconds(tree: str, snapshot: str, extra: list[str], env: dict[str, str]) -> tuple[float, float | None]:
    """One CLI audit of ``snapshot`` by the code of ``tree``: (seconds from process start to
    exit, CPU seconds of its process tree or None without ``perf``)."""
    out = tempfile.mkdtemp(prefix="alternate-out-")
    counted = os.path.join(out, "perf.txt")
    perf = ["perf", "stat", "-x", ",", "-e", "task-clock", "-o", counted] if shutil.which("perf") else []
    try:
        start = time.perf_counter()
        done = subprocess.run([*perf, sys.executable, "-c", RUN, os.path.abspath(tree), "audit", snapshot,
                               "--out", os.path.join(out, "tables"), "--fail-on", "never", *extra],
                              capture_output=True, text=True, env={**os.environ, **_python_path(tree), **env},
                              check=False)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{tree}: audit of {snapshot} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        cpu = None
        if perf:
            for line in open(counted).read().splitlines():
                fields = line.split(",")
                if len(fields) > 2 and fields[2] == "task-clock" and fields[0].replace(".", "").isdigit():
                    cpu = float(fields[0]) / 1000
        return seconds, cpu
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _python_path(tree: str) -> dict[str, str]:
    """``PYTHONPATH`` with ``tree`` first, for the run's Spark Python workers."""
    theirs = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join([os.path.abspath(tree), *([theirs] if theirs else [])])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("snapshots", nargs="+")
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a source tree (2 or more)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--env", action="append", default=[], help="TREE:NAME=VALUE for that tree's runs")
    # (what follows ``--`` is the audit's: argparse would take it as more snapshots)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, unknown = parser.parse_known_args(argv[:cut])
    extra = [*unknown, *argv[cut + 1:]]
    trees = dict(t.split("=", 1) for t in args.tree)
    envs: dict[str, dict[str, str]] = {name: {} for name in trees}
    for setting in args.env:
        name, assignment = setting.split(":", 1)
        key, value = assignment.split("=", 1)
        envs[name][key] = value
    for snapshot in args.snapshots:
        times: dict[str, list[float]] = {name: [] for name in trees}
        cpus: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, path in trees.items():
                seconds, cpu = audit_seconds(path, snapshot, extra, envs[name])
                times[name].append(round(seconds, 2))
                if cpu is not None:
                    cpus[name].append(round(cpu, 2))
        first = next(iter(trees))
        row: dict[str, object] = {"snapshot": snapshot, "runs": times}
        for label, values in (("s", times), ("cpu_s", cpus)):
            if all(values.values()):
                medians = {name: statistics.median(v) for name, v in values.items()}
                row[f"median_{label}"] = medians
                row[f"over_first_{label}"] = {n: round(m / medians[first], 3) for n, m in medians.items()}
        if all(cpus.values()):
            row["cpu_runs"] = cpus
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
