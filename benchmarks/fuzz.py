"""Fuzzing: damage a simulated snapshot in thousands of ways and hold every audit to what
SPEC 8 and the README promise (``tests/mutations.py``).

    .venv/bin/python benchmarks/fuzz.py [--mutations 10000] [--per-round 1000]
        [--partitions 1000] [--seed 1] [--workdir DIR] [--round-timeout 1200]

One base snapshot (3 brokers, ``--partitions`` partitions, a few faults) is audited once
undamaged. Each round copies it, damages ``--per-round`` distinct files (each with one
mutation kind, drawn at random among those that apply to the file), audits the copy with
the Python API in this process's Spark session, and checks: no crash, no hang (the round's
jobs are cancelled after ``--round-timeout`` seconds), per file lines read (as Spark splits
them) = parsed + skipped + quarantined, every quarantined line a ``parse_errors`` row with
file, line and reason, every unreadable file a ``parse_errors`` row, and every partition
whose files were not damaged with exactly its undamaged findings. Prints one JSON line per
round and a final summary with the count per mutation kind; exits 1 when a promise broke.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import mutations as m  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutations", type=int, default=10_000)
    parser.add_argument("--per-round", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=1_000, help="partitions of the base snapshot")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--round-timeout", type=float, default=1200.0)
    parser.add_argument("--long-line-bytes", type=int, default=m.LONG_LINE_BYTES)
    args = parser.parse_args()

    from auditor.simulator import simulate
    from auditor.spark import build_session

    work = Path(args.workdir or tempfile.mkdtemp(prefix="auditor-fuzz-"))
    base = work / "base"
    if base.exists():
        shutil.rmtree(base)
    topics = max(1, args.partitions // 100)
    simulate(base, brokers=3, topics=topics, partitions=max(1, args.partitions // topics), batches=6,
             faults=f"unclean-election={max(1, args.partitions // 50)},lossy-shutdown={max(1, args.partitions // 100)}",
             seed=args.seed)
    spark = build_session(quiet=True)
    spark.sparkContext.setLogLevel("ERROR")
    started = time.monotonic()
    _, _, findings = m.audit_damaged(spark, base)
    baseline = m.finding_keys(findings)
    targets = m.targets(base)
    partitions = sorted({t.partition for t in targets if t.partition})
    print(json.dumps({"base": str(base), "files": len(targets), "partitions": len(partitions),
                      "baseline_findings": sum(map(len, baseline.values())),
                      "baseline_s": round(time.monotonic() - started, 1)}), flush=True)

    rng = random.Random(args.seed)
    per_kind: Counter[str] = Counter()
    crashes = hangs = broken_total = 0
    done = 0
    round_no = 0
    while done < args.mutations:
        round_no += 1
        # Files every partition depends on (the broker checkpoints, topics-describe.txt) are
        # damaged in every fifth round only: in the other rounds, the partitions whose files
        # are intact must keep exactly their findings.
        pool = targets if round_no % 5 == 0 else [t for t in targets if t.partition is not None]
        n = min(args.per_round, args.mutations - done, len(pool))
        copy = m.copy_snapshot(base, work / "damaged")
        applied = m.Applied()
        long_lines = 0
        for target in rng.sample(pool, n):
            kinds = [k for k in m.KINDS if m.applicable(k, target)]
            if target.kind == "describe":
                kinds = [k for k in kinds if k not in m.TREE_MUTATIONS]
            kind = rng.choice(kinds)
            if kind == "long-line":
                if long_lines >= 3:  # 30 MB of one-line payloads per round is plenty
                    kind = "bit-flip"
                long_lines += 1
            m.mutate(copy, target, kind, rng, applied, partitions, long_line_bytes=args.long_line_bytes)
        t0 = time.monotonic()
        timer = threading.Timer(args.round_timeout, spark.sparkContext.cancelAllJobs)
        timer.start()
        status, broken = "ok", []
        try:
            broken = m.check_invariants(copy, applied, *m.audit_damaged(spark, copy), baseline)
        except Exception as exc:  # a crash (or the jobs cancelled by the timer: a hang)
            if time.monotonic() - t0 >= args.round_timeout:
                status, hangs = "hang", hangs + 1
            else:
                status, crashes = "crash", crashes + 1
            broken = [f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"]
        finally:
            timer.cancel()
            m.restore_permissions(copy)
        for kind, _ in applied.mutations:
            per_kind[kind] += 1
        done += len(applied.mutations)
        broken_total += len(broken) if status == "ok" else 0
        print(json.dumps({"round": round_no, "mutations": len(applied.mutations), "status": status,
                          "seconds": round(time.monotonic() - t0, 1), "all_partitions_touched": applied.all_touched,
                          "touched_partitions": len(applied.touched), "broken": broken[:10]}), flush=True)
    summary = {"mutations": done, "rounds": round_no, "crashes": crashes, "hangs": hangs,
               "broken_promises": broken_total, "per_kind": dict(sorted(per_kind.items())),
               "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(summary), flush=True)
    return 1 if crashes or hangs or broken_total else 0


if __name__ == "__main__":
    sys.exit(main())
