"""Where an audit's time went, from Spark's event log: its jobs on a timeline, the driver's
time between them, and the stages that did the most work.

    .venv/bin/python benchmarks/event_log.py LOG [--stages 10] [--json]

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
class Summary:
    """What :func:`summarise` reads of an event log: jobs by start, stages by task time."""

    app_s: float | None  # application start to end (None: the log has no end)
    driver_s: float | None  # time in which no job ran (None: the log has no end)
    jobs: list[Job]
    stages: list[Stage]


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
            else:
                _add(event, jobs, stages, stage_job)
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
    return Summary(app_s, driver_s, ordered, sorted(stages.values(), key=lambda s: (-s.run_s, s.stage)))


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


def render(summary: Summary, top: int) -> str:
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
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="an uncompressed event log, or a directory of them")
    parser.add_argument("--stages", type=int, default=10, help="how many of the busiest stages to list")
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
                          "stages": [asdict(s) for s in summary.stages[:args.stages]]}, indent=1))
    else:
        print(render(summary, args.stages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
