"""Landing runs in one OUT: concurrent writers, failures and SIGKILLs at random points.

These tests drive :mod:`auditor.sinks.commit` with the ``deltalake`` writer and synthetic
rows in separate processes (no Spark), so they can afford many writers and many kills;
``test_cli.py`` runs real audits at once.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import time
from collections import Counter
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from auditor.sinks import commit
from auditor.sinks.delta import DeltaRsWriter, arrow_schema
from auditor.sinks.schemas import OUTPUT_TABLES

DATA_TABLES = [name for name in OUTPUT_TABLES if name != "runs"]
START = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


def synthetic(name: str, run_id: str, n: int) -> pa.Table:
    """``n`` rows of table ``name`` for ``run_id``: every column filled by its type."""
    schema = arrow_schema(OUTPUT_TABLES[name])
    columns = []
    for field in schema:
        if field.name == "run_id":
            values: list[object] = [run_id] * n
        elif field.name == "cluster":
            values = ["c"] * n
        elif field.name == "day":
            values = [date(2026, 11, 23)] * n
        elif pa.types.is_string(field.type):
            values = [f"{name}-{run_id}-{i}" for i in range(n)]
        elif pa.types.is_integer(field.type):
            values = list(range(n))
        elif pa.types.is_timestamp(field.type):
            values = [START + timedelta(seconds=i) for i in range(n)]
        elif pa.types.is_boolean(field.type):
            values = [i % 2 == 0 for i in range(n)]
        else:
            raise AssertionError(field)
        columns.append(pa.array(values, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def identity(run_id: str) -> commit.RunIdentity:
    return commit.RunIdentity(run_id=run_id, cluster="c", started_at=START, input="/in", format="kafka",
                              protocol="epoch", writer="deltalake", tool_version="t", spark_version="s")


def rows_of(out: Path, table: str, run_id: str | None = None) -> list[str]:
    if not DeltaTable.is_deltatable(str(out / table)):
        return []
    found = DeltaTable(str(out / table)).to_pyarrow_table().to_pylist()
    return sorted(str(r) for r in found if run_id is None or r["run_id"] == run_id)


def statuses(out: Path, run_id: str) -> list[str]:
    if not DeltaTable.is_deltatable(str(out / "runs")):
        return []
    return sorted(r["status"] for r in DeltaTable(str(out / "runs")).to_pyarrow_table().to_pylist()
                  if r["run_id"] == run_id)


def land_run(out: str, run_id: str, n: int, pause: float = 0.0, fail_at: str | None = None) -> None:
    """Land a synthetic run of ``n`` rows per table, pausing after every commit; raise
    while writing ``fail_at`` (a failed write), if given."""
    writer = DeltaRsWriter()
    real = writer.replace_run

    def replace_run(path, rows, schema, rid):  # type: ignore[no-untyped-def]
        if fail_at and path.endswith(fail_at):
            raise OSError("connection reset while writing")
        real(path, rows, schema, rid)
        time.sleep(pause * random.random())

    writer.replace_run = replace_run  # type: ignore[method-assign]
    run = identity(run_id)
    commit.land(out, writer, run, [(name, synthetic(name, run_id, n)) for name in DATA_TABLES],
                lambda: run.row("SUCCEEDED", {"n": n}))


def _worker(out: str, run_id: str, n: int, pause: float, fail_at: str | None, seed: int) -> None:
    random.seed(seed)
    try:
        land_run(out, run_id, n, pause, fail_at)
    except OSError:
        if fail_at is None:
            raise
        os._exit(3)


def _spawn(out: Path, run_id: str, n: int, pause: float, fail_at: str | None = None,
           seed: int = 0) -> multiprocessing.process.BaseProcess:
    proc = multiprocessing.get_context("spawn").Process(
        target=_worker, args=(str(out), run_id, n, pause, fail_at, seed))
    proc.start()
    return proc


def test_a_failed_write_restores_only_its_own_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    land_run(str(out), "seed", 3)
    before = {t: rows_of(out, t) for t in OUTPUT_TABLES}
    with pytest.raises(OSError):
        land_run(str(out), "seed", 5, fail_at="partition_status")  # a failed re-run of the same id
    assert {t: rows_of(out, t) for t in DATA_TABLES} == {t: before[t] for t in DATA_TABLES}
    assert not (out / commit.STATE_DIR / commit.JOURNAL_FILE).exists()


def test_concurrent_writers_each_land_completely_and_never_touch_another_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    land_run(str(out), "seed", 4)
    seeded = {t: rows_of(out, t, "seed") for t in OUTPUT_TABLES}
    runs = {"w1": None, "w2": None, "w3": "partition_status", "w4": None}  # w3 fails halfway
    procs = {rid: _spawn(out, rid, 10 + i, 0.05, fail, seed=i) for i, (rid, fail) in enumerate(runs.items())}
    for proc in procs.values():
        proc.join(120)
    assert {rid: p.exitcode for rid, p in procs.items()} == {"w1": 0, "w2": 0, "w3": 3, "w4": 0}
    assert {t: rows_of(out, t, "seed") for t in OUTPUT_TABLES} == seeded
    for i, rid in enumerate(runs):
        expected = {t: sorted(str(r) for r in synthetic(t, rid, 10 + i).to_pylist()) for t in DATA_TABLES}
        got = {t: rows_of(out, t, rid) for t in DATA_TABLES}
        if runs[rid] is None:
            assert got == expected and statuses(out, rid) == ["SUCCEEDED"], rid
        else:
            assert got == {t: [] for t in DATA_TABLES} and statuses(out, rid) == [], rid


def test_killed_writers_leave_nothing_a_reader_counts(tmp_path: Path) -> None:
    """SIGKILL writers at random points; the next writer undoes what they left."""
    out = tmp_path / "out"
    land_run(str(out), "seed", 4)
    seeded = {t: rows_of(out, t, "seed") for t in OUTPUT_TABLES}
    rng = random.Random(11)
    killed = []
    for k in range(8):
        # half of them re-run the seeded run id: a kill must not leave its rows half replaced
        rid = "seed" if k % 2 else f"k{k}"
        proc = _spawn(out, rid, 6, 0.2, seed=k)
        time.sleep(rng.uniform(0.3, 2.0))  # some die before writing, some while, some after
        proc.kill()
        proc.join(30)
        killed.append(rid)
        # the next writer (here a fresh run) recovers first, then lands
        land_run(str(out), f"next{k}", 2)
        assert statuses(out, f"next{k}") == ["SUCCEEDED"]
        assert not (out / commit.STATE_DIR / commit.JOURNAL_FILE).exists()
        # SPEC 7: at most one runs row per attempt, at most one SUCCEEDED row per run id
        attempts = Counter(["seed", *killed, *(f"next{j}" for j in range(k + 1))])
        for rid_k, n in attempts.items():
            st = statuses(out, rid_k)
            assert len(st) <= n and st.count("SUCCEEDED") <= 1, (rid_k, st)
        for rid_k in set(killed):
            succeeded = "SUCCEEDED" in statuses(out, rid_k)
            if rid_k == "seed":  # landed completely (6 rows) or left exactly as it was
                six = {t: sorted(str(r) for r in synthetic(t, "seed", 6).to_pylist()) for t in OUTPUT_TABLES
                       if t != "runs"}
                now = {t: rows_of(out, t, "seed") for t in DATA_TABLES}
                assert now in ({t: seeded[t] for t in DATA_TABLES}, six), k
            elif not succeeded:
                assert {t: rows_of(out, t, rid_k) for t in DATA_TABLES} == {t: [] for t in DATA_TABLES}, rid_k
    # re-running a killed run id lands it once
    land_run(str(out), "k0", 6)
    assert all(len(rows_of(out, t, "k0")) == 6 for t in DATA_TABLES)
    assert statuses(out, "k0").count("SUCCEEDED") == 1


def test_a_busy_out_makes_the_second_writer_give_up_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    messages: list[str] = []
    with commit.out_lock(str(out), holder="run A, pid 1"):
        with pytest.raises(commit.OutputError, match=r"busy: another audit \(run A, pid 1\)"):
            with commit.out_lock(str(out), timeout=0.3, waiting=messages.append):
                pass
    assert messages and "waiting for another audit" in messages[0]
    with commit.out_lock(str(out), timeout=0.3):  # free again
        pass


def test_a_killed_lock_holder_never_leaves_out_locked(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _spawn(out, "slow", 2, 3.0, seed=1)
    deadline = time.monotonic() + 60
    while not (out / commit.STATE_DIR / commit.JOURNAL_FILE).exists():
        assert time.monotonic() < deadline and proc.is_alive()
        time.sleep(0.05)
    proc.kill()
    proc.join(30)
    with commit.out_lock(str(out), timeout=5):
        assert commit.recover(str(out), DeltaRsWriter(), by="test") is not None
    assert statuses(out, "slow") in (["FAILED"], ["SUCCEEDED"])


def test_a_run_that_cannot_get_the_lock_writes_nothing(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    land_run(str(out), "seed", 2)
    before = {t: rows_of(out, t) for t in OUTPUT_TABLES}
    monkeypatch.setenv(commit.LOCK_TIMEOUT_ENV, "0.3")
    with commit.out_lock(str(out), holder="a long writer"):
        started = time.monotonic()
        with pytest.raises(commit.OutputError, match="busy"):
            land_run(str(out), "late", 2)
        with pytest.raises(commit.OutputError, match="busy"):  # the FAILED row is best effort, as short
            commit.append_failed(str(out), DeltaRsWriter(), identity("late").row("FAILED", {}))
        assert time.monotonic() - started < 5
    assert {t: rows_of(out, t) for t in OUTPUT_TABLES} == before


def test_tables_of_an_earlier_or_a_later_version_take_the_other_s_rows(tmp_path: Path) -> None:
    """SPEC 6: "more may follow". A run adds the columns an OUT written by an earlier version
    lacks (its rows read them as null, and the rollback point is taken after that), and a
    version that does not know a column writes null into it (an OUT a later version wrote)."""
    from pyspark.sql.types import StringType, StructField, StructType

    from auditor.errors import OutputError

    out = tmp_path / "out"
    full = OUTPUT_TABLES["replica_status"]
    earlier = StructType([f for f in full.fields if f.name != "kraft_snapshots"])
    path = str(out / "replica_status")
    writer = DeltaRsWriter()
    old_rows = synthetic("replica_status", "old", 2).drop_columns(["kraft_snapshots"])
    writer.replace_run(path, old_rows, earlier, "old")
    assert "kraft_snapshots" not in DeltaTable(path).schema().to_arrow().names
    run = identity("new")
    commit.land(str(out), writer, run, [(name, synthetic(name, "new", 3)) for name in DATA_TABLES],
                lambda: run.row("SUCCEEDED", {}))
    got = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert sorted((r["run_id"], r["kraft_snapshots"]) for r in got) == [
        ("new", "replica_status-new-0"), ("new", "replica_status-new-1"), ("new", "replica_status-new-2"),
        ("old", None), ("old", None)]
    # an earlier version writing again: the column it does not know is null in its rows
    writer.replace_run(path, synthetic("replica_status", "again", 1).drop_columns(["kraft_snapshots"]),
                       earlier, "again")
    got = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert sorted((r["run_id"], r["kraft_snapshots"]) for r in got)[0] == ("again", None)
    assert len(got) == 6
    # a column that cannot be null cannot be added to the rows already there
    strict = StructType([*full.fields[:-1], StructField("later", StringType(), False), full.fields[-1]])
    with pytest.raises(OutputError, match="lacks column later"):
        writer.prepare(path, strict)
