"""How ``auditor simulate`` scales: seconds, batch lines per second and peak memory for
snapshots of growing size, each written by a fresh process (so peak RSS is its own).

    .venv/bin/python benchmarks/bench_simulate.py --sizes 100000,1000000 [--partitions 1000]

Batches per partition are chosen so the snapshot holds about SIZE batch lines over 3
replicas. Prints one Markdown row per size.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile

CHILD = """
import json, resource, sys, time
from auditor.simulator import simulate
root, partitions, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = time.monotonic()
s = simulate(root, brokers=3, topics=1, partitions=partitions, batches=batches, faults="all", seed=5)
print(json.dumps({"seconds": time.monotonic() - t, "batches": s.batches, "bytes": s.bytes, "files": s.files,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000", help="batch lines per snapshot, comma-separated")
    ap.add_argument("--partitions", type=int, default=1000)
    args = ap.parse_args()
    print("| batch lines | partitions | seconds | batch lines/s | MB written | files | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for size in (int(x) for x in args.sizes.split(",")):
        per_partition = max(1, size // (3 * args.partitions))
        root = tempfile.mkdtemp(prefix="bench-sim-")
        try:
            out = subprocess.run([sys.executable, "-c", CHILD, f"{root}/snap", str(args.partitions), str(per_partition)],
                                 check=True, capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(f"| {r['batches']:,} | {args.partitions:,} | {r['seconds']:.1f} | {r['batches'] / r['seconds']:,.0f} | "
                  f"{r['bytes'] / 1e6:,.0f} | {r['files']:,} | {r['peak_rss_mb']:.0f} |", flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
