"""``benchmarks/event_log.py``: the jobs, the driver's time between them and the busiest
stages of a Spark event log, checked on a hand-written log whose answers are worked out
below (no Spark needed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks import event_log as ev

T0 = 1_700_000_000_000  # the application's start (ms)


def _task(stage: int, run_ms: int, cpu_ns: int, read: int = 0, shuffle_in: int = 0, shuffle_out: int = 0) -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage, "Task Metrics": {
        "Executor Run Time": run_ms, "Executor CPU Time": cpu_ns, "Input Metrics": {"Records Read": read},
        "Shuffle Read Metrics": {"Total Records Read": shuffle_in},
        "Shuffle Write Metrics": {"Shuffle Records Written": shuffle_out}}}


EVENTS = [
    {"Event": "SparkListenerLogStart", "Spark Version": "4.0.5"},
    {"Event": "SparkListenerApplicationStart", "App Name": "log-auditor", "Timestamp": T0},
    # job 0: 2.0 s -> 5.0 s, stages 0 and 1
    {"Event": "SparkListenerJobStart", "Job ID": 0, "Submission Time": T0 + 2000, "Stage IDs": [0, 1],
     "Properties": {"spark.job.description": "scan: scan, entries"}},
    {"Event": "SparkListenerStageSubmitted", "Stage Info": {"Stage ID": 0, "Stage Name": "parquet at x"}},
    _task(0, 1500, 1_000_000_000, read=10),
    _task(0, 500, 400_000_000, read=20, shuffle_out=7),
    {"Event": "SparkListenerStageSubmitted", "Stage Info": {"Stage ID": 1, "Stage Name": "parquet at y"}},
    _task(1, 300, 100_000_000, shuffle_in=7),
    {"Event": "SparkListenerJobEnd", "Job ID": 0, "Completion Time": T0 + 5000},
    # jobs 1 (6.0 -> 7.0 s) and 2 (6.5 -> 8.0 s) overlap: busy from 6.0 to 8.0 s
    {"Event": "SparkListenerJobStart", "Job ID": 1, "Submission Time": T0 + 6000, "Stage IDs": [2],
     "Properties": {"spark.job.description": "engine-0: windows"}},
    {"Event": "SparkListenerStageSubmitted", "Stage Info": {"Stage ID": 2, "Stage Name": "parquet at z"}},
    _task(2, 800, 700_000_000, shuffle_out=5),
    {"Event": "SparkListenerJobStart", "Job ID": 2, "Submission Time": T0 + 6500, "Stage IDs": [],
     "Properties": {}},
    {"Event": "SparkListenerJobEnd", "Job ID": 1, "Completion Time": T0 + 7000},
    {"Event": "SparkListenerJobEnd", "Job ID": 2, "Completion Time": T0 + 8000},
    {"Event": "SparkListenerApplicationEnd", "Timestamp": T0 + 10_000},
]


def _lines() -> list[str]:
    return [json.dumps(e) + "\n" for e in EVENTS]


def test_jobs_stages_and_the_drivers_time_are_read_from_the_log() -> None:
    s = ev.summarise(_lines())
    assert s.app_s == pytest.approx(10.0)
    # jobs ran during [2, 5] and [6, 8] (jobs 1 and 2 overlap): 5 s busy, 5 s without a job
    assert s.driver_s == pytest.approx(5.0)
    assert [j.job for j in s.jobs] == [0, 1, 2]
    scan = s.jobs[0]
    assert (scan.start_s, scan.end_s, scan.wall_s) == (pytest.approx(2.0), pytest.approx(5.0), pytest.approx(3.0))
    assert scan.description == "scan: scan, entries"
    assert (scan.tasks, scan.run_s, scan.cpu_s) == (3, pytest.approx(2.3), pytest.approx(1.5))
    assert (s.jobs[2].tasks, s.jobs[2].description, s.jobs[2].wall_s) == (0, "", pytest.approx(1.5))
    # stages by task time, with their job and records
    assert [(st.stage, st.job, st.tasks) for st in s.stages] == [(0, 0, 2), (2, 1, 1), (1, 0, 1)]
    top = s.stages[0]
    assert (top.run_s, top.input_records, top.shuffle_write_records) == (pytest.approx(2.0), 30, 7)
    assert s.stages[2].shuffle_read_records == 7


def test_a_rolling_log_is_read_in_order_and_a_directory_gives_its_newest_log(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    logs = tmp_path / "events"
    rolling = logs / "eventlog_v2_local-2"
    rolling.mkdir(parents=True)
    lines = _lines()
    # a rolled log: job 0 ends in the second file, whose name sorts first as text ("10" <
    # "9"); read out of order, the job would have no end
    (rolling / "events_10_local-2").write_text("".join(lines[8:]))
    (rolling / "events_9_local-2").write_text("".join(lines[:8]))
    (rolling / "appstatus_local-2").write_text("")
    older = logs / "local-1"
    older.write_text("".join(lines[:2]))
    os.utime(older, (1, 1))  # the rolling log is the newest
    assert ev.main([str(logs), "--json", "--stages", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["app_s"] == pytest.approx(10.0) and out["driver_s"] == pytest.approx(5.0)
    assert [j["job"] for j in out["jobs"]] == [0, 1, 2]
    assert [st["stage"] for st in out["stages"]] == [0, 2]
    # the same log as text tables
    assert ev.main([str(rolling)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("application 10.00 s, 3 jobs, no job running for 5.00 s")
    assert "scan: scan, entries" in text


def test_what_it_cannot_read_is_a_clear_error(tmp_path: Path) -> None:
    compressed = tmp_path / "local-3.zstd"
    compressed.write_bytes(b"\x28\xb5\x2f\xfd")
    with pytest.raises(SystemExit, match="compressed.*spark.eventLog.compress=false"):
        ev.main([str(compressed)])
    no_start = tmp_path / "no-start"
    no_start.write_text("".join(_lines()[2:]))
    with pytest.raises(SystemExit, match="not a Spark event log"):
        ev.main([str(no_start)])
    notes = tmp_path / "notes.txt"
    notes.write_text("these are notes\n")
    with pytest.raises(SystemExit, match="line 1 is not JSON"):
        ev.main([str(notes)])
    broken = tmp_path / "broken"
    broken.write_text(json.dumps({"Event": "SparkListenerJobStart"}) + "\n")
    with pytest.raises(SystemExit, match="line 1: SparkListenerJobStart without 'Job ID'"):
        ev.main([str(broken)])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit, match="no event log in"):
        ev.main([str(empty)])


def _plan_task(stage: int, launch_ms: int, finish_ms: int, updates: dict[int, object]) -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage, "Task Metrics": {"Executor Run Time": 1},
            "Task Info": {"Launch Time": launch_ms, "Finish Time": finish_ms, "Accumulables": [
                {"ID": acc, "Name": "x", "Update": update, "Value": update} for acc, update in updates.items()]}}


#: Two SQL executions: 7 (its plan replaced once by adaptive execution) and 8, whose jobs
#: name their cut points. Accumulators: 101 an aggregate's build time (ms), 102 a sort's
#: (ms), 103 a shuffle write's (ns), 104 a row count, 105 a compiled stage's duration (ms).
PLAN_EVENTS = [
    {"Event": "SparkListenerApplicationStart", "Timestamp": T0},
    {"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart", "executionId": 7,
     "sparkPlanInfo": {"nodeName": "WholeStageCodegen (1)", "simpleString": "WholeStageCodegen (1)",
                       "metrics": [{"name": "duration", "accumulatorId": 105, "metricType": "timing"}],
                       "children": [{"nodeName": "HashAggregate", "simpleString": "HashAggregate(keys=[a])",
                                     "metrics": [{"name": "time in aggregation build", "accumulatorId": 101,
                                                  "metricType": "timing"},
                                                 {"name": "number of output rows", "accumulatorId": 104,
                                                  "metricType": "sum"}],
                                     "children": []}]}},
    {"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate", "executionId": 7,
     "sparkPlanInfo": {"nodeName": "Exchange", "simpleString": "Exchange hashpartitioning(a)",
                       "metrics": [{"name": "shuffle write time", "accumulatorId": 103, "metricType": "nsTiming"}],
                       "children": []}},
    {"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart", "executionId": 8,
     "sparkPlanInfo": {"nodeName": "Sort", "simpleString": "Sort [a ASC]",
                       "metrics": [{"name": "sort time", "accumulatorId": 102, "metricType": "timing"}],
                       "children": []}},
    {"Event": "SparkListenerJobStart", "Job ID": 4, "Submission Time": T0 + 1000, "Stage IDs": [0],
     "Properties": {"spark.job.description": "scan: scan", "spark.sql.execution.id": "7"}},
    {"Event": "SparkListenerJobStart", "Job ID": 3, "Submission Time": T0 + 1000, "Stage IDs": [],
     "Properties": {"spark.job.description": "scan: listing", "spark.sql.execution.id": "7"}},
    {"Event": "SparkListenerJobStart", "Job ID": 5, "Submission Time": T0 + 5000, "Stage IDs": [1],
     "Properties": {"spark.job.description": "engine-0: windows", "spark.sql.execution.id": "8"}},
    # 2.5 s + 1.5 s of aggregation, 0.25 s of shuffle writes, rows counted but not a time
    _plan_task(0, T0 + 1000, T0 + 4000, {101: "2500", 103: "250000000", 104: "99", 105: "2900"}),
    _plan_task(0, T0 + 1000, T0 + 3000, {101: 1500, 105: "1900"}),
    # a compiled stage that never noted its start: the clock's reading, hours (left out
    # anyway), and a sort update longer than its 1 s task (dropped and counted)
    _plan_task(1, T0 + 5000, T0 + 6000, {102: "7200000", 105: "20711645"}),
    _plan_task(1, T0 + 5000, T0 + 5800, {102: "700", 999: "5"}),
    {"Event": "SparkListenerJobEnd", "Job ID": 4, "Completion Time": T0 + 4000},
    {"Event": "SparkListenerApplicationEnd", "Timestamp": T0 + 10_000},
]


def test_operators_timing_metrics_are_summed_over_tasks_and_named_after_their_cut_point(
        tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    s = ev.summarise(json.dumps(e) + "\n" for e in PLAN_EVENTS)
    got = [(o.execution, o.description, o.node, o.metric, round(o.seconds, 6)) for o in s.operators]
    # by time; the execution's first job names it (job 3, though it started with job 4);
    # the replaced plan's operators count too; the compiled stage's duration and the row
    # count are not times of an operator
    assert got == [
        (7, "scan: listing", "HashAggregate(keys=[a])", "time in aggregation build", 4.0),
        (8, "engine-0: windows", "Sort [a ASC]", "sort time", 0.7),
        (7, "scan: listing", "Exchange hashpartitioning(a)", "shuffle write time", 0.25),
    ]
    assert s.dropped_updates == 1
    assert ev.metric_totals(s.operators) == [
        ("time in aggregation build", pytest.approx(4.0)), ("sort time", pytest.approx(0.7)),
        ("shuffle write time", pytest.approx(0.25))]
    log = tmp_path / "log"
    log.write_text("".join(json.dumps(e) + "\n" for e in PLAN_EVENTS))
    assert ev.main([str(log), "--operators", "2"]) == 0
    text = capsys.readouterr().out
    assert "(1 updates longer than their task left out)" in text
    assert "      4.00 s  time in aggregation build" in text
    assert "the 2 operators with the most time:" in text and "Exchange" not in text.split("most time:")[1]
    assert ev.main([str(log), "--operators", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dropped_updates"] == 1 and [o["metric"] for o in out["operators"]] == ["time in aggregation build"]
    assert out["metric_totals"]["sort time"] == pytest.approx(0.7)
    # without --operators, neither the text nor the JSON changes
    assert ev.main([str(log)]) == 0
    assert "operators" not in capsys.readouterr().out
    assert ev.main([str(log), "--json"]) == 0
    assert "operators" not in json.loads(capsys.readouterr().out)
