"""Determinism under memory pressure: audit one input N times and compare every table.

    .venv/bin/python benchmarks/determinism.py SNAPSHOT [--runs 30] [--driver-memory 768m]
        [--no-pressure]

Each run is a fresh `auditor audit` process with a small driver heap, while a second JVM
(a Spark job sorting random rows in a loop) competes for memory and CPU. Every output
table of every run is read back with `deltalake`, stripped of the columns that name the
run (run_id, audit_time, started_at, finished_at, counts' timings), sorted by all columns,
and compared row for row with the first run. Prints one JSON line: runs, rows per table,
and the number of differing rows (must be 0).
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

LABEL = "2026-01-01T00:00:00Z"  # every run audits the same snapshot label
RUN_COLUMNS = {"run_id", "audit_time", "started_at", "finished_at", "finding_id", "first_seen"}
TABLES = ("findings", "replica_status", "partition_status", "epoch_lineage", "parse_errors")

PRESSURE = """
import time
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local[2]").appName("pressure")
         .config("spark.driver.memory", "1g").config("spark.ui.enabled", "false").getOrCreate())
end = time.time() + {seconds}
while time.time() < end:
    spark.range(0, 3_000_000).select((F.rand(7) * 1e9).cast("long").alias("x"), F.sha2(F.col("id").cast("string"), 256)
        .alias("s")).orderBy("s").localCheckpoint(eager=True).count()
"""


def table_rows(out: Path, name: str) -> list[tuple[object, ...]]:
    """The rows of one output table, without run-naming columns, sorted."""
    from auditor.sinks.arrow_read import read_delta

    table = read_delta(str(out / name))
    keep = [c for c in table.column_names if c not in RUN_COLUMNS]
    rows = [tuple(r[c] for c in keep) for r in table.select(keep).to_pylist()]
    return sorted(rows, key=repr)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("snapshot")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--driver-memory", default="768m")
    parser.add_argument("--no-pressure", action="store_true")
    args = parser.parse_args()
    auditor = str(Path(sys.executable).with_name("auditor"))
    work = Path(tempfile.mkdtemp(prefix="auditor-determinism-"))
    pressure = None
    if not args.no_pressure:
        script = work / "pressure.py"
        script.write_text(PRESSURE.format(seconds=24 * 3600))
        pressure = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
    conf = work / "small-driver.toml"
    conf.write_text(f'[spark.conf]\n"spark.driver.memory" = "{args.driver_memory}"\n'
                    f'"spark.memory.fraction" = "0.2"\n')
    first: dict[str, list[tuple[object, ...]]] = {}
    differing = 0
    seconds = []
    try:
        for i in range(args.runs):
            out = work / f"out-{i}"
            t0 = time.perf_counter()
            done = subprocess.run([auditor, "audit", args.snapshot, "--out", str(out), "--fail-on", "never",
                                   "--cluster", "determinism", "--snapshot", LABEL, "--conf", str(conf)],
                                  capture_output=True, text=True)
            seconds.append(time.perf_counter() - t0)
            if done.returncode != 0:
                raise SystemExit(f"run {i} failed ({done.returncode}): {done.stderr[-2000:]}")
            for name in TABLES:
                rows = table_rows(out, name)
                if i == 0:
                    first[name] = rows
                else:
                    diff = len(set(rows) ^ set(first[name])) + abs(len(rows) - len(first[name]))
                    if diff:
                        print(f"run {i + 1}: {name} differs in {diff} rows", file=sys.stderr)
                    differing += diff
            if i > 0:
                shutil.rmtree(out, ignore_errors=True)
            print(f"run {i + 1}/{args.runs}: {seconds[-1]:.1f}s, differing rows so far {differing}",
                  file=sys.stderr, flush=True)
    finally:
        if pressure is not None:
            pressure.kill()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({
        "snapshot": args.snapshot, "runs": args.runs, "pressure": not args.no_pressure,
        "driver_memory": args.driver_memory, "rows": {n: len(r) for n, r in first.items()},
        "differing_rows": differing, "seconds_mean": round(sum(seconds) / len(seconds), 1),
    }))


if __name__ == "__main__":
    main()
