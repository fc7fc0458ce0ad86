"""Incremental audits (auditor.sinks.store): four consecutive snapshots of one simulated
cluster (``simulate --continue-from``), one with a follower's active segment truncated
after an unclean election, one with a rolled segment rewritten by compaction and one after
it. Parsed
incrementally, each gives exactly the parsed input of a full parse (the audit is a function
of it), while parsing only the files that changed; orphan rows of a killed run and another
cluster's rows are never used."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from auditor import load_snapshot
from auditor.config import Config
from auditor.materialise import read_frame_arrow
from auditor.run import run_audit
from auditor.simulator import continue_simulation, simulate
from auditor.sinks import store

pytestmark = pytest.mark.spark
FRAMES = ("batches", "segments", "accounting", "parse_errors")


def _compact(snapshot: Path) -> Path:
    """Rewrite one rolled segment dump as the cleaner would: one batch line fewer, the
    offsets of the others kept (the file changes size: a new fingerprint)."""
    dumps = sorted(p for p in snapshot.glob("broker=1/data/*-0/*.log.txt"))
    rolled = dumps[0]
    lines = rolled.read_text().splitlines(keepends=True)
    batch = [i for i, line in enumerate(lines) if line.startswith("baseOffset:")]
    del lines[batch[len(batch) // 2]]
    rolled.write_text("".join(lines))
    return rolled


@pytest.fixture(scope="module")
def history(tmp_path_factory):  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("incremental")
    snaps = [base / "s0"]
    simulate(snaps[0], seed=3, topics=2, partitions=2, batches=120, segment_batches=20, faults="none")
    for k, (steps, faults) in enumerate([(40, "unclean-election"), (20, "none"), (30, "none")], 1):
        snaps.append(base / f"s{k}")
        summary = continue_simulation(snaps[k - 1], snaps[k], steps, faults)
        if k == 1:
            assert summary.faults["unclean-election"] >= 1  # a follower's active segment truncated
        if k == 2:
            _compact(snaps[k])
    return base, snaps


def _parsed(snap, strip: bool) -> Any:  # type: ignore[no-untyped-def]
    """Every row of the parsed frames as JSON text, sorted (a row twice counts twice), in one
    Spark job (file ids aside); with ``strip``, by snapshot= folder, each path without it."""
    from functools import reduce

    from pyspark.sql import functions as F

    parts = []
    for name in FRAMES:
        df = getattr(snap, name)
        cols = [c for c in df.columns if c != "file_id"]
        parts.append(df.select(F.concat(F.lit(name + " "), F.to_json(F.struct(*cols))).alias("row")))
    rows = [r.row for r in reduce(lambda a, b: a.unionByName(b), parts).collect()]
    if not strip:
        return sorted(rows)
    out: dict[str, list[str]] = {}
    for row in rows:  # "file":"snapshot=L/broker=1/..." -> "file":"broker=1/..." under L
        key = next(k for k in ('"file":"snapshot=', '"rel":"snapshot=') if k in row)
        head, rest = row.split(key, 1)
        label, tail = rest.split("/", 1)
        out.setdefault(label, []).append(f"{head}{key[:-len('snapshot=')]}{tail}")
    return {label: sorted(got) for label, got in out.items()}


def test_incremental_parses_equal_full_parses(spark, history) -> None:  # type: ignore[no-untyped-def]
    base, snaps = history
    # The full parse: all the snapshots as one input of snapshot= folders.
    together = base / "together"
    labels = [f"2026-02-01T0{k}:00:00+00:00" for k in range(len(snaps))]
    for label, snap in zip(labels, snaps):
        (together / f"snapshot={label}").mkdir(parents=True)
        for child in snap.iterdir():
            (together / f"snapshot={label}" / child.name).symlink_to(child)
    full = load_snapshot(spark, str(together))
    expected = _parsed(full, strip=True)
    out = base / "out"
    parsed = []
    for k, snap in enumerate(snaps):
        inc = load_snapshot(spark, str(snap), snapshot=labels[k], store=(str(out), "prod"))
        assert _parsed(inc, strip=False) == expected[labels[k]], k
        reuse = inc.store
        store.save(str(out), "prod", f"r{k}", reuse.new, reuse.used,
                   {**reuse.writers, **{f.fp: f"r{k}" for f in reuse.new}},
                   {t: read_frame_arrow(inc.work_dir, "snapshot", t) for t in store.DATA_TABLES})
        parsed.append((inc.files_parsed, inc.files_read, len(reuse.new)))
        if k == 0:  # rows a killed run wrote without its store_files rows: never to be read
            orphans = DeltaTable(store.store_path(str(out), "store_accounting")).to_pyarrow_table()
            orphans = orphans.set_column(orphans.column_names.index("writer"), "writer",
                                         pa.array(["killed"] * orphans.num_rows))
            write_deltalake(store.store_path(str(out), "store_accounting"), orphans, mode="append",
                            partition_by=["cluster"])
    # the first run parses everything; later ones only what changed (active segments,
    # checkpoints, new segments, the compacted and the truncated files)
    assert parsed[0][0] == parsed[0][1]
    assert all(p < r / 2 for p, r, _ in parsed[1:]), parsed


def test_a_killed_writers_rows_and_another_clusters_are_never_used(spark, history, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from auditor.ingest import discovery as d
    from auditor.ingest.snapshot import Reuse

    _, snaps = history
    out = str(tmp_path / "out")
    found = d.discover(snaps[0], datetime(2026, 2, 1, tzinfo=timezone.utc))
    dumps = [(i, f) for i, f in enumerate(found.files) if f.kind == d.DUMP]
    fps = [store.fingerprint("prod", f.broker, f.rel, f.path) for _, f in dumps]
    # a run killed after writing its batch rows, before its store_files rows ...
    orphan = pa.table({"fp": [fp.fp for fp in fps], "writer": ["killed"] * len(fps), "cluster": ["prod"] * len(fps)})
    write_deltalake(store.store_path(out, "store_batches"), orphan, mode="append", partition_by=["cluster"])
    # ... and another cluster's complete entries for the same files (same fingerprints)
    store.save(out, "other", "o1", fps, [fp.fp for fp in fps], {fp.fp: "o1" for fp in fps}, {})
    assert store.known(out, "prod") == {} and len(store.known(out, "other")) == len(fps)
    reuse = Reuse(spark, (out, "prod"), dumps)
    assert reuse.reused == [] and len(reuse.to_parse) == len(dumps)
    # a file that changes in place gets a new fingerprint
    path = Path(dumps[0][1].path)
    path.write_text(path.read_text() + "\n")
    assert store.fingerprint("prod", dumps[0][1].broker, dumps[0][1].rel, str(path)) != fps[0]


def test_an_incremental_audit_counts_what_it_parsed(spark, history, tmp_path) -> None:  # type: ignore[no-untyped-def]
    base, snaps = history
    out = tmp_path / "out"
    cfg = Config(cluster="prod", incremental=True)
    seed = load_snapshot(spark, str(snaps[2]), snapshot="2026-02-01T02:00:00Z", store=(str(out), "prod"))
    reuse = seed.store
    store.save(str(out), "prod", "a", reuse.new, reuse.used, {f.fp: "a" for f in reuse.new},
               {t: read_frame_arrow(seed.work_dir, "snapshot", t) for t in store.DATA_TABLES})
    result = run_audit(spark, str(snaps[3]), str(out), cfg, run_id="b", snapshot_label="2026-02-01T03:00:00Z")
    assert 0 < result.counts["files_parsed"] < result.counts["files"] / 2, result.counts
    files = DeltaTable(store.store_path(str(out), "store_files")).to_pyarrow_table().to_pylist()
    assert {r["run_id"] for r in files} == {"a", "b"} and {r["cluster"] for r in files} == {"prod"}
    # what run b parsed went in, batch by batch, under its own name
    written = DeltaTable(store.store_path(str(out), "store_batches")).to_pyarrow_table(
        filters=[("writer", "=", "b")])
    new_fps = {r["fp"] for r in files if r["run_id"] == "b" and r["writer"] == "b"}
    assert written.num_rows > 0 and set(written.column("fp").to_pylist()) <= new_fps
