"""Command line: ``auditor audit ...``. A thin click group; pyspark is imported lazily
inside commands so ``auditor --help`` is instant."""

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

from auditor.checks.registry import FAIL_ON_CHOICES, FORMATS, PROTOCOLS
from auditor.errors import (
    AuditorError,
    InputError,
    Stopped,
    UsageError,
    failure_recorded,
    failure_text,
    mark_recorded,
)
from auditor.simulator import ALL_FAULTS
from auditor.simulator.kafka_text import DEFAULT_STYLE, DUMP_STYLES

logger = logging.getLogger("auditor")


def _audit_options(fn: Callable[..., Any]) -> Callable[..., Any]:
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


@click.group(context_settings={"auto_envvar_prefix": "AUDITOR", "help_option_names": ["-h", "--help"]})
@click.version_option(package_name="log-auditor")
def main() -> None:
    """Audit replicated logs (Kafka, Raft) for divergence, truncation and data loss."""


@main.command("audit")
@_audit_options
def audit_command(**kwargs: Any) -> None:
    """Audit SNAPSHOT and write the findings as Delta tables under --out.

    Exit status: 0 clean, 1 when a finding reaches --fail-on, 2 on bad usage or input.
    """
    sys.exit(run_from_options(**kwargs))


@main.command("simulate")
@click.argument("snapshot", type=click.Path(file_okay=False, path_type=str))
@click.option("--brokers", default=3, show_default=True, type=click.IntRange(1), help="Brokers in the cluster.")
@click.option("--topics", default=2, show_default=True, type=click.IntRange(1), help="Topics.")
@click.option("--partitions", default=3, show_default=True, type=click.IntRange(1), help="Partitions per topic.")
@click.option("--batches", default=40, show_default=True, type=click.IntRange(1),
              help="Batches per partition (on the leader, before incidents).")
@click.option("--faults", default="all", show_default=True,
              help="all, none, NAME[=COUNT],... or @FILE.toml with a [faults] table of name = count. "
                   "Names: " + ", ".join(ALL_FAULTS) + ".")
@click.option("--seed", default=1, show_default=True, type=int, help="Random seed: same seed, same snapshot.")
@click.option("--replication-factor", default=3, show_default=True, type=click.IntRange(1))
@click.option("--min-isr", default=2, show_default=True, type=click.IntRange(1), help="min.insync.replicas.")
@click.option("--kafka-version", "dump_style", default=DEFAULT_STYLE, show_default=True,
              type=click.Choice(list(DUMP_STYLES)),
              help="Print dumps as this Kafka release's kafka-dump-log.sh does.")
@click.option("--records", is_flag=True, help="Also print record lines (--deep-iteration; 2.2+ styles).")
@click.option("--segment-batches", default=500, show_default=True, type=click.IntRange(1),
              help="Batches per log segment (one dump file each).")
@click.option("--topic-prefix", default="", help="Prepended to every topic name.")
@click.option("--dump-layout", type=click.Choice(["per-segment", "per-broker"]), default="per-segment",
              show_default=True,
              help="One dump file per segment (in its partition folder), or one multi-section file per "
                   "broker (fewer files: use it from about 10,000 partitions).")
@click.option("--shapes/--no-shapes", default=True, show_default=True,
              help="Give the cluster real clusters' shapes: tiered storage (the second of every three "
                   "topics: old segments remote, not dumped), DeleteRecords (a log start inside the first "
                   "segment, every fourth partition of the others), transactional producers with "
                   "COMMIT/ABORT markers (the third of every three topics) and a compacted "
                   "__consumer_offsets topic.")
@click.option("--kraft-controllers", default=None, type=click.IntRange(0),
              help="Also simulate a KRaft controller quorum of N voters (node ids after the brokers'; every "
                   "broker an observer) and write its __cluster_metadata-0 log, snapshots and quorum-state, "
                   "with the kraft-* faults; 0: none [default: 3 for Kafka 2.8 and later, else 0].")
@click.option("--continue-from", "previous", default=None, type=click.Path(file_okay=False, path_type=str),
              help="Write the next snapshot of the cluster simulated in this earlier snapshot: the same "
                   "history, then --steps more batches per partition and --faults (default: none). The "
                   "cluster's settings come from its simulation.json.")
@click.option("--steps", default=None, type=click.IntRange(0),
              help="With --continue-from: about this many more batches per partition [default: 20].")
@click.pass_context
def simulate_command(ctx: click.Context, snapshot: str, previous: str | None, steps: int | None,
                     **kwargs: Any) -> None:
    """Simulate replication with injected faults and write a snapshot to SNAPSHOT.

    Writes kafka-dump-log.sh text, checkpoint files and topics-describe.txt in the layout
    `auditor audit` reads, plus expected_findings.json: the findings (WARNING and above)
    and follower offsets the simulator knows to be true, and simulation.json: how it was
    made (what --continue-from reads). With --continue-from, files that did not change keep
    the earlier snapshot's modification time, as a broker's rolled segments do.
    """
    from auditor.simulator import continue_simulation, simulate
    from auditor.simulator.kraft import kraft_style_for

    source = click.core.ParameterSource
    given = [name for name in kwargs if ctx.get_parameter_source(name) == source.COMMANDLINE]
    flags = {p.name: max(p.opts, key=len) for p in ctx.command.params}
    try:
        if previous is None:
            if steps is not None:
                raise InputError("--steps needs --continue-from")
            if kwargs["kraft_controllers"] is None:
                kwargs["kraft_controllers"] = 3 if kraft_style_for(kwargs["dump_style"]) is not None else 0
            with click.progressbar(length=kwargs["topics"] * kwargs["partitions"], label="simulating partitions",
                                   file=sys.stderr, show_pos=True) as bar:
                summary = simulate(snapshot, progress=bar.update, **kwargs)
        else:
            fixed = [n for n in given if n != "faults"]
            if fixed:
                raise InputError("with --continue-from the cluster's settings come from its simulation.json: "
                                 + ", ".join(flags[n] for n in fixed) + " cannot be given")
            faults = kwargs["faults"] if "faults" in given else "none"
            summary = continue_simulation(previous, snapshot, 20 if steps is None else steps, faults)
    except (InputError, ValueError) as exc:
        click.echo(f"auditor: error: {exc}", err=True)
        sys.exit(2)
    click.echo(summary.format())


@main.command("report")
@click.argument("out", type=click.Path(exists=True, file_okay=False, path_type=str))
@click.option("--cluster", default=None, help="Cluster to report on [default: the only one in OUT].")
@click.option("--run-id", default=None, help="Run to report on [default: the cluster's latest SUCCEEDED run].")
@click.option("--output", "output", default="report.html", show_default=True,
              type=click.Path(dir_okay=False, path_type=str), help="HTML file to write.")
@click.option("--max-diagrams", default=200, show_default=True, type=click.IntRange(0),
              help="Draw the worst N flagged partitions; list the others.")
def report_command(out: str, cluster: str | None, run_id: str | None, output: str, max_diagrams: int) -> None:
    """Write one self-contained HTML report of a run, read from the Delta tables in OUT.

    Overview, findings by check, the trend over earlier runs, the flagged partitions (an
    unsuppressed finding of WARNING or worse), and a diagram of each: one lane per replica
    along the offset axis, epochs, HWM, LEO, divergence and truncation offsets.
    """
    from auditor.report import write_report

    try:
        view = write_report(output, out, cluster=cluster, run_id=run_id, max_diagrams=max_diagrams)
    except AuditorError as exc:
        click.echo(f"auditor: error: {exc}", err=True)
        sys.exit(2)
    click.echo(f"report of run {view.run_id} ({view.run['cluster']}): {output}")


@main.command("explain")
@click.argument("source", metavar="OUT|SNAPSHOT", type=click.Path(exists=True, file_okay=False, path_type=str))
@click.argument("topic_partition", metavar="[TOPIC-PARTITION]", required=False)
@click.option("--topic", default=None, help="The topic (with --partition; SPEC 7's spelling).")
@click.option("--partition", default=None, type=click.IntRange(0), help="The partition number (with --topic).")
@click.option("--cluster", default=None, help="Cluster [default: the only one in OUT].")
@click.option("--run-id", default=None, help="Run [default: the cluster's latest SUCCEEDED run].")
@click.option("--conf", "conf_file", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="TOML config for auditing a SNAPSHOT (protocol, severities, allowlist).")
def explain_command(source: str, topic_partition: str | None, topic: str | None, partition: int | None,
                    cluster: str | None, run_id: str | None, conf_file: str | None) -> None:
    """Explain one partition in the terminal: its leader and why, each replica's lineage
    and epoch cache, each follower's truncation round by round, and its findings.

    SOURCE is an audit's OUT (a run's tables are read, no Spark) or a SNAPSHOT folder (it
    is audited first, in this process, into a temporary OUT). Name the partition as
    TOPIC-PARTITION (orders-3) or with --topic orders --partition 3.
    """
    from auditor.explain import explain, explain_snapshot, is_output_folder, parse_topic_partition

    try:
        options = topic is not None or partition is not None
        if (topic_partition is not None) == options or (options and (topic is None or partition is None)):
            raise UsageError("name the partition once: TOPIC-PARTITION, or --topic and --partition")
        if topic_partition is not None:
            topic, partition = parse_topic_partition(topic_partition)
        assert topic is not None and partition is not None
        if is_output_folder(source):
            explain(source, topic, partition, cluster=cluster, run_id=run_id)
        else:
            from auditor.config import load_config

            config = load_config(conf_file)
            explain_snapshot(source, topic, partition, config.with_overrides(cluster=cluster),
                             progress=lambda msg: click.echo(msg, err=True))
    except AuditorError as exc:
        click.echo(f"auditor: error: {exc}", err=True)
        sys.exit(2)


@main.command("recover")
@click.argument("out", type=click.Path(exists=True, file_okay=False, path_type=str))
def recover_command(out: str) -> None:
    """Undo the writes of an audit that was killed while writing to OUT.

    Every audit into OUT does this itself before it writes; run it by hand when no audit
    will follow soon, e.g. after a killed re-run of an existing --run-id (whose earlier
    rows stay visible, half replaced, until then). Exit 0 also when there was nothing to do.
    """
    from auditor.errors import OutputError
    from auditor.sinks import commit
    from auditor.sinks.delta import DeltaRsWriter

    try:
        with commit.out_lock(out, holder=f"auditor recover, pid {os.getpid()}",
                             waiting=lambda msg: click.echo(msg, err=True)):
            done = commit.recover(out, DeltaRsWriter(), by="auditor recover")
    except OutputError as exc:
        click.echo(f"auditor: error: {exc}", err=True)
        sys.exit(2)
    click.echo(done or f"{out}: no interrupted run to recover")


@main.command("warm-up")
@click.option("--force", is_flag=True, help="Build the jar and the archive again even when they exist.")
def warm_up_command(force: bool) -> None:
    """Build what makes later audits faster: the auditor's jar and the archive of the
    classes Spark's JVM loads.

    Compiles the auditor's Java classes (auditor.localjar; needs javac: Hadoop's local file
    system without a child process per file it writes, a planner rule for small inputs'
    one-partition plans, and lists of columns sent from Python in one call), then audits a
    tiny simulated snapshot once and keeps the JVM's class-data-sharing archive. Both live
    in ~/.cache/log-auditor/ (scripts/setup.sh runs this). Audits work without them, only
    slower.
    AUDITOR_LOCAL_JAR=0 and AUDITOR_CLASS_ARCHIVE=0 turn them off.
    """
    from auditor import classarchive, localjar

    jar = localjar.jar_path()
    if jar is not None and (force or not jar.is_file()):
        try:
            localjar.build()
            click.echo(f"warm-up: the auditor's jar built: {jar}")
        except Exception as exc:  # audits still work with Hadoop's own and Spark's plans
            click.echo(f"warm-up: could not build the auditor's jar ({exc}); audits will use Hadoop's local "
                       "file system, which starts a process per file it writes", err=True)
    path = classarchive.archive_path()
    if path is None:
        click.echo(f"warm-up: the class archive is off ({classarchive.ENV}=0)")
        return
    for stale in classarchive.prune_stale(path, time.time()):
        click.echo(f"warm-up: removed another build's class archive, written over "
                   f"{classarchive.STALE_ARCHIVE_DAYS} days ago: {stale}")
    if path.is_file() and not force:
        click.echo(f"warm-up: class archive already built: {path}")
        return
    started = time.monotonic()
    try:
        built = classarchive.build(progress=lambda msg: click.echo(f"warm-up: {msg}", err=True))
    except Exception as exc:  # audits still work without the archive
        click.echo(f"warm-up: could not build the class archive ({exc}); audits will start slower", err=True)
        sys.exit(1)
    click.echo(f"warm-up: class archive written in {time.monotonic() - started:.0f}s: {built}")


def run_from_options(
    snapshot: str, out: str, fmt: str | None, cluster: str | None, snapshot_label: str | None,
    run_id: str | None, protocol: str | None, fail_on: str | None, conf_file: str | None,
    master: str | None, report: str | None, verbose: bool, incremental: bool | None = None,
    work_dir: str | None = None, event_log: str | None = None,
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
            work_dir=work_dir)
        if event_log is not None:
            cfg = cfg.with_overrides(spark_conf={**cfg.spark_conf, **event_log_conf(event_log)})
        if not os.path.isdir(snapshot):
            raise InputError(f"input {snapshot} does not exist or is not a directory")
        from auditor.run import check_paths

        check_paths(snapshot, out, cfg)
        progress("starting Spark")
        from auditor.run import format_summary, is_small_input, run_audit
        from auditor.spark import build_session

        spark = build_session(cfg.master, conf=cfg.spark_conf, quiet=not verbose,
                              small_input=is_small_input(snapshot), work_parent=cfg.work_dir)
        if not verbose:
            spark.sparkContext.setLogLevel("ERROR")
        from auditor.progress import spark_poller

        line.poll = spark_poller(spark)
        line.start()
        try:
            result = run_audit(spark, snapshot, out, cfg, run_id=known_id, snapshot_label=snapshot_label,
                               progress=progress)
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
