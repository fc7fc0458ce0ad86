"""``benchmarks/bench_audit.py``'s Spark floor job computes what issue 21 defines it to:
per file, the batch lines' count, lowest base offset, highest last offset and an xxhash64
sum of (base, last, epoch, CRC), every one of them read by its answer (a value nothing
reads is pruned by Spark's optimizer, and the job then only counts lines)."""

from __future__ import annotations

import contextlib
import io
import json
import sys

from pyspark.sql import functions as F

from benchmarks import bench_audit

# (base, last, epoch, crc) of each file's batch lines
BATCHES = {
    "a-0": [(0, 2, 0, 3093286339), (3, 5, 0, 559324281), (6, 8, 1, 1362913526)],
    "a-1": [(10, 19, 4, 7), (20, 20, 5, 4294967295)],
}


def _line(base: int, last: int, epoch: int, crc: int) -> str:
    return (f"baseOffset: {base} lastOffset: {last} count: {last - base + 1} baseSequence: -1 lastSequence: -1 "
            f"producerId: -1 producerEpoch: -1 partitionLeaderEpoch: {epoch} isTransactional: false "
            f"isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1763000000000 "
            f"size: 115 magic: 2 compresscodec: none crc: {crc} isvalid: true")


def test_the_floor_job_splits_and_hashes_every_batch_line(spark, tmp_path, monkeypatch) -> None:
    paths = []
    for name, batches in BATCHES.items():
        path = tmp_path / name / "00000000000000000000.log.txt"
        path.parent.mkdir()
        path.write_text("\n".join([f"Dumping /data/{name}/00000000000000000000.log", "Log starting offset: 0",
                                   *[_line(*b) for b in batches]]) + "\n")
        paths.append(str(path))
    listing = tmp_path / "files.txt"
    listing.write_text("\n".join(paths) + "\n")

    monkeypatch.setattr(sys, "argv", ["floor", str(listing)])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(bench_audit.FLOOR, "floor", "exec"), {})  # noqa: S102 (the benchmark's own job)
    answer = json.loads(printed.getvalue().strip().splitlines()[-1])

    every = [b for batches in BATCHES.values() for b in batches]
    # Spark's xxhash64 of the same values, typed as the floor job reads them
    typed = spark.createDataFrame(every, "base bigint, last bigint, epoch int, crc bigint")
    hashes = [r[0] for r in typed.select(F.xxhash64("base", "last", "epoch", "crc")).collect()]
    assert answer == {"batch_lines": len(every), "files": len(BATCHES), "min_base": 0, "max_last": 20,
                      "hash_sum": sum(hashes) % (1 << 64)}
