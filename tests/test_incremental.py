"""Incremental audits (auditor.sinks.store): four consecutive snapshots of one simulated
cluster (``simulate --continue-from``), one with a follower's active segment truncated
after an unclean election, one with a rolled segment rewritten by compaction, audited
incrementally into one OUT, give the tables of four full audits, while parsing only the
files that changed; orphan rows of a killed run and another cluster's rows are never used,
and the store is pruned. A run with nothing changed takes the previous run's tables
(auditor.sinks.unchanged) and still gives a full audit's."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from auditor.config import Config
from auditor.run import run_audit
from auditor.simulator import continue_simulation, simulate
from auditor.sinks import store, unchanged

pytestmark = pytest.mark.spark
COMPARED = ("findings", "replica_status", "partition_status", "parse_errors")
RUN_TIME = {"audit_time", "day", "first_seen"}  # when a run ran: the only columns allowed to differ


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
    # (four, not five: a fifth snapshot of plain traffic exercised nothing the fourth does not,
    # and cost the suite two audits)
    for k, (steps, faults) in enumerate([(40, "unclean-election"), (20, "none"), (10, "none")], 1):
        snaps.append(base / f"s{k}")
        summary = continue_simulation(snaps[k - 1], snaps[k], steps, faults)
        if k == 1:
            assert summary.faults["unclean-election"] >= 1  # a follower's active segment truncated
        if k == 2:
            _compact(snaps[k])
    return base, snaps


def _rows(out: Path, table: str, run_id: str, aside: set[str] = RUN_TIME) -> list[str]:
    """The run's rows of ``table``, the ``aside`` columns left out (run times), as sorted
    JSON (a row twice counts twice)."""
    rows = DeltaTable(str(out / table)).to_pyarrow_table(filters=[("run_id", "=", run_id)]).to_pylist()
    return sorted(json.dumps({k: v for k, v in r.items() if k not in aside}, default=str, sort_keys=True)
                  for r in rows)


def _counts(out: Path, run_id: str) -> dict:  # type: ignore[type-arg]
    row = DeltaTable(str(out / "runs")).to_pyarrow_table(filters=[("run_id", "=", run_id)]).to_pylist()[0]
    return json.loads(row["counts"])


def _tamper(out: Path) -> int:
    """Rows a killed run wrote without its store_files rows: every stored scan row again, with
    another digest and line count. Read by mistake, they would make every window differ and
    every file's accounting wrong."""
    path = store.store_path(str(out), "store_scan")
    rows = DeltaTable(path).to_pyarrow_table()
    rows = rows.set_column(rows.column_names.index("writer"), "writer", pa.array(["killed"] * rows.num_rows))
    for column in ("d1_lo", "lines"):
        rows = rows.set_column(rows.column_names.index(column), column, pc.add(rows.column(column), 1))
    write_deltalake(path, rows, mode="append", partition_by=["cluster"])
    return rows.num_rows


def test_four_incremental_audits_equal_four_full_audits(spark, history, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, snaps = history
    full_out, inc_out = tmp_path / "full", tmp_path / "incremental"
    parsed = []
    for k, snap in enumerate(snaps):
        label, run = f"2026-02-01T0{k}:00:00Z", f"r{k}"
        run_audit(spark, str(snap), str(full_out), Config(cluster="prod"), run_id=run, snapshot_label=label)
        run_audit(spark, str(snap), str(inc_out), Config(cluster="prod", incremental=True), run_id=run,
                  snapshot_label=label)
        for table in COMPARED:
            assert _rows(inc_out, table, run) == _rows(full_out, table, run), (k, table)
        full, inc = _counts(full_out, run), _counts(inc_out, run)
        assert {**inc, "files_parsed": None, "input_digest": None} == {**full, "files_parsed": None,
                                                                       "input_digest": None}, k
        assert len(inc["input_digest"]) == 64 and "input_digest" not in full
        parsed.append((inc["files_parsed"], inc["files"]))
        if k == 0:
            assert _tamper(inc_out) > 0
        if k == 1:  # pruned after run 1 saved: nothing names the killed run
            left = DeltaTable(store.store_path(str(inc_out), "store_scan")).to_pyarrow_table(
                filters=[("writer", "=", "killed")])
            assert left.num_rows == 0
    # Nothing changed: the snapshot before the last audited later (r2b: its HWMs are below
    # r3's, so it has over-time findings), then again (r2bu takes r2b's tables, its over-time
    # findings left out, its partitions counted again).
    for out, config in ((full_out, Config(cluster="prod")), (inc_out, Config(cluster="prod", incremental=True))):
        run_audit(spark, str(snaps[2]), str(out), config, run_id="r2b", snapshot_label="2026-02-01T04:00:00Z")
    assert _nothing_changed(spark, snaps[2], full_out, inc_out, "r2b", "2026-02-01T04:30:00Z", "r2bu"), \
        "r2b has no over-time finding: the path that leaves them out is not exercised"
    files = DeltaTable(store.store_path(str(inc_out), "store_files")).to_pyarrow_table().to_pylist()
    assert {r["run_id"] for r in files} == {f"r{k}" for k in range(len(snaps))} | {"r2b", "r2bu"}
    assert {r["cluster"] for r in files} == {"prod"} and all(r["saved_at"] is not None for r in files)
    # what the last run parsed went in, file by file, under its own name
    written = DeltaTable(store.store_path(str(inc_out), "store_scan")).to_pyarrow_table(
        filters=[("writer", "=", "r3")])
    new_fps = {r["fp"] for r in files if r["run_id"] == "r3" and r["writer"] == "r3"}
    assert written.num_rows > 0 and set(written.column("fp").to_pylist()) <= new_fps
    assert _rows(full_out, "findings", "r1"), "the unclean election is found"
    # the first run parses everything; later ones only what changed (active segments,
    # checkpoints, new segments, the compacted and the truncated files)
    assert parsed[0][0] == parsed[0][1]
    assert all(0 < p < n / 2 for p, n in parsed[1:]), parsed
    # a taken run still names every file it used in the store
    assert {r["fp"] for r in files if r["run_id"] == "r2bu"} == {r["fp"] for r in files if r["run_id"] == "r2b"}

    # Which run may be taken: the latest observation's, only by a later snapshot, only with the
    # same digest (a re-run of r2bu's own id compares with r2b, which saw the same input).
    digest, at = _counts(inc_out, "r2bu")["input_digest"], datetime(2026, 2, 1, 4, 30, tzinfo=timezone.utc)
    later = datetime(2026, 2, 1, 5, tzinfo=timezone.utc)
    assert unchanged.previous_run(str(inc_out), "prod", digest, later, "r5").run_id == "r2bu"
    assert unchanged.previous_run(str(inc_out), "prod", digest, at, "r5") is None
    assert unchanged.previous_run(str(inc_out), "prod", "0" * 64, later, "r5") is None
    assert unchanged.previous_run(str(inc_out), "prod", digest, later, "r2bu").run_id == "r2b"
    assert unchanged.previous_run(str(inc_out), "other", digest, later, "r5") is None
    # An over-time finding of the taken run is left out, its partition counted again: the
    # tables are those taken without it (the engine's own counts).
    previous = unchanged.previous_run(str(inc_out), "prod", digest, later, "r5")
    before = unchanged.previous_tables(str(inc_out), "prod", previous, "r5", later, later)
    finding = DeltaTable(str(inc_out / "findings")).to_pyarrow_table(filters=[("run_id", "=", "r2bu")]).slice(0, 1)
    finding = finding.set_column(finding.column_names.index("check"), "check", pa.array(["STALE_LEADER_HWM"]))
    finding = finding.set_column(finding.column_names.index("severity"), "severity", pa.array(["CRITICAL"]))
    write_deltalake(str(inc_out / "findings"), finding, mode="append")
    after = unchanged.previous_tables(str(inc_out), "prod", previous, "r5", later, later)
    for name in before:
        assert sorted(map(str, after[name].to_pylist())) == sorted(map(str, before[name].to_pylist())), name


def _nothing_changed(spark, snap: Path, full_out: Path, inc_out: Path, previous: str, label: str,  # type: ignore[no-untyped-def]
                     run: str) -> bool:
    """``snap`` again, half an hour later: nothing changed, so the incremental run takes the
    tables of ``previous`` (auditor.sinks.unchanged) and the full run audits it all; every
    table is the same, first_seen included (both OUTs hold the same history). Returns
    whether ``previous`` had an over-time finding."""
    run_audit(spark, str(snap), str(full_out), Config(cluster="prod"), run_id=run, snapshot_label=label)
    taken = run_audit(spark, str(snap), str(inc_out), Config(cluster="prod", incremental=True), run_id=run,
                      snapshot_label=label)
    assert taken.counts["reused_run"] == previous and taken.counts["files_parsed"] == 0
    assert taken.counts["input_digest"] == _counts(inc_out, previous)["input_digest"]
    for table in (*COMPARED, "epoch_lineage"):
        assert _rows(inc_out, table, run, {"audit_time"}) == _rows(full_out, table, run, {"audit_time"}), table
    assert _rows(inc_out, "findings", run), "findings carry over"
    full, inc = _counts(full_out, run), _counts(inc_out, run)
    assert {**inc, "files_parsed": None, "reused_run": None, "input_digest": None} == {
        **full, "files_parsed": None, "reused_run": None, "input_digest": None}
    checks = DeltaTable(str(inc_out / "findings")).to_pyarrow_table(filters=[("run_id", "=", previous)])
    return bool(set(checks.column("check").to_pylist()) & set(unchanged.OVER_TIME))


def test_the_input_digest_changes_with_any_file_or_setting(history, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The digest an unchanged run is recognised by covers every input file's fingerprint,
    every setting that shapes a table and the auditor's source
    (auditor.sinks.unchanged.input_digest)."""
    import os

    from auditor.ingest import discovery as d
    from auditor.load.reuse import file_fingerprints

    _, snaps = history
    at = datetime(2026, 2, 1, tzinfo=timezone.utc)

    def digest(root: Path, config: Config) -> str:
        found = d.discover(root, at)
        dumps = [f for f in found.files if f.kind == d.DUMP]
        return unchanged.input_digest(found, file_fingerprints(config.cluster, dumps), config)

    config = Config(cluster="prod", incremental=True)
    first = digest(snaps[0], config)
    assert digest(snaps[0], config) == first
    assert digest(snaps[0], Config(cluster="prod", incremental=True, fail_on="never")) == first
    assert digest(snaps[1], config) != first
    for other in (Config(cluster="other"), Config(cluster="prod", severity={"OFFSET_GAP": "ERROR"}),
                  Config(cluster="prod", compacted_topics=("orders",)), Config(cluster="prod", protocol="kip-101")):
        assert digest(snaps[0], other) != first, other
    for kind in ("leader-epoch-checkpoint", "*.log.txt"):  # a small file and a dump, touched
        path = next(snaps[0].rglob(kind))
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
        try:
            assert digest(snaps[0], config) != first, kind
        finally:
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert digest(snaps[0], config) == first
    monkeypatch.setattr(unchanged, "code_digest", lambda: "other code")  # the auditor's source changed
    assert digest(snaps[0], config) != first


def test_a_killed_writers_rows_and_another_clusters_are_never_used(spark, history, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from auditor.ingest import discovery as d
    from auditor.load.reuse import Reuse

    _, snaps = history
    out = str(tmp_path / "out")
    found = d.discover(snaps[0], datetime(2026, 2, 1, tzinfo=timezone.utc))
    dumps = [(i, f) for i, f in enumerate(found.files) if f.kind == d.DUMP]
    fps = [store.fingerprint("prod", f.broker, f.rel, f.path) for _, f in dumps]
    # a run killed after writing its batch rows, before its store_files rows ...
    orphan = pa.table({"fp": [fp.fp for fp in fps], "writer": ["killed"] * len(fps), "cluster": ["prod"] * len(fps)})
    write_deltalake(store.store_path(out, "store_scan"), orphan, mode="append", partition_by=["cluster"])
    # ... and another cluster's complete entries for the same files (same fingerprints)
    store.save(out, "other", "o1", fps, [fp.fp for fp in fps], {fp.fp: "o1" for fp in fps}, {})
    assert store.known(out, "prod") == {} and len(store.known(out, "other")) == len(fps)
    reuse = Reuse(spark, (out, "prod"), dumps)
    assert reuse.reused == [] and len(reuse.to_parse) == len(dumps)
    # a file that changes in place gets a new fingerprint
    path = Path(dumps[0][1].path)
    path.write_text(path.read_text() + "\n")
    assert store.fingerprint("prod", dumps[0][1].broker, dumps[0][1].rel, str(path)) != fps[0]


def test_the_metadata_log_in_a_reused_per_broker_file_is_found_from_the_store(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A per-broker dump file that also holds the metadata log (SPEC 3.1, 4.7): its metadata
    sections are found from the scan's header rows, of the run that parses the file or, in
    an incremental run that reuses it, of the store (``Reuse.kraft_sections``). Both runs
    give the same tables, and the KRaft checks see the snapshots dumped in those files."""
    from auditor.simulator.kraft import KRAFT_FAULTS
    from tests.kraft_fixtures import into_per_broker_files

    snap, out = tmp_path / "snap", tmp_path / "out"
    simulate(snap, seed=6, topics=1, partitions=1, batches=20, faults=",".join(KRAFT_FAULTS), kraft_controllers=3,
             shapes=False, dump_layout="per-broker")
    into_per_broker_files(snap)
    config = Config(cluster="prod", incremental=True)
    for run in ("r0", "r1"):
        run_audit(spark, str(snap), str(out), config, run_id=run, snapshot_label="2026-02-01T00:00:00Z")
    assert _counts(out, "r1")["files_parsed"] < _counts(out, "r0")["files_parsed"]
    written = {r["writer"] for r in DeltaTable(store.store_path(str(out), "store_scan")).to_pyarrow_table().to_pylist()}
    assert written == {"r0"}  # r1 parsed no dump file: every one came from the store
    for table in COMPARED:
        assert [r.replace('"r1"', '"r0"') for r in _rows(out, table, "r1")] == _rows(out, table, "r0"), table
    truth = json.loads((snap / "expected_findings.json").read_text())
    want = {(f["check"], f["replica"], f["offset_start"]) for f in truth["findings"] if f["topic"] == "__cluster_metadata"}
    found = {(f["check"], f["replica"], f["offset_start"]) for f in map(json.loads, _rows(out, "findings", "r1"))
             if f["topic"] == "__cluster_metadata" and f["severity"] in ("CRITICAL", "ERROR", "WARNING")}
    assert found == want and any(check.startswith("KRAFT_SNAPSHOT") for check, _, _ in want), (found, want)


def test_the_store_forgets_what_the_last_k_runs_did_not_use(tmp_path) -> None:
    out = str(tmp_path)

    def fp(name: str) -> store.Fingerprint:
        return store.Fingerprint(name * 64, 1, f"data/t-0/{name}.log.txt", 10, 1)

    def rows(*names: str) -> pa.Table:
        return pa.table({"fp": [n * 64 for n in names for _ in range(3)], "base_offset": list(range(3 * len(names)))})

    writers: dict[str, str] = {}
    # (run, files it used, files it parsed): "a" is a rolled segment every run uses; "b", "c", "d"
    # and "e" are versions of an active segment, each seen by the runs after its own for a while
    plan = [("r0", "ab", "ab"), ("r1", "ac", "c"), ("r2", "ac", ""), ("r3", "ad", "d"), ("r4", "ae", "e")]
    for k, (run, used, new) in enumerate(plan):
        writers.update({n * 64: run for n in new})
        store.save(out, "prod", run, [fp(n) for n in new], [n * 64 for n in used], writers,
                   {"store_scan": rows(*new) if new else None},
                   saved_at=datetime(2026, 2, 1, k, tzinfo=timezone.utc))
        if run == "r1":  # killed while saving: its rows, no store_files row
            store.save(out, "prod", "killed", [], [], {}, {"store_scan": rows("a", "z")})
    # another cluster with the same files, saved long before: never pruned by prod's runs
    store.save(out, "other", "o1", [fp("b")], ["b" * 64], {"b" * 64: "o1"}, {"store_scan": rows("b")},
               saved_at=datetime(2020, 1, 1, tzinfo=timezone.utc))
    assert set(store.known(out, "prod")) == {n * 64 for n in "abcde"}
    # the row count from the Delta log's statistics (what bounds the rows an incremental
    # run reads back: auditor.load.reuse.Reuse.row_bound), killed writers' rows included
    assert store.stored_row_count(out, "store_scan", "prod") == 3 * 5 + 6
    assert store.stored_row_count(out, "store_scan", "other") == 3
    assert store.stored_row_count(str(tmp_path / "nothing"), "store_scan", "prod") == 0

    pruned = store.prune(out, "prod", keep_runs=2, retention_hours=0)
    assert (pruned.runs_forgotten, pruned.fingerprints_forgotten) == (3, 2)  # r0..r2; "b" and "c"
    assert store.known(out, "prod") == {"a" * 64: "r0", "d" * 64: "r3", "e" * 64: "r4"}
    batches = DeltaTable(store.store_path(out, "store_scan")).to_pyarrow_table()
    kept = sorted((r["cluster"], r["fp"][0], r["writer"]) for r in batches.to_pylist())
    assert kept == sorted([("prod", "a", "r0")] * 3 + [("prod", "d", "r3")] * 3 + [("prod", "e", "r4")] * 3
                          + [("other", "b", "o1")] * 3)
    assert store.stored_row_count(out, "store_scan", "prod") == 9
    files = DeltaTable(store.store_path(out, "store_files")).to_pyarrow_table().to_pylist()
    assert {(r["cluster"], r["run_id"]) for r in files} == {("prod", "r3"), ("prod", "r4"), ("other", "o1")}
    # vacuumed: the files on disk are exactly the tables' current files
    for table in ("store_scan", "store_files"):
        dt = DeltaTable(store.store_path(out, table))
        on_disk = {str(p) for p in Path(store.store_path(out, table)).rglob("*.parquet")}
        assert on_disk == {u.removeprefix("file://") for u in dt.file_uris()}, table
    assert pruned.files_vacuumed > 0
    # a run that read "c" (and "a") from the store before that prune saves after it: it names
    # "a" again, never "c", whose rows are gone (the next run parses "c" anew)
    store.save(out, "prod", "r5", [], ["a" * 64, "c" * 64], {"a" * 64: "r0", "c" * 64: "r1"}, {},
               saved_at=datetime(2026, 2, 1, 5, tzinfo=timezone.utc))
    assert store.known(out, "prod") == {"a" * 64: "r0", "d" * 64: "r3", "e" * 64: "r4"}
    # nothing else to forget: a second prune deletes nothing
    def versions() -> list[int]:
        return [DeltaTable(store.store_path(out, t)).version() for t in ("store_scan", "store_files")]

    before = versions()
    again = store.prune(out, "prod", keep_runs=3, retention_hours=0)
    assert (again.fingerprints_forgotten, sum(again.rows_deleted.values()), again.files_vacuumed) == (0, 0, 0)
    assert versions() == before  # and no commit: the tables' logs do not grow by idle prunes
