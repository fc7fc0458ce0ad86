"""Benchmark: what an audit of segment files reads, headers only and with --verify-crc, on a
cluster of large batches. One JSON line.

    .venv/bin/python benchmarks/bench_segments_read.py [--record-bytes 5500] [--batches 200]
        [--partitions 3] [--workdir DIR]

``auditor simulate --format segments --record-bytes N`` writes batches of about
3 x N bytes (16 KiB at the default); each audit runs as a user runs it (CLI start to
exit) and ``runs.counts`` says what it read:

- ``headers_bytes_read_per_data_batch``: ``bytes_read`` less the control batches' bytes
  (read whole) and the newest segments' tail checks, over the data batches: 61 when only
  the headers are read (SPEC 3.3: at most 128);
- ``verify_bytes_read_over_segment_bytes``: with ``--verify-crc`` every batch is read once:
  ``bytes_read`` over the bytes the batches hold (1.0, plus the few tail-check bytes);
- ``headers_audit_s``, ``verify_audit_s`` and their ratio.
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

from tests.segment_model import walk  # noqa: E402  (the tests' model of the walk)


def counts(out: Path) -> dict[str, object]:
    from deltalake import DeltaTable

    return json.loads(DeltaTable(str(out / "runs")).to_pyarrow_table().column("counts")[0].as_py())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record-bytes", type=int, default=5500)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="auditor-bench-segments-"))
    auditor = str(Path(sys.executable).with_name("auditor"))
    snap = work / "snap"
    shutil.rmtree(snap, ignore_errors=True)
    subprocess.run([auditor, "simulate", str(snap), "--format", "segments", "--record-bytes", str(args.record_bytes),
                    "--batches", str(args.batches), "--partitions", str(args.partitions), "--kraft-controllers", "0",
                    "--seed", "5"], check=True, capture_output=True)
    # what the batches are, independently of the auditor: the model's walk of every file
    data_batches = control_bytes = batch_bytes = 0
    for path in snap.rglob("*.log"):
        data = path.read_bytes()
        for pos, size, *_ in walk(data, newest=True).entries:
            batch_bytes += size
            if data[pos + 22] & 0x20:
                control_bytes += size
            else:
                data_batches += 1
    row: dict[str, object] = {"record_bytes": args.record_bytes, "data_batches": data_batches,
                              "mean_batch_bytes": round(batch_bytes / max(1, data_batches))}
    for label, extra in (("headers", []), ("verify", ["--verify-crc"])):
        out = work / f"out-{label}"
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        subprocess.run([auditor, "audit", str(snap), "--out", str(out), "--fail-on", "never", *extra],
                       check=True, capture_output=True)
        row[f"{label}_audit_s"] = round(time.perf_counter() - t0, 2)
        c = counts(out)
        row[f"{label}_bytes_read"] = c["bytes_read"]
        row["segment_bytes"] = c["segment_bytes"]
        row["tail_bytes"] = int(c["zero_tail_bytes"]) + int(c["invalid_tail_bytes"])  # type: ignore[call-overload]
    tails = 17 * 3 * args.partitions * 3  # at most 17 bytes looked at per replica's newest segment
    row["headers_bytes_read_per_data_batch"] = round(
        (int(row["headers_bytes_read"]) - control_bytes) / max(1, data_batches), 1)  # type: ignore[call-overload]
    row["headers_tail_check_bytes_at_most"] = tails
    row["verify_bytes_read_over_segment_bytes"] = round(
        int(row["verify_bytes_read"]) / max(1, batch_bytes), 4)  # type: ignore[call-overload]
    row["verify_over_headers"] = round(float(row["verify_audit_s"]) / float(row["headers_audit_s"]), 2)  # type: ignore[arg-type]
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
