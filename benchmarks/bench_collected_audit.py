"""Benchmark: auditing collected node folders at scale (SPEC 3.4). One JSON line per size.

    .venv/bin/python benchmarks/bench_collected_audit.py [--partitions 100000] [--brokers 10]
        [--batches 8] [--driver-memory 2g] [--workdir DIR]

``auditor simulate --format collected`` writes ``--partitions`` partitions x 3 replicas
(kept under the work dir and reused); then, in fresh processes one after the other:

- ``floor_s``: a plain Spark job over the same collected tables (every batch row read,
  counted and its offsets' extremes taken per replica): what any audit of them pays;
- ``audit_s``: ``auditor audit`` as a user runs it, CLI start to exit, with
  ``spark.driver.memory`` = ``--driver-memory``; ``audit_over_floor``;
- ``listed_files``: the files the audit's discovery lists (a few per log dir, whatever the
  number of partitions), and ``findings_match``: the audit found every expected finding of
  the simulator's ground truth (``expected_findings.json``) with its check and replica.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FLOOR = r"""
import sys
from auditor.spark import build_session
from pyspark.sql import functions as F
spark = build_session(None, quiet=True, conf={"spark.driver.memory": sys.argv[2]})
rows = spark.read.parquet(*sys.argv[3:])
rows.groupBy("topic", "partition", "file").agg(F.count("*").alias("n"), F.min("base_offset"),
    F.max("last_offset")).write.format("noop").mode("overwrite").save()
spark.stop()
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=10)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="auditor-bench-collected-"))
    work.mkdir(parents=True, exist_ok=True)
    auditor = str(Path(sys.executable).with_name("auditor"))
    topics = 100
    snap = work / f"collected-{args.partitions}"
    if not snap.exists():
        subprocess.run([auditor, "simulate", str(snap), "--format", "collected", "--brokers", str(args.brokers),
                        "--topics", str(topics), "--partitions", str(max(1, args.partitions // topics)),
                        "--batches", str(args.batches), "--segment-batches", "500", "--seed", "5"],
                       check=True, capture_output=True)
    from auditor.ingest.discovery import discover

    found = discover(snap, __import__("datetime").datetime.now(__import__("datetime").timezone.utc))
    tables = [cd.batches for cd in found.collected]
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", FLOOR, "", args.driver_memory, *tables], check=True, capture_output=True)
    floor = time.perf_counter() - started
    conf = work / "driver.toml"
    conf.write_text(f'[spark.conf]\n"spark.driver.memory" = "{args.driver_memory}"\n')
    out = work / f"out-{args.partitions}"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    started = time.perf_counter()
    done = subprocess.run([auditor, "audit", str(snap), "--out", str(out), "--conf", str(conf), "--fail-on", "never"],
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    from deltalake import DeltaTable

    found_rows = DeltaTable(str(out / "findings")).to_pyarrow_table().to_pylist()
    got = {(f["check"], f["topic"], f["partition"], f["replica"]) for f in found_rows}
    expected = json.loads((snap / "expected_findings.json").read_text())["findings"]
    wanted = {(e["check"], e["topic"], e["partition"], e.get("replica")) for e in expected}
    missed = sorted(map(str, wanted - got))
    print(json.dumps({
        "partitions": args.partitions, "replicas": 3 * args.partitions, "brokers": args.brokers,
        "driver_memory": args.driver_memory, "listed_files": len(found.files) + 3 * len(found.collected),
        "floor_s": round(floor, 1), "audit_s": round(seconds, 1), "audit_over_floor": round(seconds / floor, 2),
        "findings_match": not missed, "missed": missed[:10],
    }))


if __name__ == "__main__":
    main()
