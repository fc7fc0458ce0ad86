"""Benchmark: the full audit against a raw Spark scan of the same files and against a plain
single-threaded Python parse + the reference model, at several input sizes.

    .venv/bin/python benchmarks/bench_audit.py [--sizes 20000,80000,320000] [--workdir DIR]

Each size is the number of batch lines in a generated snapshot (3 replicas per partition,
~100 batches per replica, one follower in ten diverged after an unclean election).
Prints one table: seconds per stage, the ratios audit/scan and audit/python, and the
number of Spark jobs the audit ran (parse, engine and the one job that computes every
output table).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tests/reference.py

from auditor.simulator.kafka_text import Batch, checkpoint_text, content_crc, dump_segment  # noqa: E402
from tests import reference as ref  # noqa: E402

BATCHES_PER_REPLICA = 100
LINE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) .*partitionLeaderEpoch: (-?\d+) .* crc: (\d+) ")


def generate(root: Path, batch_lines: int) -> int:
    """Write a snapshot with about ``batch_lines`` batch lines; return the partition count."""
    partitions = max(1, batch_lines // (3 * BATCHES_PER_REPLICA))
    hwms: dict[int, list[str]] = {1: [], 2: [], 3: []}
    for p in range(partitions):
        common = [(i * 10, i * 10 + 9, 1 + i // 40) for i in range(BATCHES_PER_REPLICA - 5)]
        tail = [(i * 10, i * 10 + 9, 4) for i in range(BATCHES_PER_REPLICA - 5, BATCHES_PER_REPLICA)]
        forked = p % 10 == 0
        for broker in (1, 2, 3):
            spans = common + ([(b, l, 5) for b, l, _ in tail] if forked and broker == 3 else tail)
            folder = root / f"broker={broker}" / "data" / f"bench-{p}"
            folder.mkdir(parents=True)
            batches = [Batch(b, l, e, content_crc(p, b, l, e)) for b, l, e in spans]
            half = len(batches) // 2
            for seg in (batches[:half], batches[half:]):
                (folder / f"{seg[0].base_offset:020d}.log.txt").write_text(
                    dump_segment("/data", "bench", p, seg[0].base_offset, seg))
            cache = ref.rebuild_cache(spans) + ([(6, spans[-1][1] + 1)] if broker == 1 else [])
            (folder / "leader-epoch-checkpoint").write_text(checkpoint_text(cache))
            hwms[broker].append(f"bench {p} {(BATCHES_PER_REPLICA - 5) * 10}")
    for broker, lines in hwms.items():
        (root / f"broker={broker}" / "data" / "replication-offset-checkpoint").write_text(
            "\n".join(["0", str(len(lines)), *lines]) + "\n")
    return partitions


def python_baseline(root: Path) -> int:
    """Parse every dump with a regex and run the reference model per follower."""
    logs: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            if not name.endswith(".txt"):
                continue
            broker = int(Path(dirpath).parts[-3].split("=")[1])
            part = Path(dirpath).name
            with open(os.path.join(dirpath, name), encoding="utf-8") as fh:
                for line in fh:
                    m = LINE.match(line)
                    if m:
                        logs.setdefault((part, broker), []).append(tuple(int(x) for x in m.groups()))  # type: ignore[arg-type]
    diverged = 0
    for (part, broker), batches in logs.items():
        if broker == 1:
            continue
        leader = sorted(logs[(part, 1)])
        mine = sorted(batches)
        spans = [(b, l, e) for b, l, e, _ in mine]
        leo_l = leader[-1][1] + 1
        l_cache = ref.rebuild_cache([(b, l, e) for b, l, e, _ in leader]) + [(6, leo_l)]
        tr = ref.truncate_epoch(l_cache, leo_l, ref.rebuild_cache(spans), mine[-1][1] + 1, None, spans)
        d = ref.divergence_offset(mine, leader, 0)
        diverged += d is not None or tr.offset is not None
    return diverged


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="20000,80000,320000")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    from pyspark.sql import functions as F

    from auditor import audit, load_snapshot
    from auditor.ingest.discovery import discover
    from auditor.materialise import materialise, new_work_dir
    from auditor.spark import build_session

    spark = build_session(None, quiet=True)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="auditor-bench-"))
    print(f"{'batch lines':>12} {'partitions':>10} {'scan s':>8} {'audit s':>8} {'python s':>9} "
          f"{'audit/scan':>10} {'audit/python':>12} {'diverged':>8} {'jobs':>5}")
    for size in [int(x) for x in args.sizes.split(",")]:
        root = work / f"snap-{size}"
        shutil.rmtree(root, ignore_errors=True)
        partitions = generate(root, size)
        from datetime import datetime, timezone

        files = [f.path for f in discover(root, datetime.now(timezone.utc)).files]
        t0 = time.perf_counter()
        spark.read.text(files).filter(F.col("value").startswith("baseOffset")).count()
        scan = time.perf_counter() - t0
        t0 = time.perf_counter()
        group = f"bench-{size}"
        spark.sparkContext.setJobGroup(group, group)
        tables = audit(load_snapshot(spark, str(root)))
        stored = materialise(tables, new_work_dir(), "output")
        jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
        diverged = stored["replica_status"].filter(F.col("divergence_offset").isNotNull()).count()
        full = time.perf_counter() - t0
        t0 = time.perf_counter()
        py_diverged = python_baseline(root)
        py = time.perf_counter() - t0
        assert py_diverged == diverged, (py_diverged, diverged)
        print(f"{size:>12} {partitions:>10} {scan:>8.1f} {full:>8.1f} {py:>9.1f} {full / scan:>10.1f} "
              f"{full / py:>12.1f} {diverged:>8} {jobs:>5}", flush=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
