"""One audit run: parse, compute, write the Delta tables, summarise, decide the exit status.

Every output is computed and materialised before the first table is written, so a run
that fails while computing leaves OUT untouched. The writes land as
:mod:`auditor.sinks.commit` says: runs into one OUT take turns to write, a run that fails
while writing (or is killed: then the next writer does it) has every table it touched
restored, and the SUCCEEDED ``runs`` row is written last, so readers never count a
half-written run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from auditor.config import Config, validate_run_id
from auditor.engine import audit
from auditor.errors import (
    UsageError,
    failure_recorded,
    failure_text,
    mark_recorded,
)
from auditor.ingest.discovery import DUMP, Discovery, discover
from auditor.load import load_snapshot, measure
from auditor.load.reuse import Reuse, file_fingerprints
from auditor.materialise import read_frame_arrow, stream_frame_arrow
from auditor.policy import SizePolicy
from auditor.sinks import commit, schemas, unchanged
from auditor.sinks import delta as io
from auditor.sinks.history import read_history
from auditor.spark import fit_shuffle_partitions, is_local_master
from auditor.summary import (
    RunResult,
    check_consistent,
    finding_summary,
    run_counts,
    severity_counts,
    worst_partitions,
)
from auditor.version import __version__
from auditor.workdir import new_work_dir, remove_work_dir

logger = logging.getLogger(__name__)

OUTPUT = "output"  # the cut point holding the output tables

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True)
class Prepared:
    """A run's input walked once, before Spark reads it (or starts: the JVM of a small
    input's run is started for it, :func:`auditor.spark.build_session`)."""

    #: the run's start: the label of an unlabelled snapshot, ``runs.started_at``
    started: datetime
    #: the discovery of a Kafka snapshot (None for the other formats)
    found: Discovery | None
    #: the input's size policy (:mod:`auditor.policy`)
    policy: SizePolicy


def prepare(snapshot_path: str, config: Config, snapshot_label: str | None = None,
            started: datetime | None = None) -> Prepared:
    """Walk the input once and measure its size policy (no Spark).

    Raises:
        InputError, UsageError: as :func:`auditor.ingest.discovery.discover`.
    """
    started = started or datetime.now(timezone.utc)
    found = discover(snapshot_path, started, snapshot_label) if config.format == "kafka" else None
    return Prepared(started, found, measure(snapshot_path, config.format, found, incremental=config.incremental))


def run_audit(
    spark: SparkSession,
    snapshot_path: str,
    out: str,
    config: Config,
    *,
    run_id: str | None = None,
    snapshot_label: str | None = None,
    progress: Progress = _quiet,
    prepared: Prepared | None = None,
) -> RunResult:
    """Audit ``snapshot_path`` and write the tables under ``out``.

    Args:
        prepared: the input as :func:`prepare` walked it (default: walked here).

    Raises:
        AuditorError: bad input or usage (exit 2); a FAILED ``runs`` row is added when
            OUT is writable and the failure happened after the run started.
    """
    run_id = validate_run_id(run_id or str(uuid.uuid4()))
    check_paths(snapshot_path, out, config)
    t0 = time.monotonic()
    prepared = prepared or prepare(snapshot_path, config, snapshot_label)
    started = prepared.started
    io.check_writable(out)
    writer = io.choose_writer(spark)
    identity = commit.RunIdentity(
        run_id=run_id, cluster=config.cluster, started_at=started, input=snapshot_path, format=config.format,
        protocol=config.effective_protocol, writer=writer.name, tool_version=__version__,
        spark_version=spark.version)
    root = work_root(spark, out, config)
    work_dir = new_work_dir(root)
    fit_shuffle_partitions(spark)
    try:
        with recorded_end(writer, out, identity):
            computed = compute_run(spark, snapshot_path, out, config, identity, work_dir, prepared,
                                   snapshot_label=snapshot_label, progress=progress)
            by_check, failing = land_run(computed, out, config, writer, progress=progress)
    finally:
        remove_work_dir(work_dir)
    return RunResult(
        run_id=run_id, out=out, writer=writer.name, counts=computed.counts, findings_by_check=by_check,
        worst_partitions=worst_partitions(computed.arrow["partition_status"]),
        failing=failing, exit_code=1 if failing else 0, seconds=time.monotonic() - t0)


@contextlib.contextmanager
def recorded_end(writer: io.TableWriter, out: str, identity: commit.RunIdentity) -> Iterator[None]:
    """Record the end of a run that stops early: one FAILED ``runs`` row for whatever ends
    it (an exception, SIGTERM's SystemExit, SIGINT's KeyboardInterrupt), then re-raise.

    The one place a started run's failure is recorded (SPEC 7: exactly one FAILED row per
    attempt). The exception is marked, so the CLI's early-failure handler adds nothing; a
    run that succeeded wrote its SUCCEEDED row inside :func:`land_run`.
    """
    try:
        yield
    except BaseException as exc:
        if not failure_recorded(exc):
            with _no_second_signal():
                _record_failure(writer, out, identity, exc)
            mark_recorded(exc)
        raise


@contextlib.contextmanager
def _no_second_signal() -> Iterator[None]:
    """While the FAILED row is written, a second SIGTERM or SIGINT (a scheduler insisting)
    is ignored instead of cutting the row off: the run is already ending."""
    import signal
    import threading

    saved = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError, OSError):
                saved[sig] = signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@dataclass
class ComputedRun:
    """An audit computed and stored in its work dir, not yet written to OUT."""

    identity: commit.RunIdentity
    work_dir: str
    #: the output tables as Spark reads them (for the Delta Spark writer), and as Arrow
    stored: Callable[[str], DataFrame]
    arrow: dict[str, pa.Table]
    summary_before: tuple[list[tuple[str, str, int, int]], int]
    counts: dict[str, Any]
    #: an incremental run's use of the store (saved after the run landed)
    store: Reuse | None = None
    #: the table as written, read again (the findings are, to check they did not change)
    read_back: Callable[[str], pa.Table] | None = None


def compute_run(spark: SparkSession, snapshot_path: str, out: str, config: Config,
                identity: commit.RunIdentity, work_dir: str, prepared: Prepared, *,
                snapshot_label: str | None = None, progress: Progress = _quiet) -> ComputedRun:
    """Parse and audit ``snapshot_path``: every output table computed and stored under
    ``work_dir`` (nothing is written to ``out``; its history is read)."""
    found, reuse, digest = prepared.found, None, None
    if config.incremental:
        progress(f"fingerprinting the input under {snapshot_path}")
        assert found is not None
        reuse, digest = _incremental_input(spark, found, out, config)
        taken = _take_unchanged(spark, out, config, identity, work_dir, found, reuse, digest, progress)
        if taken is not None:
            return taken
    progress(f"reading and parsing the input under {snapshot_path}")
    snap = load_snapshot(spark, snapshot_path, format=config.format, snapshot=snapshot_label,
                         default_snapshot=identity.started_at, work_dir=work_dir,
                         store=(out, config.cluster) if config.incremental else None,
                         found=found, reuse=reuse, policy=prepared.policy, verify_crc=config.verify_crc)
    progress(f"{snap.files_read} input files parsed ({sum(snap.files_skipped.values())} skipped); auditing")
    history = read_history(spark, out, config.cluster, identity.run_id)
    # One job computes every output table into the run's work dir; the writer, the summary
    # and the exit status all read those same stored rows.
    stored = audit(snap, identity.protocol, run_id=identity.run_id, cluster=config.cluster,
                   audit_time=identity.started_at, config=config, history=history, output=OUTPUT)
    arrow = {name: stored_arrow(work_dir, name) for name in stored}
    summary_before = finding_summary(arrow["findings"], config.fail_on)
    counts = run_counts(snap, arrow, summary_before[0])
    if digest is not None:
        counts["input_digest"] = digest
    return ComputedRun(identity=identity, work_dir=work_dir, stored=stored.__getitem__, arrow=arrow,
                       summary_before=summary_before, counts=counts, store=snap.store)


def _incremental_input(spark: SparkSession, found: Discovery, out: str, config: Config) -> tuple[Reuse, str]:
    """An incremental run's input: its dump files fingerprinted once, the store's answer
    for them, and the digest of it all (:mod:`auditor.sinks.unchanged`)."""
    dumps = [(i, f) for i, f in enumerate(found.files) if f.kind == DUMP]
    fingerprints = file_fingerprints(config.cluster, [f for _, f in dumps])
    reuse = Reuse(spark, (out, config.cluster), dumps, fingerprints)
    return reuse, unchanged.input_digest(found, fingerprints, config)


def _take_unchanged(spark: SparkSession, out: str, config: Config, identity: commit.RunIdentity, work_dir: str,
                    found: Discovery, reuse: Reuse, digest: str, progress: Progress) -> ComputedRun | None:
    """This run as the cluster's previous one, when nothing it audits changed since that
    one (:mod:`auditor.sinks.unchanged`); None when it must be audited."""
    if len(found.snapshots) != 1 or reuse.to_parse:
        return None
    previous = unchanged.previous_run(out, config.cluster, digest, found.snapshots[0], identity.run_id)
    if previous is None:
        return None
    progress(f"nothing changed since run {previous.run_id} (the same input digest): its tables are this run's")
    tables = unchanged.previous_tables(out, config.cluster, previous, identity.run_id, identity.started_at,
                                       found.snapshots[0])
    summary_before = finding_summary(tables["findings"], config.fail_on)
    counts = {**previous.counts, "files_parsed": 0, "findings": severity_counts(summary_before[0]),
              "input_digest": digest, "reused_run": previous.run_id}
    schema = schemas.OUTPUT_TABLES
    return ComputedRun(identity=identity, work_dir=work_dir,
                       stored=lambda name: spark.createDataFrame(tables[name], schema=schema[name]), arrow=tables,
                       summary_before=summary_before, counts=counts, store=reuse, read_back=tables.__getitem__)


def land_run(run: ComputedRun, out: str, config: Config, writer: io.TableWriter, *,
             progress: Progress = _quiet) -> tuple[list[tuple[str, str, int, int]], int]:
    """Write a computed run's tables to ``out``, then its SUCCEEDED ``runs`` row
    (:func:`auditor.sinks.commit.land`); returns the findings summary and how many fail
    the run. On any failure the writes are undone and the error re-raised."""
    after: list[tuple[list[tuple[str, str, int, int]], int]] = []

    def still_consistent() -> None:
        findings = run.read_back("findings") if run.read_back is not None else stored_arrow(run.work_dir, "findings")
        after.append(finding_summary(findings, config.fail_on))
        check_consistent(run.summary_before, after[0],
                         getattr(writer, "rows_written", {}).get(io.table_path(out, "findings")))

    reuse, tables = run.store, list(run.arrow)
    commit.land(
        out, writer, run.identity,
        [(name, run.arrow[name] if writer.name == "deltalake" else run.stored(name)) for name in tables],
        lambda: run.identity.row("SUCCEEDED", run.counts), before_runs_row=still_consistent, progress=progress,
        after=(lambda: _save_store(out, config, run.identity.run_id, reuse, run.work_dir, progress))
        if reuse is not None else None)
    return after[0]


def check_paths(snapshot_path: str, out: str, config: Config | None = None) -> None:
    """Raise :class:`UsageError` when OUT is the input folder or inside it (the next audit
    would read the tables as input), or ``config`` asks for an incremental run where none
    can be (another format than Kafka's dumps; an OUT that is not a local path)."""
    if config is not None and config.incremental:
        if config.format != "kafka":
            raise UsageError(f"--incremental reuses parsed dump files: it needs --format kafka, not {config.format}")
        if "://" in out or out.startswith("file:"):
            raise UsageError(f"--incremental keeps its store under OUT on the local file system: --out {out} "
                             "must be a local or mounted path, without a scheme (a DBFS or NFS mount works)")
    if out_inside_input(snapshot_path, out):
        raise UsageError(f"--out {out} is inside the input folder {snapshot_path}: the next audit would read "
                         "its own tables; choose an OUT outside the snapshot")
    if config is not None and config.work_dir is not None and out_inside_input(snapshot_path, config.work_dir):
        raise UsageError(f"--work-dir {config.work_dir} is inside the input folder {snapshot_path}: "
                         "choose a folder outside the snapshot")


def work_root(spark: SparkSession, out: str, config: Config) -> str | None:
    """Where a run keeps its intermediates (cut points, drill-downs, large driver-side
    tables), which the executors write and read: ``[run] work_dir`` (``--work-dir``) when
    set; else, in local mode, the system's temporary folder (None); else
    ``OUT/_auditor/work``: on a cluster the driver's temporary folder exists on the
    driver's machine only, and OUT is a folder the cluster's nodes share."""
    if config.work_dir is not None:
        return os.path.abspath(config.work_dir)
    if is_local_master(spark):
        return None
    return os.path.join(os.path.abspath(out), commit.STATE_DIR, "work")


def out_inside_input(snapshot_path: str, out: str) -> bool:
    """True when OUT is the input folder or inside it (never written to: the next audit
    would read it as input)."""
    source, target = os.path.realpath(snapshot_path), os.path.realpath(out)
    return target == source or target.startswith(source.rstrip(os.sep) + os.sep)


def stored_arrow(work_dir: str, name: str) -> pa.Table:
    """Output table ``name`` as stored in the run's work dir, with its declared schema."""
    target = io.arrow_schema(schemas.OUTPUT_TABLES[name])
    table = read_frame_arrow(work_dir, OUTPUT, name)
    if table is None:
        return target.empty_table()
    return pa.Table.from_arrays([table.column(f.name).cast(f.type) for f in target], schema=target)


def _save_store(out: str, config: Config, run_id: str, reuse: Reuse, work_dir: str, progress: Progress) -> None:
    """Add what this incremental run parsed to OUT's store, then prune it (under OUT's lock,
    after the run landed: :func:`auditor.sinks.commit.land`)."""
    from auditor.sinks import store

    progress(f"updating the incremental store ({len(reuse.new)} files parsed, {len(reuse.reused)} reused)")
    frames = {name: stream_frame_arrow(work_dir, "snapshot", name) for name in store.DATA_TABLES}
    writers = {**reuse.writers, **{f.fp: run_id for f in reuse.new}}
    store.save(out, config.cluster, run_id, reuse.new, reuse.used, writers, frames)
    pruned = store.prune(out, config.cluster, config.store_keep_runs)
    if pruned.fingerprints_forgotten or pruned.files_vacuumed or pruned.compacted:
        progress(f"pruned the store: {pruned.fingerprints_forgotten} files no run of the last "
                 f"{config.store_keep_runs} used, {sum(pruned.rows_deleted.values())} rows deleted, "
                 f"{pruned.files_vacuumed} old files vacuumed"
                 + (f", {', '.join(pruned.compacted)} compacted" if pruned.compacted else ""))


def _record_failure(writer: io.TableWriter, out: str, run: commit.RunIdentity, exc: BaseException) -> None:
    """Append a FAILED ``runs`` row; earlier rows of the same run id stay as they were."""
    try:
        commit.append_failed(out, writer, run.row("FAILED", {"error": failure_text(exc)}))
    except Exception as err:  # the original error matters more than this one
        logger.warning("could not record the failed run in %s: %s", out, err)


def record_early_failure(out: str, run_id: str | None, config: Config, started: datetime,
                         input_path: str, error: str) -> bool:
    """Append a FAILED ``runs`` row for a run that failed before Spark started (bad input
    or config), when OUT is writable. Returns whether the row was written."""
    if not os.path.isdir(out) or not os.access(out, os.W_OK):
        return False
    run = commit.RunIdentity(
        run_id=run_id or str(uuid.uuid4()), cluster=config.cluster, started_at=started, input=input_path,
        format=config.format, protocol=config.effective_protocol, writer="deltalake", tool_version=__version__,
        spark_version="")
    try:
        commit.append_failed(out, io.DeltaRsWriter(), run.row("FAILED", {"error": error}))
        return True
    except Exception as exc:  # never hide the original error behind this one
        logger.warning("could not record the failed run in %s: %s", out, exc)
        return False


