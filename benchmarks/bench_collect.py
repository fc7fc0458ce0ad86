"""Benchmark: ``auditor collect`` (SPEC 3.4) on simulated brokers' log dirs. One JSON line.

    .venv/bin/python benchmarks/bench_collect.py [--record-bytes 5500] [--batches 400]
        [--partitions 6] [--small-batches 1000000] [--workdir DIR]

Two clusters are written with ``auditor simulate --format segments`` (and the first also as
dumps, same seed): one of large batches (``--record-bytes``: about 3 x N bytes a batch, 16 KiB
at the default) and one of about ``--small-batches`` small batches. Each broker is collected
in this process, its reads counted from ``/proc/self/io`` (``rchar``: bytes the process
read, whatever the page cache holds) around the collection itself:

- ``read_bytes_per_batch``: rchar less the small files' and the checkpoint files' bytes,
  over the batches (SPEC 3.4: at most 128 without --verify-crc; control batches are read
  whole);
- ``batches_per_s``: batches walked and written per second of one core, from the page cache
  (the small-batch cluster, collected twice, the second run timed; SPEC: at least 250,000);
  ``large_batches_per_s`` the same on the large batches;
- ``output_over_dumps``: the bytes ``collect`` wrote over the bytes of the same segments'
  dumps (``kafka-dump-log.sh`` text; SPEC: at most 0.1);
- ``previous_*``: a second collection with ``--previous``: the segments it read again (the
  newest of each partition only), those it reused, its rchar, and whether its rows equal
  the first's.
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
sys.path.insert(0, str(REPO))

from auditor import collect as c  # noqa: E402


def rchar() -> int:
    with open("/proc/self/io", encoding="ascii") as io:
        return int(next(line for line in io if line.startswith("rchar:")).split()[1])


def simulate(auditor: str, root: Path, fmt: str, *args: str) -> None:
    if not root.exists():
        subprocess.run([auditor, "simulate", str(root), "--format", fmt, "--kraft-controllers", "0", "--seed", "5",
                        *args], check=True, capture_output=True)


def collect_all(snap: Path, out: Path, *extra: str) -> dict[str, float]:
    """Every broker of ``snap`` collected into ``out`` here: rchar, seconds, counts."""
    shutil.rmtree(out, ignore_errors=True)
    read = seconds = 0.0
    totals: dict[str, float] = {}
    small = 0
    for node in sorted(p for p in snap.iterdir() if p.name.startswith("broker=")):
        dirs = sorted(p for p in node.iterdir() if p.is_dir())
        small += sum(p.stat().st_size for d in dirs for p in d.rglob("*")
                     if p.is_file() and not p.name.endswith(".log") and p.name in (
                         c.LEADER_EPOCH, c.QUORUM_STATE, c.HWM, *c.LATE_LOG_DIR_FILES))
        before, started = rchar(), time.perf_counter()
        code = c.main(["--broker-id", node.name.split("=")[1], "--log-dirs", ",".join(map(str, dirs)),
                       "--out", str(out), *extra])
        seconds += time.perf_counter() - started
        read += rchar() - before
        assert code == 0
        manifest = json.loads((out / node.name / c.MANIFEST).read_text())
        for key, value in manifest["counts"].items():
            totals[key] = totals.get(key, 0) + value
    return {"rchar": read, "seconds": seconds, "small_file_bytes": small, **totals}


def tables(out: Path) -> list:
    rows = []
    for folder in sorted(out.glob("broker=*/logdir=*")):
        for name, columns in ((c.BATCHES, c.BATCH_COLUMNS), (c.SEGMENTS, c.SEGMENT_COLUMNS)):
            path = c.table_path(str(folder), name)
            assert path is not None
            found = [{k: v for k, v in r.items() if k not in ("reused", "bytes_read")}
                     for r in c.read_table(path, columns)]
            rows.append((folder.name, name, sorted(json.dumps(r, sort_keys=True) for r in found)))
    return rows


def size_of(root: Path, suffix: str = "") -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and p.name.endswith(suffix))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record-bytes", type=int, default=5500)
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--small-batches", type=int, default=1_000_000)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="auditor-bench-collect-"))
    work.mkdir(parents=True, exist_ok=True)
    auditor = str(Path(sys.executable).with_name("auditor"))
    large = ["--record-bytes", str(args.record_bytes), "--batches", str(args.batches), "--partitions",
             str(args.partitions), "--segment-batches", "500"]
    simulate(auditor, work / "large", "segments", *large)
    simulate(auditor, work / "large-dumps", "dumps", *large)
    # (small batches: 3 brokers x 2 topics x P partitions x B batches on the leader)
    per_partition = 2000
    partitions = max(1, args.small_batches // (2 * per_partition))
    simulate(auditor, work / "small", "segments", "--partitions", str(partitions), "--batches", str(per_partition),
             "--segment-batches", "500")

    collect_all(work / "large", work / "out-large")  # (the page cache warmed, pyarrow's codecs loaded)
    first = collect_all(work / "large", work / "out-large")
    batches = first["batches_read"]
    row: dict[str, object] = {
        "large_batches": batches,
        "large_segment_bytes": size_of(work / "large", ".log"),
        "read_bytes_per_batch": round((first["rchar"] - first["small_file_bytes"]) / batches, 1),
        "large_batches_per_s": round(batches / first["seconds"]),
        "output_bytes": size_of(work / "out-large"),
        "dump_bytes": size_of(work / "large-dumps", ".txt") - size_of(work / "large-dumps", "topics-describe.txt"),
    }
    row["output_over_dumps"] = round(int(row["output_bytes"]) / int(row["dump_bytes"]), 4)  # type: ignore[call-overload]
    again = collect_all(work / "large", work / "out-again", "--previous", str(work / "out-large"))
    row.update(previous_segments_read=again["segments_read"], previous_segments_reused=again["segments_reused"],
               previous_rchar=again["rchar"], newest_segments=sum(
                   1 for p in (work / "large").glob("broker=*/*/*-*") if p.is_dir()),
               previous_rows_equal=tables(work / "out-large") == tables(work / "out-again"))
    collect_all(work / "small", work / "out-small")  # (the page cache warmed)
    small = collect_all(work / "small", work / "out-small")
    row.update(small_batches=small["batches_read"], batches_per_s=round(small["batches_read"] / small["seconds"]),
               small_read_bytes_per_batch=round((small["rchar"] - small["small_file_bytes"])
                                                / small["batches_read"], 1))
    verified = collect_all(work / "large", work / "out-verified", "--verify-crc")
    row.update(verify_rchar_over_segment_bytes=round(
        (verified["rchar"] - verified["small_file_bytes"]) / int(row["large_segment_bytes"]), 4),  # type: ignore[call-overload]
        verify_batches_per_s=round(verified["batches_read"] / verified["seconds"]))
    row["cpu"] = os.cpu_count()
    print(json.dumps(row))


if __name__ == "__main__":
    main()
