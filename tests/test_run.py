"""End to end: a real audit of the demo snapshot writes the six Delta tables, re-runs
replace their own rows, and a failed run leaves earlier runs intact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

from auditor import run as run_module
from auditor.config import Config
from auditor.run import run_audit
from auditor.sinks.delta import arrow_schema
from auditor.sinks.schemas import OUTPUT_TABLES
from auditor.summary import format_summary
from tests.handmade_snapshot import write_demo_snapshot
from tests.invariants import KEYS, disagreements, repeated_rows

pytestmark = pytest.mark.spark


def rows(out: Path, table: str) -> list[dict]:  # type: ignore[type-arg]
    return DeltaTable(str(out / table)).to_pyarrow_table().to_pylist()


@pytest.fixture(scope="module")
def demo_run(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("demo")
    snap = write_demo_snapshot(base / "snapshot")
    out = base / "out"
    result = run_audit(spark, str(snap), str(out), Config(cluster="demo"), run_id="run-1")
    return snap, out, result


def test_all_tables_written_with_declared_schema(demo_run) -> None:  # type: ignore[no-untyped-def]
    _, out, result = demo_run
    assert result.writer == "deltalake" and result.exit_code == 0
    for name, schema in OUTPUT_TABLES.items():
        dt = DeltaTable(str(out / name))
        table = dt.to_pyarrow_table()
        expected = arrow_schema(schema)
        assert table.schema.names == expected.names, name
        assert [f.type for f in table.schema] == [f.type for f in expected], name
        assert dt.metadata().partition_columns == ["cluster", "day"]
        for field in expected:
            if not field.nullable and table.num_rows:
                assert table.column(field.name).null_count == 0, (name, field.name)


def test_no_table_holds_a_row_twice_or_contradicts_another(demo_run) -> None:  # type: ignore[no-untyped-def]
    """SPEC 6's keys hold in the tables as the deltalake writer wrote them."""
    _, out, _ = demo_run
    tables = {name: rows(out, name) for name in KEYS}
    repeats = repeated_rows(tables)
    assert set(repeats) == set(KEYS) and not any(repeats.values()), repeats
    assert disagreements(tables) == []  # and the tables agree with each other


def test_runs_row_and_counts(demo_run) -> None:  # type: ignore[no-untyped-def]
    snap, out, result = demo_run
    (run,) = rows(out, "runs")
    assert run["status"] == "SUCCEEDED" and run["run_id"] == "run-1" and run["cluster"] == "demo"
    assert run["writer"] == "deltalake" and run["protocol"] == "epoch" and run["format"] == "kafka"
    assert run["started_at"] <= run["finished_at"] and str(run["started_at"].tzinfo) == "UTC"
    counts = json.loads(run["counts"])
    for key in ("files", "files_skipped", "lines", "lines_parsed", "lines_skipped", "lines_quarantined",
                "batches", "partitions", "replicas", "findings"):
        assert key in counts
    assert counts["lines"] == counts["lines_parsed"] + counts["lines_skipped"] + counts["lines_quarantined"]
    assert (counts["partitions"], counts["replicas"], counts["batches"]) == (4, 12, 155)
    assert counts == result.counts
    summary = format_summary(result)
    assert "4 partitions, 12 replicas, 155 batches" in summary and str(out) in summary


def test_replica_status_and_lineage_values(demo_run) -> None:  # type: ignore[no-untyped-def]
    _, out, _ = demo_run
    status = {(r["topic"], r["partition"], r["replica"]): r for r in rows(out, "replica_status")}
    lagging = status[("orders", 1, 3)]
    assert (lagging["log_end_offset"], lagging["high_watermark"], lagging["role"], lagging["in_isr"]) == (
        300, 420, "follower", False)
    assert lagging["status"] == "lagging"
    checks = {(r["topic"], r["partition"], r["replica"], r["check"], r["severity"]) for r in rows(out, "findings")}
    assert ("orders", 1, 3, "HWM_ABOVE_LEO", "ERROR") in checks
    assert ("orders", 2, 1, "DIVERGENT_SUFFIX", "WARNING") in checks
    assert not any(sev == "CRITICAL" for *_, sev in checks)
    forked = status[("orders", 2, 1)]
    assert (forked["log_end_offset"], forked["latest_epoch"], forked["batch_count"], forked["record_count"]) == (
        340, 2, 19, 340)
    leader = status[("orders", 2, 2)]
    assert (leader["role"], leader["status"], leader["latest_epoch"]) == ("leader", "leader", 3)
    lineage = sorted((r["source"], r["epoch"], r["start_offset"], r["end_offset"], r["batch_count"])
                     for r in rows(out, "epoch_lineage")
                     if (r["topic"], r["partition"], r["replica"]) == ("orders", 2, 1))
    assert lineage == [("checkpoint", 1, 0, 300, None), ("checkpoint", 2, 300, 340, None),
                       ("log", 1, 0, 300, 15), ("log", 2, 300, 340, 4)]
    parts = {(r["topic"], r["partition"]): r for r in rows(out, "partition_status")}
    assert parts[("orders", 2)]["leader"] == 2 and parts[("orders", 2)]["leader_source"] == "metadata"
    assert parts[("orders", 2)]["max_high_watermark"] == 300 and parts[("orders", 2)]["replica_count"] == 3


def test_rerun_replaces_own_rows_and_failure_keeps_history(spark, demo_run, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    snap, out, _ = demo_run
    before = {t: len(rows(out, t)) for t in OUTPUT_TABLES}
    run_audit(spark, str(snap), str(out), Config(cluster="demo"), run_id="run-1")
    assert {t: len(rows(out, t)) for t in OUTPUT_TABLES} == before
    run_audit(spark, str(snap), str(out), Config(cluster="demo"), run_id="run-2")
    after = {t: len(rows(out, t)) for t in OUTPUT_TABLES}
    assert after["replica_status"] == 2 * before["replica_status"] and after["runs"] == 2

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(run_module, "audit", boom)
    with pytest.raises(RuntimeError):
        run_audit(spark, str(snap), str(out), Config(cluster="demo"), run_id="run-1")
    runs = rows(out, "runs")
    assert sorted((r["run_id"], r["status"]) for r in runs) == [
        ("run-1", "FAILED"), ("run-1", "SUCCEEDED"), ("run-2", "SUCCEEDED")]
    assert {t: len(rows(out, t)) for t in OUTPUT_TABLES if t != "runs"} == {
        t: n for t, n in after.items() if t != "runs"}


def test_dashboard_sql_runs_on_the_written_tables(demo_run) -> None:  # type: ignore[no-untyped-def]
    """Every query of docs/dashboard.sql runs (DuckDB over the Delta tables) and answers."""
    import re

    import duckdb

    _, out, _ = demo_run
    con = duckdb.connect()
    for name in OUTPUT_TABLES:
        con.register(name, DeltaTable(str(out / name)).to_pyarrow_table())
    text = (Path(__file__).parent.parent / "docs" / "dashboard.sql").read_text()
    answers = {}
    for block in re.split(r"^-- name: ", text, flags=re.M)[1:]:
        name, query = block.split("\n", 1)
        answers[name.strip()] = con.sql(query).to_arrow_table().to_pylist()
    assert set(answers) == {"latest_successful_run", "open_findings_by_severity", "partitions_with_divergence",
                            "hwm_over_time", "findings_first_seen"}
    assert [r["cluster"] for r in answers["latest_successful_run"]] == ["demo"]
    by_sev = {r["severity"]: r["findings"] for r in answers["open_findings_by_severity"]}
    findings = [r for r in rows(out, "findings") if r["run_id"] == answers["latest_successful_run"][0]["run_id"]]
    assert sum(by_sev.values()) == len([f for f in findings if not f["suppressed"]]) > 0
    assert {(r["topic"], r["partition"], r["replica"]) for r in answers["partitions_with_divergence"]} >= {("orders", 2, 1)}
    assert answers["hwm_over_time"] and answers["findings_first_seen"]


def test_scheduler_example_is_valid_python() -> None:
    source = (Path(__file__).parent.parent / "docs" / "airflow_audit_dag.py").read_text()
    compile(source, "airflow_audit_dag.py", "exec")
    assert "jobs/audit.py" in source and "--fail-on critical" in source


def test_run_failing_halfway_through_writing_is_rolled_back(spark, demo_run, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    snap, out, _ = demo_run
    before = {t: sorted(map(str, rows(out, t))) for t in OUTPUT_TABLES}
    real = run_module.io.choose_writer

    def flaky_writer(s):  # type: ignore[no-untyped-def]
        w = real(s)
        original = w.replace_run

        def replace_run(path, df, schema, run_id):  # type: ignore[no-untyped-def]
            if path.endswith("partition_status"):  # after parse_errors, epoch_lineage, replica_status
                raise OSError("connection reset while writing")
            return original(path, df, schema, run_id)

        w.replace_run = replace_run
        return w

    monkeypatch.setattr(run_module.io, "choose_writer", flaky_writer)
    with pytest.raises(OSError):
        run_audit(spark, str(snap), str(out), Config(cluster="demo"), run_id="run-1")
    after = {t: sorted(map(str, rows(out, t))) for t in OUTPUT_TABLES}
    assert {t: v for t, v in after.items() if t != "runs"} == {t: v for t, v in before.items() if t != "runs"}
    new_runs = [r for r in rows(out, "runs") if str(r) not in before["runs"]]
    assert [(r["run_id"], r["status"]) for r in new_runs] == [("run-1", "FAILED")]


def test_consistency_guard() -> None:
    from auditor.errors import InconsistentResultError
    from auditor.summary import check_consistent

    summary = ([("DIVERGENT_SUFFIX", "WARNING", 2, 0), ("HWM_ABOVE_LEO", "ERROR", 1, 0)], 0)
    check_consistent(summary, summary, 3)
    check_consistent(summary, summary, None)  # Spark's Delta writer does not count rows
    with pytest.raises(InconsistentResultError, match="re-run"):
        check_consistent(summary, ([("HWM_ABOVE_LEO", "ERROR", 1, 0)], 0), 1)
    with pytest.raises(InconsistentResultError):
        check_consistent(summary, summary, 2)
