"""``auditor audit`` (and ``jobs/audit.py``): its options and the run from them, with the
exit status (SPEC 7) and one FAILED ``runs`` row for a run that ends early."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from auditor.errors import (
    AuditorError,
    InputError,
    Stopped,
    UsageError,
    failure_recorded,
    failure_text,
    mark_recorded,
)
from auditor.registry import FAIL_ON_CHOICES, FORMATS, PROTOCOLS

logger = logging.getLogger("auditor")


def audit_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options of ``audit``, shared with ``jobs/audit.py``."""
    options = [
        click.argument("snapshot", type=click.Path(file_okay=False, path_type=str)),
        click.option("--out", required=True, type=click.Path(file_okay=False, path_type=str),
                     help="Directory of the Delta tables (created if missing)."),
        click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
                     help="Input format: kafka snapshot (default), tables, or etcd members' WAL files."),
        click.option("--cluster", default=None, help="Cluster name stored in every row [default: default]."),
        click.option("--snapshot", "snapshot_label", default=None,
                     help="ISO-8601 instant labelling an input without snapshot= folders [default: now]."),
        click.option("--run-id", default=None, help="Run id; re-running with the same id replaces its rows [default: new UUID]."),
        click.option("--protocol", type=click.Choice(PROTOCOLS), default=None,
                     help="Truncation protocol to evaluate [default: epoch for kafka, raft for table and etcd]."),
        click.option("--fail-on", type=click.Choice(FAIL_ON_CHOICES), default=None,
                     help="Exit 1 when an unsuppressed finding is at or above this severity [default: critical]."),
        click.option("--conf", "conf_file", type=click.Path(dir_okay=False, path_type=str), default=None,
                     help="TOML config file (see conf/default.toml)."),
        click.option("--master", default=None, help="Spark master URL [default: local[*]]."),
        click.option("--incremental/--full", "incremental", default=None,
                     help="Parse only dump files that changed since earlier incremental runs of the "
                          "cluster into OUT, reading the rest from OUT's store; when no input file "
                          "changed since the cluster's latest run, write that run's tables as this "
                          "run's [default: --full, or [run] incremental in the config]."),
        click.option("--verify-crc/--headers-only", "verify_crc", default=None,
                     help="Segment files: read every batch whole and check its CRC (a CRC mismatch is "
                          "CORRUPT_BATCH), or read v2 batch headers only, 61 bytes per batch [default: "
                          "--headers-only, or [input] verify_crc in the config]."),
        click.option("--work-dir", default=None, type=click.Path(file_okay=False, path_type=str),
                     help="Folder for the run's intermediates, which executors write and read: on a "
                          "cluster, one every node sees [default: the system's temporary folder in "
                          "local mode, OUT/_auditor/work otherwise, or [run] work_dir]."),
        click.option("--event-log", default=None, type=click.Path(file_okay=False, path_type=str),
                     help="Keep Spark's event log in this folder (created if missing), for Spark's "
                          "history server."),
        click.option("--report", type=click.Path(dir_okay=False, path_type=str), default=None,
                     help="Also write an HTML summary of the run to this file."),
        click.option("--verbose", "-v", is_flag=True, help="Show tracebacks and Spark's own log lines."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def run_from_options(
    snapshot: str, out: str, fmt: str | None, cluster: str | None, snapshot_label: str | None,
    run_id: str | None, protocol: str | None, fail_on: str | None, conf_file: str | None,
    master: str | None, report: str | None, verbose: bool, incremental: bool | None = None,
    work_dir: str | None = None, event_log: str | None = None, verify_crc: bool | None = None,
) -> int:
    """Run one audit from parsed options and return the exit status (0, 1 or 2).

    Every way a run can end early (bad input or config, an error, SIGTERM, SIGINT) exits 2
    and, once the run id is known and OUT is a writable folder outside the input, leaves
    exactly one FAILED ``runs`` row: the run records it itself once it has started
    (:func:`auditor.run.recorded_end`), this function before that.
    """
    _setup_logging(verbose)
    started = time.monotonic()
    # A scheduler stops a run with SIGTERM: raise Stopped (a SystemExit), so a run that is
    # writing undoes its writes (auditor.sinks.commit) and records its end before it exits.
    previous = _stop_on_sigterm()

    from auditor.progress import ProgressLine

    line = ProgressLine(lambda: None, sys.stderr, sys.stderr.isatty(), started=started)
    progress = line.set_stage

    from datetime import datetime, timezone

    from auditor.config import Config

    began = datetime.now(timezone.utc)
    cfg: Config | None = None
    known_id: str | None = None
    try:
        from auditor.config import load_config, validate_run_id

        known_id = validate_run_id(run_id) if run_id is not None else str(uuid.uuid4())
        cfg = load_config(conf_file).with_overrides(
            format=fmt, cluster=cluster, protocol=protocol, fail_on=fail_on, master=master, incremental=incremental,
            verify_crc=verify_crc,
            work_dir=work_dir)
        if event_log is not None:
            cfg = cfg.with_overrides(spark_conf={**cfg.spark_conf, **event_log_conf(event_log)})
        if not os.path.isdir(snapshot):
            raise InputError(f"input {snapshot} does not exist or is not a directory")
        from auditor.run import check_paths

        check_paths(snapshot, out, cfg)
        from auditor.run import prepare, run_audit

        progress(f"walking the input under {snapshot}")
        prepared = prepare(snapshot, cfg, snapshot_label, began)
        progress("starting Spark")
        from auditor.spark import build_session
        from auditor.summary import format_summary

        spark = build_session(cfg.master, conf=cfg.spark_conf, quiet=not verbose,
                              small_input=prepared.policy.small_input, work_parent=cfg.work_dir)
        if not verbose:
            spark.sparkContext.setLogLevel("ERROR")
        from auditor.progress import spark_poller

        line.poll = spark_poller(spark)
        line.start()
        try:
            result = run_audit(spark, snapshot, out, cfg, run_id=known_id, snapshot_label=snapshot_label,
                               progress=progress, prepared=prepared)
        finally:
            line.stop()
        click.echo(format_summary(result))
        if report:
            from auditor.report import write_report

            write_report(report, out, cluster=cfg.cluster, run_id=result.run_id)
            click.echo(f"report: {report}")
        if result.exit_code:
            click.echo(f"{result.failing} finding(s) at or above --fail-on {cfg.fail_on}", err=True)
        return result.exit_code
    except (Exception, KeyboardInterrupt, Stopped) as exc:
        _record_if_not_yet(exc, out, known_id, cfg, cluster, began, snapshot)
        if verbose:
            logger.exception("audit failed")
        if isinstance(exc, (AuditorError, Stopped, KeyboardInterrupt)):
            text = str(exc) if not isinstance(exc, KeyboardInterrupt) else "stopped by SIGINT"
            suffix = f" (run {known_id} is recorded as FAILED in {out})" if failure_recorded(exc) else ""
            click.echo(f"auditor: error: {text}{suffix}", err=True)
        else:  # a run that fails before it finishes: exit 2 (SPEC 7)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            click.echo(f"auditor: error: the run failed: {first[:300]} (use --verbose for details)", err=True)
        return 2
    finally:
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(signal.SIGTERM, previous)


def _record_if_not_yet(exc: BaseException, out: str, run_id: str | None, cfg: Any, cluster: str | None,
                       began: Any, snapshot: str) -> None:
    """The FAILED row of a run that stopped before it started (bad config, input or usage):
    only with a known run id, an OUT that is a writable folder, and never inside the input."""
    from auditor.run import out_inside_input, record_early_failure

    if run_id is None or failure_recorded(exc) or out_inside_input(snapshot, out):
        return
    if cfg is None:  # the config could not be read: record under the cluster the options name
        from auditor.config import Config

        try:
            cfg = Config().with_overrides(cluster=cluster)
        except Exception:
            cfg = Config()
    if record_early_failure(out, run_id, cfg, began, snapshot, failure_text(exc)):
        mark_recorded(exc)


def event_log_conf(folder: str) -> dict[str, str]:
    """Spark's settings that keep the event log in ``folder`` (created; a file ``folder``
    is a usage error)."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--event-log {folder}: cannot create the folder: {exc}") from exc
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": Path(os.path.abspath(folder)).as_uri()}


def _stop_on_sigterm() -> Any:
    """Make SIGTERM raise :class:`Stopped` (once: a second SIGTERM while the run unwinds is
    ignored); returns the previous handler (None when not on the main thread)."""
    try:
        return signal.signal(signal.SIGTERM, _raise_stopped)
    except ValueError:  # only the main thread may set handlers
        return None


def _raise_stopped(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from auditor.spark import drop_pending_jvm_call

    with contextlib.suppress(Exception):
        drop_pending_jvm_call()  # the exception may leave a JVM call halfway
    raise Stopped(signal.Signals(signum).name)


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.ERROR)
