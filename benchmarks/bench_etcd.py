"""Benchmark: ``auditor audit --format etcd`` on generated etcd WAL files, against a bare
Spark scan of the same files and against decoding them in plain Python. One JSON line per size.

    .venv/bin/python benchmarks/bench_etcd.py [--sizes 100k,1M] [--workdir DIR] [--keep]

Each size is the number of entries per member of a 3-member cluster, written with the
faithful writer of the tests (``tests/etcd_wal_writer.py``): 100-byte values, a hard state
every 100 entries, a new term every 50,000 entries, and a new WAL file every 250,000
entries (each file preallocated to 64 MB as etcd does, so the input's size on disk is
mostly zeros). Every measurement of one line runs on the same files, one after the other:

- ``spark_scan_s``: a fresh Spark process reading every WAL file with the binary file
  source and summing their lengths (the floor of getting the bytes into Spark);
- ``python_s``: ``decode_wal`` over every file in this process, single-threaded, plus etcd's
  tail-overwrite rule in a dict (what a plain script would do);
- ``audit_s``: ``auditor audit ROOT --format etcd`` as a user runs it, process start to
  tables written; ``audit_over_python`` and ``audit_over_scan``.
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

from auditor.ingest.etcd_wal import decode_wal  # noqa: E402
from tests import etcd_wal_writer as w  # noqa: E402

PY = sys.executable
PER_FILE, PER_TERM, PREALLOCATE = 250_000, 50_000, 64_000_000


def parse_size(text: str) -> int:
    t = text.lower()
    factor = 1_000_000 if t.endswith("m") else 1_000 if t.endswith("k") else 1
    return int(float(t.rstrip("mk")) * factor)


def write_cluster(root: Path, entries: int) -> int:
    """Three members holding the same ``entries`` entries; returns the files written."""
    files = []
    records: list[tuple[int, bytes]] = [w.metadata(), w.snapshot(0, 0)]
    for i in range(1, entries + 1):
        term = 2 + (i - 1) // PER_TERM
        records.append(w.entry(term, i, b"v" * 100))
        if i % 100 == 0:
            records.append(w.state(term, 1, i - 1))
        if i % PER_FILE == 0 or i == entries:
            files.append(records)
            records = []
    for member in (1, 2, 3):
        w.write_member(root / f"member={member}", files, preallocate=PREALLOCATE)
    return 3 * len(files)


def spark_scan(root: Path) -> float:
    code = (
        "import sys; from pyspark.sql import SparkSession, functions as F\n"
        "s = SparkSession.builder.master('local[2]').config('spark.ui.enabled', 'false').getOrCreate()\n"
        "s.read.format('binaryFile').option('recursiveFileLookup', 'true').option('pathGlobFilter', '*.wal')"
        ".load(sys.argv[1]).select(F.sum(F.length('content'))).collect()\n"
    )
    t = time.monotonic()
    subprocess.run([PY, "-c", code, str(root)], check=True, capture_output=True)
    return time.monotonic() - t


def python_decode(root: Path) -> tuple[float, int]:
    t = time.monotonic()
    last = 0
    for member in sorted(root.glob("member=*")):
        log: dict[int, int] = {}  # index -> term
        last = 0
        for path in sorted(member.rglob("*.wal")):
            for r in decode_wal(path.read_bytes()):
                if r.get("record_type") == "entry":
                    for i in range(r["index"], last + 1):  # a later entry replaces the tail
                        log.pop(i, None)
                    log[r["index"]], last = r["term"], r["index"]
    return time.monotonic() - t, last


def audit(root: Path, out: Path) -> float:
    t = time.monotonic()
    subprocess.run([str(Path(PY).with_name("auditor")), "audit", str(root), "--format", "etcd", "--out", str(out),
                    "--fail-on", "never"], check=True, capture_output=True)
    return time.monotonic() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100k,1M")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    base = Path(args.workdir or tempfile.mkdtemp(prefix="bench-etcd-"))
    for size in args.sizes.split(","):
        entries = parse_size(size)
        root = base / f"etcd-{size}"
        shutil.rmtree(root, ignore_errors=True)
        t = time.monotonic()
        n_files = write_cluster(root, entries)
        written = time.monotonic() - t
        scan = spark_scan(root)
        py_s, last = python_decode(root)
        assert last == entries, (last, entries)
        audit_s = audit(root, base / f"out-{size}")
        print(json.dumps({
            "entries_per_member": entries, "members": 3, "wal_files": n_files, "write_s": round(written, 1),
            "spark_scan_s": round(scan, 1), "python_s": round(py_s, 1), "audit_s": round(audit_s, 1),
            "audit_over_python": round(audit_s / py_s, 2), "audit_over_scan": round(audit_s / scan, 2),
        }), flush=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(base / f"out-{size}", ignore_errors=True)


if __name__ == "__main__":
    main()
