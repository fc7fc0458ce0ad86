"""Where an audit's time went, from Spark's event log: its jobs on a timeline, the driver's
time between them, and the stages that did the most work.

    .venv/bin/python benchmarks/event_log.py LOG [--stages 10] [--operators 0] [--json]

``LOG`` is an uncompressed event log: a file, a rolling log's ``eventlog_v2_...``
directory, or a directory holding event logs (the newest is read).
``bench_audit.py --event-log DIR`` writes one per audit; any audit writes one with these
entries under ``[spark.conf]`` in its ``--conf`` file: ``"spark.eventLog.enabled" =
"true"``, ``"spark.eventLog.dir" = "file:/tmp/events"`` (a folder that exists) and
``"spark.eventLog.compress" = "false"``.

Per job: when it was submitted and ended (seconds since the application started), its wall
time, stages, tasks, the tasks' run and CPU time, and its description (the audit names each
job after its cut point: ``scan: scan, entries, ...``). ``driver_s`` adds up the time no job
ran: planning, building DataFrames, discovery, writing the Delta tables. Then the stages
with the most task time, each with its job, tasks and records read, shuffled and written.
That is how docs/design.md's figures ("the scan job 59.5 s", "14.7 s before the first job")
were read.

With ``--operators N``: inside the tasks, which plan operators took the time. Spark keeps
timing metrics per operator of each SQL execution's physical plan (``time in aggregation
build``, ``sort time``, ``scan time``, ``shuffle write time``, ...), summed here over every
task's updates (a compiled stage's ``duration`` is left out: see :data:`COMPILED_STAGE`):
first each metric's total, then the N operators with the most time by any metric, each
with the cut point (job description) whose query it belongs to. An aggregate compiled
into one stage with the operators below it counts their time as its build time: the
scan's "aggregation build" is the grammar's parse of every line as well. That is how
docs/performance-log.md's figures by operator (2026-11-29) were read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: The suffixes Spark gives a compressed event log (``spark.eventLog.compress``).
COMPRESSED = (".lz4", ".lzf", ".snappy", ".zstd")


@dataclass
class Stage:
    """One stage: its job (-1 when no job listed it), tasks, and their summed metrics."""

    stage: int
    job: int
    name: str
    tasks: int = 0
    run_s: float = 0.0
    cpu_s: float = 0.0
    input_records: int = 0
    shuffle_read_records: int = 0
    shuffle_write_records: int = 0


@dataclass
class Job:
    """One job: start and end in seconds since the application started, its stages, and
    its stages' tasks and summed task time."""

    job: int
    description: str
    start_s: float
    end_s: float | None = None
    stages: list[int] = field(default_factory=list)
    tasks: int = 0
    run_s: float = 0.0
    cpu_s: float = 0.0

    @property
    def wall_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.start_s


@dataclass
class Operator:
    """One timing metric of one operator of a SQL execution's plan, summed over its tasks."""

    execution: int
    description: str  # the execution's first job's description (the audit's cut point)
    node: str  # the operator's one-line description (``HashAggregate(keys=[...], ...)``)
    metric: str
    seconds: float = 0.0


@dataclass
class Summary:
    """What :func:`summarise` reads of an event log: jobs by start, stages by task time,
    operators' timing metrics by time."""

    app_s: float | None  # application start to end (None: the log has no end)
    driver_s: float | None  # time in which no job ran (None: the log has no end)
    jobs: list[Job]
    stages: list[Stage]
    operators: list[Operator] = field(default_factory=list)
    dropped_updates: int = 0  # operators' timing updates longer than their task: not counted


#: SQL metric types that are times, and the seconds one unit of each is.
TIMING_UNITS = {"timing": 1e-3, "nsTiming": 1e-9}
#: A compiled stage's node: its ``duration`` is left out. Compiled stages chained in one
#: task each report the chain's whole time (four of them, 17.4 s each, over one 17.4 s
#: aggregate), and one whose start was never noted reports the clock's whole reading
#: (hours, in tasks of half a second; Spark 4.0).
COMPILED_STAGE = "WholeStageCodegen"
#: The events that carry a SQL execution's physical plan (the second: a plan adaptive
#: execution changed).
PLAN_EVENTS = ("SparkListenerSQLExecutionStart", "SparkListenerSQLAdaptiveExecutionUpdate")


def log_files(path: Path) -> list[Path]:
    """The files of the event log at ``path``, in order: ``path`` itself when it is a file;
    the ``events_<n>_...`` files of a rolling log's ``eventlog_v2_...`` directory; or, for a
    directory of event logs, those of the newest one."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise SystemExit(f"event_log: no such file or directory: {path}")
    parts = [p for p in path.iterdir() if p.is_file() and p.name.startswith("events_")]
    if parts:  # a rolling log (Spark's event log format v2)
        return sorted(parts, key=lambda p: int(p.name.split("_")[1]) if p.name.split("_")[1].isdigit() else 0)
    logs = [p for p in path.iterdir() if not p.name.startswith(".")]
    if not logs:
        raise SystemExit(f"event_log: no event log in {path}")
    return log_files(max(logs, key=lambda p: p.stat().st_mtime))


def _lines(files: list[Path]) -> Iterator[str]:
    for path in files:
        with open(path, encoding="utf-8") as fh:
            yield from fh


def summarise(lines: Iterable[str]) -> Summary:
    """The jobs and stages of an event log's lines (JSON, one event per line)."""
    app_start = app_end = None
    jobs: dict[int, Job] = {}
    stages: dict[int, Stage] = {}
    stage_job: dict[int, int] = {}
    metrics: dict[int, tuple[Operator, float]] = {}  # accumulator id -> (its operator, unit)
    sums: dict[int, float] = {}  # accumulator id -> its tasks' updates, summed
    execution_jobs: dict[int, list[int]] = {}
    dropped = [0]  # timing updates longer than their task (see _task_metrics)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            raise SystemExit(f"event_log: line {number} is not JSON (not a Spark event log?)") from None
        try:
            kind = event.get("Event")
            if kind == "SparkListenerApplicationStart":
                app_start = event["Timestamp"]
            elif kind == "SparkListenerApplicationEnd":
                app_end = event["Timestamp"]
            elif str(kind).rsplit(".", 1)[-1] in PLAN_EVENTS:
                _plan_metrics(event["sparkPlanInfo"], event["executionId"], metrics)
            else:
                _add(event, jobs, stages, stage_job)
                if kind == "SparkListenerTaskEnd":
                    _task_metrics(event, metrics, sums, dropped)
                elif kind == "SparkListenerJobStart":
                    execution = (event.get("Properties") or {}).get("spark.sql.execution.id")
                    if execution is not None and str(execution).isdigit():
                        execution_jobs.setdefault(int(execution), []).append(event["Job ID"])
        except KeyError as missing:
            raise SystemExit(f"event_log: line {number}: {event.get('Event')} without {missing}") from None
    if app_start is None:
        raise SystemExit("event_log: no SparkListenerApplicationStart event (not a Spark event log?)")
    for job in jobs.values():
        job.start_s = (job.start_s - app_start) / 1000
        job.end_s = None if job.end_s is None else (job.end_s - app_start) / 1000
        for sid in job.stages:
            if sid in stages:
                job.tasks += stages[sid].tasks
                job.run_s += stages[sid].run_s
                job.cpu_s += stages[sid].cpu_s
    ordered = sorted(jobs.values(), key=lambda j: j.start_s)
    app_s = None if app_end is None else (app_end - app_start) / 1000
    driver_s = None if app_s is None else app_s - _busy(ordered, app_s)
    operators = []
    for acc, total in sums.items():
        operator, unit = metrics[acc]
        first = min(execution_jobs.get(operator.execution, []), default=None)
        operators.append(Operator(operator.execution, jobs[first].description if first in jobs else "",
                                  operator.node, operator.metric, total * unit))
    operators.sort(key=lambda o: (-o.seconds, o.execution, o.node, o.metric))
    return Summary(app_s, driver_s, ordered, sorted(stages.values(), key=lambda s: (-s.run_s, s.stage)), operators,
                   dropped[0])


def _plan_metrics(node: dict, execution: int, metrics: dict[int, tuple[Operator, float]]) -> None:
    """Note the timing metrics of ``node`` and the operators under it (a plan's tree)."""
    for metric in node.get("metrics", []):
        unit = TIMING_UNITS.get(metric.get("metricType", ""))
        if unit is not None and not node.get("nodeName", "").startswith(COMPILED_STAGE):
            name = node.get("simpleString") or node.get("nodeName", "")
            metrics[metric["accumulatorId"]] = (Operator(execution, "", name, metric["name"]), unit)
    for child in node.get("children", []):
        _plan_metrics(child, execution, metrics)


def _task_metrics(event: dict, metrics: dict[int, tuple[Operator, float]], sums: dict[int, float],
                  dropped: list[int]) -> None:
    """Add a task's updates of the operators' timing metrics to ``sums``. An update longer
    than the task itself ran (a second of slack) is dropped and counted in ``dropped``."""
    info = event.get("Task Info") or {}
    launch, finish = info.get("Launch Time"), info.get("Finish Time")
    wall_s = (finish - launch) / 1000 if isinstance(launch, int) and isinstance(finish, int) and finish else None
    for acc in info.get("Accumulables", []):
        if acc.get("ID") in metrics and acc.get("Update") is not None:
            try:
                update = float(acc["Update"])
            except (TypeError, ValueError):
                continue
            if wall_s is not None and update * metrics[acc["ID"]][1] > wall_s + 1.0:
                dropped[0] += 1
                continue
            sums[acc["ID"]] = sums.get(acc["ID"], 0.0) + update


def metric_totals(operators: list[Operator]) -> list[tuple[str, float]]:
    """Each timing metric's seconds over every operator, most first."""
    totals: dict[str, float] = {}
    for o in operators:
        totals[o.metric] = totals.get(o.metric, 0.0) + o.seconds
    return sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))


def _add(event: dict, jobs: dict[int, Job], stages: dict[int, Stage], stage_job: dict[int, int]) -> None:
    """Add one event's job, stage or task to ``jobs`` and ``stages``."""
    kind = event.get("Event")
    if kind == "SparkListenerJobStart":
        job = event["Job ID"]
        description = (event.get("Properties") or {}).get("spark.job.description") or ""
        jobs[job] = Job(job, description, event["Submission Time"], stages=list(event.get("Stage IDs", [])))
        for s in jobs[job].stages:
            stage_job[s] = job
    elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
        jobs[event["Job ID"]].end_s = event["Completion Time"]
    elif kind == "SparkListenerStageSubmitted":
        info = event["Stage Info"]
        sid = info["Stage ID"]
        stages.setdefault(sid, Stage(sid, stage_job.get(sid, -1), info.get("Stage Name", "")))
    elif kind == "SparkListenerTaskEnd":
        sid = event["Stage ID"]
        stage = stages.setdefault(sid, Stage(sid, stage_job.get(sid, -1), ""))
        metrics = event.get("Task Metrics") or {}
        stage.tasks += 1
        stage.run_s += metrics.get("Executor Run Time", 0) / 1000
        stage.cpu_s += metrics.get("Executor CPU Time", 0) / 1e9
        stage.input_records += (metrics.get("Input Metrics") or {}).get("Records Read", 0)
        stage.shuffle_read_records += (metrics.get("Shuffle Read Metrics") or {}).get("Total Records Read", 0)
        stage.shuffle_write_records += (metrics.get("Shuffle Write Metrics") or {}).get(
            "Shuffle Records Written", 0)


def _busy(jobs: list[Job], app_s: float) -> float:
    """Seconds in which at least one job ran (jobs may overlap)."""
    busy, reached = 0.0, 0.0
    for job in jobs:
        end = app_s if job.end_s is None else job.end_s
        start = max(job.start_s, reached)
        if end > start:
            busy += end - start
            reached = end
    return busy


def render(summary: Summary, top: int, operators: int = 0) -> str:
    out = []
    app = "?" if summary.app_s is None else f"{summary.app_s:.2f}"
    driver = "?" if summary.driver_s is None else f"{summary.driver_s:.2f}"
    out.append(f"application {app} s, {len(summary.jobs)} jobs, no job running for {driver} s")
    out.append(f"{'job':>4} {'start':>8} {'end':>8} {'wall':>7} {'stages':>6} {'tasks':>6} {'task run':>9} "
               f"{'task cpu':>9}  description")
    for j in summary.jobs:
        end = "?" if j.end_s is None else f"{j.end_s:8.2f}"
        wall = "?" if j.wall_s is None else f"{j.wall_s:7.2f}"
        out.append(f"{j.job:>4} {j.start_s:8.2f} {end:>8} {wall:>7} {len(j.stages):>6} {j.tasks:>6} "
                   f"{j.run_s:9.2f} {j.cpu_s:9.2f}  {j.description[:60]}")
    out.append(f"the {min(top, len(summary.stages))} stages with the most task time:")
    out.append(f"{'stage':>6} {'job':>4} {'tasks':>6} {'task run':>9} {'task cpu':>9} {'input':>10} "
               f"{'shuffle in':>10} {'shuffle out':>11}")
    for s in summary.stages[:top]:
        out.append(f"{s.stage:>6} {s.job:>4} {s.tasks:>6} {s.run_s:9.2f} {s.cpu_s:9.2f} {s.input_records:>10} "
                   f"{s.shuffle_read_records:>10} {s.shuffle_write_records:>11}")
    if operators > 0:
        out.append("the operators' timing metrics, summed over their tasks:")
        if summary.dropped_updates:
            out.append(f"({summary.dropped_updates} updates longer than their task left out)")
        for metric, seconds in metric_totals(summary.operators):
            out.append(f"{seconds:10.2f} s  {metric}")
        out.append(f"the {min(operators, len(summary.operators))} operators with the most time:")
        out.append(f"{'seconds':>9} {'exec':>5}  {'metric':<28} {'cut point':<32} operator")
        for o in summary.operators[:operators]:
            out.append(f"{o.seconds:9.2f} {o.execution:>5}  {o.metric[:28]:<28} {o.description[:32]:<32} "
                       f"{' '.join(o.node.split())[:100]}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="an uncompressed event log, or a directory of them")
    parser.add_argument("--stages", type=int, default=10, help="how many of the busiest stages to list")
    parser.add_argument("--operators", type=int, default=0,
                        help="also list the plan operators with the most time (and each timing metric's total)")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of tables")
    args = parser.parse_args(argv)
    files = log_files(args.log)
    for path in files:
        if path.suffix in COMPRESSED:
            raise SystemExit(f"event_log: {path} is compressed ({path.suffix[1:]}); write event logs with "
                             "spark.eventLog.compress=false")
        if not os.access(path, os.R_OK):
            raise SystemExit(f"event_log: cannot read {path}")
    summary = summarise(_lines(files))
    if args.json:
        print(json.dumps({"app_s": summary.app_s, "driver_s": summary.driver_s,
                          "jobs": [{**asdict(j), "wall_s": j.wall_s} for j in summary.jobs],
                          "stages": [asdict(s) for s in summary.stages[:args.stages]],
                          **({"metric_totals": dict(metric_totals(summary.operators)),
                              "dropped_updates": summary.dropped_updates,
                              "operators": [asdict(o) for o in summary.operators[:args.operators]]}
                             if args.operators > 0 else {})}, indent=1))
    else:
        print(render(summary, args.stages, args.operators))
    return 0


if __name__ == "__main__":
    sys.exit(main())
